// GET/PUT /v1/settings/local-login and its effect on POST /v1/auth/local/login (docs/api.md §3).
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { auditEvents } from "../../src/db/schema/index.ts";
import { writeSetting } from "../../src/domain/settings/instance-settings.ts";
import { OIDC_SETTING } from "../../src/domain/setup/preflight.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { completeLocalSetup, sessionFor, userWithRole } from "../helpers/factories.ts";

const SETTING = "/v1/settings/local-login";
const LOGIN = "/v1/auth/local/login";
const PREFS = "/v1/settings/preferences";

async function ready() {
  const t = await makeTestApp();
  const { ownerToken, owner } = await completeLocalSetup(t);
  return { t, ownerToken, owner };
}

/** Switches the runtime mode through the real PUT preferences (which revokes sessions): answers a fresh owner token. */
async function switchMode(t: TestApp, owner: { id: string }, token: string, runtime_mode: "local" | "remote"): Promise<string> {
  const res = await t.call("PUT", PREFS, { token, body: { runtime_mode } });
  expect(res.status, res.text).toBe(200);
  return sessionFor(t, owner);
}

describe("GET/PUT /v1/settings/local-login", () => {
  it("answers {mode: loopback} until changed, and stores the owner's choice", async () => {
    const { t, ownerToken } = await ready();
    const first = await t.call("GET", SETTING, { token: ownerToken });
    expect([first.status, first.body]).toEqual([200, { mode: "loopback" }]);
    const put = await t.call("PUT", SETTING, { token: ownerToken, body: { mode: "cli_only" } });
    expect([put.status, put.body]).toEqual([200, { mode: "cli_only" }]);
    expect((await t.call("GET", SETTING, { token: ownerToken })).body).toEqual({ mode: "cli_only" });
    const audit = await t.deps.db.select().from(auditEvents).where(eq(auditEvents.action, "settings.local_login_changed")).all();
    expect(audit.at(-1)?.details).toMatchObject({ mode: "cli_only" });
  });

  it("answers 403 external_access_owner_required to everyone but the owner, 401 missing_auth without a token", async () => {
    const { t } = await ready();
    for (const role of ["admin", "developer", "qa_viewer"] as const) {
      const { token } = await userWithRole(t, role);
      for (const [method, body] of [
        ["GET", undefined],
        ["PUT", { mode: "loopback" }],
      ] as const) {
        const res = await t.call(method, SETTING, { token, body });
        expect([res.status, res.body.code], `${role} ${method}`).toEqual([403, "external_access_owner_required"]);
      }
    }
    const anonymous = await t.call("GET", SETTING);
    expect([anonymous.status, anonymous.body.code]).toEqual([401, "missing_auth"]);
  });

  it("answers 400 invalid_input for another value", async () => {
    const { t, ownerToken } = await ready();
    for (const body of [{ mode: "off" }, { mode: "" }, {}, { mode: null }, { mode: "LOOPBACK" }]) {
      const res = await t.call("PUT", SETTING, { token: ownerToken, body });
      expect([res.status, res.body.code], JSON.stringify(body)).toEqual([400, "invalid_input"]);
    }
    expect((await t.call("GET", SETTING, { token: ownerToken })).body).toEqual({ mode: "loopback" });
  });
});

describe("local login under the setting", () => {
  it("answers 403 local_login_disabled in cli_only, even from the machine itself, and works again with loopback", async () => {
    const { t, ownerToken } = await ready();
    await t.call("PUT", SETTING, { token: ownerToken, body: { mode: "cli_only" } });
    for (const peer of ["127.0.0.1", "::1", "192.168.1.20"]) {
      const res = await t.call("POST", LOGIN, { body: {}, peer });
      expect([res.status, res.body.code], peer).toEqual([403, "local_login_disabled"]);
    }
    await t.call("PUT", SETTING, { token: ownerToken, body: { mode: "loopback" } });
    expect((await t.call("POST", LOGIN, { body: {} })).status).toBe(200);
  });

  it("answers 403 mode_restricted in remote mode until the owner sets loopback after the switch; every switch resets it", async () => {
    const { t, ownerToken, owner } = await ready();
    // Remote mode needs a passing preflight: network settings and a remote sign-in method.
    const network = { public_url: "https://ci.example.com", allowed_origins: ["https://ci.example.com"], artifact_delivery_url: null };
    expect((await t.call("PUT", "/v1/settings/external-access/network", { token: ownerToken, body: network })).status).toBe(200);
    await writeSetting(t.deps, OIDC_SETTING, { issuer_url: "https://id.example.com", client_id: "hangar" });
    // `loopback` set while still local does not count for remote mode.
    await t.call("PUT", SETTING, { token: ownerToken, body: { mode: "loopback" } });
    let token = await switchMode(t, owner, ownerToken, "remote");
    const refused = await t.call("POST", LOGIN, { body: {} });
    expect([refused.status, refused.body.code]).toEqual([403, "mode_restricted"]);

    expect((await t.call("PUT", SETTING, { token, body: { mode: "loopback" } })).status).toBe(200);
    expect((await t.call("POST", LOGIN, { body: {} })).status).toBe(200);
    // Still loopback only.
    const outside = await t.call("POST", LOGIN, { body: {}, peer: "203.0.113.9" });
    expect([outside.status, outside.body.code]).toEqual([403, "local_login_loopback_required"]);

    // Back to local (works there), then remote again: refused until set once more.
    token = await switchMode(t, owner, token, "local");
    expect((await t.call("POST", LOGIN, { body: {} })).status).toBe(200);
    token = await switchMode(t, owner, token, "remote");
    expect((await t.call("POST", LOGIN, { body: {} })).body.code).toBe("mode_restricted");
    expect((await t.call("GET", SETTING, { token })).body).toEqual({ mode: "loopback" });

    // cli_only wins in remote mode too.
    await t.call("PUT", SETTING, { token, body: { mode: "cli_only" } });
    expect((await t.call("POST", LOGIN, { body: {} })).body.code).toBe("local_login_disabled");
  });
});
