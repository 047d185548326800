// npm run bench:claim: claim cycles (claim, `running`, `succeeded`) over loopback HTTP by 20 runners, against a raw
// SQLite loop running the same three transactions on the same database file at the same `synchronous` level (the
// limit), and job pickup latency with long-poll against a runner polling every 3 s (docs/benchmarks.md, "Claims").
//
// BENCH_ROOT points at another checkout to measure its daemon with this bench (the "before" figures);
// BENCH_DAEMON_SYNCHRONOUS names that daemon's level (`normal`, the default since the performance work in docs/benchmarks.md, or `full`);
// BENCH_COMPARE_ROOT runs the HTTP claim cycles on a second checkout's daemon too, in the same run (ABBA).
import Database from "libsql";
import { mkdtempSync, rmSync } from "node:fs";
import { BENCH_ROOT, COMPARE_ROOT, cpuMs, runCli, startDaemon, stopProcess, type Daemon } from "./daemon.ts";
import { keepAliveClient } from "./keepalive-client.ts";
import { cpus, loadavg, tmpdir } from "node:os";
import { createHash, randomBytes } from "node:crypto";
import { CLAIM_SQL as TRUST_CLAIM_SQL } from "../src/db/queries/claim.ts";
import { join } from "node:path";

const BUILDS = 2000;
const RUNNERS = 20;
const PICKUP_BUILDS = Number(process.env.BENCH_PICKUP_BUILDS ?? 200);
const POLL_EVERY_MS = 3000;
const DAEMON_SYNC = (process.env.BENCH_DAEMON_SYNCHRONOUS ?? "normal").toLowerCase() === "full" ? "full" : "normal";

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}
const ms = (n: number) => `${n.toFixed(2)} ms`;
const sleep = (n: number) => new Promise((r) => setTimeout(r, n));

const http = keepAliveClient();
const { call, json } = http;

/**
 * The limit: the three transactions of a claim cycle as the daemon runs them (claim + runner heartbeat; report
 * `running` + heartbeat; report `succeeded` + heartbeat), each BEGIN … COMMIT, through prepared statements of the
 * `libsql` package on one connection, with nothing else around them: no HTTP, no auth, no JSON, no ORM.
 */
function rawLoop(path: string, synchronous: "normal" | "full", runnerIds: string[], leaseS: number, claimKind: "today" | "trust" = "today"): number {
  const db = new Database(path, { timeout: 10_000 });
  db.exec(`PRAGMA synchronous = ${synchronous}`);
  const heartbeat = db.prepare(
    `UPDATE runners SET status = CASE WHEN status IN ('draining') THEN status ELSE CASE WHEN EXISTS (SELECT 1 FROM builds
     WHERE runner_id = ?1 AND status IN ('assigned', 'running')) THEN 'busy' ELSE 'online' END END, last_heartbeat_at = ?2,
     updated_at = ?2 WHERE id = ?1`,
  );
  const claim = db.prepare(
    `UPDATE builds SET status = 'assigned', runner_id = ?1, attempt_count = attempt_count + 1, lease_expires_at = ?2,
     updated_at = ?3 WHERE id = (SELECT id FROM builds WHERE status = 'queued' AND platform IN (SELECT value FROM
     json_each((SELECT capabilities FROM runners WHERE id = ?1 AND status != 'draining'), '$.platforms') UNION ALL
     SELECT 'any') ORDER BY queued_at, rowid LIMIT 1) AND status = 'queued' AND EXISTS (SELECT 1 FROM runners WHERE
     id = ?1 AND status != 'draining') RETURNING *, (SELECT repo_url FROM projects WHERE projects.id = builds.project_id),
     (SELECT name FROM pipelines WHERE pipelines.id = builds.pipeline_id)`,
  );
  // The daemon's own claim statement with the trust match (runner trust, held open jobs, max_jobs) and the job
  // token's hash, which the daemon makes for every claim: BENCH_ONLY=raw-trust sets it beside today's.
  const trustClaim = claimKind === "trust" ? db.prepare(TRUST_CLAIM_SQL) : null;
  const running = db.prepare(
    `UPDATE builds SET status = 'running', lease_expires_at = ?3, started_at = COALESCE(started_at, ?4), updated_at = ?4
     WHERE id = ?1 AND runner_id = ?2 AND status IN ('assigned') RETURNING *`,
  );
  const succeeded = db.prepare(
    `UPDATE builds SET status = 'succeeded', exit_code = 0, started_at = COALESCE(started_at, ?3), finished_at = ?3,
     failure_reason = NULL, updated_at = ?3 WHERE id = ?1 AND runner_id = ?2 AND status IN ('assigned', 'running') RETURNING *`,
  );
  const begin = db.prepare("BEGIN");
  const commit = db.prepare("COMMIT");
  const tx = <T>(work: () => T): T => {
    begin.run();
    const out = work();
    commit.run();
    return out;
  };
  let cycles = 0;
  for (let i = 0; ; i++) {
    const runner = runnerIds[i % runnerIds.length]!;
    const now = Math.floor(Date.now() / 1000);
    const rows = tx(() => {
      const r = (
        trustClaim
          ? trustClaim.all(
              runner,
              now + leaseS,
              now,
              createHash("sha256")
                .update(`hgj_${randomBytes(32).toString("base64url")}`)
                .digest("hex"),
            )
          : claim.all(runner, now + leaseS, now)
      ) as Array<{ id: string }>;
      heartbeat.run(runner, now);
      return r;
    });
    const build = rows[0];
    if (!build) break;
    tx(() => {
      running.all(build.id, runner, now + leaseS, now);
      heartbeat.run(runner, now);
    });
    tx(() => {
      succeeded.all(build.id, runner, now);
      heartbeat.run(runner, now);
    });
    cycles++;
  }
  db.close();
  return cycles;
}

function requeue(path: string): void {
  const db = new Database(path, { timeout: 10_000 });
  db.exec(`UPDATE builds SET status = 'queued', runner_id = NULL, lease_expires_at = NULL, attempt_count = 0, started_at = NULL,
    finished_at = NULL, exit_code = NULL, failure_reason = NULL WHERE platform = 'android';
    UPDATE runners SET status = 'online'`);
  db.close();
}

async function main() {
  const dataDir = mkdtempSync(join(tmpdir(), "hangar-bench-claim-"));
  const dbPath = join(dataDir, "hangar.db");
  // Quiet daemon; the sweeper stays out of the way of the measured window.
  const env = { HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0", HANGAR_SWEEP_INTERVAL_MS: "600000", HANGAR_HOST: "127.0.0.1", HANGAR_PORT: "0" };
  const daemon = await startDaemon(env, { stderrTail: 4000 });
  const base = daemon.url;
  try {
    const token = await runCli(["setup-token"], env);
    const setup = (await json(`${base}/v1/setup/bootstrap-token/verify`, "POST", undefined, { token })).session_token;
    await json(`${base}/v1/setup/local-owner/create`, "POST", setup, { email: "bench@example.com" });
    await json(`${base}/v1/setup/complete`, "POST", setup);
    const owner = (await json(`${base}/v1/auth/local/login`, "POST", undefined, {})).session_token as string;

    const project = await json(`${base}/v1/projects`, "POST", owner, { name: "bench", repo_url: "https://example.com/x.git" });
    // BENCH_PROTECTED=1: the project holds a secret variable, so (with runner trust) every build is protected and
    // each claim also checks that the runner holds no open job: the trust match's dearest path. Harmless before it.
    if (process.env.BENCH_PROTECTED === "1") await json(`${base}/v1/projects/${project.id}/secrets/BENCH_KEY`, "PUT", owner, { value: "bench" });
    const mk = (name: string, platform: string) =>
      json(`${base}/v1/projects/${project.id}/pipelines`, "POST", owner, { name, config: { platform, steps: [{ name: "s", run: "true" }] } });
    const android = await mk("android", "android");
    const ios = await mk("ios", "ios");
    const macos = await mk("macos", "macos");
    const register = async (platforms: string[]) =>
      (await json(`${base}/v1/runners/register`, "POST", owner, { capabilities: { platforms } })) as { id: string; token: string };
    const fleet: Array<{ id: string; token: string }> = [];
    for (let i = 0; i < RUNNERS; i++) fleet.push(await register(["android"]));
    const trigger = (pipelineId: string) =>
      json(`${base}/v1/projects/${project.id}/builds`, "POST", owner, {
        pipeline_id: pipelineId,
        commit_sha: "abcdef0123456789abcdef0123456789abcdef01",
      });

    process.stdout.write(`queueing ${BUILDS} builds...\n`);
    if (process.env.BENCH_ONLY !== "pickup")
      for (let i = 0; i < BUILDS; i += 50) await Promise.all(Array.from({ length: 50 }, () => trigger(android.id)));

    const rawRuns: Record<"normal" | "full", number[]> = { normal: [], full: [] };
    const runRaw = (level: "normal" | "full") => {
      requeue(dbPath);
      const t0 = performance.now();
      const cycles = rawLoop(
        dbPath,
        level,
        fleet.map((r) => r.id),
        120,
      );
      const seconds = (performance.now() - t0) / 1000;
      if (cycles !== BUILDS) throw new Error(`raw loop ran ${cycles} cycles`);
      rawRuns[level].push(cycles / seconds);
    };
    const httpRates: number[] = [];
    const claimLatency: number[] = [];
    const cycleLatency: number[] = [];
    const compareRates: number[] = [];
    const compareClaimLatency: number[] = [];
    /** One run of the claim cycles against the daemon at `target` (this checkout's by default). */
    const cpuPerCycle: Record<string, number[]> = {};
    const runHttp = async (target = { base, rates: httpRates, claims: claimLatency, cycles: cycleLatency, pid: daemon.proc.pid! }) => {
      requeue(dbPath);
      const cpuBefore = cpuMs(target.pid);
      const seen = new Set<string>();
      const t0 = performance.now();
      await Promise.all(
        fleet.map(async (r) => {
          for (;;) {
            const s = performance.now();
            const res = await call(`${target.base}/v1/runners/${r.id}/claim`, "POST", r.token);
            if (res.status === 204) return;
            if (res.status !== 200) throw new Error(`claim ${res.status} ${res.text}`);
            target.claims.push(performance.now() - s);
            const job = JSON.parse(res.text).build_id as string;
            seen.add(job);
            await json(`${target.base}/v1/runners/${r.id}/jobs/${job}/status`, "POST", r.token, { status: "running" });
            await json(`${target.base}/v1/runners/${r.id}/jobs/${job}/status`, "POST", r.token, { status: "succeeded", exit_code: 0 });
            target.cycles.push(performance.now() - s);
          }
        }),
      );
      target.rates.push(BUILDS / ((performance.now() - t0) / 1000));
      (cpuPerCycle[target.base] ??= []).push((cpuMs(target.pid) - cpuBefore) / BUILDS);
      if (seen.size !== BUILDS) throw new Error(`http claims: distinct ${seen.size}`);
    };
    // BENCH_ONLY=raw-trust: today's claim statement against the one with the trust match, raw, ABBA twice, on
    // this daemon's database (its schema must have the trust columns); nothing else is measured.
    if (process.env.BENCH_ONLY === "raw-trust") {
      const rates: Record<"today" | "trust", number[]> = { today: [], trust: [] };
      for (const kind of ["today", "trust", "trust", "today", "today", "trust", "trust", "today"] as const) {
        requeue(dbPath);
        const t0 = performance.now();
        const cycles = rawLoop(
          dbPath,
          "normal",
          fleet.map((r) => r.id),
          120,
          kind,
        );
        if (cycles !== BUILDS) throw new Error(`raw loop ran ${cycles} cycles`);
        rates[kind].push(cycles / ((performance.now() - t0) / 1000));
      }
      const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
      process.stdout.write(
        `Raw claim cycles, synchronous=NORMAL, ${BUILDS} builds, ${RUNNERS} runners (load average ${loadavg()[0]!.toFixed(1)}):\n` +
          `  today's claim statement:      ${mean(rates.today).toFixed(0)} cycles/s (runs ${rates.today.map((r) => r.toFixed(0)).join(", ")})\n` +
          `  with the trust match + token: ${mean(rates.trust).toFixed(0)} cycles/s (runs ${rates.trust.map((r) => r.toFixed(0)).join(", ")})\n` +
          `  cost of the trust match: ${((mean(rates.today) / mean(rates.trust) - 1) * 100).toFixed(1)} % per cycle\n`,
      );
      return;
    }
    // BENCH_ONLY=pickup skips the claim cycles (the pickup figures alone, for tracing).
    if (process.env.BENCH_ONLY !== "pickup") {
      const loadStart = loadavg()[0]!;
      // Order raw, HTTP, HTTP, raw (ABBA) so a drift in the machine's load weighs on both alike.
      // The compared checkout's daemon on the same database, quiet too; its cycles interleaved with this one's.
      let compare: Daemon | undefined;
      if (COMPARE_ROOT) compare = await startDaemon(env, { stderrTail: 4000, root: COMPARE_ROOT });
      runRaw("normal");
      runRaw("full");
      await runHttp();
      const compared = compare && {
        base: compare.url,
        rates: compareRates,
        claims: compareClaimLatency,
        cycles: [] as number[],
        pid: compare.proc.pid!,
      };
      if (compared) await runHttp(compared);
      if (compared) await runHttp(compared);
      await runHttp();
      runRaw("full");
      runRaw("normal");
      await stopProcess(compare?.proc);
      const loadAfterCycles = loadavg()[0]!;
      const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
      const rawNormal = mean(rawRuns.normal);
      const rawFull = mean(rawRuns.full);
      const httpRate = mean(httpRates);
      const limit = DAEMON_SYNC === "full" ? rawFull : rawNormal;
      const cycleLines = [
        `Claim cycles (claim + running + succeeded): ${BUILDS} queued builds, ${RUNNERS} runners, daemon ${BENCH_ROOT} (synchronous=${DAEMON_SYNC})`,
        `  machine: ${cpus().length} cores, Node ${process.version}, load average ${loadStart.toFixed(1)} at the start, ${loadAfterCycles.toFixed(1)} after the cycles`,
        `  (raw and HTTP each run twice, ABBA order; rates are means over both runs)`,
        `  raw SQLite loop, synchronous=NORMAL: ${rawNormal.toFixed(0)} cycles/s (runs ${rawRuns.normal.map((r) => r.toFixed(0)).join(", ")})`,
        `  raw SQLite loop, synchronous=FULL:   ${rawFull.toFixed(0)} cycles/s (runs ${rawRuns.full.map((r) => r.toFixed(0)).join(", ")})`,
        `  over loopback HTTP:                  ${httpRate.toFixed(0)} cycles/s (runs ${httpRates.map((r) => r.toFixed(0)).join(", ")}), claim p50 ${ms(percentile(claimLatency, 50))} p99 ${ms(percentile(claimLatency, 99))}, cycle p50 ${ms(percentile(cycleLatency, 50))} p99 ${ms(percentile(cycleLatency, 99))}`,
        `  ratio HTTP / raw at the daemon's level (${DAEMON_SYNC}): ${(httpRate / limit).toFixed(3)} (target >= 0.10); against raw NORMAL: ${(httpRate / rawNormal).toFixed(3)}`,
        `  daemon CPU per cycle: ${mean(cpuPerCycle[base]!).toFixed(2)} ms (runs ${cpuPerCycle[base]!.map((v) => v.toFixed(2)).join(", ")})`,
      ];
      if (compareRates.length > 0) {
        const compareRate = mean(compareRates);
        cycleLines.push(
          `  compared checkout ${COMPARE_ROOT}: ${compareRate.toFixed(0)} cycles/s (runs ${compareRates.map((r) => r.toFixed(0)).join(", ")}), claim p50 ${ms(percentile(compareClaimLatency, 50))} p99 ${ms(percentile(compareClaimLatency, 99))}`,
          `  ratio compared / this checkout: ${(compareRate / httpRate).toFixed(3)}; compared / raw at the daemon's level: ${(compareRate / limit).toFixed(3)}`,
          `  compared daemon CPU per cycle: ${mean(Object.entries(cpuPerCycle).find(([k]) => k !== base)![1]).toFixed(2)} ms`,
        );
      }
      process.stdout.write(`${cycleLines.join("\n")}\n`);
    }

    // Pickup latency: a long-polling runner (ios) and a runner polling every 3 s (macos), side by side, each fed
    // PICKUP_BUILDS builds at random moments. Latency = trigger sent → claim answer received.
    const longPoller = await register(["ios"]);
    const poller = await register(["macos"]);
    const sentAt = new Map<number, number>();
    // Answer times are keyed by build number and matched with send times at the end: a long-poll answer can
    // arrive before the trigger's own response does.
    const longPollAt = new Map<number, number>();
    const pollAt = new Map<number, number>();
    let stop = false;
    const claimVia = async (r: { id: string; token: string }, wait: number) => {
      const res = await call(`${base}/v1/runners/${r.id}/claim${wait ? `?wait=${wait}` : ""}`, "POST", r.token);
      return res.status === 200 ? (JSON.parse(res.text) as { build_number: number }) : null;
    };
    const longPollLoop = (async () => {
      while (!stop) {
        const job = await claimVia(longPoller, 30);
        if (job) longPollAt.set(job.build_number, performance.now());
      }
    })();
    const pollLoop = (async () => {
      while (!stop) {
        for (;;) {
          const job = await claimVia(poller, 0);
          if (!job) break;
          pollAt.set(job.build_number, performance.now());
        }
        await sleep(POLL_EVERY_MS);
      }
    })();
    const feed = async (pipelineId: string) => {
      for (let i = 0; i < PICKUP_BUILDS; i++) {
        await sleep(50 + Math.random() * 250);
        const s = performance.now();
        const body = (await trigger(pipelineId)) as { build_number: number };
        sentAt.set(body.build_number, s);
      }
    };
    await Promise.all([feed(ios.id), feed(macos.id)]);
    const deadline = Date.now() + 10_000;
    while ((longPollAt.size < PICKUP_BUILDS || pollAt.size < PICKUP_BUILDS) && Date.now() < deadline) await sleep(100);
    stop = true;
    await trigger(ios.id);
    await Promise.race([Promise.all([longPollLoop, pollLoop]), sleep(POLL_EVERY_MS + 1000)]);
    const latencies = (at: Map<number, number>) => [...at].filter(([n]) => sentAt.has(n)).map(([n, t]) => t - sentAt.get(n)!);
    const longPollLatency = latencies(longPollAt);
    const pollLatency = latencies(pollAt);

    const lines = [
      `Pickup latency, trigger sent -> claim answer, ${PICKUP_BUILDS} builds each (load average ${loadavg()[0]!.toFixed(1)} at the end):`,
      `  long-poll (?wait=30): p50 ${ms(percentile(longPollLatency, 50))}, p95 ${ms(percentile(longPollLatency, 95))}, p99 ${ms(percentile(longPollLatency, 99))}, max ${ms(Math.max(...longPollLatency))} (n=${longPollLatency.length}, target p99 < 20 ms)`,
      `  polling every 3 s:    p50 ${ms(percentile(pollLatency, 50))}, p99 ${ms(percentile(pollLatency, 99))} (n=${pollLatency.length})`,
    ];
    process.stdout.write(`${lines.join("\n")}\n`);
  } catch (err) {
    process.stderr.write(`daemon stderr (tail):\n${daemon.stderr()}\n`);
    throw err;
  } finally {
    http.close();
    await stopProcess(daemon.proc);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
