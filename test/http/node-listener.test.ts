// The daemon's Node listener (src/runtime/node-listener.ts: @hono/node-server's, with JSON errors) around a plain
// fetch callback, on a real socket: what the daemon tests cannot provoke on purpose (an answer whose stream fails
// half-way, a callback that throws, headers that cannot be written).
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { consoleToLog, nodeRequestListener } from "../../src/runtime/node-listener.ts";

let server: Server | undefined;
afterEach(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

async function listen(listener: ReturnType<typeof nodeRequestListener>): Promise<number> {
  server = createServer(listener);
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}

/** Sends raw bytes and reads until the server closes the connection (or 2 s pass). */
function raw(port: number, bytes: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1", () => socket.write(bytes));
    let out = "";
    socket.on("data", (d) => (out += d.toString("latin1")));
    socket.on("error", () => {});
    socket.on("close", () => resolve(out));
    setTimeout(() => socket.destroy(), 2000);
  });
}

type LogRecord = Record<string, unknown>;

describe("nodeRequestListener", () => {
  it("an answer whose stream fails half-way is logged once as JSON and the connection is closed, not left hanging", async () => {
    const logged: LogRecord[] = [];
    // What the daemon does at start: whatever the adapter prints becomes a log record.
    const restoreConsole = consoleToLog((r) => logged.push(r));
    const port = await listen(
      nodeRequestListener(
        () =>
          new Response(
            new ReadableStream<Uint8Array>({
              start(controller) {
                controller.enqueue(new TextEncoder().encode("first part;"));
              },
              async pull(controller) {
                // The first part is on its way to the client when the source fails, as a download's would be.
                await new Promise((r) => setTimeout(r, 50));
                controller.error(new Error("the disk went away"));
              },
            }),
            { headers: { "content-type": "text/plain" } },
          ),
        { log: (r) => logged.push(r) },
      ),
    );
    try {
      const answer = await raw(port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
      expect(answer).toMatch(/^HTTP\/1\.1 200 /);
      expect(answer).toContain("first part;");
      expect(answer).not.toMatch(/\r\n0\r\n\r\n$/); // never ended as if complete
      expect(answer).not.toContain("Error:");
      expect(logged.filter((r) => r.level === "error").map((r) => r.error)).toEqual(["Error: the disk went away"]);
    } finally {
      restoreConsole();
    }
  });

  it("a callback that throws gets errorHandler's answer; a bad Host header reaches it as a RequestError", async () => {
    const port = await listen(
      nodeRequestListener(
        () => {
          throw new Error("boom");
        },
        { log: () => undefined },
      ),
    );
    expect(await raw(port, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")).toMatch(/^HTTP\/1\.1 500 [\s\S]*"internal_error"/);
    expect(await raw(port, "GET / HTTP/1.1\r\nHost: a b\r\nConnection: close\r\n\r\n")).toMatch(/^HTTP\/1\.1 400 [\s\S]*"invalid_input"/);
    expect(await raw(port, "GET /a\\b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")).toMatch(/^HTTP\/1\.1 400 [\s\S]*"invalid_input"/);
    const twoHosts = await raw(port, "GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n");
    expect(twoHosts).toMatch(/^HTTP\/1\.1 400 [\s\S]*"code":"invalid_input"/);
    expect(twoHosts.toLowerCase()).toContain("connection: close");
  });

  it("a header value that would inject a header is never written: the client gets a JSON 500, and it is reported", async () => {
    const reported: LogRecord[] = [];
    const port = await listen(
      nodeRequestListener(() => new Response("x", { headers: { "x-name": "a\r\nSet-Cookie: evil=1" } }), { log: (r) => reported.push(r) }),
    );
    const answer = await raw(port, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    expect(answer).toMatch(/^HTTP\/1\.1 500 [\s\S]*"code":"internal_error"/);
    expect(answer.toLowerCase()).not.toContain("set-cookie");
    expect(reported).toHaveLength(1);
  });

  it("the request's signal aborts when the client leaves before the answer, and not after a finished one", async () => {
    const signals: AbortSignal[] = [];
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const port = await listen(
      nodeRequestListener(
        async (req) => {
          signals.push(req.signal);
          if (new URL(req.url).pathname === "/slow") await released;
          return new Response("ok");
        },
        { log: () => undefined },
      ),
    );
    await raw(port, "GET /fast HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    const socket = net.connect(port, "127.0.0.1", () => socket.write("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"));
    await new Promise((r) => setTimeout(r, 100));
    socket.destroy();
    await new Promise((r) => setTimeout(r, 100));
    expect(signals.map((s) => s.aborted)).toEqual([false, true]);
    release();
  });
});
