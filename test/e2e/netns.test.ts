import { execFile, execFileSync } from "node:child_process";
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeDataDir, runCli, startDaemon, type Daemon } from "../helpers/daemon.ts";

// A genuinely non-loopback peer: the daemon listens on one end of a veth pair, clients run inside a network
// namespace made here on the other end. The addresses are a private test range that exists only on these two
// links, so the traffic never leaves this machine.
const SUFFIX = Math.floor(Math.random() * 0xffff)
  .toString(16)
  .padStart(4, "0");
const NS = `hangar-t-${SUFFIX}`;
const HOST_IF = `hgr${SUFFIX}h`;
const NS_IF = `hgr${SUFFIX}n`;
const OCTET = 1 + Math.floor(Math.random() * 254);
const HOST_ADDR = `10.213.${OCTET}.1`;
const LISTED = `10.213.${OCTET}.2`;
const UNLISTED = `10.213.${OCTET}.3`;
const SECRET = "netns-proxy-shared-secret-0123456789";

function ip(...args: string[]): void {
  execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] });
}

/** Why namespaces cannot be used here, or null when they can (checked by making and removing one). */
function namespacesUnavailable(): string | null {
  if (process.platform !== "linux") return `network namespaces need Linux (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return "network namespaces need root";
  const probe = `hangar-p-${SUFFIX}`;
  try {
    ip("netns", "add", probe);
  } catch (err) {
    return `\`ip netns add\` failed: ${String((err as { stderr?: Buffer }).stderr ?? err).trim()}`;
  }
  try {
    ip("netns", "del", probe);
  } catch {
    // Best effort: the probe namespace holds nothing.
  }
  return null;
}

const unavailable = namespacesUnavailable();
if (unavailable) console.log(`netns.test.ts skipped: ${unavailable}`);

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- test assertions read arbitrary JSON shapes
type Reply = { status: number; body: any };

/** Code run by `node -e` inside the namespace: one HTTP request from the given source address. */
const CLIENT = `
const http = require("node:http");
const o = JSON.parse(process.env.HANGAR_NETNS_REQUEST);
const req = http.request({ host: o.host, port: o.port, method: o.method, path: o.path, localAddress: o.localAddress, headers: o.headers }, (res) => {
  let text = "";
  res.on("data", (d) => (text += d));
  res.on("end", () => process.stdout.write(JSON.stringify({ status: res.statusCode, body: text })));
});
req.setTimeout(10000, () => req.destroy(new Error("timeout")));
req.on("error", (e) => { process.stderr.write(String(e)); process.exit(2); });
req.end(o.body);
`;

describe.skipIf(unavailable !== null)("a daemon on a veth address, clients in a network namespace", () => {
  let daemon: Daemon;
  let dataDir: string;
  let env: Record<string, string>;

  /** Sends one request from inside the namespace, from `from` (one of the namespace's two addresses). */
  function fromNamespace(
    from: string,
    method: string,
    path: string,
    options: { body?: unknown; token?: string; headers?: Record<string, string> } = {},
  ): Promise<Reply> {
    const headers: Record<string, string> = { ...options.headers };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    let body: string | undefined;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers["content-type"] = "application/json";
    }
    const requestSpec = JSON.stringify({ host: HOST_ADDR, port: daemon.port, method, path, localAddress: from, headers, body });
    return new Promise((resolve, reject) => {
      execFile(
        "ip",
        ["netns", "exec", NS, process.execPath, "-e", CLIENT],
        { env: { ...process.env, HANGAR_NETNS_REQUEST: requestSpec }, timeout: 20_000 },
        (err, stdout, stderr) => {
          if (err) return reject(new Error(`client in ${NS} failed: ${stderr || err.message}`));
          const reply = JSON.parse(stdout) as { status: number; body: string };
          resolve({ status: reply.status, body: reply.body ? JSON.parse(reply.body) : null });
        },
      );
    });
  }

  beforeAll(async () => {
    ip("netns", "add", NS);
    ip("link", "add", HOST_IF, "type", "veth", "peer", "name", NS_IF);
    ip("link", "set", NS_IF, "netns", NS);
    ip("addr", "add", `${HOST_ADDR}/24`, "dev", HOST_IF);
    ip("link", "set", HOST_IF, "up");
    ip("netns", "exec", NS, "ip", "addr", "add", `${LISTED}/24`, "dev", NS_IF);
    ip("netns", "exec", NS, "ip", "addr", "add", `${UNLISTED}/24`, "dev", NS_IF);
    ip("netns", "exec", NS, "ip", "link", "set", NS_IF, "up");
    ip("netns", "exec", NS, "ip", "link", "set", "lo", "up");
    dataDir = makeDataDir();
    env = { HANGAR_DATA_DIR: dataDir, HANGAR_HOST: HOST_ADDR, HANGAR_LOG_REQUESTS: "0" };
    daemon = await startDaemon(env);
    expect(daemon.url).toBe(`http://${HOST_ADDR}:${daemon.port}`);
  }, 30_000);

  afterAll(async () => {
    await daemon?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    // Deleting the namespace destroys its end of the veth pair, and with it the host end.
    for (const args of [
      ["netns", "del", NS],
      ["link", "del", HOST_IF],
    ]) {
      try {
        ip(...args);
      } catch {
        // Already gone.
      }
    }
  });

  it("refuses local login to a non-loopback peer and accepts a trusted proxy only from a listed CIDR", async () => {
    const issued = await runCli(["setup-token"], env);
    expect(issued.code, issued.stderr).toBe(0);
    const verified = await fromNamespace(LISTED, "POST", "/v1/setup/bootstrap-token/verify", { body: { token: issued.stdout.trim() } });
    expect(verified.status).toBe(200);
    const session = verified.body.session_token as string;
    const prefs = await fromNamespace(LISTED, "POST", "/v1/setup/preferences", {
      token: session,
      body: { runtime_mode: "remote", remote_auth_mode: "trusted_proxy" },
    });
    expect(prefs.status).toBe(200);
    const configured = await fromNamespace(LISTED, "POST", "/v1/setup/trusted-proxy/configure", {
      token: session,
      body: { setup_owner_email: "owner@example.com", trusted_proxy_cidrs: [`${LISTED}/32`], shared_secret: SECRET },
    });
    expect(configured.status).toBe(200);

    const identity = { "x-hangar-user-email": "owner@example.com", "x-hangar-trusted-proxy-secret": SECRET };
    const unlistedClaim = await fromNamespace(UNLISTED, "POST", "/v1/setup/owner/claim-trusted-proxy", { token: session, headers: identity });
    expect([unlistedClaim.status, unlistedClaim.body.code]).toEqual([403, "trusted_proxy_peer_not_allowed"]);
    const claimed = await fromNamespace(LISTED, "POST", "/v1/setup/owner/claim-trusted-proxy", { token: session, headers: identity });
    expect(claimed.status).toBe(200);
    expect((await fromNamespace(LISTED, "POST", "/v1/setup/complete", { token: session })).status).toBe(200);

    // Local login is off in remote mode (until the owner turns it back on), whatever the Host says.
    for (const host of [`${HOST_ADDR}:${daemon.port}`, "localhost", "127.0.0.1"]) {
      const local = await fromNamespace(LISTED, "POST", "/v1/auth/local/login", { body: { email: "owner@example.com" }, headers: { host } });
      expect([local.status, local.body.code], host).toEqual([403, "mode_restricted"]);
    }

    const accepted = await fromNamespace(LISTED, "POST", "/v1/auth/trusted-proxy/login", { headers: identity });
    expect(accepted.status).toBe(200);
    expect(accepted.body.user).toMatchObject({ email: "owner@example.com", role: "owner" });
    const me = await fromNamespace(UNLISTED, "GET", "/v1/users/me", { token: accepted.body.session_token });
    expect(me.status).toBe(200);

    const refused = await fromNamespace(UNLISTED, "POST", "/v1/auth/trusted-proxy/login", { headers: identity });
    expect([refused.status, refused.body.code]).toEqual([403, "trusted_proxy_peer_not_allowed"]);
    // The listed peer still needs the secret.
    const noSecret = await fromNamespace(LISTED, "POST", "/v1/auth/trusted-proxy/login", { headers: { "x-hangar-user-email": "owner@example.com" } });
    expect([noSecret.status, noSecret.body.code]).toEqual([401, "trusted_proxy_shared_secret_missing"]);

    // Bound to a routable address in remote mode: no restart needed.
    const prefsNow = await fromNamespace(LISTED, "GET", "/v1/settings/preferences", { token: accepted.body.session_token });
    expect(prefsNow.body.preferences).toMatchObject({ runtime_mode: "remote", restart_required: false });
  }, 60_000);
});
