// Job tokens (docs/runner-isolation.md): the claim hands out an hgj_ token that authenticates that job's calls
// and nothing else, until HANGAR_LOG_GRACE_S after the job is final.
import { describe, expect, it } from "vitest";
import { sweep } from "../../src/domain/builds/sweeper.ts";
import { makeTestApp } from "../helpers/app.ts";
import { buildWorld, claim, queueBuild, registerRunner } from "../helpers/builds.ts";

describe("job tokens", () => {
  it("authenticate every call of their own job: status, logs, checkout, job read, artifacts", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    await t.call("PUT", `/v1/projects/${w.project.id}/source-credentials`, { token: w.ownerToken, body: { token: "ghp_src_token" } });
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    const job = await claim(t, w.runner);
    expect(job.job_token).toMatch(/^hgj_[A-Za-z0-9_-]{43}$/);
    const token = job.job_token as string;
    const path = `/v1/runners/${w.runner.id}/jobs/${b.id}`;
    expect((await t.call("GET", path, { token })).body).toMatchObject({ build_id: b.id, status: "assigned" });
    expect((await t.call("POST", `${path}/status`, { token, body: { status: "running" } })).status).toBe(200);
    const log = await t.call("POST", `${path}/logs?offset=0`, { token, rawBody: "hello\n", headers: { "content-type": "text/plain" } });
    expect([log.status, log.body]).toEqual([200, { log_bytes: 6 }]);
    const auth = await t.call("GET", `${path}/checkout-auth`, { token });
    expect([auth.status, auth.body.password]).toEqual([200, "ghp_src_token"]);
    const art = await t.call("POST", `${path}/artifacts`, { token, body: { filename: "a.txt", size_bytes: 1, content_type: "text/plain" } });
    expect(art.status).toBe(200);
    // The runner token still works on the same calls.
    expect((await t.call("GET", path, { token: w.runner.token })).status).toBe(200);
    expect((await t.call("POST", `${path}/status`, { token, body: { status: "succeeded" } })).status).toBe(200);
  });

  it("answer 403 runner_mismatch on another job's path, of the same runner or another one", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const other = await registerRunner(t, w.ownerToken);
    const first = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    const second = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    const third = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    const a = await claim(t, w.runner);
    const b = await claim(t, w.runner);
    const c = await claim(t, other);
    expect([a.build_id, b.build_id, c.build_id]).toEqual([first.id, second.id, third.id]);
    for (const [rid, jid] of [
      [w.runner.id, second.id],
      [other.id, third.id],
      [other.id, first.id],
    ]) {
      for (const suffix of ["", "/checkout-auth", "/secrets", "/android-signing"]) {
        const res = await t.call("GET", `/v1/runners/${rid}/jobs/${jid}${suffix}`, { token: a.job_token });
        expect([jid, suffix, res.status, res.body.code]).toEqual([jid, suffix, 403, "runner_mismatch"]);
      }
      const report = await t.call("POST", `/v1/runners/${rid}/jobs/${jid}/status`, { token: a.job_token, body: { status: "running" } });
      expect([report.status, report.body.code]).toEqual([403, "runner_mismatch"]);
    }
    // The other jobs were not touched.
    expect((await t.call("GET", `/v1/builds/${second.id}`, { token: w.ownerToken })).body.status).toBe("assigned");
  });

  it("authenticate nothing but job calls: claim, heartbeat and PATCH refuse them (401 invalid_runner_token)", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    const job = await claim(t, w.runner);
    const token = job.job_token as string;
    const calls = [
      await t.call("POST", `/v1/runners/${w.runner.id}/claim`, { token }),
      await t.call("POST", `/v1/runners/${w.runner.id}/heartbeat`, { token, body: {} }),
      await t.call("PATCH", `/v1/runners/${w.runner.id}`, { token, body: { name: "taken" } }),
    ];
    expect(calls.map((r) => [r.status, r.body.code])).toEqual([
      [401, "invalid_runner_token"],
      [401, "invalid_runner_token"],
      [401, "invalid_runner_token"],
    ]);
    const forged = await t.call("GET", `/v1/runners/${w.runner.id}/jobs/${job.build_id}`, { token: `hgj_${"A".repeat(43)}` });
    expect([forged.status, forged.body.code]).toEqual([401, "invalid_job_token"]);
  });

  it("die HANGAR_LOG_GRACE_S after the job is final (401 invalid_job_token); late log chunks still land within it", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    const token = (await claim(t, w.runner)).job_token as string;
    const path = `/v1/runners/${w.runner.id}/jobs/${b.id}`;
    await t.call("POST", `${path}/status`, { token, body: { status: "running" } });
    expect((await t.call("POST", `${path}/status`, { token, body: { status: "failed", exit_code: 2 } })).status).toBe(200);
    t.clock.advance(t.deps.config.logGraceS);
    const late = await t.call("POST", `${path}/logs?offset=0`, { token, rawBody: "tail\n", headers: { "content-type": "text/plain" } });
    expect(late.status).toBe(200);
    t.clock.advance(1);
    for (const [method, suffix] of [
      ["GET", ""],
      ["POST", "/logs?offset=5"],
      ["GET", "/checkout-auth"],
    ] as const) {
      const res = await t.call(method, `${path}${suffix}`, {
        token,
        rawBody: method === "POST" ? "x\n" : undefined,
        headers: { "content-type": "text/plain" },
      });
      expect([suffix, res.status, res.body.code]).toEqual([suffix, 401, "invalid_job_token"]);
    }
    // The runner token still reads its job.
    expect((await t.call("GET", path, { token: w.runner.token })).status).toBe(200);
  });

  it("die when the build goes back to the queue; the next claim hands out a new one", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    const first = await claim(t, w.runner);
    // The lease lapses: the sweeper returns the assigned build to the queue.
    t.clock.advance(t.deps.config.jobLeaseS + 1);
    await sweep(t.deps);
    expect((await t.call("GET", `/v1/builds/${b.id}`, { token: w.ownerToken })).body.status).toBe("queued");
    const gone = await t.call("GET", `/v1/runners/${w.runner.id}/jobs/${b.id}`, { token: first.job_token });
    expect([gone.status, gone.body.code]).toEqual([401, "invalid_job_token"]);
    const second = await claim(t, w.runner);
    expect(second.build_id).toBe(b.id);
    expect(second.job_token).not.toBe(first.job_token);
    const stale = await t.call("GET", `/v1/runners/${w.runner.id}/jobs/${b.id}`, { token: first.job_token });
    expect([stale.status, stale.body.code]).toEqual([401, "invalid_job_token"]);
    expect((await t.call("GET", `/v1/runners/${w.runner.id}/jobs/${b.id}`, { token: second.job_token })).status).toBe(200);
  });
});
