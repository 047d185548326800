import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { builds, runners } from "../../src/db/schema/index.ts";
import { runMaintenance } from "../../src/domain/setup/maintenance.ts";
import { sweep } from "../../src/domain/builds/sweeper.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { buildWorld, claim, createPipeline, queueBuild, registerRunner, reportStatus } from "../helpers/builds.ts";

// Low timers, as the daemon tests use them.
const config = { HANGAR_RUNNER_OFFLINE_AFTER_S: "30", HANGAR_JOB_LEASE_S: "60", HANGAR_QUEUE_TTL_S: "600", HANGAR_BUILD_TIMEOUT_S: "300" };

async function buildOf(t: TestApp, id: string) {
  return (await t.deps.db.select().from(builds).where(eq(builds.id, id)).get())!;
}

describe("sweeper (docs/api.md §6 leases and timers)", () => {
  it("marks runners offline after HANGAR_RUNNER_OFFLINE_AFTER_S without a heartbeat; a heartbeat brings them back", async () => {
    const t = await makeTestApp({ config });
    const w = await buildWorld(t);
    t.clock.advance(30);
    await runMaintenance(t.deps);
    expect((await t.call("GET", "/v1/runners", { token: w.ownerToken })).body[0].status).toBe("online");
    t.clock.advance(1);
    await runMaintenance(t.deps);
    expect((await t.call("GET", "/v1/runners", { token: w.ownerToken })).body[0].status).toBe("offline");
    const hb = await t.call("POST", `/v1/runners/${w.runner.id}/heartbeat`, { token: w.runner.token, body: {} });
    expect(hb.body.runner.status).toBe("online");
  });

  it("requeues an assigned build whose lease lapsed, and fails it after the third claim", async () => {
    const t = await makeTestApp({ config });
    const w = await buildWorld(t);
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    for (let attempt = 1; attempt <= 3; attempt++) {
      const job = await claim(t, w.runner);
      expect(job.build_id).toBe(b.id);
      t.clock.advance(60);
      await runMaintenance(t.deps);
      expect((await buildOf(t, b.id)).status).toBe("assigned");
      t.clock.advance(1);
      await runMaintenance(t.deps);
      const row = await buildOf(t, b.id);
      expect(row.attemptCount).toBe(attempt);
      if (attempt < 3) {
        expect(row).toMatchObject({ status: "queued", runnerId: null, leaseExpiresAt: null, failureReason: null });
        // The runner that lost it gets 404 not_found on its old job.
        const stale = await reportStatus(t, w.runner, b.id, { status: "running" });
        expect([stale.status, stale.body.code]).toEqual([404, "not_found"]);
      } else {
        expect(row).toMatchObject({ status: "failed", failureReason: "claim_attempts_exhausted", finishedAt: t.clock.now() });
      }
    }
    expect(await claim(t, w.runner)).toBeNull();
  });

  it("fails a running build whose lease lapsed with failure_reason runner_lost; heartbeats keep it alive", async () => {
    const t = await makeTestApp({ config });
    const w = await buildWorld(t);
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    await claim(t, w.runner);
    await reportStatus(t, w.runner, b.id, { status: "running" });
    for (let i = 0; i < 4; i++) {
      t.clock.advance(40);
      await t.call("POST", `/v1/runners/${w.runner.id}/heartbeat`, { token: w.runner.token, body: {} });
      await runMaintenance(t.deps);
    }
    expect((await buildOf(t, b.id)).status).toBe("running");
    t.clock.advance(61);
    await runMaintenance(t.deps);
    expect(await buildOf(t, b.id)).toMatchObject({ status: "failed", failureReason: "runner_lost", finishedAt: t.clock.now() });
    const late = await reportStatus(t, w.runner, b.id, { status: "succeeded" });
    expect([late.status, late.body.code]).toEqual([409, "invalid_transition"]);
    const full = await t.call("GET", `/v1/builds/${b.id}`, { token: w.ownerToken });
    expect(full.body.failure_reason).toBe("runner_lost");
  });

  it("times out a running build past its pipeline's timeout_s and tells the runner to stop", async () => {
    const t = await makeTestApp({ config });
    const w = await buildWorld(t);
    const quick = await createPipeline(t, w.ownerToken, w.project.id, { timeout_s: 100 }, "quick");
    const b = await queueBuild(t, w.ownerToken, w.project.id, quick.id);
    const slow = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    await claim(t, w.runner);
    await claim(t, w.runner);
    await reportStatus(t, w.runner, b.id, { status: "running" });
    await reportStatus(t, w.runner, slow.id, { status: "running" });
    for (let i = 0; i < 5; i++) {
      t.clock.advance(21);
      await t.call("POST", `/v1/runners/${w.runner.id}/heartbeat`, { token: w.runner.token, body: {} });
      await runMaintenance(t.deps);
    }
    expect(await buildOf(t, b.id)).toMatchObject({ status: "timed_out", failureReason: "timeout" });
    // The default HANGAR_BUILD_TIMEOUT_S (300 here) still holds the other one.
    expect((await buildOf(t, slow.id)).status).toBe("running");
    const hb = await t.call("POST", `/v1/runners/${w.runner.id}/heartbeat`, { token: w.runner.token, body: {} });
    expect(hb.body.cancel_job_ids).toEqual([b.id]);
    const report = await reportStatus(t, w.runner, b.id, { status: "failed" });
    expect([report.status, report.body.code]).toEqual([409, "invalid_transition"]);
  });

  it("expires a queued build older than HANGAR_QUEUE_TTL_S", async () => {
    const t = await makeTestApp({ config });
    const w = await buildWorld(t, { platform: "ios", platforms: ["android"] });
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    t.clock.advance(600);
    await runMaintenance(t.deps);
    expect((await buildOf(t, b.id)).status).toBe("queued");
    t.clock.advance(1);
    await runMaintenance(t.deps);
    expect(await buildOf(t, b.id)).toMatchObject({ status: "expired", failureReason: "queue_ttl", finishedAt: t.clock.now() });
  });

  it("is idempotent: repeated and concurrent sweeps change each row once", async () => {
    const t = await makeTestApp({ config });
    const w = await buildWorld(t);
    const second = await registerRunner(t, w.ownerToken);
    const ids = [];
    for (let i = 0; i < 6; i++) ids.push((await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id)).id);
    await claim(t, w.runner);
    await claim(t, second);
    await reportStatus(t, second, ids[1]!, { status: "running" });
    t.clock.advance(61);
    const counts = await Promise.all([sweep(t.deps), sweep(t.deps), sweep(t.deps)]);
    const total = (k: keyof (typeof counts)[number]) => counts.reduce((n, c) => n + c[k], 0);
    expect(total("requeued")).toBe(1);
    expect(total("runnerLost")).toBe(1);
    expect(total("runnersOffline")).toBe(2);
    const again = await sweep(t.deps);
    expect(again).toEqual({ runnersOffline: 0, requeued: 0, attemptsExhausted: 0, runnerLost: 0, timedOut: 0, expired: 0 });
    const statuses = (await t.deps.db.select().from(runners)).map((r) => r.status);
    expect(statuses).toEqual(["offline", "offline"]);
  });

  it("frees a busy runner whose job the sweeper ended", async () => {
    const t = await makeTestApp({ config });
    const w = await buildWorld(t);
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    await claim(t, w.runner);
    await reportStatus(t, w.runner, b.id, { status: "running" });
    // Heartbeats keep the runner online, but the job's lease is not renewed by anything else here.
    await t.deps.db
      .update(builds)
      .set({ leaseExpiresAt: t.clock.now() - 1 })
      .where(eq(builds.id, b.id));
    await runMaintenance(t.deps);
    expect((await t.deps.db.select().from(runners).where(eq(runners.id, w.runner.id)).get())?.status).toBe("online");
  });
});
