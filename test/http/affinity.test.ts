// Runner affinity (docs/api.md §16, docs/decisions.md "Runner affinity"): when several runners could take a build, the
// one that took its pipeline's latest build (its warm workspace) gets it first if it claims within
// HANGAR_AFFINITY_WAIT_MS of the build being queued; a warm runner that is offline, low on disk or busy holds nothing.
import { describe, expect, it } from "vitest";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { buildWorld, claim, createPipeline, queueBuild, registerRunner, reportStatus } from "../helpers/builds.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON
type Json = any;

async function world(waitMs = "3000") {
  const t = await makeTestApp({ config: { HANGAR_AFFINITY_WAIT_MS: waitMs, HANGAR_RUNNER_OFFLINE_AFTER_S: "60" } });
  const w = await buildWorld(t);
  const other = await registerRunner(t, w.ownerToken, { name: "cold" });
  return { t, w, warm: w.runner as Json, other };
}

/** A build of `pipelineId` taken and finished by `runner` (queued outside any window): the runner is then warm. */
async function warmUp(t: TestApp, ownerToken: string, projectId: string, pipelineId: string, runner: Json): Promise<void> {
  await queueBuild(t, ownerToken, projectId, pipelineId);
  t.clock.advance(10);
  const job = await claim(t, runner);
  expect(job).not.toBeNull();
  await reportStatus(t, runner, job.build_id, { status: "running" });
  await reportStatus(t, runner, job.build_id, { status: "succeeded" });
}

describe("runner affinity", () => {
  it("holds a new build for the warm runner within the window: the other runner gets nothing, the warm one gets it", async () => {
    const { t, w, warm, other } = await world();
    await warmUp(t, w.ownerToken, w.project.id, w.pipeline.id, warm);
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    expect(await claim(t, other)).toBeNull();
    t.clock.advance(2);
    expect(await claim(t, other)).toBeNull();
    expect((await claim(t, warm))?.build_id).toBe(b.id);
  });

  it("lets another runner take it once the window has passed", async () => {
    const { t, w, warm, other } = await world();
    await warmUp(t, w.ownerToken, w.project.id, w.pipeline.id, warm);
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    expect(await claim(t, other)).toBeNull();
    t.clock.advance(3);
    expect((await claim(t, other))?.build_id).toBe(b.id);
  });

  it("holds only the warm runner's pipeline: the other runner takes a later build of another pipeline meanwhile", async () => {
    const { t, w, warm, other } = await world();
    await warmUp(t, w.ownerToken, w.project.id, w.pipeline.id, warm);
    const coldPipeline = await createPipeline(t, w.ownerToken, w.project.id, {}, "lint");
    const held = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    const free = await queueBuild(t, w.ownerToken, w.project.id, coldPipeline.id);
    expect((await claim(t, other))?.build_id).toBe(free.id);
    expect((await claim(t, warm))?.build_id).toBe(held.id);
  });

  it("is not held by a warm runner that stopped heartbeating, is low on disk, is busy or is draining", async () => {
    const { t, w, warm, other } = await world();
    const beat = (r: Json, body: object = {}) => t.call("POST", `/v1/runners/${r.id}/heartbeat`, { token: r.token, body });

    // Offline: no heartbeat for longer than HANGAR_RUNNER_OFFLINE_AFTER_S (whether the sweeper marked it yet or not).
    await warmUp(t, w.ownerToken, w.project.id, w.pipeline.id, warm);
    t.clock.advance(61);
    await beat(other);
    const afterSilence = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    expect((await claim(t, other))?.build_id).toBe(afterSilence.id);
    await reportStatus(t, other, afterSilence.id, { status: "running" });
    await reportStatus(t, other, afterSilence.id, { status: "succeeded" });

    // Low on disk.
    const lowPipeline = await createPipeline(t, w.ownerToken, w.project.id, {}, "low");
    await warmUp(t, w.ownerToken, w.project.id, lowPipeline.id, warm);
    expect((await beat(warm, { free_disk_bytes: 2 ** 30, low_disk: true })).status).toBe(200);
    const whileLow = await queueBuild(t, w.ownerToken, w.project.id, lowPipeline.id);
    expect((await claim(t, other))?.build_id).toBe(whileLow.id);
    await reportStatus(t, other, whileLow.id, { status: "running" });
    await reportStatus(t, other, whileLow.id, { status: "succeeded" });
    await beat(warm, { free_disk_bytes: 100 * 2 ** 30, low_disk: false });

    // Busy with another build (no job cap set: one at a time).
    const busyPipeline = await createPipeline(t, w.ownerToken, w.project.id, {}, "busy");
    await warmUp(t, w.ownerToken, w.project.id, busyPipeline.id, warm);
    const elsewhere = await createPipeline(t, w.ownerToken, w.project.id, {}, "elsewhere");
    await queueBuild(t, w.ownerToken, w.project.id, elsewhere.id);
    t.clock.advance(10);
    expect(await claim(t, warm)).not.toBeNull();
    const whileBusy = await queueBuild(t, w.ownerToken, w.project.id, busyPipeline.id);
    expect((await claim(t, other))?.build_id).toBe(whileBusy.id);

    // Draining.
    const drainPipeline = await createPipeline(t, w.ownerToken, w.project.id, {}, "drain");
    const idle = await registerRunner(t, w.ownerToken, { name: "warm-2" });
    await warmUp(t, w.ownerToken, w.project.id, drainPipeline.id, idle);
    expect((await t.call("PATCH", `/v1/runners/${idle.id}`, { token: idle.token, body: { status: "draining" } })).status).toBe(200);
    const whileDraining = await queueBuild(t, w.ownerToken, w.project.id, drainPipeline.id);
    await reportStatus(t, other, whileBusy.id, { status: "running" });
    await reportStatus(t, other, whileBusy.id, { status: "succeeded" });
    expect((await claim(t, other))?.build_id).toBe(whileDraining.id);
  });

  it("is off with HANGAR_AFFINITY_WAIT_MS=0", async () => {
    const { t, w, warm, other } = await world("0");
    await warmUp(t, w.ownerToken, w.project.id, w.pipeline.id, warm);
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    expect((await claim(t, other))?.build_id).toBe(b.id);
  });
});
