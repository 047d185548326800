// The HTTP client of the claim benches (bench:claim, bench:sqld): runners talk to the daemon through node:http
// with keep-alive (lighter on the shared CPU than fetch), and every answer's status is counted so a bench can
// report 5xx (docs/api.md §8: none).
import { Agent, request } from "node:http";

export interface KeepAliveClient {
  /** One request; retried on a fresh socket when a kept-alive one was closed by the server while idle (nothing was sent). */
  call(url: string, method: string, token?: string, body?: unknown): Promise<{ status: number; text: string }>;
  /** call(), refusing any status from 300 up, with the answer parsed. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- benches read arbitrary JSON answers
  json(url: string, method: string, token?: string, body?: unknown): Promise<any>;
  /** Answers by status. */
  statuses: Map<number, number>;
  /** Closes the kept-alive sockets. */
  close(): void;
}

export function keepAliveClient(): KeepAliveClient {
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const statuses = new Map<number, number>();
  async function call(url: string, method: string, token?: string, body?: unknown): Promise<{ status: number; text: string }> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string> = { "content-length": String(payload ? Buffer.byteLength(payload) : 0) };
    if (token) headers.authorization = `Bearer ${token}`;
    if (payload) headers["content-type"] = "application/json";
    // A retry goes on a fresh connection: every idle socket in the pool may have been closed by the server.
    const once = (fresh: boolean) =>
      new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = request(url, { method, agent: fresh ? false : agent, headers }, (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (d: string) => (text += d));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
          res.on("error", reject);
        });
        req.on("error", reject);
        req.end(payload);
      });
    for (let attempt = 1; ; attempt++) {
      try {
        const res = await once(attempt > 1);
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        return res;
      } catch (err) {
        if (attempt >= 4) throw new Error(`${method} ${url}: ${(err as Error).message}`);
      }
    }
  }
  async function json(url: string, method: string, token?: string, body?: unknown) {
    const res = await call(url, method, token, body);
    if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${res.text}`);
    return JSON.parse(res.text);
  }
  return { call, json, statuses, close: () => agent.destroy() };
}
