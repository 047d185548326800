// Retention against the real daemon process: a pass killed with SIGKILL half-way is finished by the next start with
// nothing half-deleted, two daemons on one database run the daily pass once, and backup/restore agree afterwards.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { artifacts, builds, pipelines, projects } from "../../src/db/schema/index.ts";
import { openDb, type OpenedDb } from "../../src/db/client.ts";
import { migrateDb } from "../../src/db/migrate.ts";
import { writeSetting } from "../../src/domain/settings/instance-settings.ts";
import { RETENTION_SETTING } from "../../src/domain/retention/policy.ts";
import { makeDataDir, runCli, startDaemon, type Daemon } from "../helpers/daemon.ts";

const DAY = 86_400;
const started: Daemon[] = [];
afterAll(async () => {
  for (const d of started) await d.stop("SIGKILL");
});

/**
 * A data directory holding `count` final builds, each with one local artifact of `size` bytes (real files), half of
 * them finished 40 days ago and half yesterday, and an instance policy deleting artifacts after 30 days.
 */
async function seed(dataDir: string, count: number, size = 512): Promise<{ old: Set<string>; all: string[] }> {
  const opened = await openDb(`file:${join(dataDir, "hangar.db")}`);
  try {
    await migrateDb(opened.db);
    const now = Math.floor(Date.now() / 1000);
    const clock = { now: () => now };
    const projectId = crypto.randomUUID();
    const pipelineId = crypto.randomUUID();
    await opened.db
      .insert(projects)
      .values({ id: projectId, name: "app", repoUrl: "https://git.example.com/app.git", defaultBranch: "main", createdAt: now, updatedAt: now });
    await opened.db.insert(pipelines).values({
      id: pipelineId,
      projectId,
      name: "build",
      config: { platform: "any", steps: [{ name: "b", run: "true" }] },
      createdAt: now,
      updatedAt: now,
    });
    const base = join(dataDir, "artifacts");
    const old = new Set<string>();
    const all: string[] = [];
    const bytes = new Uint8Array(size).fill(1);
    for (let start = 0; start < count; start += 500) {
      const buildRows = [];
      const artifactRows = [];
      for (let i = start; i < Math.min(count, start + 500); i++) {
        const buildId = crypto.randomUUID();
        const artifactId = crypto.randomUUID();
        const finishedAt = i % 2 === 0 ? now - 40 * DAY : now - DAY;
        buildRows.push({
          id: buildId,
          projectId,
          pipelineId,
          buildNumber: i + 1,
          status: "succeeded" as const,
          platform: "any",
          triggerType: "manual" as const,
          commitSha: "0123456789abcdef0123456789abcdef01234567",
          branch: "main",
          configSnapshot: { platform: "any", steps: [] },
          timeoutS: 3600,
          queuedAt: finishedAt,
          startedAt: finishedAt,
          finishedAt,
          createdAt: finishedAt,
          updatedAt: finishedAt,
        });
        artifactRows.push({
          id: artifactId,
          buildId,
          runnerId: "r",
          filename: "app.apk",
          sizeBytes: size,
          contentType: "application/octet-stream",
          status: "available" as const,
          storageLocation: { provider: "local", base_dir: base, key: `${buildId}/${artifactId}` },
          completedAt: finishedAt,
          createdAt: finishedAt,
          updatedAt: finishedAt,
        });
        mkdirSync(join(base, buildId), { recursive: true, mode: 0o700 });
        writeFileSync(join(base, buildId, artifactId), bytes, { mode: 0o600 });
        if (i % 2 === 0) old.add(artifactId);
        all.push(artifactId);
      }
      await opened.db.insert(builds).values(buildRows);
      await opened.db.insert(artifacts).values(artifactRows);
    }
    await writeSetting({ db: opened.db, clock }, RETENTION_SETTING, {
      artifacts: { keep_last: null, max_age_days: 30 },
      logs: { max_age_days: null },
    });
    return { old, all };
  } finally {
    opened.close();
  }
}

interface Row {
  id: string;
  status: string;
  storage_removed_at: number | null;
  key: string;
}

async function artifactRows(db: OpenedDb): Promise<Row[]> {
  return db.db.all<Row>(sql`SELECT id, status, storage_removed_at, json_extract(storage_location, '$.key') AS key FROM artifacts`);
}

/** Every file under artifacts/, as `<build>/<artifact>` keys. */
function storedKeys(dataDir: string): Set<string> {
  const base = join(dataDir, "artifacts");
  const keys = new Set<string>();
  if (!existsSync(base)) return keys;
  for (const build of readdirSync(base)) {
    if (!statSync(join(base, build)).isDirectory()) continue;
    for (const file of readdirSync(join(base, build))) keys.add(`${build}/${file}`);
  }
  return keys;
}

/** Rows and bytes agree: every available artifact has its file, nothing else has one, every expired removal is done. */
function expectConsistent(rows: Row[], keys: Set<string>): void {
  const available = new Set(rows.filter((r) => r.status === "available").map((r) => r.key));
  const missing = [...available].filter((k) => !keys.has(k));
  const orphans = [...keys].filter((k) => !available.has(k));
  expect({ missing: missing.length, orphans: orphans.length }).toEqual({ missing: 0, orphans: 0 });
  expect(rows.filter((r) => r.status === "expired" && r.storage_removed_at === null)).toEqual([]);
}

async function waitFor<T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs = 60_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const env = (dataDir: string) => ({
  HANGAR_DATA_DIR: dataDir,
  HANGAR_LOG_REQUESTS: "0",
  HANGAR_RETENTION_LEASE_S: "2",
  HANGAR_SWEEP_INTERVAL_MS: "200",
});

describe("a retention pass and the real daemon", () => {
  it("killed with SIGKILL half-way, is finished by the next start: no row without bytes, no bytes without row, one audit event", async () => {
    const dataDir = makeDataDir();
    const { old, all } = await seed(dataDir, 6000);
    const watcher = await openDb(`file:${join(dataDir, "hangar.db")}`);
    try {
      // The pass is due at start (none ever ran): kill the daemon once some, not all, artifacts are expired.
      const first = await startDaemon(env(dataDir));
      started.push(first);
      const seen = await waitFor("the pass under way", async () => {
        const [r] = await watcher.db.all<{ n: number }>(sql`SELECT count(*) AS n FROM artifacts WHERE status = 'expired'`);
        return Number(r!.n) > 0 && Number(r!.n);
      });
      await first.stop("SIGKILL");
      const [afterKill] = await watcher.db.all<{ n: number }>(sql`SELECT count(*) AS n FROM artifacts WHERE status = 'expired'`);
      expect(seen).toBeGreaterThan(0);
      expect(Number(afterKill!.n), "the kill landed mid-pass").toBeLessThan(old.size);
      const [unfinished] = await watcher.db.all<{ n: number }>(sql`SELECT count(*) AS n FROM retention_passes WHERE finished_at IS NULL`);
      expect(Number(unfinished!.n)).toBe(1);

      // The next start resumes the same pass once its lease lapses, and finishes it.
      const second = await startDaemon(env(dataDir));
      started.push(second);
      await waitFor("the pass finished", async () => {
        const [r] = await watcher.db.all<{ n: number }>(sql`SELECT count(*) AS n FROM retention_passes WHERE finished_at IS NULL`);
        return Number(r!.n) === 0;
      });
      const rows = await artifactRows(watcher);
      expect(new Set(rows.filter((r) => r.status === "expired").map((r) => r.id))).toEqual(old);
      expect(rows.filter((r) => r.status === "available")).toHaveLength(all.length - old.size);
      expectConsistent(rows, storedKeys(dataDir));
      const passes = await watcher.db.all<{ artifacts_count: number; finished_at: number }>(
        sql`SELECT artifacts_count, finished_at FROM retention_passes`,
      );
      expect(passes).toHaveLength(1);
      expect(Number(passes[0]!.artifacts_count)).toBe(old.size);
      const events = await watcher.db.all<{ details: string }>(sql`SELECT details FROM audit_events WHERE action = 'retention.pass'`);
      expect(events).toHaveLength(1);
      expect(JSON.parse(events[0]!.details)).toMatchObject({ trigger: "scheduled", artifacts: { count: old.size, bytes: old.size * 512 } });

      // backup and restore agree with the database after the pass: only available artifacts, each with its bytes.
      const out = join(mkdtempSync(join(tmpdir(), "hangar-retention-backup-")), "snapshot");
      const backup = await runCli(["backup", "--out", out, "--with-artifacts"], { HANGAR_DATA_DIR: dataDir }, 120_000);
      expect(backup.code, backup.stderr).toBe(0);
      await second.stop();
      const restoredDir = join(mkdtempSync(join(tmpdir(), "hangar-retention-restore-")), "data");
      const restored = await runCli(["restore", "--from", out], { HANGAR_DATA_DIR: restoredDir }, 120_000);
      expect(restored.code, restored.stderr).toBe(0);
      const copy = await openDb(`file:${join(restoredDir, "hangar.db")}`);
      try {
        const restoredRows = await artifactRows(copy);
        expect(restoredRows.filter((r) => r.status === "expired")).toHaveLength(old.size);
        expectConsistent(restoredRows, storedKeys(restoredDir));
      } finally {
        copy.close();
      }
    } finally {
      watcher.close();
    }
  }, 180_000);

  it("two daemons started together on one database run the due pass once", async () => {
    const dataDir = makeDataDir();
    const { old } = await seed(dataDir, 400);
    const [a, b] = await Promise.all([startDaemon(env(dataDir)), startDaemon(env(dataDir))]);
    started.push(a, b);
    const watcher = await openDb(`file:${join(dataDir, "hangar.db")}`);
    try {
      await waitFor("a finished pass", async () => {
        const [r] = await watcher.db.all<{ n: number }>(sql`SELECT count(*) AS n FROM retention_passes WHERE finished_at IS NOT NULL`);
        return Number(r!.n) > 0;
      });
      // Several more checks of both daemons: none starts a second pass within the day.
      await new Promise((r) => setTimeout(r, 1000));
      const passes = await watcher.db.all<{ artifacts_count: number }>(sql`SELECT artifacts_count FROM retention_passes`);
      expect(passes.map((p) => Number(p.artifacts_count))).toEqual([old.size]);
      const events = await watcher.db.all<{ n: number }>(sql`SELECT count(*) AS n FROM audit_events WHERE action = 'retention.pass'`);
      expect(Number(events[0]!.n)).toBe(1);
      expectConsistent(await artifactRows(watcher), storedKeys(dataDir));
    } finally {
      watcher.close();
      await a.stop();
      await b.stop();
    }
  }, 120_000);
});
