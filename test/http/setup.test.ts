import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { auditEvents, bootstrapTokens, setupSessions, users } from "../../src/db/schema/index.ts";
import { issueBootstrapToken } from "../../src/domain/setup/setup.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { completeLocalSetup, setInstance, startSetup } from "../helpers/factories.ts";

const VERIFY = "/v1/setup/bootstrap-token/verify";
const WRONG_TOKEN = "0".repeat(64);

async function status(t: TestApp) {
  return (await t.call("GET", "/v1/public/setup-status")).body;
}

/** Every setup endpoint with a body that passes its schema, so only the state decides the answer. */
const SETUP_ENDPOINTS: Array<[string, unknown]> = [
  [VERIFY, { token: WRONG_TOKEN }],
  ["/v1/setup/preferences", { runtime_mode: "local" }],
  ["/v1/setup/oidc/configure", { issuer_url: "https://idp.example.com", client_id: "hangar" }],
  ["/v1/setup/trusted-proxy/configure", {}],
  ["/v1/setup/owner/start-oidc", { redirect_uri: "http://127.0.0.1/cb" }],
  ["/v1/setup/owner/verify-oidc", { code: "c", state: "s" }],
  ["/v1/setup/owner/claim-trusted-proxy", undefined],
  ["/v1/setup/local-owner/create", { email: "someone@example.com" }],
  ["/v1/setup/complete", undefined],
];

describe("GET /v1/public/setup-status", () => {
  it("starts uninitialized, in setup mode, with a stable instance id", async () => {
    const t = await makeTestApp();
    const first = await t.call("GET", "/v1/public/setup-status");
    expect(first.status).toBe(200);
    expect(first.body).toEqual({
      instance_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      state: "uninitialized",
      setup_mode: true,
      is_configured: false,
    });
    expect((await status(t)).instance_id).toBe(first.body.instance_id);
  });

  it("moves to bootstrap_pending when a token is issued, and verification does not change the state", async () => {
    const t = await makeTestApp();
    const { token } = await issueBootstrapToken(t.deps);
    expect((await status(t)).state).toBe("bootstrap_pending");
    expect((await t.call("POST", VERIFY, { body: { token } })).status).toBe(200);
    expect((await status(t)).state).toBe("bootstrap_pending");
  });

  it("reports ready and is_configured once setup completes", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    expect(await status(t)).toMatchObject({ state: "ready", setup_mode: false, is_configured: true });
  });
});

describe("POST /v1/setup/bootstrap-token/verify", () => {
  it("answers 500 no_bootstrap_token when none was generated", async () => {
    const t = await makeTestApp();
    const res = await t.call("POST", VERIFY, { body: { token: WRONG_TOKEN } });
    expect(res.status).toBe(500);
    expect(res.body.code).toBe("no_bootstrap_token");
  });

  it("answers 400 invalid_input for a token that is not 64 hex characters, without counting a failure", async () => {
    const t = await makeTestApp();
    await issueBootstrapToken(t.deps);
    for (const token of ["abc", "g".repeat(64), "0".repeat(63), 42]) {
      const res = await t.call("POST", VERIFY, { body: { token } });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe("invalid_input");
      expect(res.body.issues[0].path).toBe("token");
    }
    const row = await t.deps.db.select().from(bootstrapTokens).get();
    expect(row?.failedAttempts).toBe(0);
  });

  it("answers 401 invalid_token for a wrong token", async () => {
    const t = await makeTestApp();
    await issueBootstrapToken(t.deps);
    const res = await t.call("POST", VERIFY, { body: { token: WRONG_TOKEN } });
    expect(res.status).toBe(401);
    expect(res.body.code).toBe("invalid_token");
  });

  it("gives a 30-minute setup session for the right token, in upper or lower case", async () => {
    const t = await makeTestApp();
    const { token } = await issueBootstrapToken(t.deps);
    const res = await t.call("POST", VERIFY, { body: { token: token.toUpperCase() } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ session_token: expect.stringMatching(/^hgs_[A-Za-z0-9_-]{43}$/), expires_at: t.clock.now() + 1800 });
  });

  it("answers 410 token_consumed for a token already used", async () => {
    const t = await makeTestApp();
    const { token } = await issueBootstrapToken(t.deps);
    expect((await t.call("POST", VERIFY, { body: { token } })).status).toBe(200);
    const again = await t.call("POST", VERIFY, { body: { token } });
    expect(again.status).toBe(410);
    expect(again.body.code).toBe("token_consumed");
  });

  it("answers 410 token_expired once the token's TTL elapsed", async () => {
    const t = await makeTestApp();
    const { token } = await issueBootstrapToken(t.deps, 60);
    t.clock.advance(59);
    const fresh = await issueBootstrapToken(t.deps, 60);
    t.clock.advance(60);
    const res = await t.call("POST", VERIFY, { body: { token: fresh.token } });
    expect(res.status).toBe(410);
    expect(res.body.code).toBe("token_expired");
    // The replaced token is simply wrong now.
    expect((await t.call("POST", VERIFY, { body: { token } })).body.code).toBe("invalid_token");
  });

  it("answers 429 too_many_attempts from the fifth failure on, the right token included, until a new token", async () => {
    const t = await makeTestApp();
    const { token } = await issueBootstrapToken(t.deps);
    for (let i = 1; i <= 4; i++) {
      const res = await t.call("POST", VERIFY, { body: { token: WRONG_TOKEN } });
      expect(res.status, `attempt ${i}`).toBe(401);
    }
    const fifth = await t.call("POST", VERIFY, { body: { token: WRONG_TOKEN } });
    expect(fifth.status).toBe(429);
    expect(fifth.body.code).toBe("too_many_attempts");
    const right = await t.call("POST", VERIFY, { body: { token } });
    expect(right.status).toBe(429);
    expect(right.body.code).toBe("too_many_attempts");

    const renewed = await issueBootstrapToken(t.deps);
    expect((await t.call("POST", VERIFY, { body: { token: renewed.token } })).status).toBe(200);
  });

  it("never lets 20 parallel wrong guesses exceed the limit; the right token is then refused", async () => {
    const t = await makeTestApp();
    const { token } = await issueBootstrapToken(t.deps);
    const answers = await Promise.all(Array.from({ length: 20 }, () => t.call("POST", VERIFY, { body: { token: WRONG_TOKEN } })));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 401).length).toBeLessThanOrEqual(4);
    expect(statuses.every((s) => s === 401 || s === 429)).toBe(true);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(16);
    const right = await t.call("POST", VERIFY, { body: { token } });
    expect(right.status).toBe(429);
    expect(right.body.code).toBe("too_many_attempts");
  });

  it("consumes the token exactly once under parallel verifications", async () => {
    const t = await makeTestApp();
    const { token } = await issueBootstrapToken(t.deps);
    const answers = await Promise.all(Array.from({ length: 8 }, () => t.call("POST", VERIFY, { body: { token } })));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 410 && a.body.code === "token_consumed")).toHaveLength(7);
    expect(await t.deps.db.select().from(setupSessions).all()).toHaveLength(1);
  });

  it("works in bootstrap_pending, idp_configured and owner_created", async () => {
    const t = await makeTestApp();
    for (const state of ["bootstrap_pending", "idp_configured", "owner_created"] as const) {
      const { token } = await issueBootstrapToken(t.deps);
      await setInstance(t, { state });
      const res = await t.call("POST", VERIFY, { body: { token } });
      expect(res.status, state).toBe(200);
    }
  });
});

describe("setup session", () => {
  const SESSION_ENDPOINTS: Array<[string, unknown]> = [
    ["/v1/setup/preferences", { runtime_mode: "local" }],
    ["/v1/setup/local-owner/create", { email: "owner@example.com" }],
    ["/v1/setup/complete", undefined],
  ];

  for (const [path, body] of SESSION_ENDPOINTS) {
    it(`${path}: 401 missing_auth, invalid_session and session_expired`, async () => {
      const t = await makeTestApp();
      const session = await startSetup(t);

      const missing = await t.call("POST", path, { body });
      expect(missing.status).toBe(401);
      expect(missing.body.code).toBe("missing_auth");

      const unknown = await t.call("POST", path, { body, token: "A".repeat(43) });
      expect(unknown.status).toBe(401);
      expect(unknown.body.code).toBe("invalid_session");

      const malformed = await t.call("POST", path, { body, headers: { authorization: `Basic ${session}` } });
      expect(malformed.status).toBe(401);
      expect(malformed.body.code).toBe("invalid_session");

      t.clock.advance(30 * 60);
      const expired = await t.call("POST", path, { body, token: session });
      expect(expired.status).toBe(401);
      expect(expired.body.code).toBe("session_expired");
    });
  }

  it("slides: every authenticated request renews it to 30 minutes from now", async () => {
    const t = await makeTestApp();
    const session = await startSetup(t);
    for (let i = 0; i < 4; i++) {
      t.clock.advance(29 * 60);
      const res = await t.call("POST", "/v1/setup/preferences", { token: session, body: {} });
      expect(res.status).toBe(200);
      expect(res.body.session_expires_at).toBe(t.clock.now() + 1800);
    }
    t.clock.advance(30 * 60 - 1);
    expect((await t.call("POST", "/v1/setup/preferences", { token: session, body: {} })).status).toBe(200);
    t.clock.advance(30 * 60);
    const expired = await t.call("POST", "/v1/setup/preferences", { token: session, body: {} });
    expect(expired.body.code).toBe("session_expired");
    // An expired session never revives, even on a later request.
    expect((await t.call("POST", "/v1/setup/preferences", { token: session, body: {} })).body.code).toBe("session_expired");
  });

  it("is stored only as a hash", async () => {
    const t = await makeTestApp();
    const session = await startSetup(t);
    const rows = await t.deps.db.select().from(setupSessions).all();
    expect(rows).toHaveLength(1);
    expect(JSON.stringify(rows)).not.toContain(session);
  });
});

describe("POST /v1/setup/preferences", () => {
  it("keeps local mode by default and stores both preferences", async () => {
    const t = await makeTestApp();
    const session = await startSetup(t);
    const res = await t.call("POST", "/v1/setup/preferences", { token: session, body: {} });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ runtime_mode: "local", remote_auth_mode: "oidc", session_expires_at: t.clock.now() + 1800 });

    const remote = await t.call("POST", "/v1/setup/preferences", {
      token: session,
      body: { runtime_mode: "remote", remote_auth_mode: "trusted_proxy" },
    });
    expect(remote.body).toMatchObject({ runtime_mode: "remote", remote_auth_mode: "trusted_proxy" });
    const partial = await t.call("POST", "/v1/setup/preferences", { token: session, body: { runtime_mode: "local" } });
    expect(partial.body).toMatchObject({ runtime_mode: "local", remote_auth_mode: "trusted_proxy" });
  });

  it("answers 400 invalid_input for other values", async () => {
    const t = await makeTestApp();
    const session = await startSetup(t);
    for (const body of [{ runtime_mode: "cloud" }, { remote_auth_mode: "saml" }, { runtime_mode: 1 }]) {
      const res = await t.call("POST", "/v1/setup/preferences", { token: session, body });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe("invalid_input");
      expect(res.body.issues.length).toBeGreaterThan(0);
    }
  });

  it("answers 409 invalid_state once the owner exists", async () => {
    const t = await makeTestApp();
    const session = await startSetup(t);
    expect((await t.call("POST", "/v1/setup/local-owner/create", { token: session, body: { email: "o@example.com" } })).status).toBe(200);
    const res = await t.call("POST", "/v1/setup/preferences", { token: session, body: { runtime_mode: "remote" } });
    expect(res.status).toBe(409);
    expect(res.body.code).toBe("invalid_state");
  });
});

describe("POST /v1/setup/local-owner/create", () => {
  it("creates the owner in bootstrap_pending and reports owner_created", async () => {
    const t = await makeTestApp();
    const session = await startSetup(t);
    const res = await t.call("POST", "/v1/setup/local-owner/create", { token: session, body: { email: "Owner@Example.com" } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ state: "owner_created", owner_email: "owner@example.com", session_expires_at: t.clock.now() + 1800 });
    expect((await status(t)).state).toBe("owner_created");
    const owner = await t.deps.db.select().from(users).where(eq(users.role, "owner")).get();
    expect(owner).toMatchObject({ email: "owner@example.com", status: "active" });
  });

  it("answers 400 invalid_input for an invalid email", async () => {
    const t = await makeTestApp();
    const session = await startSetup(t);
    for (const body of [{ email: "not-an-email" }, { email: "" }, {}, { email: "a@b" }]) {
      const res = await t.call("POST", "/v1/setup/local-owner/create", { token: session, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.code).toBe("invalid_input");
    }
    expect(await t.deps.db.select().from(users).all()).toHaveLength(0);
  });

  it("answers 403 mode_restricted in remote mode", async () => {
    const t = await makeTestApp();
    const session = await startSetup(t);
    await t.call("POST", "/v1/setup/preferences", { token: session, body: { runtime_mode: "remote" } });
    const res = await t.call("POST", "/v1/setup/local-owner/create", { token: session, body: { email: "o@example.com" } });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe("mode_restricted");
  });

  it("answers 409 invalid_state outside bootstrap_pending", async () => {
    const t = await makeTestApp();
    const session = await startSetup(t);
    await setInstance(t, { state: "idp_configured" });
    const idp = await t.call("POST", "/v1/setup/local-owner/create", { token: session, body: { email: "o@example.com" } });
    expect(idp.status).toBe(409);
    expect(idp.body.code).toBe("invalid_state");

    await setInstance(t, { state: "bootstrap_pending" });
    expect((await t.call("POST", "/v1/setup/local-owner/create", { token: session, body: { email: "o@example.com" } })).status).toBe(200);
    const second = await t.call("POST", "/v1/setup/local-owner/create", { token: session, body: { email: "p@example.com" } });
    expect(second.status).toBe(409);
    expect(second.body.code).toBe("invalid_state");
  });

  it("makes exactly one owner from two parallel creations", async () => {
    const t = await makeTestApp();
    const session = await startSetup(t);
    const [a, b] = await Promise.all([
      t.call("POST", "/v1/setup/local-owner/create", { token: session, body: { email: "a@example.com" } }),
      t.call("POST", "/v1/setup/local-owner/create", { token: session, body: { email: "b@example.com" } }),
    ]);
    expect([a!.status, b!.status].sort()).toEqual([200, 409]);
    expect([a, b].find((r) => r!.status === 409)!.body.code).toBe("invalid_state");
    const all = await t.deps.db.select().from(users).all();
    expect(all).toHaveLength(1);
    expect(all[0]!.role).toBe("owner");
    const created = await t.deps.db.select().from(auditEvents).where(eq(auditEvents.action, "setup.owner_created")).all();
    expect(created).toHaveLength(1);
    expect(created[0]!.actorUserId).toBe(all[0]!.id);
  });

  it("makes exactly one owner from many parallel creations with distinct sessions", async () => {
    const t = await makeTestApp();
    const sessions: string[] = [];
    for (let i = 0; i < 5; i++) sessions.push(await startSetup(t));
    const answers = await Promise.all(
      sessions.map((s, i) => t.call("POST", "/v1/setup/local-owner/create", { token: s, body: { email: `o${i}@example.com` } })),
    );
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 409)).toHaveLength(4);
    expect(await t.deps.db.select().from(users).all()).toHaveLength(1);
  });
});

describe("POST /v1/setup/complete", () => {
  it("answers 409 invalid_state before the owner exists", async () => {
    const t = await makeTestApp();
    const session = await startSetup(t);
    const res = await t.call("POST", "/v1/setup/complete", { token: session });
    expect(res.status).toBe(409);
    expect(res.body.code).toBe("invalid_state");
  });

  it("moves to ready, clears setup sessions and the bootstrap token, and records it", async () => {
    const t = await makeTestApp();
    const session = await startSetup(t);
    await t.call("POST", "/v1/setup/local-owner/create", { token: session, body: { email: "o@example.com" } });
    const { instance_id } = await status(t);
    const res = await t.call("POST", "/v1/setup/complete", { token: session });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ state: "ready", instance_id });
    expect(await t.deps.db.select().from(setupSessions).all()).toHaveLength(0);
    expect(await t.deps.db.select().from(bootstrapTokens).all()).toHaveLength(0);
    const done = await t.deps.db.select().from(auditEvents).where(eq(auditEvents.action, "setup.completed")).all();
    expect(done).toHaveLength(1);
    expect(done[0]!.actorEmail).toBe("o@example.com");
  });

  it("lets only one of two parallel completions through", async () => {
    const t = await makeTestApp();
    const session = await startSetup(t);
    await t.call("POST", "/v1/setup/local-owner/create", { token: session, body: { email: "o@example.com" } });
    const answers = await Promise.all([1, 2].map(() => t.call("POST", "/v1/setup/complete", { token: session })));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409]);
    expect(await t.deps.db.select().from(auditEvents).where(eq(auditEvents.action, "setup.completed")).all()).toHaveLength(1);
  });
});

describe("after setup completes", () => {
  it("answers 409 already_configured on every setup endpoint, with or without a session, forever", async () => {
    const t = await makeTestApp();
    const session = await startSetup(t);
    await t.call("POST", "/v1/setup/local-owner/create", { token: session, body: { email: "o@example.com" } });
    await t.call("POST", "/v1/setup/complete", { token: session });
    for (const [path, body] of SETUP_ENDPOINTS) {
      for (const token of [undefined, session, "A".repeat(43)]) {
        const res = await t.call("POST", path, { body, token });
        expect(res.status, `${path} ${token ?? "(none)"}`).toBe(409);
        expect(res.body.code, path).toBe("already_configured");
      }
      // Even a body that fails validation is refused for the state first.
      const bad = await t.call("POST", path, { body: { nonsense: true, token: 1, email: 2 } });
      expect(bad.body.code, path).toBe("already_configured");
    }
    t.clock.advance(400 * 24 * 3600);
    const later = await t.call("POST", VERIFY, { body: { token: WRONG_TOKEN } });
    expect(later.status).toBe(409);
    expect(later.body.code).toBe("already_configured");
  });

  it("refuses a new bootstrap token", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    await expect(issueBootstrapToken(t.deps)).rejects.toMatchObject({ status: 409, code: "already_configured" });
    expect(await t.deps.db.select().from(bootstrapTokens).all()).toHaveLength(0);
  });
});
