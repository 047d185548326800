// `npm run bench:ui`: each page of the web UI loaded 200 times over loopback by a signed-in browser session
// (sequential requests, keep-alive), p50/p99 beside its JSON API twin where one exists; each page's HTML weight
// and script bytes (inline and linked). The physical limit measured in the same run: a bare node:http server
// answering the same page bytes (no framework, no database, no session), so "× floor" is what Hangar adds.
import { createServer, type Server } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { createNodeListener, loadConfig } from "../src/index.ts";
import { createNodeDeps } from "../src/runtime/node-deps.ts";
import { issueBootstrapToken } from "../src/domain/setup/setup.ts";
import { SCRIPT, scriptUrl } from "../src/web/assets.ts";

const N = Number(process.env.BENCH_UI_N ?? 200);
const PAGES: { page: string; api: string | null }[] = [
  { page: "/login", api: null },
  { page: "/users", api: "/v1/users" },
  { page: "/runners", api: "/v1/runners" },
  { page: "/settings", api: "/v1/settings/external-access/preflight" },
  { page: "/audit", api: "/v1/audit-events" },
];

function listen(server: Server): Promise<string> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)));
}

async function timed(url: string, headers: Record<string, string>): Promise<{ ms: number[]; body: string }> {
  const ms: number[] = [];
  let body = "";
  for (let i = 0; i < N + 10; i++) {
    const start = performance.now();
    const res = await fetch(url, { headers, redirect: "manual" });
    body = await res.text();
    const took = performance.now() - start;
    if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
    if (i >= 10) ms.push(took); // the first 10 warm up
  }
  return { ms: ms.sort((a, b) => a - b), body };
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
const f = (n: number) => n.toFixed(2);

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), "hangar-bench-ui-"));
  const { deps, close } = await createNodeDeps(loadConfig({ HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0" }));
  const server = createServer(createNodeListener(deps));
  const base = await listen(server);
  const json = async (method: string, path: string, body?: unknown, token?: string) => {
    const res = await fetch(base + path, {
      method,
      headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return (await res.json()) as Record<string, unknown>;
  };
  const { token } = await issueBootstrapToken(deps);
  const setup = (await json("POST", "/v1/setup/bootstrap-token/verify", { token })).session_token as string;
  await json("POST", "/v1/setup/local-owner/create", { email: "owner@example.com" }, setup);
  await json("POST", "/v1/setup/complete", undefined, setup);
  const session = (await json("POST", "/v1/auth/local/login", {})).session_token as string;
  for (let i = 0; i < 10; i++) await json("POST", "/v1/users/invite", { email: `user${i}@example.com`, role: "developer" }, session);
  for (let i = 0; i < 5; i++) await json("POST", "/v1/runners/register", { name: `runner-${i}`, capabilities: { platforms: ["ios"] } }, session);

  console.log(`bench:ui — ${N} sequential loads per route over loopback, signed in; ${cpus().length} CPUs, load ${loadavg()[0]!.toFixed(2)}`);
  console.log(
    "| page | p50 ms | p99 ms | JSON twin | twin p50 | twin p99 | bare-server p50 (same bytes) | p50 × floor | HTML bytes | script bytes |",
  );
  console.log("|---|---|---|---|---|---|---|---|---|---|");
  const rows: string[] = [];
  for (const { page, api } of PAGES) {
    const cookie: Record<string, string> = page === "/login" ? {} : { cookie: `__Host-hangar_session=${session}` };
    const html = await timed(base + page, { accept: "text/html", ...cookie });
    const twin = api ? await timed(base + api, { authorization: `Bearer ${session}` }) : null;
    // The floor: the same bytes from a server that does nothing else.
    const bytes = Buffer.from(html.body);
    const bare = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8", "content-length": bytes.length });
      res.end(bytes);
    });
    const bareUrl = await listen(bare);
    const floor = await timed(bareUrl + page, {});
    await new Promise<void>((r) => bare.close(() => r()));
    const inline = [...html.body.matchAll(/<script(?![^>]*\bsrc=)[^>]*>([\s\S]*?)<\/script>/g)].reduce((n, m) => n + Buffer.byteLength(m[1]!), 0);
    const linked = html.body.includes(scriptUrl()) ? Buffer.byteLength(SCRIPT) : 0;
    const row = `| ${page} | ${f(pct(html.ms, 50))} | ${f(pct(html.ms, 99))} | ${api ?? "–"} | ${twin ? f(pct(twin.ms, 50)) : "–"} | ${twin ? f(pct(twin.ms, 99)) : "–"} | ${f(pct(floor.ms, 50))} | ${f(pct(html.ms, 50) / pct(floor.ms, 50))} | ${bytes.length} | ${inline + linked} |`;
    rows.push(row);
    console.log(row);
    if (inline + linked > 30 * 1024) throw new Error(`${page} has more than 30 KB of script`);
  }
  await new Promise<void>((r) => server.close(() => r()));
  close();
  rmSync(dataDir, { recursive: true, force: true });
}

await main();
