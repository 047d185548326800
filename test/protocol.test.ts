// The wire protocol (src/protocol/runner.ts) against the daemon that speaks it: a real claim answer has exactly the
// protocol's fields, and a status report sent by the runner's own client and reporter is accepted and kept. A field
// added on one side only fails here (and the OpenAPI contract test checks the daemon's answers against the
// schemas the protocol builds).
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import * as z from "zod/mini";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RunnerClient } from "../src/cli/runner/client.ts";
import type { Logger } from "../src/cli/runner/log.ts";
import { StatusReporter } from "../src/cli/runner/reporter.ts";
import { claimedJobSchema, heartbeatAnswerSchema, jobStateSchema, type ClaimedJob, type StatusReport } from "../src/protocol/runner.ts";
import { createNodeListener } from "../src/runtime/node-listener.ts";
import { makeTestApp, type TestApp } from "./helpers/app.ts";
import { buildWorld, claim, queueBuild } from "./helpers/builds.ts";

const strictClaim = z.strictObject(claimedJobSchema.shape);
const quiet: Logger = { info: () => undefined, warn: () => undefined, error: () => undefined };

let t: TestApp;
let server: Server;
let baseUrl: string;
let world: Awaited<ReturnType<typeof buildWorld>>;

beforeAll(async () => {
  t = await makeTestApp();
  world = await buildWorld(t);
  server = createServer(createNodeListener(t.deps));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  t?.close();
});

describe("the runner wire protocol", () => {
  it("a real claim answer has exactly the protocol's fields; the heartbeat and job state answers parse too", async () => {
    const { ownerToken, project, pipeline, runner } = world;
    await queueBuild(t, ownerToken, project.id, pipeline.id);
    const job = await claim(t, runner);
    const parsed = strictClaim.safeParse(job);
    expect(parsed.success, JSON.stringify(parsed.error?.issues)).toBe(true);
    expect(Object.keys(job).sort()).toEqual(Object.keys(claimedJobSchema.shape).sort());

    const beat = await t.call("POST", `/v1/runners/${runner.id}/heartbeat`, { token: runner.token, body: {} });
    expect(z.strictObject(heartbeatAnswerSchema.shape).safeParse(beat.body).success).toBe(true);
    const state = await t.call("GET", `/v1/runners/${runner.id}/jobs/${job.build_id}`, { token: job.job_token });
    expect(z.strictObject(jobStateSchema.shape).safeParse(state.body).success).toBe(true);
  });

  it("the strict claim schema refuses a field it lacks and a field missing (the check above is not vacuous)", () => {
    const job: ClaimedJob = {
      build_id: "b",
      project_id: "p",
      pipeline_id: "pl",
      pipeline_name: "build",
      build_number: 1,
      config_snapshot: {},
      commit_sha: "0".repeat(40),
      branch: "main",
      repo_url: "https://example.com/r.git",
      trigger_event: null,
      lease_expires_at: 1,
      job_token: "hgj_x",
      trust: "open",
      outbound_allow: [],
    };
    expect(strictClaim.safeParse(job).success).toBe(true);
    expect(strictClaim.safeParse({ ...job, new_field: 1 }).success).toBe(false);
    const { trigger_event: _dropped, ...missing } = job;
    expect(strictClaim.safeParse(missing).success).toBe(false);
  });

  it("a full status report sent through the runner's client and reporter is accepted and kept by the daemon", async () => {
    const { ownerToken, project, pipeline, runner } = world;
    await queueBuild(t, ownerToken, project.id, pipeline.id);
    const job = (await claim(t, runner)) as ClaimedJob;
    const client = new RunnerClient(baseUrl, runner.token, runner.id, quiet).forJob(job.job_token);
    const now = Math.floor(Date.now() / 1000);
    const report: StatusReport = {
      status: "succeeded",
      exit_code: 0,
      step_results: [{ name: "build", status: "succeeded", exit_code: 0, started_at: now - 5, finished_at: now }],
      release_notes: "Fixed <b>everything</b>",
      commits: [{ sha: "0123456789abcdef0123456789abcdef01234567", subject: "fix", author: "Ada" }],
      caches: [
        {
          key: "deps-linux-abc",
          result: "partial",
          restored_key: "deps-linux-",
          source: "shared",
          size_bytes: 1024,
          restore_ms: 12,
          save_ms: 30,
          saved: true,
        },
      ],
    };
    const running = new StatusReporter(client, job.build_id, quiet, () => undefined);
    expect(await running.final({ status: "running", step_results: [{ name: "build", status: "running", started_at: now - 5 }] })).toBe("delivered");
    let refused = "";
    const reporter = new StatusReporter(client, job.build_id, quiet, (code) => (refused = code));
    expect(await reporter.final(report)).toBe("delivered");
    expect(refused).toBe("");

    const build = (await t.call("GET", `/v1/builds/${job.build_id}`, { token: ownerToken })).body;
    expect(build.status).toBe("succeeded");
    expect(build.step_results).toEqual(report.step_results);
    expect(build.caches).toEqual(report.caches);
  });
});
