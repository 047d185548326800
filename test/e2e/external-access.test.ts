import { request } from "node:http";
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { http, makeDataDir, runCli, startDaemon, type Daemon } from "../helpers/daemon.ts";

const SECRET = "e2e-proxy-shared-secret-0123456789";

/** A request with full control of the Host header, which fetch does not give. */
function rawRequest(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: unknown,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- test assertions read arbitrary JSON shapes
): Promise<{ status: number; body: any }> {
  const url = new URL(base);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        headers: { ...headers, ...(payload ? { "content-type": "application/json", "content-length": String(Buffer.byteLength(payload)) } : {}) },
      },
      (res) => {
        let text = "";
        res.on("data", (d: Buffer) => (text += d.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : null }));
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

async function setupSession(daemon: Daemon, env: Record<string, string>): Promise<string> {
  const issued = await runCli(["setup-token"], env);
  expect(issued.code, issued.stderr).toBe(0);
  const verified = await http(daemon.url, "POST", "/v1/setup/bootstrap-token/verify", { body: { token: issued.stdout.trim() } });
  expect(verified.status).toBe(200);
  return verified.body.session_token;
}

describe("loopback over a real socket (local mode)", () => {
  let daemon: Daemon;
  let dataDir: string;
  let ownerToken: string;

  beforeAll(async () => {
    dataDir = makeDataDir();
    const env = { HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0" };
    daemon = await startDaemon(env);
    const session = await setupSession(daemon, env);
    expect((await http(daemon.url, "POST", "/v1/setup/local-owner/create", { token: session, body: { email: "owner@example.com" } })).status).toBe(
      200,
    );
    expect((await http(daemon.url, "POST", "/v1/setup/complete", { token: session })).status).toBe(200);
    const login = await http(daemon.url, "POST", "/v1/auth/local/login", { body: { email: "owner@example.com" } });
    expect(login.status).toBe(200);
    ownerToken = login.body.session_token;
  }, 30_000);

  afterAll(async () => {
    await daemon?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("refuses local login from 127.0.0.1 when a forwarding header is present", async () => {
    for (const header of ["X-Forwarded-For", "Forwarded", "X-Real-IP", "CF-Connecting-IP", "True-Client-IP"]) {
      const res = await http(daemon.url, "POST", "/v1/auth/local/login", {
        body: { email: "owner@example.com" },
        headers: { [header]: "203.0.113.4" },
      });
      expect([res.status, res.body.code], header).toEqual([403, "local_login_loopback_required"]);
    }
  });

  it("refuses local login from 127.0.0.1 with a non-loopback Host, and accepts loopback names", async () => {
    for (const host of ["ci.example.com", "evil.example.com:8080", "10.0.0.1", "localhost.evil.example"]) {
      const res = await rawRequest(daemon.url, "POST", "/v1/auth/local/login", { host }, { email: "owner@example.com" });
      expect([res.status, res.body.code], host).toEqual([403, "local_login_loopback_required"]);
    }
    for (const host of ["localhost", `localhost:${daemon.port}`, `127.0.0.1:${daemon.port}`]) {
      const res = await rawRequest(daemon.url, "POST", "/v1/auth/local/login", { host }, { email: "owner@example.com" });
      expect(res.status, host).toBe(200);
    }
  });

  it("answers the other local-login rows: email_required and user_not_found", async () => {
    expect((await http(daemon.url, "POST", "/v1/auth/local/login", { body: {} })).status).toBe(200);
    const invited = await http(daemon.url, "POST", "/v1/users/invite", { token: ownerToken, body: { email: "dev@example.com", role: "developer" } });
    expect(invited.status).toBe(200);
    expect((await http(daemon.url, "POST", "/v1/auth/local/login", { body: { email: "dev@example.com" } })).status).toBe(200);
    const ambiguous = await http(daemon.url, "POST", "/v1/auth/local/login", { body: {} });
    expect([ambiguous.status, ambiguous.body.code]).toEqual([400, "email_required"]);
    const unknown = await http(daemon.url, "POST", "/v1/auth/local/login", { body: { email: "nobody@example.com" } });
    expect([unknown.status, unknown.body.code]).toEqual([403, "user_not_found"]);
  });

  it("refuses network settings changes that are not loopback while in local mode", async () => {
    const body = { public_url: "https://ci.example.com", allowed_origins: ["https://ci.example.com"] };
    const proxied = await http(daemon.url, "PUT", "/v1/settings/external-access/network", {
      token: ownerToken,
      body,
      headers: { "x-forwarded-for": "198.51.100.2" },
    });
    expect([proxied.status, proxied.body.code]).toEqual([403, "external_access_loopback_required"]);
    const direct = await http(daemon.url, "PUT", "/v1/settings/external-access/network", { token: ownerToken, body });
    expect(direct.status).toBe(200);
    expect(direct.body.settings.source).toBe("database");
  });

  it("refuses cross-origin requests in local mode", async () => {
    const res = await http(daemon.url, "GET", "/v1/users/me", { token: ownerToken, headers: { origin: "https://ci.example.com" } });
    expect([res.status, res.body.code]).toEqual([403, "forbidden"]);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
  });
});

describe("trusted-proxy setup and login over a real socket", () => {
  let daemon: Daemon;
  let dataDir: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    dataDir = makeDataDir();
    env = { HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0" };
    daemon = await startDaemon(env);
  }, 30_000);

  afterAll(async () => {
    await daemon?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("configures, claims the owner, completes and signs users in through a proxy on this machine", async () => {
    const session = await setupSession(daemon, env);
    const prefs = await http(daemon.url, "POST", "/v1/setup/preferences", {
      token: session,
      body: { runtime_mode: "remote", remote_auth_mode: "trusted_proxy" },
    });
    expect(prefs.status).toBe(200);
    // Local login row: refused while setup is incomplete in remote mode.
    const early = await http(daemon.url, "POST", "/v1/auth/local/login", { body: { email: "owner@example.com" } });
    expect([early.status, early.body.code]).toEqual([403, "mode_restricted"]);

    const configured = await http(daemon.url, "POST", "/v1/setup/trusted-proxy/configure", {
      token: session,
      body: { setup_owner_email: "owner@example.com", trusted_proxy_cidrs: [], shared_secret: SECRET, gateway_access_ticket: "gw-ticket" },
    });
    expect(configured.status).toBe(200);
    expect(configured.body).toMatchObject({ state: "idp_configured", has_shared_secret: true, has_gateway_access_ticket: true });

    // A proxy on this machine: loopback peer (empty list), forwarding headers present, identity asserted.
    const proxy = { "X-Forwarded-For": "203.0.113.50", "X-Forwarded-Proto": "https", "X-HANGAR-USER-EMAIL": "owner@example.com" };
    const noSecret = await http(daemon.url, "POST", "/v1/setup/owner/claim-trusted-proxy", { token: session, headers: proxy });
    expect([noSecret.status, noSecret.body.code]).toEqual([401, "trusted_proxy_shared_secret_missing"]);
    const claimed = await http(daemon.url, "POST", "/v1/setup/owner/claim-trusted-proxy", {
      token: session,
      headers: { ...proxy, "x-hangar-trusted-proxy-secret": SECRET },
    });
    expect(claimed.status).toBe(200);
    expect(claimed.body).toMatchObject({ state: "owner_created", owner_email: "owner@example.com" });
    expect((await http(daemon.url, "POST", "/v1/setup/complete", { token: session })).status).toBe(200);

    const login = await http(daemon.url, "POST", "/v1/auth/trusted-proxy/login", { headers: { ...proxy, "X-Hangar-Trusted-Proxy-Secret": SECRET } });
    expect(login.status).toBe(200);
    expect(login.body.user).toMatchObject({ email: "owner@example.com", role: "owner" });
    const me = await http(daemon.url, "GET", "/v1/users/me", { token: login.body.session_token, headers: proxy });
    expect(me.body).toMatchObject({ email: "owner@example.com", role: "owner" });

    const wrong = await http(daemon.url, "POST", "/v1/auth/trusted-proxy/login", {
      headers: { ...proxy, "X-Hangar-Trusted-Proxy-Secret": `${SECRET}!` },
    });
    expect([wrong.status, wrong.body.code]).toEqual([401, "trusted_proxy_shared_secret_invalid"]);
    // Local login is off in remote mode until the owner turns it back on; through the proxy it is refused.
    const viaProxy = await http(daemon.url, "POST", "/v1/auth/local/login", { body: { email: "owner@example.com" }, headers: proxy });
    expect([viaProxy.status, viaProxy.body.code]).toEqual([403, "mode_restricted"]);

    // Remote mode on 127.0.0.1: the preferences say a restart with another bind address is needed.
    const token = login.body.session_token;
    const prefsNow = await http(daemon.url, "GET", "/v1/settings/preferences", { token, headers: proxy });
    expect(prefsNow.body.preferences).toMatchObject({ runtime_mode: "remote", restart_required: true });

    // Network settings from behind the proxy (remote mode), then CORS for the listed origin.
    const network = await http(daemon.url, "PUT", "/v1/settings/external-access/network", {
      token,
      headers: proxy,
      body: { public_url: "https://ci.example.com", allowed_origins: ["https://ci.example.com"] },
    });
    expect(network.status).toBe(200);
    const preflight = await http(daemon.url, "GET", "/v1/settings/external-access/preflight", { token, headers: proxy });
    expect(preflight.body.ready).toBe(true);
    const cors = await fetch(`${daemon.url}/v1/users/me`, {
      method: "OPTIONS",
      headers: { origin: "https://ci.example.com", "access-control-request-method": "GET", "access-control-request-headers": "authorization" },
    });
    expect(cors.status).toBe(204);
    expect(cors.headers.get("access-control-allow-origin")).toBe("https://ci.example.com");
    const foreign = await fetch(`${daemon.url}/v1/users/me`, {
      headers: { origin: "https://elsewhere.example.com", authorization: `Bearer ${token}` },
    });
    expect(foreign.status).toBe(403);
    expect(foreign.headers.get("access-control-allow-origin")).toBeNull();
  });
});
