// The wire protocol (src/protocol/runner.ts) against the daemon that speaks it: a real claim answer has exactly the
// protocol's fields, and a status report sent by the runner's own client and reporter is accepted and kept. A field
// added on one side only fails here (and the OpenAPI contract test checks the daemon's answers against the
// schemas the protocol builds).
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as z from "zod/mini";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRemoteCache } from "../src/cli/runner/cache-remote.ts";
import { RunnerClient } from "../src/cli/runner/client.ts";
import type { Logger } from "../src/cli/runner/log.ts";
import { StatusReporter } from "../src/cli/runner/reporter.ts";
import { uploadArtifacts } from "../src/cli/runner/upload.ts";
import { ARTIFACT_KINDS as STORED_ARTIFACT_KINDS } from "../src/db/schema/constants.ts";
import {
  ARTIFACT_KINDS,
  cacheLookupQuerySchema,
  cacheUploadBodySchema,
  claimedJobSchema,
  createArtifactBodySchema,
  heartbeatAnswerSchema,
  jobStateSchema,
  type ClaimedJob,
  type StatusReport,
} from "../src/protocol/runner.ts";
import { createNodeListener } from "../src/runtime/node-listener.ts";
import { makeTestApp, type TestApp } from "./helpers/app.ts";
import { useS3Storage } from "./helpers/artifact-world.ts";
import { buildWorld, claim, queueBuild } from "./helpers/builds.ts";
import { startTestS3, type TestS3 } from "./helpers/s3rver.ts";

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

  it("the daemon's artifact and cache routes document exactly the protocol's request fields", async () => {
    const doc = (await t.call("GET", "/v1/openapi.json")).body;
    const jobs = "/v1/runners/{runner_id}/jobs/{job_id}";
    const bodyFields = (path: string) => Object.keys(doc.paths[path].post.requestBody.content["application/json"].schema.properties).sort();
    expect(bodyFields(`${jobs}/artifacts`)).toEqual(Object.keys(createArtifactBodySchema.shape).sort());
    expect(bodyFields(`${jobs}/caches`)).toEqual(Object.keys(cacheUploadBodySchema.shape).sort());
    const queryFields = doc.paths[`${jobs}/caches`].get.parameters
      .filter((p: { in: string }) => p.in === "query")
      .map((p: { name: string }) => p.name);
    expect(queryFields.sort()).toEqual(Object.keys(cacheLookupQuerySchema.shape).sort());
    // The kinds a runner declares are the kinds the database keeps.
    expect([...ARTIFACT_KINDS]).toEqual([...STORED_ARTIFACT_KINDS]);
  });

  it("a file and a test report uploaded by the runner's own uploader are declared, stored and listed with their kind", async () => {
    const { ownerToken, project, pipeline, runner } = world;
    await queueBuild(t, ownerToken, project.id, pipeline.id);
    const job = (await claim(t, runner)) as ClaimedJob;
    const client = new RunnerClient(baseUrl, runner.token, runner.id, quiet).forJob(job.job_token);
    const dir = mkdtempSync(join(tmpdir(), "hangar-protocol-"));
    try {
      writeFileSync(join(dir, "app.apk"), "not really an apk");
      writeFileSync(join(dir, "TEST-unit.xml"), '<testsuite name="unit" tests="1"><testcase name="works" classname="A"/></testsuite>');
      const said: string[] = [];
      const files = await uploadArtifacts(client, job.build_id, dir, ["app.apk"], (l) => said.push(l), { attempts: 1 });
      const reports = await uploadArtifacts(client, job.build_id, dir, ["TEST-unit.xml"], (l) => said.push(l), { attempts: 1 }, "junit");
      expect([files.failed, reports.failed], said.join("\n")).toEqual([[], []]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const listed = (await t.call("GET", `/v1/builds/${job.build_id}/artifacts`, { token: ownerToken })).body;
    const byName = Object.fromEntries((listed as { filename: string }[]).map((a: { filename: string }) => [a.filename, a]));
    expect(byName["app.apk"]).toMatchObject({ kind: "file", size_bytes: 17, status: "available" });
    expect(byName["TEST-unit.xml"]).toMatchObject({ kind: "junit", status: "available" });
  });
});

describe("the shared cache's request bodies, from the runner's own client (s3rver behind SigV4)", () => {
  let s3: TestS3;
  beforeAll(async () => {
    s3 = await startTestS3();
  });
  afterAll(async () => s3?.close());

  it("a cache entry saved by the runner's remote cache is accepted, uploaded and found again by key and restore key", async () => {
    const s3App = await makeTestApp();
    // s3rver checks presigned expiry against the real clock.
    s3App.clock.set(Math.floor(Date.now() / 1000));
    const s3World = await buildWorld(s3App);
    await useS3Storage(s3App, s3.endpoint, s3.bucket);
    const s3Server = createServer(createNodeListener(s3App.deps));
    await new Promise<void>((resolve) => s3Server.listen(0, "127.0.0.1", resolve));
    const dir = mkdtempSync(join(tmpdir(), "hangar-protocol-cache-"));
    try {
      const url = `http://127.0.0.1:${(s3Server.address() as AddressInfo).port}`;
      await queueBuild(s3App, s3World.ownerToken, s3World.project.id, s3World.pipeline.id);
      const job = (await claim(s3App, s3World.runner)) as ClaimedJob;
      const said: string[] = [];
      const remote = createRemoteCache(new RunnerClient(url, s3World.runner.token, s3World.runner.id, quiet), job, { say: (l) => said.push(l) });
      const archive = join(dir, "deps.tar");
      const bytes = Buffer.from("an archive of dependencies");
      writeFileSync(archive, bytes);
      // Upper-case hex on the wire: the protocol's body accepts it and the daemon keeps it lower-case.
      const sha256 = createHash("sha256").update(bytes).digest("hex");
      await remote.upload("deps-linux-1", archive, bytes.length, sha256.toUpperCase());
      expect(said).toEqual([]);
      expect(await remote.find("deps-linux-1", [])).toMatchObject({ key: "deps-linux-1", size_bytes: bytes.length, sha256 });
      expect(await remote.find("deps-linux-2", ["deps-mac-", "deps-linux-"])).toMatchObject({ key: "deps-linux-1" });
    } finally {
      await new Promise((resolve) => s3Server.close(resolve));
      rmSync(dir, { recursive: true, force: true });
      s3App.close();
    }
  });
});
