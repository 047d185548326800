// `npm run bench:runner`: what the reference runner costs the machine it runs on (docs/benchmarks.md).
//
// 1. The end-of-job sweep (src/cli/runner/sweep.ts) with 200 processes a job left running, each in a session of
//    its own (`setsid`, what a process-group kill misses): the time from the job's end to all 200 gone, beside
//    the floor, signalling the same 200 pids known in advance and waiting for them to be gone (no search).
//    Twice: processes that exit on SIGTERM, and processes that ignore it (the sweep's 2 s grace, then SIGKILL).
// 2. The idle runner: RSS and CPU of the standalone runner (dist/hangar-runner.mjs, what another machine runs)
//    and of `hangar runner` while they long-poll a real daemon with no job for ~20 s, beside a bare Node process
//    that only sleeps (the limit: what any Node process costs), all measured over the same window.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { COOKIE_VAR, findCookieProcesses, newJobCookie, sweepJobProcesses } from "../src/cli/runner/sweep.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const BIN = join(ROOT, "bin", "hangar.mjs");
const BUNDLE = join(ROOT, "dist", "hangar-runner.mjs");
const LEFTOVERS = Number(process.env.BENCH_LEFTOVERS ?? 200);
const IDLE_S = Number(process.env.BENCH_IDLE_S ?? 20);
const ROUNDS = 3;
const CLK_TCK = 100; // Linux USER_HZ; /proc/<pid>/stat counts CPU time in these ticks

if (process.platform !== "linux") throw new Error("bench:runner reads /proc: run it on Linux");

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** A process's start time (clock ticks since boot), so a pid reused by another process is not taken for it. */
function startTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return fields[0] === "Z" ? null : fields[19]!;
  } catch {
    return null;
  }
}

/** Gone, a zombie (exited, not yet reaped: it holds no memory and runs nothing), or its pid now someone else's. */
function gone(p: { pid: number; start: string | null }): boolean {
  const now = startTime(p.pid);
  return now === null || now !== p.start;
}

/**
 * A holder shell (without the cookie) starts `count` processes carrying it, each `setsid`'d, and reaps them when
 * they die. Resolves with their pids once all of them are visible to the sweep's own search.
 */
async function startLeftovers(
  cookie: string,
  count: number,
  ignoreTerm: boolean,
): Promise<{ pids: Array<{ pid: number; start: string | null }>; holder: ChildProcess }> {
  const body = ignoreTerm ? `trap '' TERM; exec sleep 300` : "exec sleep 300";
  const script = `i=0; while [ $i -lt ${count} ]; do ${COOKIE_VAR}=${cookie} setsid sh -c "${body}" & echo $!; i=$((i+1)); done; echo ready; wait`;
  const holder = spawn("sh", ["-c", script], { stdio: ["ignore", "pipe", "inherit"] });
  const pids = await new Promise<number[]>((resolve) => {
    let out = "";
    holder.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      if (out.includes("ready\n"))
        resolve(
          out
            .split("\n")
            .filter((l) => /^\d+$/.test(l))
            .map(Number),
        );
    });
  });
  const uids = new Set([process.getuid!()]);
  for (;;) {
    // Until each has exec'd sleep with the cookie in its environment (the shell's fork is briefly the holder's).
    const found = await findCookieProcesses(cookie, uids);
    if (found.length >= count) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  return { pids: pids.map((pid) => ({ pid, start: startTime(pid) })), holder };
}

async function untilGone(pids: Array<{ pid: number; start: string | null }>): Promise<void> {
  while (!pids.every(gone)) await new Promise((r) => setTimeout(r, 5));
}

async function sweepRound(ignoreTerm: boolean): Promise<{ sweepMs: number; floorMs: number; scanMs: number; killed: number }> {
  const uids = new Set([process.getuid!()]);
  // The sweep: find by cookie, signal, confirm none is left.
  const cookie = newJobCookie();
  const a = await startLeftovers(cookie, LEFTOVERS, ignoreTerm);
  const scanStart = performance.now();
  await findCookieProcesses(cookie, uids);
  const scanMs = performance.now() - scanStart;
  const t0 = performance.now();
  const result = await sweepJobProcesses(cookie, uids);
  const sweepMs = performance.now() - t0;
  // Checked by the cookie, not by pid: on a busy machine a freed pid can be reused at once by someone else's process.
  const left = await findCookieProcesses(cookie, uids);
  if (left.length > 0) {
    const what = left.map((pid) => `${pid}: ${readFileSync(`/proc/${pid}/stat`, "utf8").slice(0, 60)}`).join("; ");
    throw new Error(`the sweep left ${left.length} process(es) behind: ${what}`);
  }
  // The floor: the same number of processes, pids known, signalled directly and polled until gone.
  const b = await startLeftovers(newJobCookie(), LEFTOVERS, ignoreTerm);
  const t1 = performance.now();
  for (const { pid } of b.pids) process.kill(pid, "SIGTERM");
  if (ignoreTerm) {
    // The same grace the sweep gives before SIGKILL: a process that ignores SIGTERM only goes with SIGKILL.
    await new Promise((r) => setTimeout(r, 2000));
    for (const p of b.pids) if (!gone(p)) process.kill(p.pid, "SIGKILL");
  }
  await untilGone(b.pids);
  const floorMs = performance.now() - t1;
  await Promise.all([a.holder, b.holder].map((h) => new Promise((r) => (h.exitCode !== null ? r(null) : h.once("exit", r)))));
  return { sweepMs, floorMs, scanMs, killed: result.killed };
}

/** utime + stime of a process in seconds, and its resident set in MiB. */
function usage(pid: number): { cpuS: number; rssMiB: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const cpuS = (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
  const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return { cpuS, rssMiB: rss ? Number(rss[1]) / 1024 : NaN };
}

function spawnUntil(
  args: string[],
  env: Record<string, string>,
  pattern: RegExp,
  stream: "stdout" | "stderr" = "stdout",
): Promise<{ proc: ChildProcess; match: RegExpExecArray }> {
  const proc = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  return new Promise((resolve, reject) => {
    let out = "";
    proc[stream]!.on("data", (d: Buffer) => {
      out += d.toString();
      const m = pattern.exec(out);
      if (m) resolve({ proc, match: m });
    });
    proc.once("exit", (code) => reject(new Error(`${args.join(" ")} exited with ${code}:\n${out}`)));
  });
}

function stop(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    proc.once("exit", () => resolve());
    proc.kill("SIGTERM");
  });
}

async function call(base: string, method: string, path: string, body?: unknown, token?: string): Promise<Record<string, unknown>> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers["content-type"] = "application/json";
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as Record<string, unknown>;
}

/** Requests the daemon answered on runner routes so far (its own /metrics, loopback in local mode). */
async function runnerRequests(base: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  let n = 0;
  for (const m of text.matchAll(/^hangar_http_requests_total\{[^}]*route="\/v1\/runners\/:runner_id\/[^"]*"[^}]*\} (\d+)$/gm)) n += Number(m[1]);
  return n;
}

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

async function idleRunners(): Promise<void> {
  // What `npm install` leaves: both bundles built from these sources (bin/hangar.mjs runs the sources through tsx
  // while dist/hangar.mjs is older than them, which is not what an installation runs).
  const newest = newestMtime(join(ROOT, "src"));
  const stale = (path: string) => !existsSync(path) || statSync(path).mtimeMs < newest;
  if (stale(BUNDLE) || stale(join(ROOT, "dist", "hangar.mjs"))) {
    const built = spawnSync(process.execPath, [join(ROOT, "scripts", "build.mjs")], { cwd: ROOT, stdio: "inherit" });
    if (built.status !== 0) throw new Error("scripts/build.mjs failed");
  }
  const dataDir = mkdtempSync(join(tmpdir(), "hangar-bench-runner-"));
  const children: ChildProcess[] = [];
  try {
    const env = { HANGAR_DATA_DIR: dataDir, HANGAR_HOST: "127.0.0.1", HANGAR_PORT: "0", HANGAR_LOG_REQUESTS: "0" };
    const daemon = await spawnUntil([BIN, "serve"], env, /hangar listening on (http:\/\/\S+)/);
    children.push(daemon.proc);
    const url = daemon.match[1]!;
    const token = spawnSync(process.execPath, [BIN, "setup-token"], { cwd: ROOT, env: { ...process.env, ...env }, encoding: "utf8" }).stdout.trim();
    const setup = (await call(url, "POST", "/v1/setup/bootstrap-token/verify", { token })).session_token as string;
    await call(url, "POST", "/v1/setup/local-owner/create", { email: "bench@example.com" }, setup);
    await call(url, "POST", "/v1/setup/complete", undefined, setup);
    const session = (await call(url, "POST", "/v1/auth/local/login", {})).session_token as string;
    const register = async (name: string) =>
      (await call(url, "POST", "/v1/runners/register", { name, capabilities: { platforms: ["android"] } }, session)) as { id: string; token: string };

    const online = /runner \S+ online at/;
    const start = async (name: string, args: string[]) => {
      const r = await register(name);
      const work = join(dataDir, `work-${name}`);
      const started = await spawnUntil([...args, "--url", url, "--id", r.id, "--workdir", work], { HANGAR_RUNNER_TOKEN: r.token }, online, "stderr");
      children.push(started.proc);
      return started.proc;
    };
    const standalone = await start("standalone", [BUNDLE]);
    const cli = await start("cli", [BIN, "runner"]);
    const bare = spawn(process.execPath, ["-e", "setInterval(() => {}, 1 << 30)"], { stdio: "ignore" });
    children.push(bare);

    // Settle (start-up work, the first heartbeat), then measure every process over the same window.
    await new Promise((r) => setTimeout(r, 3000));
    const procs = { standalone, cli, bare } as const;
    const before = Object.fromEntries(Object.entries(procs).map(([k, p]) => [k, usage(p.pid!)])) as Record<
      keyof typeof procs,
      ReturnType<typeof usage>
    >;
    const requestsBefore = await runnerRequests(url);
    const rss: Record<keyof typeof procs, number[]> = { standalone: [], cli: [], bare: [] };
    const t0 = performance.now();
    while (performance.now() - t0 < IDLE_S * 1000) {
      await new Promise((r) => setTimeout(r, 1000));
      for (const [k, p] of Object.entries(procs)) rss[k as keyof typeof procs].push(usage(p.pid!).rssMiB);
    }
    const wallS = (performance.now() - t0) / 1000;
    const requests = (await runnerRequests(url)) - requestsBefore;
    const after = Object.fromEntries(Object.entries(procs).map(([k, p]) => [k, usage(p.pid!)])) as Record<
      keyof typeof procs,
      ReturnType<typeof usage>
    >;

    const cpuMs = (k: keyof typeof procs) => (after[k].cpuS - before[k].cpuS) * 1000;
    const line = (label: string, k: keyof typeof procs) =>
      `${label.padEnd(44)} RSS median ${median(rss[k]).toFixed(1).padStart(5)} MiB (max ${Math.max(...rss[k]).toFixed(1)})   CPU ${cpuMs(k).toFixed(0).padStart(4)} ms in ${wallS.toFixed(1)} s (${((cpuMs(k) / 1000 / wallS) * 100).toFixed(2)} %)`;
    console.log(`\nidle runners long-polling a daemon with no job, ${wallS.toFixed(1)} s, sampled every second:`);
    console.log(line("standalone runner (dist/hangar-runner.mjs)", "standalone"));
    console.log(line("hangar runner (bin/hangar.mjs, dist bundle)", "cli"));
    console.log(line("bare node, sleeping (the limit)", "bare"));
    const ratio = (k: keyof typeof procs) =>
      `RSS ${(median(rss[k]) / median(rss.bare)).toFixed(2)}×, CPU +${(cpuMs(k) - cpuMs("bare")).toFixed(0)} ms`;
    console.log(`ratio to the sleeping node: standalone ${ratio("standalone")}; hangar runner ${ratio("cli")}`);
    console.log(
      `runner requests answered by the daemon in the window (both runners): ${requests} (${((requests / 2 / wallS) * 60).toFixed(1)} per runner per minute)`,
    );
  } finally {
    for (const c of children.reverse()) await stop(c);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  console.log(
    `Runner benchmark: ${LEFTOVERS} leftover processes per sweep, ${ROUNDS} rounds; idle window ${IDLE_S} s; ${cpus().length} CPUs, ` +
      `load average ${loadavg()[0]!.toFixed(1)}, ${readdirSync("/proc").filter((n) => /^\d+$/.test(n)).length} processes, Node ${process.version}`,
  );
  for (const ignoreTerm of [false, true]) {
    const rounds: Array<Awaited<ReturnType<typeof sweepRound>>> = [];
    for (let i = 0; i < ROUNDS; i++) rounds.push(await sweepRound(ignoreTerm));
    const m = (f: (r: (typeof rounds)[number]) => number) => median(rounds.map(f));
    const label = ignoreTerm ? "ignoring SIGTERM" : "exiting on SIGTERM";
    console.log(
      `sweep, ${LEFTOVERS} setsid'd processes ${label.padEnd(18)}: ${m((r) => r.sweepMs)
        .toFixed(0)
        .padStart(5)} ms (killed ${m((r) => r.killed)}; one /proc search ${m((r) => r.scanMs).toFixed(1)} ms)   ` +
        `floor (pids known, signalled, polled) ${m((r) => r.floorMs)
          .toFixed(0)
          .padStart(5)} ms   ratio ${(m((r) => r.sweepMs) / m((r) => r.floorMs)).toFixed(2)}`,
    );
  }
  await idleRunners();
  console.log(`load average at the end: ${loadavg()[0]!.toFixed(1)}`);
}

await main();
