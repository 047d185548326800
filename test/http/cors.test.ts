import { describe, expect, it } from "vitest";
import { writeSetting } from "../../src/domain/settings/instance-settings.ts";
import { OIDC_SETTING } from "../../src/domain/setup/preflight.ts";
import { makeTestApp } from "../helpers/app.ts";
import { completeLocalSetup, sessionFor } from "../helpers/factories.ts";

const APP_ORIGIN = "https://app.example.com";

async function remoteInstance() {
  const t = await makeTestApp();
  const { ownerToken, owner } = await completeLocalSetup(t);
  const network = await t.call("PUT", "/v1/settings/external-access/network", {
    token: ownerToken,
    body: { public_url: "https://ci.example.com", allowed_origins: ["https://ci.example.com", APP_ORIGIN] },
  });
  expect(network.status).toBe(200);
  await writeSetting(t.deps, OIDC_SETTING, { issuer_url: "https://id.example.com" });
  expect((await t.call("PUT", "/v1/settings/preferences", { token: ownerToken, body: { runtime_mode: "remote" } })).status).toBe(200);
  return { t, token: await sessionFor(t, owner) };
}

describe("CORS in remote mode", () => {
  it("echoes an allowed origin on the response, errors included", async () => {
    const { t, token } = await remoteInstance();
    const res = await t.call("GET", "/v1/users/me", { token, headers: { origin: APP_ORIGIN } });
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBe(APP_ORIGIN);
    expect(res.headers.get("vary")).toContain("Origin");
    const denied = await t.call("GET", "/v1/users/me", { token: "A".repeat(43), headers: { origin: APP_ORIGIN } });
    expect(denied.status).toBe(401);
    expect(denied.headers.get("access-control-allow-origin")).toBe(APP_ORIGIN);
  });

  it("answers a preflight for an allowed origin with 204 and the allowed methods and headers", async () => {
    const { t } = await remoteInstance();
    const res = await t.call("OPTIONS", "/v1/builds", {
      headers: { origin: APP_ORIGIN, "access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type" },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBe(APP_ORIGIN);
    expect(res.headers.get("access-control-allow-methods")).toContain("POST");
    expect(res.headers.get("access-control-allow-headers")?.toLowerCase()).toContain("authorization");
    expect(res.headers.get("access-control-allow-credentials")).toBeNull();
  });

  it("refuses an origin outside allowed_origins with 403 and no CORS headers, preflight included", async () => {
    const { t, token } = await remoteInstance();
    for (const origin of ["https://evil.example.com", "http://app.example.com", "null"]) {
      const res = await t.call("GET", "/v1/users/me", { token, headers: { origin } });
      expect([res.status, res.body.code], origin).toEqual([403, "forbidden"]);
      expect(res.headers.get("access-control-allow-origin")).toBeNull();
      const pre = await t.call("OPTIONS", "/v1/users/me", { headers: { origin, "access-control-request-method": "GET" } });
      expect(pre.status, origin).toBe(403);
      expect(pre.headers.get("access-control-allow-origin")).toBeNull();
    }
  });

  it("leaves requests without an Origin, and same-origin requests, alone", async () => {
    const { t, token } = await remoteInstance();
    const plain = await t.call("GET", "/v1/users/me", { token });
    expect(plain.status).toBe(200);
    expect(plain.headers.get("access-control-allow-origin")).toBeNull();
    const same = await t.call("GET", "/v1/users/me", { token, headers: { origin: "http://localhost", host: "localhost" } });
    expect(same.status).toBe(200);
    expect(same.headers.get("access-control-allow-origin")).toBeNull();
  });
});

describe("CORS in local mode", () => {
  it("allows no cross-origin access at all, even for an origin listed in allowed_origins", async () => {
    const t = await makeTestApp();
    const { ownerToken } = await completeLocalSetup(t);
    await t.call("PUT", "/v1/settings/external-access/network", {
      token: ownerToken,
      body: { public_url: "https://ci.example.com", allowed_origins: ["https://ci.example.com", APP_ORIGIN] },
    });
    const res = await t.call("GET", "/v1/users/me", { token: ownerToken, headers: { origin: APP_ORIGIN } });
    expect([res.status, res.body.code]).toEqual([403, "forbidden"]);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
    const pre = await t.call("OPTIONS", "/v1/auth/local/login", { headers: { origin: APP_ORIGIN, "access-control-request-method": "POST" } });
    expect(pre.status).toBe(403);
    expect(pre.headers.get("access-control-allow-origin")).toBeNull();
    // A web page cannot drive the loopback-only login through the user's browser.
    const login = await t.call("POST", "/v1/auth/local/login", { body: {}, headers: { origin: "https://evil.example.com" } });
    expect([login.status, login.body.code]).toEqual([403, "forbidden"]);
    // The daemon's own origin is not cross-origin.
    const same = await t.call("POST", "/v1/auth/local/login", { body: {}, headers: { origin: "http://127.0.0.1:8080", host: "127.0.0.1:8080" } });
    expect(same.status).toBe(200);
  });
});
