/**
 * Cross-daemon wake-ups (docs/decisions.md, docs/api.md §8): the `queue_version` row moves in the same statement as a build
 * becomes queued, and ONE loop per daemon reads it while claims wait, waking them when it changed. A second
 * connection on the same file with its own JobSignal stands in for another daemon (test/e2e/sqld.test.ts does it
 * with real daemon processes on sqld).
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { openDb } from "../../src/db/client.ts";
import { users } from "../../src/db/schema/index.ts";
import type { Db } from "../../src/db/types.ts";
import { triggerBuild } from "../../src/domain/builds/builds.ts";
import { JobSignal } from "../../src/domain/builds/job-signal.ts";
import { readQueueVersion } from "../../src/domain/builds/scheduler.ts";
import { makeTestApp } from "../helpers/app.ts";
import { buildWorld, claim, queueBuild } from "../helpers/builds.ts";

describe("the queue version", () => {
  it("moves with every build that becomes queued, whichever path queues it, and only then", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const v0 = await readQueueVersion(t.deps.db);
    const a = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    expect(await readQueueVersion(t.deps.db)).toBe(v0 + 2);
    // Claimed, running: not queued, no move.
    const job = await claim(t, w.runner);
    expect(job.build_id).toBe(a.id);
    await t.opened.client.execute({ sql: "UPDATE builds SET status = 'running' WHERE id = ?", args: [a.id] });
    expect(await readQueueVersion(t.deps.db)).toBe(v0 + 2);
    // Back to queued (what the sweeper and a runner's removal do): a move. Queued again to queued: none.
    await t.opened.client.execute({ sql: "UPDATE builds SET status = 'queued', runner_id = NULL WHERE id = ?", args: [a.id] });
    expect(await readQueueVersion(t.deps.db)).toBe(v0 + 3);
    await t.opened.client.execute({ sql: "UPDATE builds SET status = 'queued', updated_at = updated_at + 1 WHERE id = ?", args: [b.id] });
    expect(await readQueueVersion(t.deps.db)).toBe(v0 + 3);
  });
});

describe("the daemon's queue-version loop", () => {
  it("wakes its waiting claims within a poll when another daemon queues a build, with one loop for all of them", async () => {
    let db: Db | undefined;
    const signal = new JobSignal({ readVersion: () => readQueueVersion(db!) });
    const t = await makeTestApp({ deps: { jobSignal: signal } });
    db = t.deps.db;
    const w = await buildWorld(t);
    const waiting = Array.from({ length: 5 }, () => t.call("POST", `/v1/runners/${w.runner.id}/claim?wait=10`, { token: w.runner.token }));
    const start = performance.now();
    while (signal.waiting < 5) await new Promise((r) => setTimeout(r, 10));
    const readsBefore = signal.versionReads;
    // Another daemon: its own connection and signal, so nothing in this process is told.
    const other = await openDb(`file:${t.dbPath}`);
    try {
      const owner = await t.deps.db.select().from(users).where(eq(users.role, "owner")).get();
      await new Promise((r) => setTimeout(r, 300));
      const queuedAt = performance.now();
      const foreign = await triggerBuild({ ...t.deps, db: other.db, jobSignal: new JobSignal() }, owner!, w.project.id, {
        pipeline_id: w.pipeline.id,
        commit_sha: "abcdef1",
      });
      const first = await Promise.race(waiting);
      const pickup = performance.now() - queuedAt;
      expect(first.status).toBe(200);
      expect(first.body.build_id).toBe(foreign.id);
      // A waiting claim's own fallback try comes after 2–3 s; the loop reads every 50–100 ms.
      expect(pickup).toBeLessThan(1500);
      // One loop for five waiters: about one read per 50–100 ms in all, not five.
      const elapsed = performance.now() - start;
      expect(signal.versionReads - readsBefore).toBeLessThanOrEqual(Math.ceil(elapsed / 50) + 2);
    } finally {
      other.close();
    }
  });

  it("a waiting claim's retries leave the runner row alone until one takes a job, then mark it busy in the same round trip", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const runnerRow = async () =>
      (await t.opened.client.execute({ sql: "SELECT status, last_heartbeat_at FROM runners WHERE id = ?", args: [w.runner.id] })).rows[0]!;
    const pending = t.call("POST", `/v1/runners/${w.runner.id}/claim?wait=10`, { token: w.runner.token });
    while (t.deps.jobSignal.waiting < 1) await new Promise((r) => setTimeout(r, 10));
    const first = t.clock.now();
    expect((await runnerRow()).last_heartbeat_at).toBe(first);
    t.clock.advance(100);
    // Retries every 250–450 ms (this JobSignal has no version loop): empty ones write nothing.
    await new Promise((r) => setTimeout(r, 1000));
    expect(await runnerRow()).toMatchObject({ status: "online", last_heartbeat_at: first });
    const other = await openDb(`file:${t.dbPath}`);
    try {
      const owner = await t.deps.db.select().from(users).where(eq(users.role, "owner")).get();
      const foreign = await triggerBuild({ ...t.deps, db: other.db, jobSignal: new JobSignal() }, owner!, w.project.id, {
        pipeline_id: w.pipeline.id,
        commit_sha: "abcdef1",
      });
      const res = await pending;
      expect(res.body.build_id).toBe(foreign.id);
    } finally {
      other.close();
    }
    expect(await runnerRow()).toMatchObject({ status: "busy", last_heartbeat_at: first + 100 });
  });

  it("reads nothing while no claim waits", async () => {
    let reads = 0;
    const signal = new JobSignal({
      readVersion: async () => {
        reads++;
        return 1;
      },
    });
    await signal.wait(250);
    const afterWait = reads;
    expect(afterWait).toBeGreaterThanOrEqual(1);
    await new Promise((r) => setTimeout(r, 400));
    expect(reads).toBe(afterWait);
  });

  it("wakes at once a claim whose try overlapped a notification", async () => {
    const signal = new JobSignal();
    const seen = signal.generation;
    signal.notify();
    const started = performance.now();
    await signal.wait(5000, undefined, seen);
    expect(performance.now() - started).toBeLessThan(100);
    expect(signal.waiting).toBe(0);
  });
});
