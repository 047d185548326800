// Bearer-token prefixes (docs/api.md §3): hgu_ user session, hgs_ setup session, hgr_ runner; 32 random bytes
// base64url after the prefix; the stored SHA-256 is of the whole token, prefix included.
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { runners, setupSessions, userSessions } from "../../src/db/schema/index.ts";
import { sha256Hex } from "../../src/domain/common/crypto.ts";
import { makeTestApp } from "../helpers/app.ts";
import { completeLocalSetup, startSetup } from "../helpers/factories.ts";

describe("token prefixes", () => {
  it("a setup session is hgs_ + 43 characters, stored as the hash of the whole token", async () => {
    const t = await makeTestApp();
    const token = await startSetup(t);
    expect(token).toMatch(/^hgs_[A-Za-z0-9_-]{43}$/);
    const row = await t.deps.db
      .select()
      .from(setupSessions)
      .where(eq(setupSessions.tokenHash, await sha256Hex(token)))
      .get();
    expect(row).toBeDefined();
    // Without its prefix the token is nothing.
    const bare = await t.call("POST", "/v1/setup/preferences", { token: token.slice(4), body: { runtime_mode: "local" } });
    expect([bare.status, bare.body.code]).toEqual([401, "invalid_session"]);
    expect((await t.call("POST", "/v1/setup/preferences", { token, body: { runtime_mode: "local" } })).status).toBe(200);
  });

  it("user sessions are hgu_ and runner tokens hgr_, hashed whole; none starts with '-'", async () => {
    const t = await makeTestApp();
    const { ownerToken } = await completeLocalSetup(t);
    const tokens: string[] = [];
    for (let i = 0; i < 20; i++) {
      const login = await t.call("POST", "/v1/auth/local/login", { body: {} });
      expect(login.body.session_token).toMatch(/^hgu_[A-Za-z0-9_-]{43}$/);
      tokens.push(login.body.session_token);
    }
    const stored = await t.deps.db
      .select()
      .from(userSessions)
      .where(eq(userSessions.tokenHash, await sha256Hex(tokens[0]!)))
      .get();
    expect(stored).toBeDefined();
    expect((await t.call("GET", "/v1/users/me", { token: tokens[0]!.slice(4) })).body.code).toBe("invalid_session");

    const reg = await t.call("POST", "/v1/runners/register", { token: ownerToken, body: { name: "r", capabilities: { platforms: ["android"] } } });
    expect(reg.status).toBe(200);
    expect(reg.body.token).toMatch(/^hgr_[A-Za-z0-9_-]{43}$/);
    const runner = await t.deps.db.select().from(runners).where(eq(runners.id, reg.body.id)).get();
    expect(runner?.tokenHash).toBe(await sha256Hex(reg.body.token));
    for (const token of [...tokens, reg.body.token as string]) expect(token.startsWith("-")).toBe(false);
  });
});
