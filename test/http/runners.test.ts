import { describe, expect, it } from "vitest";
import { makeTestApp } from "../helpers/app.ts";
import { buildWorld, claim, queueBuild, reportStatus, appendLog } from "../helpers/builds.ts";

describe("smoke", () => {
  it("queues, claims, reports and logs", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    expect(b.build_number).toBe(1);
    const job = await claim(t, w.runner);
    expect(job.build_id).toBe(b.id);
    expect((await reportStatus(t, w.runner, b.id, { status: "running" })).status).toBe(200);
    expect((await appendLog(t, w.runner, b.id, 0, "hello\n")).body).toEqual({ log_bytes: 6 });
    expect((await reportStatus(t, w.runner, b.id, { status: "succeeded" })).body.status).toBe("succeeded");
    const log = await t.call("GET", `/v1/builds/${b.id}/logs`, { token: w.ownerToken });
    expect(log.text).toBe("hello\n");
    expect(await claim(t, w.runner)).toBeNull();
  });
});
