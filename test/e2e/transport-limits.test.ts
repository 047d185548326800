// The daemon's transport rules on real sockets (docs/decisions.md, "HTTP adapter"): a request's headers must
// arrive within HANGAR_HEADERS_TIMEOUT_MS (20 s) and its body within HANGAR_BODY_TIMEOUT_MS (60 s), else 408 with
// a JSON body and the connection closed; a request with two Host headers is refused with 400. The daemon here
// runs with one-second limits so the tests are quick.
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeDataDir, startDaemon, type Daemon } from "../helpers/daemon.ts";

const LIMIT_MS = 1000;

/** Writes `parts` (waiting `pauseMs` before each after the first), then reads until the daemon closes or 5 s pass. */
function converse(port: number, parts: string[], pauseMs = 0): Promise<{ text: string; closedAfterMs: number }> {
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = net.connect(port, "127.0.0.1");
    let text = "";
    socket.on("data", (d: Buffer) => (text += d.toString("latin1")));
    socket.on("error", () => undefined);
    const giveUp = setTimeout(() => socket.destroy(), 5000);
    socket.on("close", () => {
      clearTimeout(giveUp);
      resolve({ text, closedAfterMs: Date.now() - started });
    });
    socket.once("connect", async () => {
      for (const [i, part] of parts.entries()) {
        if (i > 0) await new Promise((r) => setTimeout(r, pauseMs));
        if (socket.destroyed) return;
        socket.write(part);
      }
    });
  });
}

const jsonBody = (text: string): unknown => JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4));

describe("transport limits of the daemon", () => {
  let daemon: Daemon;

  beforeAll(async () => {
    daemon = await startDaemon({
      HANGAR_DATA_DIR: makeDataDir(),
      HANGAR_BODY_TIMEOUT_MS: String(LIMIT_MS),
      HANGAR_HEADERS_TIMEOUT_MS: String(LIMIT_MS),
    });
  });
  afterAll(async () => {
    await daemon?.stop();
  });

  it("a body that stops arriving gets 408 invalid_input once the body time-out passes, and the connection is closed", async () => {
    const head = "POST /v1/setup/bootstrap-token/verify HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n";
    const res = await converse(daemon.port, [head, '{"token":']);
    expect(res.text).toMatch(/^HTTP\/1\.1 408 /);
    expect(jsonBody(res.text)).toEqual({ code: "invalid_input", message: expect.any(String) });
    expect(res.closedAfterMs).toBeGreaterThanOrEqual(LIMIT_MS - 100);
    expect(res.closedAfterMs).toBeLessThan(LIMIT_MS + 2500);
  });

  it("a body that keeps trickling in is cut off at the time-out all the same", async () => {
    const head = "POST /v1/setup/bootstrap-token/verify HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n";
    // A byte every 200 ms: 40 bytes would take 8 s.
    const res = await converse(daemon.port, [head, ...Array.from({ length: 40 }, () => "a")], 200);
    expect(res.text).toMatch(/^HTTP\/1\.1 408 /);
    expect(res.closedAfterMs).toBeLessThan(LIMIT_MS + 2500);
  });

  it("headers that stop arriving get 408 once the headers time-out passes", async () => {
    const res = await converse(daemon.port, ["GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "]);
    expect(res.text).toMatch(/^HTTP\/1\.1 408 /);
    expect(jsonBody(res.text)).toEqual({ code: "invalid_input", message: expect.any(String) });
    expect(res.closedAfterMs).toBeGreaterThanOrEqual(LIMIT_MS - 100);
    expect(res.closedAfterMs).toBeLessThan(LIMIT_MS + 2500);
  });

  it("a request with two Host headers is refused with 400 invalid_input, whatever the two say", async () => {
    for (const hosts of [
      ["127.0.0.1", "evil.example"],
      ["127.0.0.1", "127.0.0.1"],
    ]) {
      const res = await converse(daemon.port, [`GET /v1/public/setup-status HTTP/1.1\r\nHost: ${hosts[0]}\r\nhost: ${hosts[1]}\r\n\r\n`]);
      expect(res.text, hosts.join()).toMatch(/^HTTP\/1\.1 400 /);
      expect(jsonBody(res.text)).toEqual({ code: "invalid_input", message: expect.any(String) });
    }
  });

  it("a request that arrives in time is answered as usual on the same connection, long after the limits (the control)", async () => {
    const body = '{"token":"not-a-token"}';
    const post = `POST /v1/setup/bootstrap-token/verify HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    // Two requests, the second sent after more than both limits of quiet on the kept-alive connection.
    const res = await converse(daemon.port, [post, `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`], LIMIT_MS + 500);
    const statuses = [...res.text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
    expect(statuses[0]).toBeGreaterThanOrEqual(400);
    expect(statuses[0]).toBeLessThan(408);
    expect(statuses[1]).toBe(200);
    expect(daemon.stderr()).not.toMatch(/unhandled error/);
  });
});
