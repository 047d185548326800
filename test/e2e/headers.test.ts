// Header attacks on a real socket (raw TCP, so nothing is normalised on the way): filenames that try to inject
// a response header or leave the artifacts directory, Host spoofing on install links, forwarding headers that
// try to pass for loopback, identity headers sent to a deployment that does not use a trusted proxy, and
// truncated or malformed requests. The daemon listens on 0.0.0.0 so a second, non-loopback address of this
// machine gives a genuinely non-loopback peer.
import { createHash, randomBytes } from "node:crypto";
import { readdirSync, rmSync, statSync } from "node:fs";
import net from "node:net";
import { networkInterfaces } from "node:os";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDb } from "../../src/db/client.ts";
import { writeSetting } from "../../src/domain/settings/instance-settings.ts";
import { OIDC_SETTING } from "../../src/domain/setup/preflight.ts";
import { systemClock } from "../../src/deps.ts";
import { createHttpServer } from "../../src/runtime/http-server.ts";
import { daemonCaller, DEFAULT_SHA, type Caller } from "../helpers/builds.ts";
import { makeDataDir, runCli, startDaemon, type Daemon } from "../helpers/daemon.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON shapes are asserted by the tests
type Json = any;

interface RawResponse {
  status: number;
  /** Header lines exactly as received, names lower-cased. */
  headers: Array<[string, string]>;
  headerBlock: string;
  body: Buffer;
  text: string;
  json: Json;
}

/** A non-loopback IPv4 address of this machine, if it has one. */
const OTHER_ADDRESS = Object.values(networkInterfaces())
  .flat()
  .find((i) => i && i.family === "IPv4" && !i.internal)?.address;

function decodeChunked(data: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = data.indexOf("\r\n", at);
    if (lineEnd < 0) break;
    const size = parseInt(data.subarray(at, lineEnd).toString("latin1"), 16);
    if (!size) break;
    parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
  return Buffer.concat(parts);
}

/**
 * Writes `request` to a fresh connection and reads until the server closes it. `halfClose` ends our side
 * after writing (a client that sent less than it announced); `destroyAfterMs` drops the connection instead.
 */
function raw(
  host: string,
  port: number,
  request: Buffer | string,
  options: { halfClose?: boolean; destroyAfterMs?: number } = {},
): Promise<RawResponse | null> {
  return new Promise((resolve) => {
    const socket = net.connect(port, host);
    const chunks: Buffer[] = [];
    socket.on("data", (d: Buffer) => chunks.push(d));
    socket.on("error", () => undefined);
    socket.on("close", () => {
      const all = Buffer.concat(chunks);
      const split = all.indexOf("\r\n\r\n");
      if (split < 0) return resolve(null);
      const headerBlock = all.subarray(0, split).toString("latin1");
      const [statusLine, ...lines] = headerBlock.split("\r\n");
      const headers = lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()] as [string, string]);
      let body: Buffer = all.subarray(split + 4);
      if (headers.some(([n, v]) => n === "transfer-encoding" && v === "chunked")) body = decodeChunked(body);
      const text = body.toString("utf8");
      let json: Json = null;
      try {
        json = JSON.parse(text);
      } catch {
        json = null;
      }
      resolve({ status: Number(statusLine?.split(" ")[1]), headers, headerBlock, body, text, json });
    });
    socket.write(request);
    if (options.halfClose) socket.end();
    if (options.destroyAfterMs !== undefined) setTimeout(() => socket.destroy(), options.destroyAfterMs);
  });
}

/** One HTTP/1.1 request with exactly these headers (Host included), closing the connection after the answer. */
function request(
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: Buffer | string,
  options: { contentLength?: number } = {},
): Buffer {
  const bytes = body === undefined ? Buffer.alloc(0) : Buffer.from(body);
  const lines = [`${method} ${path} HTTP/1.1`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), "Connection: close"];
  if (body !== undefined || options.contentLength !== undefined) lines.push(`Content-Length: ${options.contentLength ?? bytes.length}`);
  return Buffer.concat([Buffer.from(`${lines.join("\r\n")}\r\n\r\n`, "latin1"), bytes]);
}

const json = (token?: string): Record<string, string> => ({
  "Content-Type": "application/json",
  ...(token ? { Authorization: `Bearer ${token}` } : {}),
});

let daemon: Daemon;
let dataDir: string;
let env: Record<string, string>;
let api: Caller;
let port: number;
let ownerToken: string;
let runner: { id: string; token: string };
let buildId: string;
const LOCAL = "127.0.0.1";

async function localRaw(method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<RawResponse> {
  const r = await raw(
    LOCAL,
    port,
    request(method, path, { Host: `127.0.0.1:${port}`, ...headers }, body === undefined ? undefined : JSON.stringify(body)),
  );
  if (!r) throw new Error(`${method} ${path}: no answer`);
  return r;
}

beforeAll(async () => {
  dataDir = makeDataDir();
  env = { HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0", HANGAR_HOST: "0.0.0.0" };
  daemon = await startDaemon(env);
  port = daemon.port;
  const base = `http://127.0.0.1:${port}`;
  api = daemonCaller(base);
  const made = await runCli(["setup-token"], env);
  const verified = await api.call("POST", "/v1/setup/bootstrap-token/verify", { body: { token: made.stdout.trim() } });
  const setup = verified.body.session_token;
  expect((await api.call("POST", "/v1/setup/local-owner/create", { token: setup, body: { email: "owner@example.com" } })).status).toBe(200);
  expect((await api.call("POST", "/v1/setup/complete", { token: setup })).status).toBe(200);
  ownerToken = (await api.call("POST", "/v1/auth/local/login", { body: {} })).body.session_token;
  const project = await api.call("POST", "/v1/projects", {
    token: ownerToken,
    body: { name: "app", repo_url: "https://git.example.com/app.git", config_path: null },
  });
  const pipeline = await api.call("POST", `/v1/projects/${project.body.id}/pipelines`, {
    token: ownerToken,
    body: { name: "ci", config: { platform: "any", steps: [{ name: "s", run: "true" }] } },
  });
  const reg = await api.call("POST", "/v1/runners/register", { token: ownerToken, body: { capabilities: { platforms: ["ios"] } } });
  runner = reg.body;
  const build = await api.call("POST", `/v1/projects/${project.body.id}/builds`, {
    token: ownerToken,
    body: { pipeline_id: pipeline.body.id, commit_sha: DEFAULT_SHA },
  });
  buildId = build.body.id;
  await api.call("POST", `/v1/runners/${runner.id}/claim`, { token: runner.token });
  expect(
    (await api.call("POST", `/v1/runners/${runner.id}/jobs/${buildId}/status`, { token: runner.token, body: { status: "running" } })).status,
  ).toBe(200);
}, 30_000);

afterAll(async () => {
  await daemon?.stop("SIGKILL");
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

const artifactsPath = () => `/v1/runners/${runner.id}/jobs/${buildId}/artifacts`;

/** Create, upload and complete an artifact; answers its id. */
async function storeArtifact(filename: string, bytes: Buffer, extra: Record<string, unknown> = {}): Promise<string> {
  const created = await api.call("POST", artifactsPath(), {
    token: runner.token,
    body: { filename, size_bytes: bytes.length, content_type: "application/octet-stream", ...extra },
  });
  expect(created.status, created.text).toBe(200);
  const put = await api.call("PUT", new URL(created.body.upload.url).pathname, {
    rawBody: bytes,
    headers: { "content-type": "application/octet-stream" },
  });
  expect(put.status, put.text).toBe(200);
  const done = await api.call("POST", `${artifactsPath()}/${created.body.artifact.id}/complete`, { token: runner.token });
  expect(done.status, done.text).toBe(200);
  return created.body.artifact.id;
}

/** Every file under a directory, relative to it. */
function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? walk(path).map((p) => join(name, p)) : [name];
  });
}

describe("filenames", () => {
  it.each([
    ["CRLF and a header", "app\r\nSet-Cookie: pwned=1.apk"],
    ["a bare LF", "app\nX-Injected: 1.apk"],
    ["a bare CR", "app\rx.apk"],
    ["a NUL", "app\u0000.apk"],
    ["a C1 control (NEL)", "app\u0085.apk"],
    ["a tab", "app\t.apk"],
    ["../", "../evil.apk"],
    ["..\\", "..\\evil.apk"],
    ["an absolute path", "/etc/passwd"],
    ["a subdirectory", "dist/app.apk"],
    ["only ..", ".."],
    ["only .", "."],
    ["more than 255 bytes", `${"é".repeat(130)}.apk`],
  ])("refuses a filename with %s at create: 400 invalid_input", async (_, filename) => {
    const res = await localRaw("POST", artifactsPath(), json(runner.token), { filename, size_bytes: 1, content_type: "application/octet-stream" });
    expect([res.status, res.json?.code]).toEqual([400, "invalid_input"]);
    expect(res.json.issues.map((i: { path: string }) => i.path)).toContain("filename");
    expect(res.headers.map(([n]) => n)).not.toContain("set-cookie");
  });

  it("refuses a content type that would carry a header (it is echoed on download)", async () => {
    for (const content_type of ["application/octet-stream\r\nX-Injected: 1", 'text/html; charset="a\r\nb"', "application/x\u0000y"]) {
      const res = await localRaw("POST", artifactsPath(), json(runner.token), { filename: "a.apk", size_bytes: 1, content_type });
      expect([res.status, res.json?.code], JSON.stringify(content_type)).toEqual([400, "invalid_input"]);
    }
  });

  it("serves legit odd names with one safe Content-Disposition (ASCII fallback, filename* for the rest), stored by id only", async () => {
    const names = [
      "Démo ünïcode.apk",
      'quote"d;name=x.apk',
      "back\\slash-free 'single' (parens).apk",
      "%2e%2e%2fetc%2fpasswd.apk",
      "emoji-🚀.apk",
      "\u202egpj.apk",
      "\u2028line-separator.apk",
      "CON.apk",
    ].filter((n) => !n.includes("\\"));
    for (const filename of names) {
      const bytes = randomBytes(1000);
      const id = await storeArtifact(filename, bytes);
      const link = await api.call("POST", `/v1/artifacts/${id}/download-link`, { token: ownerToken });
      const res = (await raw(LOCAL, port, request("GET", new URL(link.body.url).pathname, { Host: `127.0.0.1:${port}` })))!;
      expect(res.status, filename).toBe(200);
      expect(createHash("sha256").update(res.body).digest("hex")).toBe(createHash("sha256").update(bytes).digest("hex"));
      // The header block is plain printable ASCII: no byte of the name can end a line or start a header.
      expect(/^[\x20-\x7e\r\n]*$/.test(res.headerBlock), filename).toBe(true);
      expect(res.headers.map(([n]) => n)).not.toContain("set-cookie");
      const dispositions = res.headers.filter(([n]) => n === "content-disposition").map(([, v]) => v);
      expect(dispositions).toHaveLength(1);
      const value = dispositions[0]!;
      const m = /^attachment; filename="([^"\\]*)"(?:; filename\*=UTF-8''([A-Za-z0-9!#$&+.^_`|~%-]+))?$/.exec(value);
      expect(m, value).not.toBeNull();
      if (m![2] !== undefined) expect(decodeURIComponent(m![2])).toBe(filename);
      else expect(m![1]).toBe(filename);
      if (/[^\x20-\x7e]/.test(filename)) expect(m![2], `${filename} needs filename*`).toBeDefined();
    }
    // Stored bytes live under artifacts/<build>/<artifact>: the name never reaches the file system.
    const stored = walk(join(dataDir, "artifacts"));
    for (const file of stored) expect(file.split("/")).toHaveLength(2);
    for (const file of walk(dataDir)) expect(relative(dataDir, join(dataDir, file))).not.toMatch(/passwd|Démo|🚀|CON\.apk/);
  });
});

describe("Host spoofing", () => {
  let installToken: string;
  let installUrl: string;

  beforeAll(async () => {
    const network = await api.call("PUT", "/v1/settings/external-access/network", {
      token: ownerToken,
      body: { public_url: "https://ci.example.com", artifact_delivery_url: "https://dl.example.com", allowed_origins: ["https://ci.example.com"] },
    });
    expect(network.status, network.text).toBe(200);
    const id = await storeArtifact("app.ipa", randomBytes(64), {
      install_metadata: { bundle_identifier: "com.example.app", bundle_version: "1", title: "App" },
    });
    // The install link is asked for with every header a proxy or an attacker could use to name another host.
    const res = await localRaw("POST", `/v1/artifacts/${id}/install-link`, {
      ...json(ownerToken),
      Host: "evil.example",
      "X-Forwarded-Host": "evil-forwarded.example",
      "X-Forwarded-Proto": "http",
      "X-Forwarded-Port": "8443",
      Forwarded: "host=evil-forwarded.example;proto=http",
      "X-Original-URL": "https://evil.example/",
    });
    expect(res.status, res.text).toBe(200);
    installUrl = res.json.manifest_url;
    installToken = new URL(installUrl).pathname.split("/")[3]!;
    expect(res.json.install_url).toBe(`itms-services://?action=download-manifest&url=${encodeURIComponent(installUrl)}`);
  });

  it("install URLs come from the configured delivery URL, never from the request's Host or forwarding headers", () => {
    expect(installUrl).toBe(`https://dl.example.com/install/ios/${installToken}/manifest.plist`);
    expect(installUrl).not.toMatch(/evil/);
  });

  it("the manifest and the artifact redirect ignore a spoofed Host as well", async () => {
    const spoof = { Host: "evil.example", "X-Forwarded-Host": "evil-forwarded.example" };
    const manifest = (await raw(LOCAL, port, request("GET", `/install/ios/${installToken}/manifest.plist`, spoof)))!;
    expect(manifest.status).toBe(200);
    expect(manifest.text).toContain(`https://dl.example.com/install/artifact/${installToken}`);
    expect(manifest.text).not.toMatch(/evil/);
    const redirect = (await raw(LOCAL, port, request("GET", `/install/artifact/${installToken}`, spoof)))!;
    expect(redirect.status).toBe(302);
    expect(redirect.headers.find(([n]) => n === "location")?.[1]).toBe(`https://dl.example.com/install/download/${installToken}`);
    // An absolute-form request target names another host too: still the configured base.
    const absolute = (await raw(LOCAL, port, request("GET", `http://evil.example/install/artifact/${installToken}`, { Host: "evil.example" })))!;
    expect(absolute.headers.find(([n]) => n === "location")?.[1]).toBe(`https://dl.example.com/install/download/${installToken}`);
  });
});

describe("who is loopback", () => {
  const login = (host: string, headers: Record<string, string>) =>
    raw(
      host,
      port,
      request("POST", "/v1/auth/local/login", { "Content-Type": "application/json", ...headers }, JSON.stringify({ email: "owner@example.com" })),
    );

  it("a loopback peer with a loopback Host and no forwarding header may sign in locally (the control)", async () => {
    const res = (await login(LOCAL, { Host: `127.0.0.1:${port}` }))!;
    expect(res.status, res.text).toBe(200);
  });

  it.each([
    ["X-Forwarded-For", { "X-Forwarded-For": "127.0.0.1" }],
    ["X-Real-IP", { "X-Real-IP": "127.0.0.1" }],
    ["Forwarded", { Forwarded: "for=127.0.0.1;host=localhost" }],
    ["CF-Connecting-IP", { "CF-Connecting-IP": "127.0.0.1" }],
    ["True-Client-IP", { "True-Client-IP": "::1" }],
    ["an empty X-Forwarded-For", { "X-Forwarded-For": "" }],
    ["a public Host (DNS rebinding)", { Host: "rebind.example" }],
    ["a Host that only starts like localhost", { Host: "localhost.evil.example" }],
  ])("a loopback peer sending %s is not loopback: 403 local_login_loopback_required", async (_, headers) => {
    const res = (await login(LOCAL, { Host: `127.0.0.1:${port}`, ...(headers as Record<string, string>) }))!;
    expect([res.status, res.json?.code]).toEqual([403, "local_login_loopback_required"]);
  });

  it.skipIf(!OTHER_ADDRESS)("a non-loopback peer stays non-loopback whatever it claims in headers", async () => {
    const claims: Array<Record<string, string>> = [
      { Host: `127.0.0.1:${port}` },
      { Host: "localhost", "X-Forwarded-For": "127.0.0.1" },
      { Host: "localhost", "X-Real-IP": "127.0.0.1", "X-Forwarded-Host": "localhost" },
      { Host: "[::1]", Forwarded: 'for="[::1]"' },
      { Host: "localhost", "X-Client-IP": "127.0.0.1", "X-Originating-IP": "127.0.0.1", "X-Remote-Addr": "127.0.0.1" },
    ];
    for (const headers of claims) {
      const res = (await login(OTHER_ADDRESS!, headers))!;
      expect([res.status, res.json?.code], JSON.stringify(headers)).toEqual([403, "local_login_loopback_required"]);
      const net = await raw(
        OTHER_ADDRESS!,
        port,
        request(
          "PUT",
          "/v1/settings/external-access/network",
          { ...json(ownerToken), ...headers },
          JSON.stringify({ public_url: "https://x.example.com", allowed_origins: ["https://x.example.com"] }),
        ),
      );
      expect([net!.status, net!.json?.code], JSON.stringify(headers)).toEqual([403, "external_access_loopback_required"]);
    }
  });
});

describe("malformed and truncated requests", () => {
  it.each([
    ["a Host with a space", "a b"],
    ["a Host with a path", "evil.example/../x"],
    ["an unclosed IPv6 Host", "[::1"],
    ["a Host with userinfo", "user@evil.example"],
    ["a Host with a bad port", "localhost:99999"],
    ["a percent-encoded Host", "ev%69l.example"],
  ])("%s: 400 with a JSON error body", async (_, host) => {
    const res = await raw(LOCAL, port, request("GET", "/v1/public/setup-status", { Host: host }));
    expect(res!.status).toBe(400);
    expect(res!.json, res!.text).toEqual({ code: "invalid_input", message: expect.any(String) });
  });

  it.each([
    [
      "Content-Length and Transfer-Encoding together (smuggling)",
      "POST /v1/auth/local/login HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      400,
    ],
    [
      "a malformed chunk size",
      "POST /v1/auth/local/login HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
      400,
    ],
    ["a NUL in the path", "GET /v1/builds/a\u0000b HTTP/1.1\r\nHost: localhost\r\n\r\n", 400],
    ["a header without a colon", "GET /v1/public/setup-status HTTP/1.1\r\nHost: localhost\r\nBroken header\r\n\r\n", 400],
    ["a space before the colon", "GET /v1/public/setup-status HTTP/1.1\r\nHost : localhost\r\n\r\n", 400],
    ["headers over the limit", `GET /v1/public/setup-status HTTP/1.1\r\nHost: localhost\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`, 431],
  ])("%s: refused with a JSON error body", async (_, bytes, status) => {
    const res = await raw(LOCAL, port, bytes, { halfClose: true });
    expect(res!.status).toBe(status);
    expect(res!.json, res!.text).toEqual({ code: expect.any(String), message: expect.any(String) });
  });

  it("bodies cut off before their announced length never become a server error, and the daemon stays up", async () => {
    const cases: Buffer[] = [
      request("POST", "/v1/auth/local/login", { Host: "localhost", "Content-Type": "application/json" }, '{"email":', { contentLength: 100 }),
      request("POST", "/v1/setup/bootstrap-token/verify", { Host: "localhost", "Content-Type": "text/plain" }, '{"token":', { contentLength: 100 }),
      request("POST", "/v1/projects", { Host: "localhost", ...json(ownerToken) }, '{"name":"x"', { contentLength: 5000 }),
      Buffer.from(
        `POST /v1/auth/local/login HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n5\r\n{"ema`,
      ),
      request(
        "POST",
        `/v1/runners/${runner.id}/jobs/${buildId}/logs?offset=0`,
        { Host: "localhost", Authorization: `Bearer ${runner.token}`, "Content-Type": "text/plain" },
        "partial log",
        { contentLength: 1000 },
      ),
    ];
    for (const bytes of cases) {
      const res = await raw(LOCAL, port, bytes, { halfClose: true });
      if (res) {
        expect(res.status, res.text).toBeLessThan(500);
        expect(res.json).toEqual({ code: expect.any(String), message: expect.any(String) });
      }
      const dropped = await raw(LOCAL, port, bytes, { destroyAfterMs: 50 });
      if (dropped) expect(dropped.status).toBeLessThan(500);
    }
    expect((await api.call("GET", "/healthz")).status).toBe(200);
    // Nothing half-read was stored: no project named "x", and the log is still empty.
    const projects = (await api.call("GET", "/v1/projects", { token: ownerToken })).body.map((p: Json) => p.name);
    expect(projects).not.toContain("x");
    expect((await api.call("GET", `/v1/builds/${buildId}/logs`, { token: ownerToken })).text).toBe("");
    await new Promise((r) => setTimeout(r, 200));
    expect(daemon.stderr()).not.toMatch(/unhandled error/);
  });

  it("an upload cut off mid-body leaves nothing visible and the same URL works on retry", async () => {
    const bytes = randomBytes(300_000);
    const created = await api.call("POST", artifactsPath(), {
      token: runner.token,
      body: { filename: "retry.apk", size_bytes: bytes.length, content_type: "application/octet-stream" },
    });
    const path = new URL(created.body.upload.url).pathname;
    const head = request("PUT", path, { Host: `127.0.0.1:${port}`, "Content-Type": "application/octet-stream" }, undefined, {
      contentLength: bytes.length,
    });
    await raw(LOCAL, port, Buffer.concat([head, bytes.subarray(0, 100_000)]), { destroyAfterMs: 150 });
    await new Promise((r) => setTimeout(r, 200));
    const early = await api.call("POST", `${artifactsPath()}/${created.body.artifact.id}/complete`, { token: runner.token });
    expect([early.status, early.body.code]).toEqual([409, "upload_incomplete"]);
    const put = await api.call("PUT", path, { rawBody: bytes, headers: { "content-type": "application/octet-stream" } });
    expect(put.status, put.text).toBe(200);
    const done = await api.call("POST", `${artifactsPath()}/${created.body.artifact.id}/complete`, { token: runner.token });
    expect(done.status).toBe(200);
    const link = await api.call("POST", `/v1/artifacts/${created.body.artifact.id}/download-link`, { token: ownerToken });
    const got = Buffer.from(await (await fetch(link.body.url)).arrayBuffer());
    expect(got.equals(bytes)).toBe(true);
    expect(daemon.stderr()).not.toMatch(/unhandled error/);
  });
});

describe("slow clients (the daemon's listener settings)", () => {
  it("an upload may take longer than the body time-out while it keeps moving; a stalled one is closed; any other slow body gets 408", async () => {
    // The daemon's server, with a one-second body limit so the test is quick.
    const server = createHttpServer(
      (req, res) => {
        let n = 0;
        req.on("data", (d: Buffer) => (n += d.length));
        req.on("end", () => res.end(`got ${n}`));
        req.on("error", () => undefined);
      },
      { headersTimeoutMs: 10_000, bodyTimeoutMs: 1000, idleTimeoutMs: 10_000 },
    );
    expect(server.requestTimeout).toBe(0);
    await new Promise<void>((r) => server.listen(0, LOCAL, () => r()));
    const serverPort = (server.address() as net.AddressInfo).port;
    /** Sends the head, then `bytes` body bytes one every `everyMs`; resolves with what came back and when the socket closed. */
    const trickle = (head: string, bytes: number, everyMs: number) =>
      new Promise<{ out: string; closedAfterMs: number }>((resolve) => {
        const started = Date.now();
        const socket = net.connect(serverPort, LOCAL);
        let out = "";
        socket.on("data", (d: Buffer) => (out += d.toString()));
        socket.on("error", () => undefined);
        socket.on("close", () => {
          clearInterval(timer);
          resolve({ out, closedAfterMs: Date.now() - started });
        });
        socket.write(head);
        let sent = 0;
        const timer = setInterval(() => {
          if (sent++ < bytes && !socket.destroyed) socket.write("a");
        }, everyMs);
      });
    const upload = "/v1/artifacts/local-upload/token";
    try {
      // Ten bytes over about 2.5 s, a byte every 250 ms: more than the limit in total, never still that long.
      const moving = await trickle(`PUT ${upload} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\nConnection: close\r\n\r\n`, 10, 250);
      expect(moving.out).toMatch(/^HTTP\/1\.1 200[\s\S]*got 10$/);
      // Two bytes, then silence: closed once the limit passes without a byte, long before the client would give up.
      const stalled = await trickle(`PUT ${upload} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\n`, 2, 10);
      expect(stalled.closedAfterMs).toBeGreaterThanOrEqual(900);
      expect(stalled.closedAfterMs).toBeLessThan(5000);
      // The same moving body on any other route: 408 once the limit passes, with a JSON body.
      const other = await trickle("POST /v1/projects HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\n", 10, 250);
      expect(other.out).toMatch(/^HTTP\/1\.1 408 [\s\S]*\{"code":"invalid_input","message":"[^"]+"\}$/);
      expect(other.closedAfterMs).toBeGreaterThanOrEqual(900);
      expect(other.closedAfterMs).toBeLessThan(2400);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

// Last: it switches the instance to remote mode with OIDC.
describe("identity headers on a deployment that does not use a trusted proxy", () => {
  const identities: Array<Record<string, string>> = [
    { "X-Hangar-User-Email": "owner@example.com" },
    { "X-Service-User-Email": "owner@example.com" },
    { "X-Gateway-Username": "owner@example.com" },
    { "X-Hangar-User-Email": "owner@example.com", "X-Hangar-Trusted-Proxy-Secret": "anything" },
    { "X-Forwarded-User": "owner@example.com", "X-Forwarded-Email": "owner@example.com", "Remote-User": "owner@example.com" },
  ];

  async function expectIgnored(mode: string): Promise<void> {
    for (const headers of identities) {
      // The loopback peer is what an empty CIDR list would trust, so only the mode can refuse it here.
      const login = await localRaw("POST", "/v1/auth/trusted-proxy/login", headers);
      expect([login.status, login.json?.code], `${mode} ${JSON.stringify(headers)}`).toEqual([403, "mode_restricted"]);
      const me = await localRaw("GET", "/v1/users/me", headers);
      expect([me.status, me.json?.code]).toEqual([401, "missing_auth"]);
      const bogus = await localRaw("GET", "/v1/users/me", { ...headers, Authorization: "Bearer not-a-session" });
      expect([bogus.status, bogus.json?.code]).toEqual([401, "invalid_session"]);
    }
  }

  it("local mode: the headers sign nobody in and authenticate nothing", async () => {
    await expectIgnored("local");
  });

  it("remote mode with OIDC: the same", async () => {
    // OIDC counts as configured for the preflight once its settings document exists (written as the OIDC area would).
    const opened = await openDb(`file:${join(dataDir, "hangar.db")}`);
    try {
      await writeSetting({ db: opened.db, clock: systemClock }, OIDC_SETTING, { issuer: "https://idp.example.com", client_id: "hangar" });
    } finally {
      opened.close();
    }
    await api.call("PUT", "/v1/settings/external-access/network", {
      token: ownerToken,
      body: { public_url: "https://ci.example.com", allowed_origins: ["https://ci.example.com"] },
    });
    const prefs = await api.call("PUT", "/v1/settings/preferences", { token: ownerToken, body: { runtime_mode: "remote" } });
    expect(prefs.status, prefs.text).toBe(200);
    expect(prefs.body.preferences.runtime_mode).toBe("remote");
    await expectIgnored("remote oidc");
  });
});
