// `npm run bench:backup`: `hangar backup` of a database with 100,000 builds (each with a 1 KiB log chunk) while
// the real daemon serves GET /v1/users/me under load. Prints the request p99 with and without a backup running
// (the limit: the same load with no backup), and the backup's MB/s beside `cp` of the same database file (the
// limit: a plain file copy, measured in the same run).
import autocannon from "autocannon";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import Database from "libsql";
import { runCli, startDaemon, stopProcess } from "./daemon.ts";

const BUILDS = Number(process.env.BENCH_BUILDS ?? 100_000);
const CONNECTIONS = 8;

async function post(base: string, path: string, body?: unknown, token?: string): Promise<Record<string, unknown>> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers["content-type"] = "application/json";
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await fetch(base + path, { method: "POST", headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as Record<string, unknown>;
}

async function load(url: string, token: string, seconds: number) {
  const r = await autocannon({
    url: `${url}/v1/users/me`,
    connections: CONNECTIONS,
    duration: seconds,
    headers: { authorization: `Bearer ${token}` },
  });
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.non2xx };
}

const dataDir = mkdtempSync(join(tmpdir(), "hangar-bench-backup-"));
const env = { HANGAR_DATA_DIR: dataDir, HANGAR_HOST: "127.0.0.1", HANGAR_PORT: "0", HANGAR_LOG_REQUESTS: "0" };
const daemon = await startDaemon(env);
try {
  const token = await runCli(["setup-token"], env, "ignore");
  const setup = (await post(daemon.url, "/v1/setup/bootstrap-token/verify", { token })).session_token as string;
  await post(daemon.url, "/v1/setup/local-owner/create", { email: "bench@example.com" }, setup);
  await post(daemon.url, "/v1/setup/complete", undefined, setup);
  const session = (await post(daemon.url, "/v1/auth/local/login", {})).session_token as string;
  const project = await post(daemon.url, "/v1/projects", { name: "bench", repo_url: "https://git.example.com/bench.git" }, session);
  const pipeline = await post(
    daemon.url,
    `/v1/projects/${project.id}/pipelines`,
    { name: "build", config: { platform: "any", steps: [{ name: "s", run: "true" }] } },
    session,
  );

  // 100,000 finished builds with a log chunk each, written straight into the file beside the running daemon.
  const fill = performance.now();
  const db = new Database(join(dataDir, "hangar.db"));
  db.exec("PRAGMA busy_timeout = 10000");
  db.prepare(`
    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
    INSERT INTO builds (id, project_id, pipeline_id, build_number, status, platform, trigger_type, commit_sha, branch,
      config_snapshot, timeout_s, queued_at, started_at, finished_at, created_at, updated_at, log_bytes)
    SELECT 'bench-' || i, ?, ?, i + 1000, 'succeeded', 'any', 'manual', '0123456789abcdef0123456789abcdef01234567', 'main',
      '{"platform":"any","steps":[{"name":"s","run":"true"}]}', 3600, 1700000000 + i, 1700000001 + i, 1700000002 + i,
      1700000000 + i, 1700000002 + i, 1024 FROM n`).run(BUILDS, project.id, pipeline.id);
  db.prepare(`
    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
    INSERT INTO build_log_chunks (build_id, start_offset, content) SELECT 'bench-' || i, 0, randomblob(1024) FROM n`).run(BUILDS);
  db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  db.close();
  const dbBytes = statSync(join(dataDir, "hangar.db")).size;
  console.log(`filled ${BUILDS} builds in ${((performance.now() - fill) / 1000).toFixed(1)} s; hangar.db ${(dbBytes / 1e6).toFixed(1)} MB`);

  await load(daemon.url, session, 2); // warm-up
  const baseline = await load(daemon.url, session, 10);

  const out = join(mkdtempSync(join(tmpdir(), "hangar-bench-backup-out-")), "b");
  const during = load(daemon.url, session, 10);
  const backupStarted = performance.now();
  await runCli(["backup", "--out", out], env, "ignore");
  const backup = { ms: performance.now() - backupStarted };
  const underBackup = await during;
  const copied = statSync(join(out, "hangar.db")).size;

  const cpTarget = join(mkdtempSync(join(tmpdir(), "hangar-bench-cp-")), "hangar.db");
  const cpStart = performance.now();
  execFileSync("cp", [join(dataDir, "hangar.db"), cpTarget]);
  const cpMs = performance.now() - cpStart;

  const backupMBs = dbBytes / 1e6 / (backup.ms / 1000);
  const cpMBs = dbBytes / 1e6 / (cpMs / 1000);
  console.log(
    `load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")}`,
  );
  console.log(`GET /v1/users/me, ${CONNECTIONS} connections, 10 s each:`);
  console.log(
    `  no backup running (the limit): ${baseline.rps.toFixed(0)} req/s, p50 ${baseline.p50} ms, p99 ${baseline.p99} ms, errors ${baseline.errors}`,
  );
  console.log(
    `  while the backup ran:          ${underBackup.rps.toFixed(0)} req/s, p50 ${underBackup.p50} ms, p99 ${underBackup.p99} ms, errors ${underBackup.errors}`,
  );
  console.log(`  p99 ratio (during / without): ${(underBackup.p99 / baseline.p99).toFixed(2)}`);
  console.log(
    `backup of ${(dbBytes / 1e6).toFixed(1)} MB (snapshot ${(copied / 1e6).toFixed(1)} MB): ${(backup.ms / 1000).toFixed(2)} s including process start, integrity check and checksums = ${backupMBs.toFixed(0)} MB/s`,
  );
  console.log(`cp of the same file (the limit): ${(cpMs / 1000).toFixed(2)} s = ${cpMBs.toFixed(0)} MB/s; ratio ${(backupMBs / cpMBs).toFixed(2)}`);
} finally {
  await stopProcess(daemon.proc);
  rmSync(dataDir, { recursive: true, force: true });
}
