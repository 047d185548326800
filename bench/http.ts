// `npm run bench:http`: GET /v1/users/me with a valid session on the real daemon, beside a bare node:http
// server answering the same bytes (status, headers, body) with no framework, database or auth (the floor of
// what Node can do on this machine), in the same run, same load: autocannon, 32 connections over loopback.
// Then cold start: spawn `node bin/hangar.mjs serve` → the listening line, median of 5, against the bare
// server's; and the daemon's idle RSS.
//
// BENCH_ROOT points at another checkout to measure its daemon with this bench (the "before" figures);
// BENCH_COMPARE_ROOT adds a second checkout's daemon to the same interleaved rounds (another HTTP adapter).
import autocannon from "autocannon";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { BENCH_ROOT, COMPARE_ROOT, cpuMs, HANGAR_BIN, runCli, stopProcess } from "./daemon.ts";

const CONNECTIONS = 32;
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 10);
const WARMUP_S = 2;
const ROUNDS = 5;

interface Started {
  proc: ChildProcess;
  url: string;
  startedMs: number;
}

/** Spawns a process and resolves on a line of stdout matching `pattern` (its first group is the URL). */
function spawnUntil(args: string[], env: Record<string, string>, pattern: RegExp, cwd = BENCH_ROOT): Promise<Started & { readyMs: number }> {
  const startedMs = performance.now();
  const proc = spawn(process.execPath, args, { cwd, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "ignore"] });
  return new Promise((resolve, reject) => {
    let out = "";
    proc.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const m = pattern.exec(out);
      if (m?.[1]) resolve({ proc, url: m[1], startedMs, readyMs: performance.now() - startedMs });
    });
    proc.once("exit", (code) => reject(new Error(`${args.join(" ")} exited with ${code} before it was ready:\n${out}`)));
  });
}

async function post(base: string, path: string, body?: unknown, token?: string): Promise<Record<string, unknown>> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers["content-type"] = "application/json";
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await fetch(base + path, { method: "POST", headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as Record<string, unknown>;
}

/** Runs setup in local mode on a fresh daemon and answers a user session token. */
async function completeSetup(base: string, env: Record<string, string>): Promise<string> {
  const token = await runCli(["setup-token"], env);
  const setup = (await post(base, "/v1/setup/bootstrap-token/verify", { token })).session_token as string;
  await post(base, "/v1/setup/local-owner/create", { email: "bench@example.com" }, setup);
  await post(base, "/v1/setup/complete", undefined, setup);
  return (await post(base, "/v1/auth/local/login", {})).session_token as string;
}

// The bare server answers every request with the bytes Hangar sent for GET /v1/users/me: same status line,
// same headers (Date, Connection and Keep-Alive are Node's own in both), same body.
const BARE_SERVER = `
import { createServer } from "node:http";
const { headers, body } = JSON.parse(process.env.BENCH_RESPONSE);
const s = createServer((req, res) => {
  res.writeHead(200, headers);
  res.end(body);
});
s.listen(0, "127.0.0.1", () => console.log("bare listening on http://127.0.0.1:" + s.address().port));
process.on("SIGTERM", () => s.close(() => process.exit(0)));
`;

/** The daemon's resident set, from /proc (Linux). */
function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

interface Figures {
  rps: number;
  /** The server's CPU time per request (µs), when its pid is known. */
  cpuUs?: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
}

async function measure(url: string, token: string | undefined, seconds: number, pid?: number): Promise<Figures> {
  const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  const cpuBefore = pid ? cpuMs(pid) : 0;
  const r = await autocannon({ url, connections: CONNECTIONS, duration: seconds, headers });
  const cpuUs = pid ? ((cpuMs(pid) - cpuBefore) * 1000) / r.requests.total : undefined;
  return { rps: r.requests.average, cpuUs, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.timeouts, non2xx: r.non2xx };
}

/**
 * Interleaved rounds: every target is loaded in each round, one after the other, so a change in the machine's
 * background load hits all of them alike; the figures are the medians over the rounds.
 */
async function loadInterleaved(targets: Array<{ url: string; token?: string; pid?: number }>): Promise<Figures[]> {
  for (const t of targets) await measure(t.url, t.token, WARMUP_S);
  const perTarget: Figures[][] = targets.map(() => []);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, t] of targets.entries()) perTarget[i]!.push(await measure(t.url, t.token, DURATION_S / ROUNDS, t.pid));
  }
  return perTarget.map((runs) => ({
    rps: median(runs.map((r) => r.rps)),
    cpuUs: runs[0]!.cpuUs === undefined ? undefined : median(runs.map((r) => r.cpuUs!)),
    p50: median(runs.map((r) => r.p50)),
    p99: median(runs.map((r) => r.p99)),
    errors: runs.reduce((n, r) => n + r.errors, 0),
    non2xx: runs.reduce((n, r) => n + r.non2xx, 0),
  }));
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

const fmt = (f: Figures) =>
  `${f.rps.toFixed(0).padStart(7)} req/s   ${f.cpuUs === undefined ? "" : `CPU ${f.cpuUs.toFixed(0)} µs/req   `}p50 ${String(f.p50).padStart(3)} ms   p99 ${String(f.p99).padStart(3)} ms   errors ${f.errors} non-2xx ${f.non2xx}`;

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), "hangar-bench-"));
  const listening = /hangar listening on (http:\/\/\S+)/;
  const children: ChildProcess[] = [];
  try {
    console.log(
      `HTTP benchmark: GET /v1/users/me, ${CONNECTIONS} connections, ${DURATION_S} s per target in ${ROUNDS} interleaved rounds ` +
        `(after ${WARMUP_S} s warm-up), ${cpus().length} CPUs, load average ${loadavg()[0]!.toFixed(1)}, Node ${process.version}`,
    );

    const env = { HANGAR_DATA_DIR: dataDir, HANGAR_HOST: "127.0.0.1", HANGAR_PORT: "0" };
    // bin/hangar.mjs compiles dist/hangar.cjs with the V8 code cache the first `serve` after a build writes
    // (1 s after its start): said here, since the first start of a fresh build runs without one.
    const codeCacheAtStart = !existsSync(join(BENCH_ROOT, "dist", "hangar.cjs"))
      ? "n/a (no dist/hangar.cjs in this checkout)"
      : existsSync(join(BENCH_ROOT, "dist", "hangar.cjs.v8cache"))
        ? "yes"
        : "no (that start wrote it; the timed starts used it)";
    const daemon = await spawnUntil([HANGAR_BIN, "serve"], env, listening);
    children.push(daemon.proc);
    const session = await completeSetup(daemon.url, env);
    const meRes = await fetch(`${daemon.url}/v1/users/me`, { headers: { authorization: `Bearer ${session}` } });
    const me = await meRes.text();
    if (!meRes.ok) throw new Error(`users/me: ${meRes.status} ${me}`);
    const sentHeaders: Record<string, string> = {};
    meRes.headers.forEach((value, name) => {
      if (!["date", "connection", "keep-alive", "transfer-encoding"].includes(name)) sentHeaders[name] = value;
    });
    const BARE_ENV = { BENCH_RESPONSE: JSON.stringify({ headers: sentHeaders, body: me }) };
    // Idle RSS: the daemon after setup and one request, left alone for 3 s.
    await new Promise((r) => setTimeout(r, 3000));
    const idleRss = rssMiB(daemon.proc.pid!);

    const bare = await spawnUntil(["--input-type=module", "-e", BARE_SERVER], BARE_ENV, /bare listening on (http:\/\/\S+)/);
    children.push(bare.proc);

    // The same daemon, database and session, with the per-request log line off, to show what logging costs.
    const quiet = await spawnUntil([HANGAR_BIN, "serve"], { ...env, HANGAR_LOG_REQUESTS: "0" }, listening);
    children.push(quiet.proc);

    // The compared checkout's daemon on the same data directory and session, request log on as in `daemon`.
    const compare = COMPARE_ROOT ? await spawnUntil([join(COMPARE_ROOT, "bin", "hangar.mjs"), "serve"], env, listening, COMPARE_ROOT) : undefined;
    if (compare) children.push(compare.proc);

    const [bareFigures, hangarFigures, quietFigures, compareFigures] = (await loadInterleaved([
      { url: `${bare.url}/v1/users/me`, pid: bare.proc.pid },
      { url: `${daemon.url}/v1/users/me`, token: session, pid: daemon.proc.pid },
      { url: `${quiet.url}/v1/users/me`, token: session, pid: quiet.proc.pid },
      ...(compare ? [{ url: `${compare.url}/v1/users/me`, token: session, pid: compare.proc.pid }] : []),
    ])) as [Figures, Figures, Figures, Figures | undefined];
    await stopProcess(bare.proc);
    if (compare) await stopProcess(compare.proc);
    const loadedRss = rssMiB(daemon.proc.pid!);
    await stopProcess(daemon.proc);
    await stopProcess(quiet.proc);

    console.log(`bare node:http (same bytes)         ${fmt(bareFigures)}`);
    console.log(`hangar GET /v1/users/me             ${fmt(hangarFigures)}`);
    console.log(`hangar, request log off             ${fmt(quietFigures)}`);
    console.log(
      `ratio hangar / bare (target >= 0.25): ${(hangarFigures.rps / bareFigures.rps).toFixed(3)} (request log off: ${(quietFigures.rps / bareFigures.rps).toFixed(3)})`,
    );
    if (compareFigures) {
      console.log(`compared checkout ${COMPARE_ROOT}: ${fmt(compareFigures)}`);
      console.log(
        `ratio compared / this checkout: ${(compareFigures.rps / hangarFigures.rps).toFixed(3)} (compared / bare ${(compareFigures.rps / bareFigures.rps).toFixed(3)})`,
      );
    }
    if (process.env.BENCH_SKIP_START === "1") return;

    // Cold start: process spawn → listening line, on the set-up data directory and on a fresh one.
    const existing: number[] = [];
    const fresh: number[] = [];
    for (let i = 0; i < 5; i++) {
      const again = await spawnUntil([HANGAR_BIN, "serve"], env, listening);
      existing.push(again.readyMs);
      await stopProcess(again.proc);
      const freshDir = mkdtempSync(join(tmpdir(), "hangar-bench-fresh-"));
      const first = await spawnUntil([HANGAR_BIN, "serve"], { ...env, HANGAR_DATA_DIR: freshDir }, listening);
      fresh.push(first.readyMs);
      await stopProcess(first.proc);
      rmSync(freshDir, { recursive: true, force: true });
    }
    const bareStarts: number[] = [];
    for (let i = 0; i < 5; i++) {
      const b = await spawnUntil(["--input-type=module", "-e", BARE_SERVER], BARE_ENV, /bare listening on (http:\/\/\S+)/);
      bareStarts.push(b.readyMs);
      await stopProcess(b.proc);
    }
    const ms = (v: number[]) => `${median(v).toFixed(0)} ms (runs: ${v.map((x) => x.toFixed(0)).join(", ")})`;
    console.log(`cold start, existing data dir: median ${ms(existing)}`);
    console.log(`cold start, fresh data dir:    median ${ms(fresh)}`);
    console.log(`bare node:http server start:   median ${ms(bareStarts)}`);
    console.log(`load average at the end: ${loadavg()[0]!.toFixed(1)}`);
    console.log(`cold start ratio hangar / bare: ${(median(existing) / median(bareStarts)).toFixed(2)} (target <= 2)`);
    console.log(`daemon RSS: idle ${idleRss.toFixed(1)} MiB (target <= 70), after the load ${loadedRss.toFixed(1)} MiB`);
    console.log(`V8 code cache (dist/hangar.cjs.v8cache) present at the first start: ${codeCacheAtStart}`);
  } finally {
    for (const c of children) await stopProcess(c);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
