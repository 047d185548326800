// A runner lost mid-build (its lease lapses; docs/api.md §6, §21), with the test clock and the real sweeper: the
// build's log says so, and a pipeline's `retry: {runner_lost: N}` queues it again at most N times along the chain.
import { describe, expect, it } from "vitest";
import { runMaintenance } from "../../src/domain/setup/maintenance.ts";
import { sweep } from "../../src/domain/builds/sweeper.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { appendLog, buildWorld, claim, createPipeline, queueBuild, registerRunner, reportStatus } from "../helpers/builds.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON
type Json = any;

const config = { HANGAR_RUNNER_OFFLINE_AFTER_S: "30", HANGAR_JOB_LEASE_S: "60", HANGAR_QUEUE_TTL_S: "6000", HANGAR_BUILD_TIMEOUT_S: "3000" };

async function logOf(t: TestApp, token: string, buildId: string): Promise<string> {
  const res = await t.call("GET", `/v1/builds/${buildId}/logs?offset=0`, { token });
  expect(res.status).toBe(200);
  return res.text;
}

async function buildsOf(t: TestApp, token: string): Promise<Json[]> {
  return (await t.call("GET", "/v1/builds", { token })).body;
}

/** Claims `buildId` with the runner, starts it, then lets its lease lapse and sweeps. */
async function loseRunner(t: TestApp, runner: { id: string; token: string }, buildId: string, log?: string): Promise<void> {
  expect((await claim(t, runner))?.build_id).toBe(buildId);
  expect((await reportStatus(t, runner, buildId, { status: "running" })).status).toBe(200);
  if (log) expect((await appendLog(t, runner, buildId, 0, log)).status).toBe(200);
  t.clock.advance(61);
  await runMaintenance(t.deps);
}

describe("a runner lost mid-build", () => {
  it("fails the build with runner_lost and a line in its log saying so; without retry nothing is queued again", async () => {
    const t = await makeTestApp({ config });
    const w = await buildWorld(t);
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    // The runner's last chunk ended mid-line: the daemon's line still starts on a line of its own.
    await loseRunner(t, w.runner, b.id, "> Task :app:compile\nhalf a li");
    const lost = (await t.call("GET", `/v1/builds/${b.id}`, { token: w.ownerToken })).body;
    expect(lost).toMatchObject({ status: "failed", failure_reason: "runner_lost" });
    const log = await logOf(t, w.ownerToken, b.id);
    expect(log).toMatch(
      /^> Task :app:compile\nhalf a li\nhangar: runner "runner-[^"]+" stopped answering \(no heartbeat; its lease lapsed at \S+Z\): the build failed with runner_lost\.\n$/,
    );
    const all = await buildsOf(t, w.ownerToken);
    expect(all).toHaveLength(1);
    // A second sweep changes nothing: one line, one failure.
    await runMaintenance(t.deps);
    expect(await logOf(t, w.ownerToken, b.id)).toBe(log);
  });

  it("queues it again with retry.runner_lost: N (rerun_of set, trigger unchanged), at most N times along the chain", async () => {
    const t = await makeTestApp({ config });
    const w = await buildWorld(t);
    const pipeline = await createPipeline(t, w.ownerToken, w.project.id, { platform: "android", retry: { runner_lost: 2 } } as never, "retried");
    const first = await queueBuild(t, w.ownerToken, w.project.id, pipeline.id, { branch: "main" });
    const original = (await t.call("GET", `/v1/builds/${first.id}`, { token: w.ownerToken })).body;

    const chain: Json[] = [original];
    for (let i = 1; i <= 3; i++) {
      const current = chain[chain.length - 1];
      await loseRunner(t, w.runner, current.id);
      const all = await buildsOf(t, w.ownerToken);
      const next = all.find((b: Json) => b.rerun_of === current.id);
      const log = await logOf(t, w.ownerToken, current.id);
      expect(log).toContain("stopped answering");
      if (i <= 2) {
        expect(log).toContain(`queued again automatically (retry.runner_lost: retry ${i} of 2)`);
        expect(next, `retry ${i}`).toBeDefined();
        expect(next).toMatchObject({
          status: "queued",
          pipeline_id: pipeline.id,
          commit_sha: original.commit_sha,
          branch: "main",
          trigger_type: original.trigger_type,
          trigger_actor: original.trigger_actor,
          rerun_of: current.id,
          build_number: original.build_number + i,
        });
        chain.push(next);
      } else {
        expect(log).toContain("not queued again: retry.runner_lost allows 2 automatic retries and they are used");
        expect(next).toBeUndefined();
      }
    }
    expect(await buildsOf(t, w.ownerToken)).toHaveLength(3);
  });

  it("a manual rerun starts a new chain; two sweeps racing queue one retry", async () => {
    const t = await makeTestApp({ config });
    const w = await buildWorld(t);
    const pipeline = await createPipeline(t, w.ownerToken, w.project.id, { platform: "android", retry: { runner_lost: 1 } } as never, "once");
    const b = await queueBuild(t, w.ownerToken, w.project.id, pipeline.id);
    expect((await claim(t, w.runner))?.build_id).toBe(b.id);
    await reportStatus(t, w.runner, b.id, { status: "running" });
    t.clock.advance(61);
    await Promise.all([sweep(t.deps), sweep(t.deps), sweep(t.deps)]);
    const retries = (await buildsOf(t, w.ownerToken)).filter((x: Json) => x.rerun_of === b.id);
    expect(retries).toHaveLength(1);
    expect((await logOf(t, w.ownerToken, b.id)).match(/stopped answering/g)).toHaveLength(1);

    // The retry is lost too: retry 1 of 1 was used, so nothing more.
    await loseRunner(t, w.runner, retries[0].id);
    expect((await buildsOf(t, w.ownerToken)).filter((x: Json) => x.rerun_of === retries[0].id)).toHaveLength(0);
    // A person's rerun of it is a new chain, which may be retried once again.
    const rerun = await t.call("POST", `/v1/builds/${retries[0].id}/rerun`, { token: w.ownerToken });
    expect(rerun.status).toBe(200);
    await loseRunner(t, w.runner, rerun.body.id);
    expect((await buildsOf(t, w.ownerToken)).filter((x: Json) => x.rerun_of === rerun.body.id)).toHaveLength(1);
  });

  it("a retry goes to another runner that can take it", async () => {
    const t = await makeTestApp({ config });
    const w = await buildWorld(t, { platforms: ["android"] });
    const pipeline = await createPipeline(t, w.ownerToken, w.project.id, { platform: "android", retry: { runner_lost: 1 } } as never, "r");
    const b = await queueBuild(t, w.ownerToken, w.project.id, pipeline.id);
    await loseRunner(t, w.runner, b.id);
    const other = await registerRunner(t, w.ownerToken, { platforms: ["android"] });
    const job = await claim(t, other);
    expect(job.build_id).not.toBe(b.id);
    expect((await t.call("GET", `/v1/builds/${job.build_id}`, { token: w.ownerToken })).body.rerun_of).toBe(b.id);
  });
});

describe("retry in pipeline configs", () => {
  it("accepts runner_lost 0 to 3 and refuses anything else with 400 invalid_input, stored and in the pipeline file", async () => {
    const t = await makeTestApp({ config });
    const w = await buildWorld(t);
    for (const n of [0, 3]) {
      const ok = await t.call("POST", `/v1/projects/${w.project.id}/pipelines`, {
        token: w.ownerToken,
        body: { name: `ok-${n}`, config: { platform: "any", steps: ["true"], retry: { runner_lost: n } } },
      });
      expect(ok.status, ok.text).toBe(200);
      expect(ok.body.config.retry).toEqual({ runner_lost: n });
    }
    for (const retry of [{ runner_lost: 4 }, { runner_lost: -1 }, { runner_lost: 1.5 }, { runner_lost: "2" }, { runner_lost: 1, timeout: 2 }, 2]) {
      const bad = await t.call("POST", `/v1/projects/${w.project.id}/pipelines`, {
        token: w.ownerToken,
        body: { name: "bad", config: { platform: "any", steps: ["true"], retry } },
      });
      expect([bad.status, bad.body.code], JSON.stringify(retry)).toEqual([400, "invalid_input"]);
      const patched = await t.call("PATCH", `/v1/projects/${w.project.id}/pipelines/${w.pipeline.id}`, {
        token: w.ownerToken,
        body: { config: { platform: "any", steps: ["true"], retry } },
      });
      expect([patched.status, patched.body.code], JSON.stringify(retry)).toEqual([400, "invalid_input"]);
    }
    const file = await t.call("POST", `/v1/projects/${w.project.id}/pipeline-config/validate`, {
      token: w.ownerToken,
      body: { content: "pipelines:\n  build:\n    platform: android\n    steps: [./gradlew build]\n    retry:\n      runner_lost: 5\n" },
    });
    expect(file.status).toBe(200);
    expect(file.body.ok).toBe(false);
    expect(file.body.issues).toEqual([expect.objectContaining({ path: "pipelines.build.retry.runner_lost", line: 6 })]);
    const good = await t.call("POST", `/v1/projects/${w.project.id}/pipeline-config/validate`, {
      token: w.ownerToken,
      body: { content: "pipelines:\n  build:\n    platform: android\n    steps: [./gradlew build]\n    retry: {runner_lost: 2}\n" },
    });
    expect(good.body).toEqual({ ok: true, issues: [], pipelines: ["build"] });
  });
});
