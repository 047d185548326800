import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { auditEvents, userSessions, users } from "../../src/db/schema/index.ts";
import { makeTestApp } from "../helpers/app.ts";
import { completeLocalSetup, createUser, setInstance, startSetup } from "../helpers/factories.ts";

const LOGIN = "/v1/auth/local/login";
const DAY = 24 * 60 * 60;

describe("/v1/auth/* before setup is ready", () => {
  it("answers 409 setup_incomplete on every auth endpoint in local mode", async () => {
    const t = await makeTestApp();
    for (const state of ["uninitialized", "bootstrap_pending", "idp_configured", "owner_created"] as const) {
      await setInstance(t, { state });
      for (const [method, path, body] of [
        ["POST", LOGIN, { email: "o@example.com" }],
        ["POST", LOGIN, {}],
        ["POST", "/v1/auth/logout", undefined],
        ["GET", "/v1/auth/oidc/start", undefined],
        ["POST", "/v1/auth/oidc/callback", { code: "c", state: "s" }],
        ["POST", "/v1/auth/trusted-proxy/login", undefined],
      ] as const) {
        const res = await t.call(method, path, { body, token: path.endsWith("logout") ? "A".repeat(43) : undefined });
        expect(res.status, `${state} ${path}`).toBe(409);
        expect(res.body.code, `${state} ${path}`).toBe("setup_incomplete");
      }
    }
  });

  it("refuses local login with 403 mode_restricted while setup is incomplete in remote mode", async () => {
    const t = await makeTestApp();
    const session = await startSetup(t);
    await t.call("POST", "/v1/setup/preferences", { token: session, body: { runtime_mode: "remote" } });
    const res = await t.call("POST", LOGIN, { body: { email: "o@example.com" } });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe("mode_restricted");
    // The other auth endpoints still answer setup_incomplete.
    expect((await t.call("POST", "/v1/auth/logout", { token: "x" })).body.code).toBe("setup_incomplete");
  });
});

describe("POST /v1/auth/local/login", () => {
  it("answers the LocalLoginResponse with a 24-hour session", async () => {
    const t = await makeTestApp();
    const { owner } = await completeLocalSetup(t, "owner@example.com");
    const res = await t.call("POST", LOGIN, { body: { email: "owner@example.com" } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      session_token: expect.stringMatching(/^hgu_[A-Za-z0-9_-]{43}$/),
      expires_at: t.clock.now() + DAY,
      user: { user_id: owner.id, email: "owner@example.com", display_name: "owner", role: "owner", avatar_url: null, oidc_subject: null },
    });
    const me = await t.call("GET", "/v1/users/me", { token: res.body.session_token });
    expect(me.status).toBe(200);
    expect(me.body.id).toBe(owner.id);
  });

  it("keeps the session valid for 24 hours and not a second longer", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const login = await t.call("POST", LOGIN, { body: {} });
    t.clock.advance(DAY - 1);
    expect((await t.call("GET", "/v1/users/me", { token: login.body.session_token })).status).toBe(200);
    t.clock.advance(1);
    const expired = await t.call("GET", "/v1/users/me", { token: login.body.session_token });
    expect(expired.status).toBe(401);
    expect(expired.body.code).toBe("invalid_session");
  });

  it("matches the email case-insensitively", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t, "owner@example.com");
    const res = await t.call("POST", LOGIN, { body: { email: "OWNER@Example.COM" } });
    expect(res.status).toBe(200);
    expect(res.body.user.email).toBe("owner@example.com");
  });

  it("lets the email be omitted when exactly one user is active (no body, empty object, invited and disabled users aside)", async () => {
    const t = await makeTestApp();
    const { owner } = await completeLocalSetup(t);
    await createUser(t, { status: "invited" });
    await createUser(t, { status: "disabled" });
    for (const options of [{}, { body: {} }, { body: { email: undefined } }]) {
      const res = await t.call("POST", LOGIN, options);
      expect(res.status, JSON.stringify(options)).toBe(200);
      expect(res.body.user.user_id).toBe(owner.id);
    }
  });

  it("answers 400 email_required when several users are active and no email is given", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    await createUser(t, { status: "active" });
    const res = await t.call("POST", LOGIN, { body: {} });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe("email_required");
  });

  it("answers 403 user_not_found for an unknown or a disabled email", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const disabled = await createUser(t, { status: "disabled" });
    for (const email of ["nobody@example.com", disabled.email]) {
      const res = await t.call("POST", LOGIN, { body: { email } });
      expect(res.status, email).toBe(403);
      expect(res.body.code).toBe("user_not_found");
    }
    expect(await t.deps.db.select().from(userSessions).where(eq(userSessions.userId, disabled.id)).all()).toHaveLength(0);
  });

  it("answers 400 invalid_input for a malformed email", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    for (const email of ["nope", 7, ""]) {
      const res = await t.call("POST", LOGIN, { body: { email } });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe("invalid_input");
    }
  });

  it("makes an invited user active on first sign-in and records the sign-in", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const invited = await createUser(t, { email: "new@example.com", role: "qa_viewer", status: "invited" });
    const res = await t.call("POST", LOGIN, { body: { email: "new@example.com" } });
    expect(res.status).toBe(200);
    expect(res.body.user).toMatchObject({ user_id: invited.id, role: "qa_viewer" });
    const row = await t.deps.db.select().from(users).where(eq(users.id, invited.id)).get();
    expect(row?.status).toBe("active");
    const signIns = await t.deps.db.select().from(auditEvents).where(eq(auditEvents.action, "auth.sign_in")).all();
    expect(signIns.some((e) => e.actorUserId === invited.id && (e.details as { method: string }).method === "local")).toBe(true);
  });

  it("answers 403 local_login_loopback_required for a non-loopback peer in local mode; remote mode refuses it first", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const res = await t.call("POST", LOGIN, { body: {}, peer: "192.168.1.20" });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe("local_login_loopback_required");
    // From the machine itself it keeps working after setup.
    expect((await t.call("POST", LOGIN, { body: {} })).status).toBe(200);
    // Remote mode: refused until the owner turns it back on (test/http/local-login-setting.test.ts).
    await setInstance(t, { runtimeMode: "remote" });
    for (const peer of ["192.168.1.20", "127.0.0.1"]) {
      const remote = await t.call("POST", LOGIN, { body: {}, peer });
      expect([remote.status, remote.body.code], peer).toEqual([403, "mode_restricted"]);
    }
  });

  it("answers 403 local_login_loopback_required to a loopback socket of another OS user (test/e2e/local-login-owner.test.ts with real users)", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const res = await t.call("POST", LOGIN, { body: {}, peerIsOtherUser: true });
    expect([res.status, res.body.code]).toEqual([403, "local_login_loopback_required"]);
    expect((await t.call("POST", LOGIN, { body: {} })).status).toBe(200);
  });

  it("stores only the hash of the session token", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const res = await t.call("POST", LOGIN, { body: {} });
    const rows = await t.deps.db.select().from(userSessions).all();
    expect(JSON.stringify(rows)).not.toContain(res.body.session_token);
  });
});

describe("POST /v1/auth/logout", () => {
  it("answers 401 missing_auth without a header and invalid_session for an unknown or malformed token", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const missing = await t.call("POST", "/v1/auth/logout");
    expect(missing.status).toBe(401);
    expect(missing.body.code).toBe("missing_auth");
    for (const headers of [{ authorization: "Bearer nope" }, { authorization: "Token abc" }, { authorization: "Bearer" }]) {
      const res = await t.call("POST", "/v1/auth/logout", { headers });
      expect(res.status, headers.authorization).toBe(401);
      expect(res.body.code).toBe("invalid_session");
    }
  });

  it("ends only the current session", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const a = (await t.call("POST", LOGIN, { body: {} })).body.session_token;
    const b = (await t.call("POST", LOGIN, { body: {} })).body.session_token;
    const out = await t.call("POST", "/v1/auth/logout", { token: a });
    expect(out.status).toBe(200);
    expect(out.body).toEqual({ ok: true });
    const after = await t.call("GET", "/v1/users/me", { token: a });
    expect(after.status).toBe(401);
    expect(after.body.code).toBe("invalid_session");
    expect((await t.call("POST", "/v1/auth/logout", { token: a })).body.code).toBe("invalid_session");
    expect((await t.call("GET", "/v1/users/me", { token: b })).status).toBe(200);
  });

  it("answers 401 invalid_session for an expired session", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const token = (await t.call("POST", LOGIN, { body: {} })).body.session_token;
    t.clock.advance(DAY);
    const res = await t.call("POST", "/v1/auth/logout", { token });
    expect(res.status).toBe(401);
    expect(res.body.code).toBe("invalid_session");
  });
});
