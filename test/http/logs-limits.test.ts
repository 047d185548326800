import { describe, expect, it } from "vitest";
import { runMaintenance } from "../../src/domain/setup/maintenance.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { appendLog, buildWorld, claim, queueBuild, reportStatus } from "../helpers/builds.ts";

const config = { HANGAR_MAX_LOG_BYTES: "2048", HANGAR_LOG_GRACE_S: "60", HANGAR_JOB_LEASE_S: "60", HANGAR_BUILD_TIMEOUT_S: "300" };

async function runningBuild(t: TestApp, steps?: unknown[]) {
  const w = await buildWorld(t);
  const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
  await claim(t, w.runner);
  const running = await reportStatus(t, w.runner, b.id, { status: "running", ...(steps ? { step_results: steps } : {}) });
  expect(running.status).toBe(200);
  const read = async () => (await t.call("GET", `/v1/builds/${b.id}/logs?offset=0`, { token: w.ownerToken })).text;
  const build = async () => (await t.call("GET", `/v1/builds/${b.id}`, { token: w.ownerToken })).body;
  return { w, b, read, build };
}

describe("HANGAR_MAX_LOG_BYTES (docs/api.md §6)", () => {
  it("ends the log with one truncation line and keeps accepting (and dropping) chunks, offsets still counting", async () => {
    const t = await makeTestApp({ config });
    const { w, b, read } = await runningBuild(t);
    const line = "x".repeat(99) + "\n";
    let offset = 0;
    for (let i = 0; i < 30; i++) {
      const res = await appendLog(t, w.runner, b.id, offset, line);
      expect(res.status).toBe(200);
      offset += line.length;
      expect(res.body.log_bytes).toBe(offset);
    }
    const log = await read();
    expect(log.startsWith(line.repeat(20))).toBe(true);
    expect(log.endsWith("\nhangar: log truncated at 2048 bytes\n")).toBe(true);
    expect(log.match(/hangar: log truncated/g)).toHaveLength(1);
    expect(log.length).toBe(2048 + "\nhangar: log truncated at 2048 bytes\n".length);
    // A gap is still a gap, a repeat still a repeat: the raw offsets are intact past the cap.
    const gap = await appendLog(t, w.runner, b.id, offset + 5, "late");
    expect([gap.status, gap.body.code]).toEqual([409, "log_offset_mismatch"]);
    const repeat = await appendLog(t, w.runner, b.id, offset - line.length, line);
    expect([repeat.status, repeat.body.log_bytes]).toEqual([200, offset]);
    expect(await read()).toBe(log);
  });
});

describe("HANGAR_LOG_GRACE_S", () => {
  it("takes chunks shortly after the build ended and refuses them later (409 invalid_transition)", async () => {
    const t = await makeTestApp({ config });
    const { w, b, read } = await runningBuild(t);
    expect((await reportStatus(t, w.runner, b.id, { status: "succeeded" })).status).toBe(200);
    t.clock.advance(60);
    const late = await appendLog(t, w.runner, b.id, 0, "flushed after the status\n");
    expect(late.status).toBe(200);
    t.clock.advance(1);
    const tooLate = await appendLog(t, w.runner, b.id, late.body.log_bytes, "much later\n");
    expect([tooLate.status, tooLate.body.code]).toEqual([409, "invalid_transition"]);
    expect(await read()).toBe("flushed after the status\n");
  });
});

describe("steps of a build that ends without its runner", () => {
  const steps = [
    { name: "checkout", status: "succeeded", exit_code: 0, started_at: 1, finished_at: 2 },
    { name: "build", status: "running", started_at: 2 },
    { name: "test", status: "pending" },
  ];

  it("a canceled build leaves no step running: the running one failed at the cancel, the pending ones skipped", async () => {
    const t = await makeTestApp({ config });
    const { w, b, build } = await runningBuild(t, steps);
    t.clock.advance(5);
    expect((await t.call("POST", `/v1/builds/${b.id}/cancel`, { token: w.ownerToken })).status).toBe(200);
    expect((await build()).step_results).toEqual([
      steps[0],
      { name: "build", status: "failed", started_at: 2, finished_at: t.clock.now() },
      { name: "test", status: "skipped" },
    ]);
  });

  it("so does a timed-out and a lost build (sweeper), and a runner's own canceled report", async () => {
    for (const how of ["timeout", "lost", "runner", "removed"] as const) {
      const t = await makeTestApp({ config });
      const { w, b, build } = await runningBuild(t, steps);
      if (how === "timeout") {
        for (let i = 0; i < 6; i++) {
          t.clock.advance(55);
          await t.call("POST", `/v1/runners/${w.runner.id}/heartbeat`, { token: w.runner.token, body: {} });
        }
        await runMaintenance(t.deps);
      } else if (how === "lost") {
        t.clock.advance(61);
        await runMaintenance(t.deps);
      } else if (how === "removed") {
        expect((await t.call("DELETE", `/v1/runners/${w.runner.id}`, { token: w.ownerToken })).status).toBeLessThan(300);
      } else {
        expect((await reportStatus(t, w.runner, b.id, { status: "canceled", step_results: steps })).status).toBe(200);
      }
      const ended = await build();
      expect([how, ended.status]).toEqual([how, how === "timeout" ? "timed_out" : how === "lost" || how === "removed" ? "failed" : "canceled"]);
      expect(ended.step_results.map((s: { status: string }) => s.status)).toEqual(["succeeded", "failed", "skipped"]);
      expect(ended.step_results[1].finished_at).toBe(t.clock.now());
    }
  });
});
