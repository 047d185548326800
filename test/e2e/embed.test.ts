import { mkdtempSync, rmSync } from "node:fs";
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueBootstrapToken } from "../../src/domain/setup/setup.ts";
import { createNodeDeps, createNodeListener, loadConfig } from "../../src/index.ts";
import type { NodeRuntime } from "../../src/runtime/node-deps.ts";

const dataDir = mkdtempSync(join(tmpdir(), "hangar-embed-"));
let runtime: NodeRuntime;
let tcp: Server;
let unix: Server;
let base: string;
const socketPath = join(dataDir, "hangar.sock");

/** A host application: it answers its own paths and hands everything else to Hangar's listener. */
function hostServer(hangar: (req: IncomingMessage, res: ServerResponse) => unknown): Server {
  return createServer((req, res) => {
    if (req.url === "/host/hello") {
      res.writeHead(200, { "content-type": "text/plain" }).end("hello from the host");
      return;
    }
    void hangar(req, res);
  });
}

/** A plain node:http request (TCP or a Unix socket), JSON in and out. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- test assertions read arbitrary JSON shapes
function send(target: { port?: number; socketPath?: string }, method: string, path: string, body?: unknown, token?: string) {
  return new Promise<{ status: number; body: any; headers: IncomingMessage["headers"] }>((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string> = { host: "localhost" };
    if (payload) headers["content-type"] = "application/json";
    if (token) headers.authorization = `Bearer ${token}`;
    const req = request({ host: "127.0.0.1", ...target, method, path, headers }, (res) => {
      let text = "";
      res.on("data", (d: Buffer) => (text += d.toString()));
      res.on("end", () => {
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text);
        } catch {
          // plain text answer
        }
        resolve({ status: res.statusCode ?? 0, body: parsed, headers: res.headers });
      });
    });
    req.on("error", reject);
    req.end(payload);
  });
}

beforeAll(async () => {
  runtime = await createNodeDeps(loadConfig({ HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0" }));
  const listener = createNodeListener(runtime.deps);
  tcp = hostServer(listener);
  unix = hostServer(listener);
  await new Promise<void>((resolve) => tcp.listen(0, "127.0.0.1", resolve));
  await new Promise<void>((resolve) => unix.listen(socketPath, resolve));
  base = `http://127.0.0.1:${(tcp.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => tcp?.close(resolve));
  await new Promise((resolve) => unix?.close(resolve));
  runtime?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe("createNodeListener mounted in a plain node:http server", () => {
  it("serves Hangar's routes beside the host's own", async () => {
    const port = (tcp.address() as AddressInfo).port;
    const own = await send({ port }, "GET", "/host/hello");
    expect(own.body).toBe("hello from the host");
    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ ok: true });
    const status = await send({ port }, "GET", "/v1/public/setup-status");
    expect(status.status).toBe(200);
    expect(status.headers["cache-control"]).toBe("no-store");
    expect(status.body.state).toBe("uninitialized");
  });

  it("feeds the socket's peer address to the loopback rules", async () => {
    const port = (tcp.address() as AddressInfo).port;
    const { token } = await issueBootstrapToken(runtime.deps);
    const setup = (await send({ port }, "POST", "/v1/setup/bootstrap-token/verify", { token })).body.session_token;
    expect((await send({ port }, "POST", "/v1/setup/local-owner/create", { email: "host@example.com" }, setup)).status).toBe(200);
    expect((await send({ port }, "POST", "/v1/setup/complete", undefined, setup)).status).toBe(200);

    // Over TCP from 127.0.0.1 the request is loopback: local login works.
    const viaTcp = await send({ port }, "POST", "/v1/auth/local/login", {});
    expect(viaTcp.status).toBe(200);
    expect(viaTcp.body.user.email).toBe("host@example.com");
    const me = await send({ port }, "GET", "/v1/users/me", undefined, viaTcp.body.session_token);
    expect(me.body.role).toBe("owner");

    // The same request over a Unix socket has no TCP peer address: same Host, no forwarding headers, refused.
    // So the decision comes from the socket the host passed in, not from anything in the request.
    const viaUnix = await send({ socketPath }, "POST", "/v1/auth/local/login", {});
    expect(viaUnix.status).toBe(403);
    expect(viaUnix.body.code).toBe("local_login_loopback_required");
    expect((await send({ socketPath }, "GET", "/healthz")).status).toBe(200);
  });
});
