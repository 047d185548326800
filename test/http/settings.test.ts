import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { auditEvents } from "../../src/db/schema/index.ts";
import { writeSetting } from "../../src/domain/settings/instance-settings.ts";
import { NETWORK_SETTING, readNetworkSettings } from "../../src/domain/settings/network-settings.ts";
import { OIDC_SETTING } from "../../src/domain/setup/preflight.ts";
import { TRUSTED_PROXY_SETTING } from "../../src/domain/auth/trusted-proxy.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { completeLocalSetup, sessionFor, userWithRole } from "../helpers/factories.ts";

const PREFS = "/v1/settings/preferences";
const NETWORK = "/v1/settings/external-access/network";
const PREFLIGHT = "/v1/settings/external-access/preflight";
// The External Access checks, the trusted proxy's secret (not required), then the host's free-space check (not required).
const CHECK_IDS = [
  "public_url_set",
  "public_url_https",
  "public_url_origin_allowed",
  "remote_auth_configured",
  "artifact_delivery_https",
  "trusted_proxy_secret",
  "data_dir_free_space",
];
const GOOD_NETWORK = { public_url: "https://ci.example.com", allowed_origins: ["https://ci.example.com"], artifact_delivery_url: null };

async function ready(options: { config?: Record<string, string> } = {}) {
  const t = await makeTestApp(options);
  const { ownerToken, owner } = await completeLocalSetup(t);
  return { t, ownerToken, owner };
}

/** Stands in for the OIDC area's stored configuration: the preflight only looks for the document's presence. */
async function configureOidcDocument(t: TestApp) {
  await writeSetting(t.deps, OIDC_SETTING, { issuer_url: "https://id.example.com", client_id: "hangar" });
}

describe("GET /v1/settings/preferences", () => {
  it("answers the preferences to the owner and admins", async () => {
    const { t, ownerToken } = await ready();
    const res = await t.call("GET", PREFS, { token: ownerToken });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      preferences: { key_storage_mode: "file", runtime_mode: "local", restart_required: false, updated_at: expect.any(Number) },
    });
    const admin = await userWithRole(t, "admin");
    expect((await t.call("GET", PREFS, { token: admin.token })).status).toBe(200);
  });

  it("answers 403 insufficient_role to developers and QA viewers and 401 missing_auth without a token", async () => {
    const { t } = await ready();
    for (const role of ["developer", "qa_viewer"] as const) {
      const { token } = await userWithRole(t, role);
      const res = await t.call("GET", PREFS, { token });
      expect([res.status, res.body.code], role).toEqual([403, "insufficient_role"]);
    }
    const anonymous = await t.call("GET", PREFS);
    expect([anonymous.status, anonymous.body.code]).toEqual([401, "missing_auth"]);
  });
});

describe("PUT /v1/settings/preferences", () => {
  it("answers 400 unsupported_key_storage_mode for anything but file, and invalid_input for an unknown mode", async () => {
    const { t, ownerToken } = await ready();
    const keychain = await t.call("PUT", PREFS, { token: ownerToken, body: { key_storage_mode: "keychain" } });
    expect([keychain.status, keychain.body.code]).toEqual([400, "unsupported_key_storage_mode"]);
    const cloud = await t.call("PUT", PREFS, { token: ownerToken, body: { runtime_mode: "cloud" } });
    expect([cloud.status, cloud.body.code]).toEqual([400, "invalid_input"]);
    const file = await t.call("PUT", PREFS, { token: ownerToken, body: { key_storage_mode: "file", runtime_mode: "local" } });
    expect(file.status).toBe(200);
    expect(file.body).toEqual({ preferences: expect.objectContaining({ key_storage_mode: "file", runtime_mode: "local" }), sessions_revoked: false });
  });

  it("lets only the owner change the runtime mode: 403 external_access_owner_required for an admin", async () => {
    const { t } = await ready();
    const admin = await userWithRole(t, "admin");
    const res = await t.call("PUT", PREFS, { token: admin.token, body: { runtime_mode: "remote" } });
    expect([res.status, res.body.code]).toEqual([403, "external_access_owner_required"]);
    // Writing the unchanged mode is not a mode change.
    const same = await t.call("PUT", PREFS, { token: admin.token, body: { runtime_mode: "local", key_storage_mode: "file" } });
    expect(same.status).toBe(200);
    const dev = await userWithRole(t, "developer");
    const devRes = await t.call("PUT", PREFS, { token: dev.token, body: { runtime_mode: "remote" } });
    expect([devRes.status, devRes.body.code]).toEqual([403, "insufficient_role"]);
  });

  it("refuses remote mode with the first failing preflight check's code", async () => {
    const { t, ownerToken } = await ready();
    const enable = () => t.call("PUT", PREFS, { token: ownerToken, body: { runtime_mode: "remote" } });
    const expectCode = async (code: string) => {
      const res = await enable();
      expect([res.status, res.body.code], code).toEqual([400, code]);
    };
    await expectCode("external_access_public_url_missing");
    // A loopback public URL is as good as none: devices cannot reach it.
    await writeSetting(t.deps, NETWORK_SETTING, {
      public_url: "https://localhost:8443",
      artifact_delivery_url: null,
      allowed_origins: ["https://localhost:8443"],
    });
    await expectCode("external_access_public_url_missing");
    await writeSetting(t.deps, NETWORK_SETTING, {
      public_url: "http://ci.example.com",
      artifact_delivery_url: null,
      allowed_origins: ["http://ci.example.com"],
    });
    await expectCode("external_access_https_required");
    await writeSetting(t.deps, NETWORK_SETTING, { public_url: "https://ci.example.com", artifact_delivery_url: null, allowed_origins: [] });
    await expectCode("external_access_origin_not_allowed");
    await writeSetting(t.deps, NETWORK_SETTING, {
      public_url: "https://ci.example.com",
      artifact_delivery_url: "http://cdn.example.com",
      allowed_origins: ["https://ci.example.com"],
    });
    await expectCode("external_access_auth_missing");
    await configureOidcDocument(t);
    await expectCode("artifact_delivery_https_required");
    // Nothing changed and no session was revoked on the way.
    expect((await t.call("GET", PREFS, { token: ownerToken })).body.preferences.runtime_mode).toBe("local");
  });

  it("enables remote mode once the preflight passes, revokes every session and reports restart_required on 127.0.0.1", async () => {
    const { t, ownerToken, owner } = await ready();
    const other = await userWithRole(t, "developer");
    expect((await t.call("PUT", NETWORK, { token: ownerToken, body: GOOD_NETWORK })).status).toBe(200);
    await configureOidcDocument(t);
    t.clock.advance(60);
    const res = await t.call("PUT", PREFS, { token: ownerToken, body: { runtime_mode: "remote" } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      preferences: { key_storage_mode: "file", runtime_mode: "remote", restart_required: true, updated_at: t.clock.now() },
      sessions_revoked: true,
    });
    for (const token of [ownerToken, other.token]) {
      const me = await t.call("GET", "/v1/users/me", { token });
      expect([me.status, me.body.code]).toEqual([401, "invalid_session"]);
    }
    const fresh = await sessionFor(t, owner);
    expect((await t.call("GET", PREFS, { token: fresh })).body.preferences).toMatchObject({ runtime_mode: "remote", restart_required: true });
    const audit = await t.deps.db.select().from(auditEvents).where(eq(auditEvents.action, "settings.runtime_mode_changed")).all();
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ actorUserId: owner.id, details: { from: "local", to: "remote", sessions_revoked: true } });

    // Back to local: no preflight, sessions revoked again.
    const back = await t.call("PUT", PREFS, { token: fresh, body: { runtime_mode: "local" } });
    expect(back.body).toMatchObject({ preferences: { runtime_mode: "local", restart_required: false }, sessions_revoked: true });
    expect((await t.call("GET", "/v1/users/me", { token: fresh })).status).toBe(401);
  });

  it("reports no restart when the listener is bound to every interface", async () => {
    const { t, ownerToken } = await ready({ config: { HANGAR_HOST: "0.0.0.0" } });
    await t.call("PUT", NETWORK, { token: ownerToken, body: GOOD_NETWORK });
    await writeSetting(t.deps, TRUSTED_PROXY_SETTING, { trusted_proxy_cidrs: [], user_email_header: "x-hangar-user-email" });
    const res = await t.call("PUT", PREFS, { token: ownerToken, body: { runtime_mode: "remote" } });
    expect(res.status).toBe(200);
    expect(res.body.preferences.restart_required).toBe(false);
  });
});

describe("/v1/settings/external-access/network", () => {
  it("answers source default and nulls before any PUT", async () => {
    const { t, ownerToken } = await ready();
    const res = await t.call("GET", NETWORK, { token: ownerToken });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      settings: { public_url: null, artifact_delivery_url: null, allowed_origins: [], source: "default", updated_at: null },
    });
    const dev = await userWithRole(t, "developer");
    const refused = await t.call("GET", NETWORK, { token: dev.token });
    expect([refused.status, refused.body.code]).toEqual([403, "insufficient_role"]);
  });

  it("stores normalized settings with source database and records an audit event", async () => {
    const { t, ownerToken, owner } = await ready();
    const res = await t.call("PUT", NETWORK, {
      token: ownerToken,
      body: {
        public_url: "https://CI.example.com/",
        artifact_delivery_url: "https://cdn.example.com/hangar/",
        allowed_origins: ["https://ci.example.com:443/", "https://app.example.com"],
      },
    });
    expect(res.status).toBe(200);
    const settings = {
      public_url: "https://ci.example.com",
      artifact_delivery_url: "https://cdn.example.com/hangar",
      allowed_origins: ["https://ci.example.com", "https://app.example.com"],
      source: "database",
      updated_at: t.clock.now(),
    };
    expect(res.body).toEqual({ settings });
    expect((await t.call("GET", NETWORK, { token: ownerToken })).body).toEqual({ settings });
    expect(await readNetworkSettings(t.deps)).toEqual(settings);
    const audit = await t.deps.db.select().from(auditEvents).where(eq(auditEvents.action, "settings.network_updated")).all();
    expect(audit[0]).toMatchObject({ actorUserId: owner.id });
    // The delivery URL may be removed again.
    const cleared = await t.call("PUT", NETWORK, { token: ownerToken, body: { ...GOOD_NETWORK, artifact_delivery_url: null } });
    expect(cleared.body.settings.artifact_delivery_url).toBeNull();
  });

  it.each([
    ["invalid_input", { ...GOOD_NETWORK, public_url: "not a url" }],
    ["invalid_input", { ...GOOD_NETWORK, public_url: "https://ci.example.com/?x=1" }],
    ["invalid_input", { ...GOOD_NETWORK, allowed_origins: ["https://ci.example.com", "https://app.example.com/path"] }],
    ["invalid_input", { ...GOOD_NETWORK, allowed_origins: ["*"] }],
    ["invalid_input", { public_url: "https://ci.example.com" }],
    ["external_access_https_required", { ...GOOD_NETWORK, public_url: "http://ci.example.com", allowed_origins: ["http://ci.example.com"] }],
    ["external_access_origin_not_allowed", { ...GOOD_NETWORK, allowed_origins: ["https://app.example.com"] }],
    ["external_access_origin_not_allowed", { ...GOOD_NETWORK, allowed_origins: ["http://ci.example.com"] }],
    ["artifact_delivery_url_invalid", { ...GOOD_NETWORK, artifact_delivery_url: "cdn.example.com" }],
    ["artifact_delivery_url_invalid", { ...GOOD_NETWORK, artifact_delivery_url: "ftp://cdn.example.com" }],
    ["artifact_delivery_https_required", { ...GOOD_NETWORK, artifact_delivery_url: "http://cdn.example.com" }],
    ["artifact_delivery_public_url_required", { ...GOOD_NETWORK, artifact_delivery_url: "https://localhost:8443" }],
    ["artifact_delivery_public_url_required", { ...GOOD_NETWORK, artifact_delivery_url: "https://127.0.0.1" }],
    ["artifact_delivery_public_url_required", { ...GOOD_NETWORK, artifact_delivery_url: "https://[::1]/" }],
  ])("answers 400 %s for %j", async (code, body) => {
    const { t, ownerToken } = await ready();
    const res = await t.call("PUT", NETWORK, { token: ownerToken, body });
    expect([res.status, res.body.code]).toEqual([400, code]);
    expect((await readNetworkSettings(t.deps)).source).toBe("default");
  });

  it("answers 403 external_access_owner_required to admins and developers", async () => {
    const { t } = await ready();
    for (const role of ["admin", "developer"] as const) {
      const { token } = await userWithRole(t, role);
      const res = await t.call("PUT", NETWORK, { token, body: GOOD_NETWORK });
      expect([res.status, res.body.code], role).toEqual([403, "external_access_owner_required"]);
    }
  });

  it("refuses a non-loopback client in local mode before reading the body", async () => {
    const { t, ownerToken } = await ready();
    const res = await t.call("PUT", NETWORK, { token: ownerToken, body: { public_url: 42 }, peer: "192.168.1.20" });
    expect([res.status, res.body.code]).toEqual([403, "external_access_loopback_required"]);
  });

  it("answers 403 external_access_loopback_required to a non-loopback client in local mode only", async () => {
    const { t, ownerToken, owner } = await ready();
    for (const [peer, headers] of [
      ["192.168.1.20", {}],
      ["127.0.0.1", { "x-forwarded-for": "203.0.113.1" }],
      ["127.0.0.1", { host: "ci.example.com" }],
    ] as const) {
      const res = await t.call("PUT", NETWORK, { token: ownerToken, body: GOOD_NETWORK, peer, headers });
      expect([res.status, res.body.code], `${peer} ${JSON.stringify(headers)}`).toEqual([403, "external_access_loopback_required"]);
    }
    // In remote mode the owner may change it from anywhere.
    await t.call("PUT", NETWORK, { token: ownerToken, body: GOOD_NETWORK });
    await configureOidcDocument(t);
    expect((await t.call("PUT", PREFS, { token: ownerToken, body: { runtime_mode: "remote" } })).status).toBe(200);
    const remoteToken = await sessionFor(t, owner);
    const res = await t.call("PUT", NETWORK, {
      token: remoteToken,
      peer: "192.168.1.20",
      body: { ...GOOD_NETWORK, artifact_delivery_url: "https://cdn.example.com" },
    });
    expect(res.status).toBe(200);
  });
});

describe("GET /v1/settings/external-access/preflight", () => {
  it("lists the six checks in order and is not ready on a fresh instance", async () => {
    const { t, ownerToken } = await ready();
    const res = await t.call("GET", PREFLIGHT, { token: ownerToken });
    expect(res.status).toBe(200);
    expect(res.body.ready).toBe(false);
    expect(res.body.checks.map((c: { id: string }) => c.id)).toEqual(CHECK_IDS);
    expect(res.body.checks.map((c: { failure_code: string }) => c.failure_code)).toEqual([
      "external_access_public_url_missing",
      "external_access_https_required",
      "external_access_origin_not_allowed",
      "external_access_auth_missing",
      "artifact_delivery_https_required",
      "trusted_proxy_shared_secret_missing",
      "data_dir_low_space",
    ]);
    // The free-space check depends on this machine's disk (test/http/retention.test.ts drives it).
    expect(res.body.checks.slice(0, 6).map((c: { ok: boolean }) => c.ok)).toEqual([false, false, false, false, true, true]);
    expect(res.body.checks.map((c: { required: boolean }) => c.required)).toEqual([true, true, true, true, true, false, false]);
    for (const check of res.body.checks)
      expect(check).toEqual({
        id: expect.any(String),
        label: expect.any(String),
        ok: expect.any(Boolean),
        message: expect.any(String),
        failure_code: expect.any(String),
        required: expect.any(Boolean),
      });
  });

  it("is ready with HTTPS network settings and either remote sign-in configured", async () => {
    for (const key of [OIDC_SETTING, TRUSTED_PROXY_SETTING]) {
      const { t, ownerToken } = await ready();
      await t.call("PUT", NETWORK, { token: ownerToken, body: { ...GOOD_NETWORK, artifact_delivery_url: "https://cdn.example.com" } });
      expect((await t.call("GET", PREFLIGHT, { token: ownerToken })).body.ready).toBe(false);
      await writeSetting(t.deps, key, { configured: true });
      const res = await t.call("GET", PREFLIGHT, { token: ownerToken });
      expect(res.body.ready, key).toBe(true);
      expect(res.body.checks.every((c: { ok: boolean }) => c.ok)).toBe(true);
    }
  });

  it("answers 403 insufficient_role to a QA viewer", async () => {
    const { t } = await ready();
    const { token } = await userWithRole(t, "qa_viewer");
    const res = await t.call("GET", PREFLIGHT, { token });
    expect([res.status, res.body.code]).toEqual([403, "insufficient_role"]);
  });
});
