// `npm run bench:retention`: a retention pass of the real daemon over BENCH_BUILDS final builds (20,000), each with one
// sparse artifact file of BENCH_ARTIFACT_MB (5 MiB: 100 GB in all, no real bytes written), 80 % of them past the
// policy's 30 days. Prints the pass's duration and files/s and GB/s beside the limit measured in the same run on the
// same disk (rm of as many sparse files of the same size and their directories, as many at once as the pass), and the p99 latency of
// GET /v1/public/setup-status (one request at a time) while the pass runs beside the same latency idle.
import { mkdirSync, mkdtempSync, openSync, closeSync, ftruncateSync, rmSync } from "node:fs";
import { rm, rmdir } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import Database from "libsql";
import { runCli, startDaemon, stopProcess } from "./daemon.ts";

const BUILDS = Number(process.env.BENCH_BUILDS ?? 20_000);
const ARTIFACT_BYTES = Number(process.env.BENCH_ARTIFACT_MB ?? 5) * 1024 * 1024;
const IDLE_S = Number(process.env.BENCH_IDLE_S ?? 10);
/** The pass's removals in flight (src/domain/retention/pass.ts REMOVALS_IN_FLIGHT): the limit runs as many. */
const IN_FLIGHT = 8;
const DAY = 86_400;

function sparseFile(path: string, size: number): void {
  const fd = openSync(path, "w", 0o600);
  try {
    ftruncateSync(fd, size);
  } finally {
    closeSync(fd);
  }
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const dataDir = mkdtempSync(join(tmpdir(), "hangar-bench-retention-"));
const env = { HANGAR_DATA_DIR: dataDir, HANGAR_HOST: "127.0.0.1", HANGAR_PORT: "0", HANGAR_LOG_REQUESTS: "0" };
try {
  // The schema, from the real migrations.
  await runCli(["migrate"], env, "ignore");
  const db = new Database(join(dataDir, "hangar.db"));
  db.pragma("journal_mode = WAL");
  const now = Math.floor(Date.now() / 1000);
  const base = join(dataDir, "artifacts");
  const projectId = crypto.randomUUID();
  const pipelineId = crypto.randomUUID();
  db.prepare(
    "INSERT INTO projects (id, name, repo_url, default_branch, created_at, updated_at) VALUES (?, 'bench', 'https://git.example.com/b.git', 'main', ?, ?)",
  ).run(projectId, now, now);
  db.prepare(
    'INSERT INTO pipelines (id, project_id, name, config, created_at, updated_at) VALUES (?, ?, \'build\', \'{"platform":"any","steps":[]}\', ?, ?)',
  ).run(pipelineId, projectId, now, now);
  const insertBuild =
    db.prepare(`INSERT INTO builds (id, project_id, pipeline_id, build_number, status, platform, trigger_type, commit_sha, branch, config_snapshot, timeout_s,
    queued_at, started_at, finished_at, created_at, updated_at) VALUES (?, ?, ?, ?, 'succeeded', 'any', 'manual', '0123456789abcdef0123456789abcdef01234567', ?, '{}', 3600, ?, ?, ?, ?, ?)`);
  const insertArtifact =
    db.prepare(`INSERT INTO artifacts (id, build_id, runner_id, filename, size_bytes, content_type, status, storage_location, completed_at, created_at, updated_at)
    VALUES (?, ?, 'r', 'app.ipa', ?, 'application/octet-stream', 'available', ?, ?, ?, ?)`);
  let doomed = 0;
  const seedStart = performance.now();
  db.exec("BEGIN");
  for (let i = 0; i < BUILDS; i++) {
    const buildId = crypto.randomUUID();
    const artifactId = crypto.randomUUID();
    const old = i % 5 !== 0;
    if (old) doomed++;
    const finishedAt = old ? now - 40 * DAY - i : now - DAY;
    insertBuild.run(buildId, projectId, pipelineId, i + 1, `branch-${i % 20}`, finishedAt, finishedAt, finishedAt, finishedAt, finishedAt);
    insertArtifact.run(
      artifactId,
      buildId,
      ARTIFACT_BYTES,
      JSON.stringify({ provider: "local", base_dir: base, key: `${buildId}/${artifactId}` }),
      finishedAt,
      finishedAt,
      finishedAt,
    );
    mkdirSync(join(base, buildId), { recursive: true, mode: 0o700 });
    sparseFile(join(base, buildId, artifactId), ARTIFACT_BYTES);
  }
  db.prepare("INSERT INTO instance_settings (key, value, updated_at) VALUES ('retention', ?, ?)").run(
    JSON.stringify({ artifacts: { keep_last: null, max_age_days: 30 }, logs: { max_age_days: null } }),
    now,
  );
  // A pass ran just now: none is due until the idle window is measured and this row is moved two days back.
  const seeded = Math.floor(Date.now() / 1000);
  db.prepare(
    "INSERT INTO retention_passes (id, trigger, started_at, finished_at, lease_owner, lease_expires_at) VALUES ('seed', 'scheduled', ?, ?, 'seed', 0)",
  ).run(seeded, seeded);
  db.exec("COMMIT");
  console.error(
    `seeded ${BUILDS} builds, ${((BUILDS * ARTIFACT_BYTES) / 1e9).toFixed(0)} GB of sparse artifacts in ${((performance.now() - seedStart) / 1000).toFixed(1)} s`,
  );

  const daemon = await startDaemon(
    { ...env, HANGAR_SWEEP_INTERVAL_MS: "250" },
    { stderrMode: process.env.BENCH_DAEMON_STDERR ? "inherit" : "ignore" },
  );
  try {
    const samples: Array<{ at: number; ms: number }> = [];
    let passStart = 0;
    let passEnd = 0;
    const watch = db.prepare("SELECT started_at, finished_at FROM retention_passes WHERE id != 'seed'");
    const deadline = Date.now() + (IDLE_S + 600) * 1000;
    const dueAt = Date.now() + IDLE_S * 1000;
    let due = false;
    while (Date.now() < deadline) {
      if (!due && Date.now() >= dueAt) {
        // The daemon's own schedule (a check every 250 ms here) then finds the pass overdue and starts it.
        db.prepare("UPDATE retention_passes SET started_at = started_at - 2 * 86400, finished_at = finished_at - 2 * 86400 WHERE id = 'seed'").run();
        due = true;
      }
      const t0 = performance.now();
      const res = await fetch(`${daemon.url}/v1/public/setup-status`);
      await res.arrayBuffer();
      samples.push({ at: t0, ms: performance.now() - t0 });
      const row = watch.get() as { started_at: number; finished_at: number | null } | undefined;
      if (row && !passStart) passStart = performance.now();
      if (row?.finished_at && !passEnd) {
        passEnd = performance.now();
        break;
      }
    }
    if (!passEnd) throw new Error("the pass did not finish in time");
    const passRow = db
      .prepare("SELECT artifacts_count, artifacts_bytes, started_at, finished_at FROM retention_passes WHERE id != 'seed'")
      .get() as Record<string, number>;
    // The first requests warm the daemon up (JIT, statement cache): left out of the idle figures.
    const idle = samples
      .slice(50)
      .filter((s) => s.at < passStart - 200)
      .map((s) => s.ms)
      .sort((a, b) => a - b);
    const during = samples
      .filter((s) => s.at > passStart && s.at < passEnd)
      .map((s) => s.ms)
      .sort((a, b) => a - b);
    // The pass's own clock is in whole seconds; the bench's sampling of it is within one request of the truth.
    const passS = (passEnd - passStart) / 1000;
    await stopProcess(daemon.proc);

    // The limit: the same disk work with nothing else running: rm of as many sparse files of the same size, each in
    // its own directory removed after it, IN_FLIGHT at a time as the pass does.
    const rawDir = join(dataDir, "raw");
    mkdirSync(rawDir);
    const paths: string[] = [];
    for (let i = 0; i < doomed; i++) {
      const dir = join(rawDir, String(i));
      mkdirSync(dir);
      const p = join(dir, "f");
      sparseFile(p, ARTIFACT_BYTES);
      paths.push(p);
    }
    const rawStart = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (next < paths.length) {
          const p = paths[next++]!;
          await rm(p, { force: true });
          await rmdir(dirname(p));
        }
      }),
    );
    const rawS = (performance.now() - rawStart) / 1000;

    const gb = (doomed * ARTIFACT_BYTES) / 1e9;
    const out = {
      builds: BUILDS,
      deleted: Number(passRow.artifacts_count),
      deleted_gb: Number((Number(passRow.artifacts_bytes) / 1e9).toFixed(1)),
      pass_s: Number(passS.toFixed(2)),
      pass_files_per_s: Math.round(doomed / passS),
      pass_gb_per_s: Number((gb / passS).toFixed(1)),
      raw_rm_s: Number(rawS.toFixed(2)),
      raw_rm_files_per_s: Math.round(doomed / rawS),
      pass_vs_raw_rm: Number((rawS / passS).toFixed(3)),
      idle: { n: idle.length, p50_ms: Number(percentile(idle, 50).toFixed(2)), p99_ms: Number(percentile(idle, 99).toFixed(2)) },
      during_pass: {
        n: during.length,
        p50_ms: Number(percentile(during, 50).toFixed(2)),
        p99_ms: Number(percentile(during, 99).toFixed(2)),
        max_ms: Number((during.at(-1) ?? NaN).toFixed(2)),
      },
      p99_ratio: Number((percentile(during, 99) / percentile(idle, 99)).toFixed(2)),
      loadavg_1m: Number(loadavg()[0]!.toFixed(2)),
    };
    console.log(JSON.stringify(out, null, 2));
  } finally {
    await stopProcess(daemon.proc);
    db.close();
  }
} finally {
  rmSync(dataDir, { recursive: true, force: true });
}
