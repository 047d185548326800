// The daemon's Node listener (src/runtime/node-listener.ts: @hono/node-server's, with JSON errors), on raw
// sockets: a chunked JSON body gets the same answer as the same body with a Content-Length, and
// one over the cap is refused with 413; a body nobody read is drained so the connection carries the next
// request; HEAD answers GET's status and headers without a body; multiple cookies stay separate headers.
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeDataDir, startDaemon, type Daemon } from "../helpers/daemon.ts";

interface Answer {
  status: number;
  headers: Array<[string, string]>;
  body: string;
}

/**
 * Sends each request on ONE connection, one after the other, and parses each answer (Content-Length or
 * chunked bodies). Answers null for a request the server did not answer before closing.
 */
async function onOneConnection(port: number, requests: string[], headRequests = new Set<number>()): Promise<Array<Answer | null>> {
  const socket = net.connect(port, "127.0.0.1");
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  let buffer = Buffer.alloc(0);
  let closed = false;
  let wake: (() => void) | undefined;
  socket.on("data", (d: Buffer) => {
    buffer = Buffer.concat([buffer, d]);
    wake?.();
  });
  socket.on("close", () => {
    closed = true;
    wake?.();
  });
  socket.on("error", () => {});
  const more = () => new Promise<void>((resolve) => (wake = resolve));
  const answers: Array<Answer | null> = [];
  for (const [i, request] of requests.entries()) {
    socket.write(request);
    let answer: Answer | null = null;
    for (;;) {
      const end = buffer.indexOf("\r\n\r\n");
      if (end >= 0) {
        const [statusLine, ...lines] = buffer.subarray(0, end).toString("latin1").split("\r\n");
        const headers = lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()] as [string, string]);
        const get = (n: string) => headers.find(([k]) => k === n)?.[1];
        let rest = buffer.subarray(end + 4);
        let body: Buffer | null = null;
        if (headRequests.has(i)) body = Buffer.alloc(0);
        else if (get("content-length") !== undefined) {
          const length = Number(get("content-length"));
          if (rest.length >= length) {
            body = rest.subarray(0, length);
            rest = rest.subarray(length);
          }
        } else if (get("transfer-encoding") === "chunked") {
          const done = rest.indexOf("\r\n0\r\n\r\n");
          if (done >= 0 || rest.subarray(0, 5).toString() === "0\r\n\r\n") {
            const parts: Buffer[] = [];
            let at = 0;
            for (;;) {
              const lineEnd = rest.indexOf("\r\n", at);
              const size = parseInt(rest.subarray(at, lineEnd).toString(), 16);
              if (!size) {
                at = lineEnd + 4;
                break;
              }
              parts.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
              at = lineEnd + 2 + size + 2;
            }
            body = Buffer.concat(parts);
            rest = rest.subarray(at);
          }
        } else body = Buffer.alloc(0);
        if (body) {
          answer = { status: Number(statusLine!.split(" ")[1]), headers, body: body.toString() };
          buffer = rest;
          break;
        }
      }
      if (closed) break;
      await more();
    }
    answers.push(answer);
    if (!answer) break;
  }
  socket.destroy();
  return answers;
}

const chunked = (path: string, body: string, extra = "") => {
  let out = `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n${extra}\r\n`;
  for (let i = 0; i < body.length; i += 4096) {
    const part = body.slice(i, i + 4096);
    out += `${Buffer.byteLength(part).toString(16)}\r\n${part}\r\n`;
  }
  return `${out}0\r\n\r\n`;
};
const withLength = (path: string, body: string, extra = "") =>
  `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;
const get = (path: string, method = "GET", extra = "") => `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${extra}\r\n`;

describe("the daemon's Node listener", () => {
  let daemon: Daemon;

  beforeAll(async () => {
    daemon = await startDaemon({ HANGAR_DATA_DIR: makeDataDir() });
  });
  afterAll(async () => {
    await daemon?.stop();
  });

  it("a chunked JSON body gets the same answer as the same body with a Content-Length", async () => {
    for (const body of ['{"token":"not-a-token"}', "{not json", '{"token":' + JSON.stringify("x".repeat(50_000)) + "}"]) {
      const [a, b] = await onOneConnection(daemon.port, [
        chunked("/v1/setup/bootstrap-token/verify", body),
        withLength("/v1/setup/bootstrap-token/verify", body),
      ]);
      expect(a!.status, body.slice(0, 20)).toBe(b!.status);
      expect(JSON.parse(a!.body).code).toBe(JSON.parse(b!.body).code);
      expect(a!.status).toBeGreaterThanOrEqual(400);
      expect(a!.status).toBeLessThan(500);
    }
  });

  it("a chunked JSON body over the 1 MiB cap is refused with 413 payload_too_large, and one with a Content-Length over it too", async () => {
    const big = JSON.stringify({ token: "x".repeat(1024 * 1024 + 10) });
    const [a] = await onOneConnection(daemon.port, [chunked("/v1/setup/bootstrap-token/verify", big)]);
    expect(a!.status).toBe(413);
    expect(JSON.parse(a!.body).code).toBe("payload_too_large");
    const [b] = await onOneConnection(daemon.port, [withLength("/v1/setup/bootstrap-token/verify", big)]);
    expect(b!.status).toBe(413);
    expect(JSON.parse(b!.body).code).toBe("payload_too_large");
    expect((await fetch(`${daemon.url}/healthz`)).status).toBe(200);
  });

  it("a body nobody read is drained: the same connection carries the next request", async () => {
    // Refused before its body is read (no session), with 256 KiB still on the wire.
    const unread = withLength("/v1/projects", JSON.stringify({ name: "p".repeat(256 * 1024) }));
    const [refused, next] = await onOneConnection(daemon.port, [unread, get("/healthz")]);
    expect(refused!.status).toBe(401);
    expect(JSON.parse(refused!.body).code).toBe("missing_auth");
    expect(next!.status).toBe(200);
  });

  it("HEAD answers GET's status and headers with no body; both say what the body is", async () => {
    const [head, getAnswer] = await onOneConnection(
      daemon.port,
      [get("/v1/public/setup-status", "HEAD"), get("/v1/public/setup-status")],
      new Set([0]),
    );
    expect(head!.status).toBe(getAnswer!.status);
    expect(head!.body).toBe("");
    const type = (a: Answer) => a.headers.find(([k]) => k === "content-type")?.[1];
    expect(type(head!)).toBe(type(getAnswer!));
    expect(type(getAnswer!)).toMatch(/^application\/json/);
    expect(getAnswer!.headers.find(([k]) => k === "content-length")?.[1]).toBe(String(Buffer.byteLength(getAnswer!.body)));
  });

  it("a page answer carries its security headers and a text body with its length", async () => {
    const [page] = await onOneConnection(daemon.port, [get("/setup")]);
    expect(page!.status).toBe(200);
    const names = page!.headers.map(([k]) => k);
    expect(names).toEqual(expect.arrayContaining(["content-security-policy", "x-frame-options", "x-content-type-options", "content-length"]));
    expect(page!.body).toMatch(/^<!DOCTYPE html>/);
    expect(daemon.stderr()).not.toMatch(/unhandled error/);
  });
});
