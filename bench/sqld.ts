// npm run bench:sqld: claim cycles (claim, `running`, `succeeded`) by 20 runners with TWO daemons sharing one sqld
// (libsql-server 0.24, --use-custom-wal libsql-wal), beside ONE daemon on the embedded file, and a raw client loop
// against the same sqld running the same three transactions with the same 20-way concurrency (the limit: the
// server's own rate for this work, without HTTP, auth, JSON or ORM); then cross-daemon pickup: a runner long-polls
// daemon B while builds are queued through daemon A (docs/api.md §8).
//
// BENCH_BUILDS (default 2000) and BENCH_PICKUP_BUILDS (default 100) size the runs.
import { createClient, type Client, type InStatement } from "@libsql/client";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { runCli, startDaemon, stopProcess, type Daemon } from "./daemon.ts";
import { keepAliveClient } from "./keepalive-client.ts";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { startSqld, type SqldServer } from "../test/helpers/sqld.ts";

const BUILDS = Number(process.env.BENCH_BUILDS ?? 2000);
const RUNNERS = 20;
const PICKUP_BUILDS = Number(process.env.BENCH_PICKUP_BUILDS ?? 100);
const LEASE_S = 120;

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}
const ms = (n: number) => `${n.toFixed(1)} ms`;
const sleep = (n: number) => new Promise((r) => setTimeout(r, n));

const http = keepAliveClient();
const { call, json, statuses } = http;

/** The daemon quiet (no request log, no sweeps in the measured window), its stderr tail kept for errors. */
function startQuietDaemon(env: Record<string, string>): Promise<Daemon> {
  return startDaemon(
    { HANGAR_LOG_REQUESTS: "0", HANGAR_SWEEP_INTERVAL_MS: "600000", HANGAR_HOST: "127.0.0.1", HANGAR_PORT: "0", ...env },
    { stderrTail: 8000 },
  );
}

interface World {
  owner: string;
  projectId: string;
  android: string;
  ios: string;
  fleet: Array<{ id: string; token: string; base: string }>;
}

/** Setup through `bases[0]`, then a project, pipelines and RUNNERS android runners spread over the daemons. */
async function makeWorld(env: Record<string, string>, bases: string[]): Promise<World> {
  const base = bases[0]!;
  const token = await runCli(["setup-token"], env);
  const setup = (await json(`${base}/v1/setup/bootstrap-token/verify`, "POST", undefined, { token })).session_token;
  await json(`${base}/v1/setup/local-owner/create`, "POST", setup, { email: "bench@example.com" });
  await json(`${base}/v1/setup/complete`, "POST", setup);
  const owner = (await json(`${base}/v1/auth/local/login`, "POST", undefined, {})).session_token as string;
  const project = await json(`${base}/v1/projects`, "POST", owner, { name: "bench", repo_url: "https://example.com/x.git" });
  const mk = (name: string, platform: string) =>
    json(`${base}/v1/projects/${project.id}/pipelines`, "POST", owner, { name, config: { platform, steps: [{ name: "s", run: "true" }] } });
  const android = (await mk("android", "android")).id as string;
  const ios = (await mk("ios", "ios")).id as string;
  const fleet: World["fleet"] = [];
  for (let i = 0; i < RUNNERS; i++) {
    const at = bases[i % bases.length]!;
    const r = await json(`${at}/v1/runners/register`, "POST", owner, { capabilities: { platforms: ["android"] } });
    fleet.push({ id: r.id, token: r.token, base: at });
  }
  return { owner, projectId: project.id, android, ios, fleet };
}

async function queueAll(world: World, bases: string[]): Promise<void> {
  for (let i = 0; i < BUILDS; i += 50) {
    await Promise.all(
      Array.from({ length: 50 }, (_, k) =>
        json(`${bases[k % bases.length]}/v1/projects/${world.projectId}/builds`, "POST", world.owner, {
          pipeline_id: world.android,
          commit_sha: "abcdef0123456789",
        }),
      ),
    );
  }
}

/** Claim cycles over HTTP until every android build is done: rate, claim latencies, distinct builds. */
async function httpCycles(world: World): Promise<{ rate: number; claims: number[] }> {
  const seen = new Set<string>();
  const claims: number[] = [];
  const t0 = performance.now();
  await Promise.all(
    world.fleet.map(async (r) => {
      for (;;) {
        const s = performance.now();
        const res = await call(`${r.base}/v1/runners/${r.id}/claim`, "POST", r.token);
        if (res.status === 204) return;
        if (res.status !== 200) throw new Error(`claim ${res.status} ${res.text}`);
        claims.push(performance.now() - s);
        const job = JSON.parse(res.text).build_id as string;
        if (seen.has(job)) throw new Error(`build ${job} claimed twice`);
        seen.add(job);
        await json(`${r.base}/v1/runners/${r.id}/jobs/${job}/status`, "POST", r.token, { status: "running" });
        await json(`${r.base}/v1/runners/${r.id}/jobs/${job}/status`, "POST", r.token, { status: "succeeded", exit_code: 0 });
      }
    }),
  );
  const rate = BUILDS / ((performance.now() - t0) / 1000);
  if (seen.size !== BUILDS) throw new Error(`http claims: ${seen.size} distinct of ${BUILDS}`);
  return { rate, claims };
}

const REQUEUE = `UPDATE builds SET status = 'queued', runner_id = NULL, lease_expires_at = NULL, attempt_count = 0, started_at = NULL,
  finished_at = NULL, exit_code = NULL, failure_reason = NULL WHERE platform = 'android'`;

/** The same three transactions as the daemon's claim cycle (bench/claim.ts's raw loop), each one write batch. */
const CLAIM = `UPDATE builds SET status = 'assigned', runner_id = ?1, attempt_count = attempt_count + 1, lease_expires_at = ?2,
  updated_at = ?3 WHERE id = (SELECT id FROM builds WHERE status = 'queued' AND platform IN (SELECT value FROM
  json_each((SELECT capabilities FROM runners WHERE id = ?1 AND status != 'draining'), '$.platforms') UNION ALL
  SELECT 'any') ORDER BY queued_at, rowid LIMIT 1) AND status = 'queued' AND EXISTS (SELECT 1 FROM runners WHERE
  id = ?1 AND status != 'draining') RETURNING id, (SELECT repo_url FROM projects WHERE projects.id = builds.project_id),
  (SELECT name FROM pipelines WHERE pipelines.id = builds.pipeline_id)`;
const HEARTBEAT = `UPDATE runners SET status = CASE WHEN status IN ('draining') THEN status ELSE CASE WHEN EXISTS (SELECT 1 FROM builds
  WHERE runner_id = ?1 AND status IN ('assigned', 'running')) THEN 'busy' ELSE 'online' END END, last_heartbeat_at = ?2,
  updated_at = ?2 WHERE id = ?1`;
const RUNNING = `UPDATE builds SET status = 'running', lease_expires_at = ?3, started_at = COALESCE(started_at, ?4), updated_at = ?4
  WHERE id = ?1 AND runner_id = ?2 AND status IN ('assigned') RETURNING *`;
const SUCCEEDED = `UPDATE builds SET status = 'succeeded', exit_code = 0, started_at = COALESCE(started_at, ?3), finished_at = ?3,
  failure_reason = NULL, updated_at = ?3 WHERE id = ?1 AND runner_id = ?2 AND status IN ('assigned', 'running') RETURNING *`;

/** The limit: RUNNERS concurrent loops through one @libsql/client against the same sqld, nothing else around them. */
async function rawCycles(client: Client, runnerIds: string[]): Promise<{ rate: number; claims: number[] }> {
  await client.execute(REQUEUE);
  const claims: number[] = [];
  let cycles = 0;
  const t0 = performance.now();
  await Promise.all(
    runnerIds.map(async (runner) => {
      for (;;) {
        const now = Math.floor(Date.now() / 1000);
        const s = performance.now();
        const hb: InStatement = { sql: HEARTBEAT, args: [runner, now] };
        const [claimed] = await client.batch([{ sql: CLAIM, args: [runner, now + LEASE_S, now] }, hb], "write");
        const id = claimed!.rows[0]?.id;
        if (id === undefined) return;
        claims.push(performance.now() - s);
        await client.batch([{ sql: RUNNING, args: [id, runner, now + LEASE_S, now] }, hb], "write");
        await client.batch([{ sql: SUCCEEDED, args: [id, runner, now] }, hb], "write");
        cycles++;
      }
    }),
  );
  const rate = cycles / ((performance.now() - t0) / 1000);
  if (cycles !== BUILDS) throw new Error(`raw loop ran ${cycles} cycles`);
  return { rate, claims };
}

/** A runner long-polls daemon B while builds are queued through daemon A at random moments. */
async function crossPickup(world: World, a: string, b: string): Promise<{ fromSent: number[]; fromQueued: number[] }> {
  const r = await json(`${b}/v1/runners/register`, "POST", world.owner, { capabilities: { platforms: ["ios"] } });
  const sentAt = new Map<number, number>();
  const queuedAt = new Map<number, number>();
  const answeredAt = new Map<number, number>();
  let stop = false;
  const loop = (async () => {
    while (!stop) {
      const res = await call(`${b}/v1/runners/${r.id}/claim?wait=30`, "POST", r.token);
      if (res.status === 200) answeredAt.set((JSON.parse(res.text) as { build_number: number }).build_number, performance.now());
    }
  })();
  for (let i = 0; i < PICKUP_BUILDS; i++) {
    await sleep(100 + Math.random() * 300);
    const s = performance.now();
    const body = await json(`${a}/v1/projects/${world.projectId}/builds`, "POST", world.owner, {
      pipeline_id: world.ios,
      commit_sha: "abcdef0123456789",
    });
    sentAt.set(body.build_number, s);
    queuedAt.set(body.build_number, performance.now());
  }
  const deadline = Date.now() + 10_000;
  while (answeredAt.size < PICKUP_BUILDS && Date.now() < deadline) await sleep(50);
  stop = true;
  await json(`${a}/v1/projects/${world.projectId}/builds`, "POST", world.owner, { pipeline_id: world.ios, commit_sha: "abcdef0123456789" });
  await Promise.race([loop, sleep(5000)]);
  const answered = [...answeredAt].filter(([n]) => sentAt.has(n));
  return {
    fromSent: answered.map(([n, t]) => t - sentAt.get(n)!),
    // A's answer comes after the build is committed (queued); a claim answered even earlier counts 0.
    fromQueued: answered.map(([n, t]) => Math.max(0, t - queuedAt.get(n)!)),
  };
}

async function main() {
  const dirs: string[] = [];
  const daemons: Daemon[] = [];
  let sqld: SqldServer | undefined;
  let client: Client | undefined;
  const lines: string[] = [];
  const say = (line: string) => {
    lines.push(line);
    process.stdout.write(`${line}\n`);
  };
  try {
    say(
      `bench:sqld: ${BUILDS} builds, ${RUNNERS} runners, ${cpus().length} cores, Node ${process.version}, load average ${loadavg()[0]!.toFixed(1)} at the start`,
    );

    // One daemon on the embedded file.
    const fileDir = mkdtempSync(join(tmpdir(), "hangar-bench-sqld-file-"));
    dirs.push(fileDir);
    const fileEnv = { HANGAR_DATA_DIR: fileDir };
    const single = await startQuietDaemon(fileEnv);
    daemons.push(single);
    const fileWorld = await makeWorld(fileEnv, [single.url]);
    await queueAll(fileWorld, [single.url]);
    const file = await httpCycles(fileWorld);
    await stopProcess(single.proc);
    say(
      `  one daemon, embedded file:       ${file.rate.toFixed(0)} cycles/s, claim p50 ${ms(percentile(file.claims, 50))} p99 ${ms(percentile(file.claims, 99))}`,
    );

    // Two daemons on one sqld, sharing the master key.
    sqld = await startSqld();
    const dirA = mkdtempSync(join(tmpdir(), "hangar-bench-sqld-a-"));
    const dirB = mkdtempSync(join(tmpdir(), "hangar-bench-sqld-b-"));
    dirs.push(dirA, dirB);
    const envA = { HANGAR_DATA_DIR: dirA, HANGAR_DATABASE_URL: sqld.url };
    const a = await startQuietDaemon(envA);
    daemons.push(a);
    copyFileSync(join(dirA, "master.key"), join(dirB, "master.key"));
    const b = await startQuietDaemon({ HANGAR_DATA_DIR: dirB, HANGAR_DATABASE_URL: sqld.url });
    daemons.push(b);
    const world = await makeWorld(envA, [a.url, b.url]);
    await queueAll(world, [a.url, b.url]);
    const before5xx = [...statuses].filter(([s]) => s >= 500).reduce((n, [, c]) => n + c, 0);
    const two = await httpCycles(world);
    say(
      `  two daemons, one sqld:           ${two.rate.toFixed(0)} cycles/s, claim p50 ${ms(percentile(two.claims, 50))} p99 ${ms(percentile(two.claims, 99))}`,
    );

    // The limit, on the same server and rows.
    client = createClient({ url: sqld.url });
    const raw = await rawCycles(
      client,
      world.fleet.map((r) => r.id),
    );
    say(
      `  raw client loop, same sqld:      ${raw.rate.toFixed(0)} cycles/s, claim p50 ${ms(percentile(raw.claims, 50))} p99 ${ms(percentile(raw.claims, 99))} (20 concurrent loops, 3 write batches per cycle)`,
    );
    // ABBA: the daemons again after the raw loop, so a drift in the machine's load weighs on both alike.
    await client.execute(REQUEUE);
    const two2 = await httpCycles(world);
    say(
      `  two daemons, one sqld (again):   ${two2.rate.toFixed(0)} cycles/s, claim p50 ${ms(percentile(two2.claims, 50))} p99 ${ms(percentile(two2.claims, 99))}`,
    );
    const twoRate = (two.rate + two2.rate) / 2;
    say(
      `  ratio two daemons on sqld / raw loop on sqld: ${(twoRate / raw.rate).toFixed(3)}; two daemons on sqld / one daemon on the file: ${(twoRate / file.rate).toFixed(3)}`,
    );
    const fives = [...statuses].filter(([s]) => s >= 500).reduce((n, [, c]) => n + c, 0);
    say(
      `  5xx answers: ${fives} (during the sqld cycles: ${fives - before5xx}); answers by status: ${[...statuses].map(([s, c]) => `${s}×${c}`).join(", ")}`,
    );

    const { fromSent, fromQueued } = await crossPickup(world, a.url, b.url);
    say(
      `Cross-daemon pickup (build queued through A -> claim answered by B to a runner long-polling it), n=${fromQueued.length}, ` +
        `from A's answer to the trigger (the build is queued by then): p50 ${ms(percentile(fromQueued, 50))}, p99 ${ms(percentile(fromQueued, 99))}, ` +
        `max ${ms(Math.max(...fromQueued))}; from the trigger sent (upper bound, includes A's own answer time): p50 ${ms(percentile(fromSent, 50))}, ` +
        `p99 ${ms(percentile(fromSent, 99))} (docs/api.md §8: p99 < 500 ms; load average ${loadavg()[0]!.toFixed(1)} at the end)`,
    );
    for (const d of [a, b]) if (d.stderr().includes("unhandled error")) say(`  daemon stderr has an unhandled error:\n${d.stderr()}`);
  } finally {
    http.close();
    client?.close();
    for (const d of daemons) await stopProcess(d.proc);
    await sqld?.stop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
