// `hangar login`'s one-time codes (docs/api.md §3) in the domain layer: single use, 5 minutes, audited sign-in.
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { auditEvents } from "../../src/db/schema/index.ts";
import { createCliSession, createLocalLoginCode, LOCAL_LOGIN_CODE_TTL_S, redeemLocalLoginCode } from "../../src/domain/auth/local-login-codes.ts";
import { ApiError } from "../../src/errors.ts";
import { makeTestApp } from "../helpers/app.ts";
import { completeLocalSetup, createUser } from "../helpers/factories.ts";

async function refusal(p: Promise<unknown>): Promise<{ status: number; code: string }> {
  try {
    await p;
  } catch (err) {
    if (err instanceof ApiError) return { status: err.status, code: err.code };
    throw err;
  }
  throw new Error("expected a refusal");
}

describe("local login codes", () => {
  it("signs the owner in once with a code, by default, and audits the sign-in", async () => {
    const t = await makeTestApp();
    const { owner } = await completeLocalSetup(t);
    await createUser(t, { email: "dev@example.com" });
    const { code, expiresAt } = await createLocalLoginCode(t.deps);
    expect(code).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(expiresAt).toBe(t.clock.now() + LOCAL_LOGIN_CODE_TTL_S);
    const signedIn = await redeemLocalLoginCode(t.deps, code);
    expect(signedIn.user.user_id).toBe(owner.id);
    const me = await t.call("GET", "/v1/users/me", { token: signedIn.session_token });
    expect(me.status).toBe(200);
    expect(me.body.email).toBe("owner@example.com");
    // Single use: the second redemption is refused.
    expect(await refusal(redeemLocalLoginCode(t.deps, code))).toEqual({ status: 410, code: "token_expired" });
    const events = await t.deps.db.select().from(auditEvents).where(eq(auditEvents.action, "auth.sign_in"));
    expect(events.at(-1)?.details).toEqual({ method: "local", via: "cli_link" });
  });

  it("signs in the user named by email; an unknown or disabled email is 403 user_not_found", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const dev = await createUser(t, { email: "dev@example.com", status: "invited" });
    await createUser(t, { email: "gone@example.com", status: "disabled" });
    const { code } = await createLocalLoginCode(t.deps, { email: "DEV@example.com" });
    const signedIn = await redeemLocalLoginCode(t.deps, code);
    expect(signedIn.user).toMatchObject({ user_id: dev.id, role: "developer" });
    expect(await refusal(createLocalLoginCode(t.deps, { email: "nobody@example.com" }))).toEqual({ status: 403, code: "user_not_found" });
    expect(await refusal(createLocalLoginCode(t.deps, { email: "gone@example.com" }))).toEqual({ status: 403, code: "user_not_found" });
  });

  it("expires after 5 minutes; an unknown code is 404 not_found", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const { code } = await createLocalLoginCode(t.deps);
    t.clock.advance(LOCAL_LOGIN_CODE_TTL_S);
    expect(await refusal(redeemLocalLoginCode(t.deps, code))).toEqual({ status: 410, code: "token_expired" });
    expect(await refusal(redeemLocalLoginCode(t.deps, "x".repeat(43)))).toEqual({ status: 404, code: "not_found" });
  });

  it("gives one session to two racing redemptions of one code", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const { code } = await createLocalLoginCode(t.deps);
    const results = await Promise.allSettled([redeemLocalLoginCode(t.deps, code), redeemLocalLoginCode(t.deps, code)]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
  });

  it("refuses before setup is ready (409 setup_incomplete), for codes and printed sessions alike", async () => {
    const t = await makeTestApp();
    expect(await refusal(createLocalLoginCode(t.deps))).toEqual({ status: 409, code: "setup_incomplete" });
    expect(await refusal(createCliSession(t.deps))).toEqual({ status: 409, code: "setup_incomplete" });
  });

  it("a printed session is a normal 24-hour user session, audited via cli", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const signedIn = await createCliSession(t.deps);
    expect(signedIn.expires_at).toBe(t.clock.now() + 24 * 3600);
    expect((await t.call("GET", "/v1/users/me", { token: signedIn.session_token })).status).toBe(200);
    const events = await t.deps.db.select().from(auditEvents).where(eq(auditEvents.action, "auth.sign_in"));
    expect(events.at(-1)?.details).toEqual({ method: "local", via: "cli" });
  });
});
