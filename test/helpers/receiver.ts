import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll } from "vitest";

export interface Received {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface Receiver {
  url: string;
  requests: Received[];
  /** Decides the status of each request (default 200). */
  respond: (req: Received, index: number) => number;
  close(): Promise<void>;
}

/** A real HTTP server on 127.0.0.1 port 0 that records every request: notification receiver or fake forge API. */
export async function startReceiver(): Promise<Receiver> {
  const receiver: Receiver = { url: "", requests: [], respond: () => 200, close: async () => undefined };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const received = { method: req.method ?? "", path: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks).toString("utf8") };
      const index = receiver.requests.push(received) - 1;
      const status = receiver.respond(received, index);
      res.writeHead(status, { "content-type": "application/json" });
      res.end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let closed = false;
  receiver.close = () => {
    if (closed) return Promise.resolve();
    closed = true;
    server.closeAllConnections();
    return new Promise((resolve) => server.close(() => resolve()));
  };
  afterAll(() => receiver.close());
  return receiver;
}

/** Polls `check` until it returns true or the deadline passes (no fixed sleeps in tests). */
export async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs = 10_000, what = "condition"): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
