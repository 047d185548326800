// A reverse proxy on the daemon's machine (docs/api.md §3): two small Node proxies in front of the real daemon, one
// with nginx's defaults (upstream `Host: 127.0.0.1:PORT`, no forwarding header: the daemon cannot tell its
// visitors from local processes) and one that adds X-Forwarded-For. Local login must be refused through both
// once the instance runs as a proxy deployment would, while `hangar login` keeps working on the machine.
import { createServer, request as httpRequest, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDb } from "../../src/db/client.ts";
import { systemClock } from "../../src/deps.ts";
import { writeSetting } from "../../src/domain/settings/instance-settings.ts";
import { OIDC_SETTING } from "../../src/domain/setup/preflight.ts";
import { http, makeDataDir, runCli, startDaemon, type Daemon } from "../helpers/daemon.ts";

interface Proxy {
  url: string;
  close(): Promise<void>;
}

/**
 * A proxy to `upstream`. `nginx`: what `proxy_pass http://127.0.0.1:PORT;` sends with no other directive: the
 * upstream's host:port as Host, `Connection: close`, and the client's headers otherwise unchanged. `xff`: the
 * same plus `X-Forwarded-For: <client address>`, as `proxy_set_header X-Forwarded-For $remote_addr` adds.
 */
async function startProxy(upstream: string, style: "nginx" | "xff"): Promise<Proxy> {
  const target = new URL(upstream);
  const server: Server = createServer((req: IncomingMessage, res) => {
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value === undefined || ["host", "connection", "keep-alive"].includes(name)) continue;
      headers[name] = value;
    }
    headers.host = target.host;
    headers.connection = "close";
    if (style === "xff") headers["x-forwarded-for"] = req.socket.remoteAddress ?? "";
    const up = httpRequest({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    up.on("error", () => res.writeHead(502).end());
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

let daemon: Daemon;
let dataDir: string;
let env: Record<string, string>;
let nginx: Proxy;
let xff: Proxy;

async function owner(): Promise<string> {
  const r = await runCli(["login", "--print-token"], env);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout.trim();
}

/** A visitor of the proxy (whatever Host it sends, the proxy replaces it with the upstream's). */
function loginThrough(proxy: Proxy) {
  return http(proxy.url, "POST", "/v1/auth/local/login", { body: {} });
}

beforeAll(async () => {
  dataDir = makeDataDir();
  env = { HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0" };
  daemon = await startDaemon(env, 60_000);
  [nginx, xff] = await Promise.all([startProxy(daemon.url, "nginx"), startProxy(daemon.url, "xff")]);
  const made = await runCli(["setup-token"], env);
  const verified = await http(daemon.url, "POST", "/v1/setup/bootstrap-token/verify", { body: { token: made.stdout.trim() } });
  const setup = verified.body.session_token as string;
  expect((await http(daemon.url, "POST", "/v1/setup/local-owner/create", { token: setup, body: { email: "owner@example.com" } })).status).toBe(200);
  expect((await http(daemon.url, "POST", "/v1/setup/complete", { token: setup })).status).toBe(200);
}, 120_000);

afterAll(async () => {
  await Promise.all([nginx?.close(), xff?.close()]);
  await daemon?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

describe("local login behind a reverse proxy on the same machine", { timeout: 120_000 }, () => {
  it("local mode: refused through a proxy that adds X-Forwarded-For; with cli_only refused through both", async () => {
    const viaXff = await loginThrough(xff);
    expect([viaXff.status, viaXff.body.code]).toEqual([403, "local_login_loopback_required"]);

    const token = await owner();
    const put = await http(daemon.url, "PUT", "/v1/settings/local-login", { token, body: { mode: "cli_only" } });
    expect([put.status, put.body]).toEqual([200, { mode: "cli_only" }]);
    for (const proxy of [nginx, xff]) {
      const res = await loginThrough(proxy);
      expect([res.status, res.body.code]).toEqual([403, "local_login_disabled"]);
    }
    // Not even from the machine itself; `hangar login` still signs in.
    const direct = await http(daemon.url, "POST", "/v1/auth/local/login", { body: {} });
    expect([direct.status, direct.body.code]).toEqual([403, "local_login_disabled"]);
    const me = await http(daemon.url, "GET", "/v1/users/me", { token: await owner() });
    expect(me.body).toMatchObject({ email: "owner@example.com", role: "owner" });
    expect((await http(daemon.url, "PUT", "/v1/settings/local-login", { token, body: { mode: "loopback" } })).status).toBe(200);
  });

  it("remote mode: refused through both proxies (403 mode_restricted) until the owner turns it back on", async () => {
    // What the preflight needs for remote mode: network settings and an OIDC document (written as the OIDC area would).
    let token = await owner();
    const network = await http(daemon.url, "PUT", "/v1/settings/external-access/network", {
      token,
      body: { public_url: "https://ci.example.com", allowed_origins: ["https://ci.example.com"] },
    });
    expect(network.status).toBe(200);
    const opened = await openDb(`file:${join(dataDir, "hangar.db")}`);
    try {
      await writeSetting({ db: opened.db, clock: systemClock }, OIDC_SETTING, { issuer_url: "https://id.example.com", client_id: "hangar" });
    } finally {
      opened.close();
    }
    const prefs = await http(daemon.url, "PUT", "/v1/settings/preferences", { token, body: { runtime_mode: "remote" } });
    expect(prefs.status, JSON.stringify(prefs.body)).toBe(200);

    for (const proxy of [nginx, xff]) {
      const res = await loginThrough(proxy);
      expect([res.status, res.body.code]).toEqual([403, "mode_restricted"]);
    }
    const direct = await http(daemon.url, "POST", "/v1/auth/local/login", { body: {} });
    expect([direct.status, direct.body.code]).toEqual([403, "mode_restricted"]);

    // The owner turns it back on (from the machine, with `hangar login`): the proxy that says so is still refused.
    token = await owner();
    expect((await http(daemon.url, "PUT", "/v1/settings/local-login", { token, body: { mode: "loopback" } })).status).toBe(200);
    const viaXff = await loginThrough(xff);
    expect([viaXff.status, viaXff.body.code]).toEqual([403, "local_login_loopback_required"]);
    expect((await http(daemon.url, "POST", "/v1/auth/local/login", { body: {} })).status).toBe(200);
  });
});
