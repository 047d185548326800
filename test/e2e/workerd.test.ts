// The Workers entry in REAL workerd (docs/decisions.md, docs/api.md §8): src/runtime/worker.ts bundled the way wrangler does
// (esbuild, workerd conditions, no Node compatibility flag) and run by miniflare's workerd against a real libSQL
// server (sqld) and S3 storage (s3rver behind the SigV4 check). A Node daemon on the same sqld takes the instance
// through setup and signs the owner in; from then on the Worker alone serves the reference runner's whole flow,
// the burst, and the cron trigger's maintenance and outbox pass.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bytesToBase64Url, randomBytes } from "../../src/domain/common/crypto.ts";
import { claim, daemonCaller, makeGitRepo, registerRunner, reportStatus, type Caller, type GitRepo } from "../helpers/builds.ts";
import { makeDataDir, runCli, startDaemon, http, type Daemon } from "../helpers/daemon.ts";
import { startReceiver, type Receiver } from "../helpers/receiver.ts";
import { S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, startTestS3, type TestS3 } from "../helpers/s3rver.ts";
import { startSqld, type SqldServer } from "../helpers/sqld.ts";
import { bundleWorker, wranglerSettings } from "../helpers/workerd.ts";
import { removeDir, startRunner, stopRunner, waitFor, type RunnerProcess } from "./runner-harness.ts";

let sqld: SqldServer;
let s3: TestS3;
let receiver: Receiver;
let repo: GitRepo;
let scratch: string;
let dataDir: string;
let daemon: Daemon | undefined;
let mf: Miniflare | undefined;
let workerUrl: string;
let worker: Caller;
let ownerToken: string;
let project: { id: string };
let pipeline: { id: string };
/** workerd's stdout and stderr (the Worker's console), for the failure messages and the no-Node-API check. */
let runtimeOutput = "";
const runners: RunnerProcess[] = [];

beforeAll(async () => {
  [sqld, s3, receiver] = await Promise.all([startSqld(), startTestS3(), startReceiver()]);
  repo = makeGitRepo({ "README.md": "hello from the repository\n" });
  scratch = mkdtempSync(join(tmpdir(), "hangar-workerd-"));

  // One master key for the daemon (its master.key file) and the Worker (the HANGAR_MASTER_KEY secret): S3
  // credentials sealed by one are opened by the other (docs/api.md §8).
  const key = bytesToBase64Url(randomBytes(32));
  dataDir = makeDataDir();
  writeFileSync(join(dataDir, "master.key"), `${key}\n`, { mode: 0o600 });
  const env = { HANGAR_DATA_DIR: dataDir, HANGAR_DATABASE_URL: sqld.url };
  // The daemon applies the migrations to the server on start (a Worker cannot read drizzle/).
  const [started, script] = await Promise.all([startDaemon(env), bundleWorker()]);
  daemon = started;

  mf = new Miniflare({
    modules: true,
    script,
    ...wranglerSettings(),
    host: "127.0.0.1",
    port: 0,
    bindings: {
      HANGAR_DATABASE_URL: sqld.url,
      HANGAR_MASTER_KEY: key,
      // s3rver and the notification receiver listen on loopback; the outbound guard refuses that by default.
      HANGAR_OUTBOUND_ALLOW: "127.0.0.1/32",
      HANGAR_LOG_REQUESTS: "0",
      // Several runners take this file's builds one after another: no build is held for the last one's warm workspace.
      HANGAR_AFFINITY_WAIT_MS: "0",
    },
    // Serves /cdn-cgi/handler/scheduled, which fires the cron trigger's scheduled() as Cloudflare would.
    unsafeTriggerHandlers: true,
    handleRuntimeStdio(stdout: Readable, stderr: Readable) {
      stdout.on("data", (d: Buffer) => (runtimeOutput += d.toString()));
      stderr.on("data", (d: Buffer) => (runtimeOutput += d.toString()));
    },
  });
  try {
    workerUrl = String(await mf.ready).replace(/\/$/, "");
  } catch (err) {
    throw new Error(
      `workerd did not start: ${String(err)}\n${runtimeOutput}\nThe binary comes from the dev dependency miniflare through ` +
        "its optional platform package @cloudflare/workerd-linux-64 (no install script needed): run `npm ci`.",
    );
  }
  worker = daemonCaller(workerUrl);
}, 120_000);

afterAll(async () => {
  for (const r of runners.splice(0)) await stopRunner(r);
  await mf?.dispose();
  await daemon?.stop("SIGKILL");
  await Promise.all([sqld?.stop(), s3?.close(), receiver?.close()]);
  repo?.remove();
  if (scratch) removeDir(scratch);
  if (dataDir) removeDir(dataDir);
});

describe("the Workers entry in real workerd against sqld and S3", () => {
  it("answers setup status from the shared database, before and after a Node daemon sets the instance up", async () => {
    const before = await worker.call("GET", "/v1/public/setup-status");
    expect(before.status).toBe(200);
    expect(before.body.state).toBe("uninitialized");
    const fromDaemon = await http(daemon!.url, "GET", "/v1/public/setup-status");
    expect(before.body.instance_id).toBe(fromDaemon.body.instance_id);

    // Setup through the Node daemon: local setup needs a loopback peer, which a Worker never has.
    const made = await runCli(["setup-token"], { HANGAR_DATA_DIR: dataDir, HANGAR_DATABASE_URL: sqld.url });
    expect(made.code, made.stderr).toBe(0);
    const verified = await http(daemon!.url, "POST", "/v1/setup/bootstrap-token/verify", { body: { token: made.stdout.trim() } });
    const setup = verified.body.session_token as string;
    expect((await http(daemon!.url, "POST", "/v1/setup/local-owner/create", { token: setup, body: { email: "owner@example.com" } })).status).toBe(
      200,
    );
    expect((await http(daemon!.url, "POST", "/v1/setup/complete", { token: setup })).status).toBe(200);

    const after = await worker.call("GET", "/v1/public/setup-status");
    expect(after.status).toBe(200);
    expect(after.body).toMatchObject({ instance_id: before.body.instance_id, state: "ready", is_configured: true });
  }, 60_000);

  it("accepts a session made by the Node daemon, and refuses local login itself (no loopback peer on Workers)", async () => {
    const login = await http(daemon!.url, "POST", "/v1/auth/local/login", { body: {} });
    expect(login.status).toBe(200);
    ownerToken = login.body.session_token;

    const me = await worker.call("GET", "/v1/users/me", { token: ownerToken });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ email: "owner@example.com", role: "owner" });

    const refused = await worker.call("POST", "/v1/auth/local/login", { body: {} });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe("local_login_loopback_required");

    // From here on the Worker alone serves the instance: no daemon sweeps, sends or answers for it.
    await daemon!.stop("SIGTERM");
    daemon = undefined;
  }, 60_000);

  it("runs a build triggered through the Worker on the real reference runner, the artifact stored in S3", async () => {
    const settings = await worker.call("PUT", "/v1/settings/artifact-storage", {
      token: ownerToken,
      body: {
        provider: "s3",
        s3: {
          endpoint: s3.endpoint,
          region: "us-east-1",
          bucket: s3.bucket,
          prefix: "ci/",
          access_key_id: S3_ACCESS_KEY_ID,
          secret_access_key: S3_SECRET_ACCESS_KEY,
          force_path_style: true,
        },
      },
    });
    expect(settings.status).toBe(200);

    const keep = mkdtempSync(join(scratch, "keep-"));
    const createdProject = await worker.call("POST", "/v1/projects", {
      token: ownerToken,
      body: { name: "workerd-app", repo_url: repo.url, config_path: null },
    });
    expect(createdProject.status).toBe(200);
    project = createdProject.body;
    const createdPipeline = await worker.call("POST", `/v1/projects/${project.id}/pipelines`, {
      token: ownerToken,
      body: {
        name: "build",
        config: {
          platform: "any",
          steps: [
            // Output on both sides of a pause: the runner sends the log in several appends (the second append
            // is where the Buffer blob column failed on workerd).
            { name: "hello", run: 'echo "first line"; cat README.md; sleep 1; echo "second line"; sleep 0.5; echo "third line"' },
            { name: "package", run: 'mkdir -p out && head -c 200000 /dev/urandom > out/app-release.apk && cp out/app-release.apk "$KEEP/"' },
          ],
          env: { KEEP: keep },
          artifacts: ["out/*.apk"],
        },
      },
    });
    expect(createdPipeline.status).toBe(200);
    pipeline = createdPipeline.body;
    const notification = await worker.call("POST", `/v1/projects/${project.id}/notifications`, {
      token: ownerToken,
      body: { kind: "webhook", url: `${receiver.url}/hangar`, on: ["succeeded"] },
    });
    expect(notification.status).toBe(200);

    const runner = await registerRunner(worker, ownerToken, { platforms: ["android"] });
    // Workers has no git binary: the trigger names its commit.
    const queued = await worker.call("POST", `/v1/projects/${project.id}/builds`, {
      token: ownerToken,
      body: { pipeline_id: pipeline.id, branch: "main", commit_sha: repo.shas.main },
    });
    expect(queued.status).toBe(200);
    const r = startRunner(workerUrl, runner, ["--once"], join(scratch, "work"));
    runners.push(r);
    const code = await r.exited;
    expect(code, `runner output:\n${r.stdout()}\n${r.stderr()}\nworkerd output:\n${runtimeOutput}`).toBe(0);

    const done = await worker.call("GET", `/v1/builds/${queued.body.id}`, { token: ownerToken });
    expect(done.body.status).toBe("succeeded");
    expect(done.body.runner_id).toBe(runner.id);
    expect(done.body.step_results.map((s: { name: string; status: string }) => [s.name, s.status])).toEqual([
      ["hello", "succeeded"],
      ["package", "succeeded"],
    ]);

    const log = await worker.call("GET", `/v1/builds/${queued.body.id}/logs`, { token: ownerToken });
    expect(log.status).toBe(200);
    for (const line of ["first line", "hello from the repository", "second line", "third line"]) expect(log.text).toContain(line);
    // Reading from an offset inside the log goes through the straddling chunk's bytes.
    const offset = log.text.indexOf("second line");
    const tail = await worker.call("GET", `/v1/builds/${queued.body.id}/logs?offset=${Buffer.byteLength(log.text.slice(0, offset))}`, {
      token: ownerToken,
    });
    expect(tail.text.startsWith("second line")).toBe(true);

    const artifacts = await worker.call("GET", `/v1/builds/${queued.body.id}/artifacts`, { token: ownerToken });
    expect(artifacts.body.map((a: { filename: string }) => a.filename)).toEqual(["app-release.apk"]);
    const apk = artifacts.body[0];
    expect(apk.size_bytes).toBe(200_000);
    // The runner uploaded to S3 itself, through a URL the Worker presigned; the Worker checked it with a signed HEAD.
    const stored = s3.requests.filter((q) => q.path === `/${s3.bucket}/ci/${queued.body.id}/${apk.id}`);
    expect(stored.some((q) => q.method === "PUT" && q.verified)).toBe(true);
    expect(stored.some((q) => q.method === "HEAD" && q.verified)).toBe(true);
    const link = await worker.call("POST", `/v1/artifacts/${apk.id}/download-link`, { token: ownerToken });
    expect(link.status).toBe(200);
    const download = await fetch(new URL(link.body.url, workerUrl));
    expect(download.status).toBe(200);
    expect(Buffer.from(await download.arrayBuffer()).equals(readFileSync(join(keep, "app-release.apk")))).toBe(true);

    // The cron trigger: maintenance and the outbox pass run in workerd; the notification is sent by it alone.
    expect(receiver.requests).toEqual([]);
    const cron = await fetch(`${workerUrl}/cdn-cgi/handler/scheduled?cron=${encodeURIComponent("* * * * *")}`);
    expect(cron.status, await cron.text()).toBe(200);
    await waitFor("the build notification", () => receiver.requests.length > 0);
    const sent = JSON.parse(receiver.requests[0]!.body);
    expect(sent.type).toBe("build.succeeded");
    expect(sent.data.build.id).toBe(queued.body.id);

    expect(runtimeOutput).not.toMatch(/Buffer is not defined|is not defined|Uncaught/);
  }, 120_000);

  it("stores and reads log bytes exactly when an append splits a UTF-8 character (blobs are bytes on Workers)", async () => {
    const runner = await registerRunner(worker, ownerToken, { platforms: ["android"] });
    const queued = await worker.call("POST", `/v1/projects/${project.id}/builds`, {
      token: ownerToken,
      body: { pipeline_id: pipeline.id, commit_sha: repo.shas.main },
    });
    expect(queued.status).toBe(200);
    expect((await claim(worker, runner))?.build_id).toBe(queued.body.id);
    expect((await reportStatus(worker, runner, queued.body.id, { status: "running" })).status).toBe(200);
    const append = (offset: number, bytes: number[]) =>
      worker.call("POST", `/v1/runners/${runner.id}/jobs/${queued.body.id}/logs?offset=${offset}`, {
        token: runner.token,
        rawBody: new Uint8Array(bytes),
        headers: { "content-type": "text/plain; charset=utf-8" },
      });
    // "hé\n" with the é (C3 A9) cut between two appends, then a byte that is no UTF-8 at all.
    expect((await append(0, [0x68, 0xc3])).body).toEqual({ log_bytes: 2 });
    expect((await append(2, [0xa9, 0x0a])).body).toEqual({ log_bytes: 4 });
    expect((await append(4, [0xff, 0x0a])).body).toEqual({ log_bytes: 6 });
    const read = async (offset: number) => {
      const res = await fetch(`${workerUrl}/v1/builds/${queued.body.id}/logs?offset=${offset}`, {
        headers: { authorization: `Bearer ${ownerToken}` },
      });
      expect(res.status).toBe(200);
      return [...new Uint8Array(await res.arrayBuffer())];
    };
    expect(await read(0)).toEqual([0x68, 0xc3, 0xa9, 0x0a, 0xff, 0x0a]);
    expect(await read(2)).toEqual([0xa9, 0x0a, 0xff, 0x0a]);
    expect((await reportStatus(worker, runner, queued.body.id, { status: "succeeded", exit_code: 0 })).status).toBe(200);
  }, 60_000);

  it("answers every request of bursts of 40, also after 30 requests abandoned mid-flight", async () => {
    // Each request reads the database (session, then its own query); no build or project is needed.
    const paths = ["/v1/users/me", "/v1/builds", "/v1/projects", "/v1/runners"];
    const burst = () =>
      Promise.all(Array.from({ length: 40 }, (_, i) => worker.call("GET", paths[i % paths.length]!, { token: ownerToken }).then((r) => r.status)));
    expect(await burst()).toEqual(Array(40).fill(200));
    // Clients that go away mid-request: with one shared client each of them kept a slot of its limit for good.
    await Promise.allSettled(
      Array.from({ length: 30 }, () =>
        fetch(`${workerUrl}/v1/builds`, { headers: { authorization: `Bearer ${ownerToken}` }, signal: AbortSignal.timeout(15) }),
      ),
    );
    expect(await burst()).toEqual(Array(40).fill(200));
    expect(await burst()).toEqual(Array(40).fill(200));
  }, 60_000);
});
