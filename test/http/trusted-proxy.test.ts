import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { auditEvents, instanceSettings, users } from "../../src/db/schema/index.ts";
import { readTrustedProxySettings, TRUSTED_PROXY_SETTING } from "../../src/domain/auth/trusted-proxy.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { completeLocalSetup, createUser, startSetup } from "../helpers/factories.ts";

const CONFIGURE = "/v1/setup/trusted-proxy/configure";
const CLAIM = "/v1/setup/owner/claim-trusted-proxy";
const LOGIN = "/v1/auth/trusted-proxy/login";
const SECRET = "proxy-shared-secret-0123456789";
const SECRET_HEADER = "X-Hangar-Trusted-Proxy-Secret";
const DEFAULT_HEADER = "x-hangar-user-email";

/** Verify a bootstrap token and choose remote + trusted proxy, as the setup wizard would. */
async function remoteProxySession(t: TestApp): Promise<string> {
  const session = await startSetup(t);
  const prefs = await t.call("POST", "/v1/setup/preferences", {
    token: session,
    body: { runtime_mode: "remote", remote_auth_mode: "trusted_proxy" },
  });
  expect(prefs.status).toBe(200);
  return session;
}

interface ProxyConfig {
  setup_owner_email?: string | null;
  user_email_header?: string;
  trusted_proxy_cidrs?: string[];
  shared_secret?: string | null;
  gateway_access_ticket?: string | null;
}

async function configured(t: TestApp, config: ProxyConfig): Promise<string> {
  const session = await remoteProxySession(t);
  const res = await t.call("POST", CONFIGURE, { token: session, body: config });
  expect(res.status, res.text).toBe(200);
  return session;
}

/** Runs setup to `ready` through the proxy: configure, claim as `owner`, complete. */
async function readyThroughProxy(t: TestApp, config: ProxyConfig, claim: { peer: string; owner?: string }): Promise<void> {
  const session = await configured(t, config);
  const headers: Record<string, string> = { [config.user_email_header ?? DEFAULT_HEADER]: claim.owner ?? "owner@example.com" };
  if (config.shared_secret) headers[SECRET_HEADER] = config.shared_secret;
  const claimed = await t.call("POST", CLAIM, { token: session, peer: claim.peer, headers });
  expect(claimed.status, claimed.text).toBe(200);
  expect((await t.call("POST", "/v1/setup/complete", { token: session })).status).toBe(200);
}

/** Headers a proxy adds; `secret: null` leaves the secret header out. */
function proxyHeaders(email: string | undefined, secret: string | null = SECRET, header = DEFAULT_HEADER): Record<string, string> {
  const headers: Record<string, string> = { "x-forwarded-for": "198.51.100.7" };
  if (email !== undefined) headers[header] = email;
  if (secret !== null) headers[SECRET_HEADER] = secret;
  return headers;
}

describe("POST /v1/setup/trusted-proxy/configure", () => {
  it("stores the configuration, moves bootstrap_pending to idp_configured and answers without secrets", async () => {
    const t = await makeTestApp();
    const session = await remoteProxySession(t);
    const res = await t.call("POST", CONFIGURE, {
      token: session,
      body: {
        setup_owner_email: "Owner@Example.com",
        user_email_header: "X-Gateway-Username",
        trusted_proxy_cidrs: ["10.0.0.0/8", "fd00::/8", "192.0.2.7"],
        shared_secret: SECRET,
        gateway_access_ticket: "ticket-abc",
      },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      state: "idp_configured",
      setup_owner_email: "owner@example.com",
      user_email_header: "x-gateway-username",
      trusted_proxy_cidrs: ["10.0.0.0/8", "fd00::/8", "192.0.2.7/32"],
      has_shared_secret: true,
      has_gateway_access_ticket: true,
      assertion: null,
      configured_at: t.clock.now(),
      session_expires_at: t.clock.now() + 30 * 60,
    });
    expect(res.text).not.toContain(SECRET);
    expect(res.text).not.toContain("ticket-abc");
    expect((await t.call("GET", "/v1/public/setup-status")).body.state).toBe("idp_configured");

    // At rest both secrets are sealed; the reader opens the gateway ticket for the install links.
    const row = await t.deps.db.select().from(instanceSettings).where(eq(instanceSettings.key, TRUSTED_PROXY_SETTING)).get();
    expect(JSON.stringify(row?.value)).not.toContain(SECRET);
    expect(JSON.stringify(row?.value)).not.toContain("ticket-abc");
    expect(await readTrustedProxySettings(t.deps)).toMatchObject({
      userEmailHeader: "x-gateway-username",
      cidrs: ["10.0.0.0/8", "fd00::/8", "192.0.2.7/32"],
      hasSharedSecret: true,
      gatewayAccessTicket: "ticket-abc",
    });
    const audit = await t.deps.db.select().from(auditEvents).where(eq(auditEvents.action, "setup.trusted_proxy_configured")).all();
    expect(audit).toHaveLength(1);
    expect(JSON.stringify(audit[0]?.details)).not.toContain(SECRET);
  });

  it("uses the default header and an empty list when they are omitted, and may be repeated in idp_configured", async () => {
    const t = await makeTestApp();
    const session = await configured(t, { shared_secret: SECRET, gateway_access_ticket: "t1" });
    const again = await t.call("POST", CONFIGURE, { token: session, body: { trusted_proxy_cidrs: ["100.64.0.0/10"] } });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({
      state: "idp_configured",
      setup_owner_email: null,
      user_email_header: DEFAULT_HEADER,
      trusted_proxy_cidrs: ["100.64.0.0/10"],
      // Write-only secrets: omitted keeps them.
      has_shared_secret: true,
      has_gateway_access_ticket: true,
    });
    const cleared = await t.call("POST", CONFIGURE, { token: session, body: { shared_secret: null, gateway_access_ticket: null } });
    expect(cleared.body).toMatchObject({ has_shared_secret: false, has_gateway_access_ticket: false, trusted_proxy_cidrs: [] });
    expect((await readTrustedProxySettings(t.deps))?.gatewayAccessTicket).toBeNull();
  });

  it.each([
    ["an invalid owner email", { setup_owner_email: "not-an-email" }],
    ["a header name with a space", { user_email_header: "x user email" }],
    ["an empty header name", { user_email_header: "" }],
    ["a header that cannot carry identity", { user_email_header: "Authorization" }],
    ["the secret header as identity header", { user_email_header: "x-hangar-trusted-proxy-secret" }],
    ["a prefix over 32 bits", { trusted_proxy_cidrs: ["10.0.0.0/33"] }],
    ["a word instead of a CIDR", { trusted_proxy_cidrs: ["10.0.0.0/8", "banana"] }],
    ["host bits set", { trusted_proxy_cidrs: ["10.0.0.5/8"] }],
    ["a non-decimal IPv4 form", { trusted_proxy_cidrs: ["0x0a.0.0.0/8"] }],
    ["an IPv6 zone id", { trusted_proxy_cidrs: ["fe80::1%eth0"] }],
    ["a list that is not a list", { trusted_proxy_cidrs: "10.0.0.0/8" }],
    ["a short shared secret", { shared_secret: "short" }],
    ["a shared secret with spaces", { shared_secret: "a secret with spaces in it" }],
    ["an empty gateway ticket", { gateway_access_ticket: "" }],
  ])("answers 400 invalid_input for %s", async (_name, body) => {
    const t = await makeTestApp();
    const session = await remoteProxySession(t);
    const res = await t.call("POST", CONFIGURE, { token: session, body });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe("invalid_input");
    expect(res.body.issues.length).toBeGreaterThan(0);
    expect((await t.call("GET", "/v1/public/setup-status")).body.state).toBe("bootstrap_pending");
  });

  it("answers 403 mode_restricted unless the setup chose remote with trusted_proxy", async () => {
    const t = await makeTestApp();
    const session = await startSetup(t);
    const local = await t.call("POST", CONFIGURE, { token: session, body: {} });
    expect(local.status).toBe(403);
    expect(local.body.code).toBe("mode_restricted");
    await t.call("POST", "/v1/setup/preferences", { token: session, body: { runtime_mode: "remote", remote_auth_mode: "oidc" } });
    const oidc = await t.call("POST", CONFIGURE, { token: session, body: {} });
    expect(oidc.status).toBe(403);
    expect(oidc.body.code).toBe("mode_restricted");
    await t.call("POST", "/v1/setup/preferences", { token: session, body: { runtime_mode: "local", remote_auth_mode: "trusted_proxy" } });
    expect((await t.call("POST", CONFIGURE, { token: session, body: {} })).body.code).toBe("mode_restricted");
  });

  it("answers 409 invalid_state once the owner exists and 409 already_configured after completion", async () => {
    const t = await makeTestApp();
    const session = await configured(t, {});
    expect((await t.call("POST", CLAIM, { token: session, headers: proxyHeaders("owner@example.com", null) })).status).toBe(200);
    const afterOwner = await t.call("POST", CONFIGURE, { token: session, body: { trusted_proxy_cidrs: ["0.0.0.0/0"] } });
    expect(afterOwner.status).toBe(409);
    expect(afterOwner.body.code).toBe("invalid_state");
    // The refused configure changed nothing and recorded nothing.
    expect((await readTrustedProxySettings(t.deps))?.cidrs).toEqual([]);
    expect(await t.deps.db.select().from(auditEvents).where(eq(auditEvents.action, "setup.trusted_proxy_configured")).all()).toHaveLength(1);
    await t.call("POST", "/v1/setup/complete", { token: session });
    const afterReady = await t.call("POST", CONFIGURE, { token: session, body: {} });
    expect(afterReady.status).toBe(409);
    expect(afterReady.body.code).toBe("already_configured");
  });

  it("answers 401 missing_auth and invalid_session without a valid setup session", async () => {
    const t = await makeTestApp();
    await remoteProxySession(t);
    const missing = await t.call("POST", CONFIGURE, { body: {} });
    expect([missing.status, missing.body.code]).toEqual([401, "missing_auth"]);
    const invalid = await t.call("POST", CONFIGURE, { body: {}, token: "A".repeat(43) });
    expect([invalid.status, invalid.body.code]).toEqual([401, "invalid_session"]);
  });
});

describe("POST /v1/setup/owner/claim-trusted-proxy", () => {
  it("creates the owner from the proxy's identity header, names case-insensitive", async () => {
    const t = await makeTestApp();
    const session = await configured(t, {
      setup_owner_email: "owner@example.com",
      user_email_header: "X-Auth-Request-Email",
      trusted_proxy_cidrs: ["10.20.0.0/16"],
      shared_secret: SECRET,
    });
    const res = await t.call("POST", CLAIM, {
      token: session,
      peer: "10.20.3.4",
      headers: { "x-auth-request-email": " Owner@Example.COM ", "x-hangar-trusted-proxy-secret": SECRET, "X-Forwarded-For": "203.0.113.9" },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ state: "owner_created", owner_email: "owner@example.com", session_expires_at: t.clock.now() + 30 * 60 });
    const owner = await t.deps.db.select().from(users).where(eq(users.email, "owner@example.com")).get();
    expect(owner).toMatchObject({ role: "owner", status: "active" });
    const again = await t.call("POST", CLAIM, {
      token: session,
      peer: "10.20.3.4",
      headers: { "x-auth-request-email": "owner@example.com", [SECRET_HEADER]: SECRET },
    });
    expect([again.status, again.body.code]).toEqual([409, "invalid_state"]);
  });

  it("answers 403 mode_restricted outside remote trusted-proxy setup", async () => {
    const t = await makeTestApp();
    const session = await startSetup(t);
    const res = await t.call("POST", CLAIM, { token: session, headers: proxyHeaders("owner@example.com") });
    expect([res.status, res.body.code]).toEqual([403, "mode_restricted"]);
  });

  it("answers 409 trusted_proxy_not_configured before configure", async () => {
    const t = await makeTestApp();
    const session = await remoteProxySession(t);
    const res = await t.call("POST", CLAIM, { token: session, headers: proxyHeaders("owner@example.com") });
    expect([res.status, res.body.code]).toEqual([409, "trusted_proxy_not_configured"]);
  });

  it("answers every 401 and 403 row in the order peer, secret, identity, owner email", async () => {
    const t = await makeTestApp();
    const session = await configured(t, { setup_owner_email: "owner@example.com", trusted_proxy_cidrs: ["10.0.0.0/8"], shared_secret: SECRET });
    const cases: Array<[string, string, Record<string, string>, number, string]> = [
      ["peer outside the list", "192.168.1.10", proxyHeaders("owner@example.com"), 403, "trusted_proxy_peer_not_allowed"],
      ["loopback peer with a non-empty list", "127.0.0.1", proxyHeaders("owner@example.com"), 403, "trusted_proxy_peer_not_allowed"],
      ["no secret header", "10.1.1.1", proxyHeaders("owner@example.com", null), 401, "trusted_proxy_shared_secret_missing"],
      ["an empty secret header", "10.1.1.1", proxyHeaders("owner@example.com", ""), 401, "trusted_proxy_shared_secret_missing"],
      ["a wrong secret", "10.1.1.1", proxyHeaders("owner@example.com", `${SECRET}x`), 401, "trusted_proxy_shared_secret_invalid"],
      ["a secret prefix", "10.1.1.1", proxyHeaders("owner@example.com", SECRET.slice(0, 20)), 401, "trusted_proxy_shared_secret_invalid"],
      ["no identity header", "10.1.1.1", proxyHeaders(undefined), 401, "trusted_proxy_identity_missing"],
      ["an identity that is not an email", "10.1.1.1", proxyHeaders("owner"), 401, "trusted_proxy_identity_invalid"],
      ["another identity", "10.1.1.1", proxyHeaders("mallory@example.com"), 403, "trusted_proxy_owner_email_mismatch"],
    ];
    for (const [name, peer, headers, status, code] of cases) {
      const res = await t.call("POST", CLAIM, { token: session, peer, headers });
      expect([res.status, res.body.code], name).toEqual([status, code]);
    }
    expect((await t.call("GET", "/v1/public/setup-status")).body.state).toBe("idp_configured");
  });

  it("trusts only loopback peers when the list is empty, IPv4-mapped included", async () => {
    const t = await makeTestApp();
    const session = await configured(t, {});
    const remote = await t.call("POST", CLAIM, { token: session, peer: "203.0.113.5", headers: proxyHeaders("owner@example.com", null) });
    expect([remote.status, remote.body.code]).toEqual([403, "trusted_proxy_peer_not_allowed"]);
    const mapped = await t.call("POST", CLAIM, { token: session, peer: "::ffff:127.0.0.1", headers: proxyHeaders("owner@example.com", null) });
    expect(mapped.status).toBe(200);
  });

  it("answers 409 already_configured after completion", async () => {
    const t = await makeTestApp();
    await readyThroughProxy(t, {}, { peer: "127.0.0.1" });
    const res = await t.call("POST", CLAIM, { token: "A".repeat(43), headers: proxyHeaders("owner@example.com") });
    expect([res.status, res.body.code]).toEqual([409, "already_configured"]);
  });
});

describe("POST /v1/auth/trusted-proxy/login", () => {
  it("answers 409 setup_incomplete before setup is ready", async () => {
    const t = await makeTestApp();
    await configured(t, {});
    const res = await t.call("POST", LOGIN, { headers: proxyHeaders("owner@example.com") });
    expect([res.status, res.body.code]).toEqual([409, "setup_incomplete"]);
  });

  it("signs in the forwarded user with a 24-hour session; an invited user becomes active", async () => {
    const t = await makeTestApp();
    await readyThroughProxy(t, { trusted_proxy_cidrs: ["fd00:1::/64", "10.9.0.0/16"], shared_secret: SECRET }, { peer: "10.9.0.1" });
    const dev = await createUser(t, { email: "dev@example.com", status: "invited", role: "developer" });
    const res = await t.call("POST", LOGIN, { peer: "fd00:1::42", headers: proxyHeaders("DEV@example.com") });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      session_token: expect.stringMatching(/^hgu_[A-Za-z0-9_-]{43}$/),
      expires_at: t.clock.now() + 24 * 60 * 60,
      user: { user_id: dev.id, email: "dev@example.com", display_name: "dev", role: "developer", avatar_url: null, oidc_subject: null },
    });
    const me = await t.call("GET", "/v1/users/me", { token: res.body.session_token, peer: "10.9.0.1" });
    expect(me.body).toMatchObject({ id: dev.id, status: "active" });
    const signIns = await t.deps.db.select().from(auditEvents).where(eq(auditEvents.action, "auth.sign_in")).all();
    expect(signIns.map((e) => e.details)).toContainEqual({ method: "trusted_proxy" });
    // The IPv4-mapped form of a listed IPv4 peer is the same peer.
    expect((await t.call("POST", LOGIN, { peer: "::ffff:10.9.200.1", headers: proxyHeaders("dev@example.com") })).status).toBe(200);
  });

  it("answers 403 mode_restricted on an instance that is not remote with trusted_proxy", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const res = await t.call("POST", LOGIN, { headers: proxyHeaders("owner@example.com") });
    expect([res.status, res.body.code]).toEqual([403, "mode_restricted"]);
  });

  it("answers every 401 and 403 row of the login table", async () => {
    const t = await makeTestApp();
    await readyThroughProxy(
      t,
      { trusted_proxy_cidrs: ["10.0.0.0/8"], shared_secret: SECRET, user_email_header: "X-Gateway-Username" },
      { peer: "10.0.0.2" },
    );
    await createUser(t, { email: "gone@example.com", status: "disabled" });
    const h = (email: string | undefined, secret?: string) => proxyHeaders(email, secret ?? null, "X-GATEWAY-USERNAME");
    const cases: Array<[string, string, Record<string, string>, number, string]> = [
      ["peer not listed", "172.16.0.1", h("owner@example.com", SECRET), 403, "trusted_proxy_peer_not_allowed"],
      ["IPv6 peer against IPv4 list", "fd00::1", h("owner@example.com", SECRET), 403, "trusted_proxy_peer_not_allowed"],
      ["no secret", "10.0.0.2", h("owner@example.com"), 401, "trusted_proxy_shared_secret_missing"],
      ["wrong secret", "10.0.0.2", h("owner@example.com", "x".repeat(SECRET.length)), 401, "trusted_proxy_shared_secret_invalid"],
      ["no identity", "10.0.0.2", h(undefined, SECRET), 401, "trusted_proxy_identity_missing"],
      ["bad identity", "10.0.0.2", h("owner@", SECRET), 401, "trusted_proxy_identity_invalid"],
      ["identity in the default header only", "10.0.0.2", proxyHeaders("owner@example.com", SECRET), 401, "trusted_proxy_identity_missing"],
      ["unknown user", "10.0.0.2", h("nobody@example.com", SECRET), 403, "user_not_found"],
      ["disabled user", "10.0.0.2", h("gone@example.com", SECRET), 403, "user_not_found"],
    ];
    for (const [name, peer, headers, status, code] of cases) {
      const res = await t.call("POST", LOGIN, { peer, headers });
      expect([res.status, res.body.code], name).toEqual([status, code]);
    }
    const ok = await t.call("POST", LOGIN, { peer: "10.255.255.255", headers: h("owner@example.com", SECRET) });
    expect(ok.status).toBe(200);
    expect(ok.body.user.role).toBe("owner");
  });
});
