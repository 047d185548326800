// The runner's shared-cache client (src/cli/runner/cache-remote.ts) against the real daemon with S3 storage (s3rver
// behind the SigV4 check): upload through the presigned PUT, lookup by exact key and by restore-key prefix, the
// archive streamed back byte-equal, a corrupted object refused by the SHA-256 check, and the scoping: another project
// and a lower-trust build see nothing they must not.
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CacheIntegrityError, createRemoteCache } from "../../src/cli/runner/cache-remote.ts";
import type { RemoteCache } from "../../src/cli/runner/cache-remote-types.ts";
import { RunnerClient } from "../../src/cli/runner/client.ts";
import { claim, createPipeline, createProject, queueBuild, registerRunner } from "../helpers/builds.ts";
import { s3StorageSettingsBody, startTestS3, type TestS3 } from "../helpers/s3rver.ts";
import { startReadyDaemon, type ReadyDaemon } from "./runner-harness.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON
type Json = any;

const quiet = { info: () => {}, warn: () => {}, error: () => {} };
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

let s3: TestS3;
let d: ReadyDaemon;
let scratch: string;

beforeAll(async () => {
  s3 = await startTestS3();
  // s3rver listens on loopback, which the outbound guard refuses unless allowed.
  d = await startReadyDaemon({ HANGAR_OUTBOUND_ALLOW: "127.0.0.1/32", HANGAR_LOG_REQUESTS: "0" });
  scratch = mkdtempSync(join(tmpdir(), "hangar-cache-remote-"));
});
afterAll(async () => {
  await d?.daemon.stop("SIGKILL");
  await s3?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

async function useS3(): Promise<void> {
  const settings = await d.api.call("PUT", "/v1/settings/artifact-storage", {
    token: d.ownerToken,
    body: s3StorageSettingsBody(s3),
  });
  expect(settings.status, settings.text).toBe(200);
}

/** A project whose builds of `main` are protected (it holds a secret variable and protects main). */
async function protectedProject(): Promise<{ project: Json; pipeline: Json }> {
  const project = await createProject(d.api, d.ownerToken);
  const pipeline = await createPipeline(d.api, d.ownerToken, project.id);
  expect(
    (await d.api.call("PUT", `/v1/projects/${project.id}/secrets/API_KEY`, { token: d.ownerToken, body: { value: "s3cr3t-value" } })).status,
  ).toBe(200);
  expect((await d.api.call("PUT", `/v1/projects/${project.id}/protection`, { token: d.ownerToken, body: { branches: ["main"] } })).status).toBe(200);
  return { project, pipeline };
}

/** Queues a build, claims it with `runner` and answers the job with the remote cache the runner would use for it. */
async function claimed(project: Json, pipeline: Json, runner: Json, branch = "main"): Promise<{ job: Json; cache: RemoteCache }> {
  await queueBuild(d.api, d.ownerToken, project.id, pipeline.id, { branch });
  const job = await claim(d.api, runner);
  expect(job?.job_token).toMatch(/^hgj_/);
  const client = new RunnerClient(d.daemon.url, runner.token, runner.id, quiet);
  return { job, cache: createRemoteCache(client, job) };
}

function archive(name: string, bytes: Uint8Array): string {
  const file = join(scratch, name);
  writeFileSync(file, bytes);
  return file;
}

describe("the runner's shared cache client on the real daemon", () => {
  it("finds nothing and saves nothing while the artifacts are on local disk", async () => {
    const { project, pipeline } = await protectedProject();
    const runner = await registerRunner(d.api, d.ownerToken);
    const said: string[] = [];
    await queueBuild(d.api, d.ownerToken, project.id, pipeline.id);
    const job = await claim(d.api, runner);
    const cache = createRemoteCache(new RunnerClient(d.daemon.url, runner.token, runner.id, quiet), job, { say: (l) => said.push(l) });
    expect(await cache.find("k", ["k"])).toBeNull();
    const bytes = new Uint8Array([1, 2, 3]);
    await cache.upload("k", archive("local.tar", bytes), 3, sha(bytes));
    expect(said.join("\n")).toContain("shared cache unavailable");
    await d.api.call("POST", `/v1/runners/${runner.id}/jobs/${job.build_id}/status`, { token: runner.token, body: { status: "running" } });
    await d.api.call("POST", `/v1/runners/${runner.id}/jobs/${job.build_id}/status`, { token: runner.token, body: { status: "succeeded" } });
  });

  it("uploads, finds by exact key and by restore key, downloads byte-equal, refuses a corrupted archive, and scopes entries", async () => {
    await useS3();
    const { project, pipeline } = await protectedProject();
    const runner = await registerRunner(d.api, d.ownerToken);
    const first = await claimed(project, pipeline, runner);
    expect(first.job.trust).toBe("protected");

    // A few MiB: the PUT streams from disk and the GET back to disk.
    const bytes = new Uint8Array(randomBytes(3 * 1024 * 1024 + 17));
    const file = archive("gradle.tar", bytes);
    const before = s3.requests.length;
    await first.cache.upload("gradle-linux-abc", file, bytes.length, sha(bytes));
    const put = s3.requests.slice(before).find((r) => r.method === "PUT");
    expect(put?.verified).toBe(true);
    expect(put?.path).toMatch(new RegExp(`^/${s3.bucket}/ci/caches/${project.id}/protected/`));

    const exact = await first.cache.find("gradle-linux-abc", ["gradle-"]);
    expect(exact).toMatchObject({ key: "gradle-linux-abc", size_bytes: bytes.length, sha256: sha(bytes) });
    const partial = await first.cache.find("gradle-linux-def", ["npm-", "gradle-linux-"]);
    expect(partial?.key).toBe("gradle-linux-abc");
    expect(await first.cache.find("gradle-linux-def", ["npm-"])).toBeNull();

    // A later job of the same project and trust restores it, streamed to disk and byte-equal.
    const second = await claimed(project, pipeline, runner);
    const hit = await second.cache.find("gradle-linux-xyz", ["gradle-linux-"]);
    expect(hit).not.toBeNull();
    const out = join(scratch, "restored.tar");
    await second.cache.download(hit!, out);
    expect(sha(readFileSync(out))).toBe(sha(bytes));

    // An object replaced by other bytes of the same size: the SHA-256 check refuses it, and nothing is left behind.
    const good = new Uint8Array(randomBytes(4096));
    const created = await d.api.call("POST", `/v1/runners/${runner.id}/jobs/${second.job.build_id}/caches`, {
      token: second.job.job_token,
      body: { key: "corrupt-1", size_bytes: good.length, sha256: sha(good) },
    });
    expect(created.status).toBe(200);
    const tampered = new Uint8Array(good);
    tampered[100] = (good[100] ?? 0) ^ 0xff;
    const putTampered = await fetch(created.body.upload.url, { method: "PUT", headers: created.body.upload.headers, body: tampered });
    expect(putTampered.status).toBe(200);
    const corruptHit = await second.cache.find("corrupt-1", []);
    expect(corruptHit?.sha256).toBe(sha(good));
    const corruptOut = join(scratch, "corrupt.tar");
    await expect(second.cache.download(corruptHit!, corruptOut)).rejects.toBeInstanceOf(CacheIntegrityError);
    expect(existsSync(corruptOut)).toBe(false);
    // A wrong size is refused too (the recorded size says less than the object holds).
    await expect(second.cache.download({ ...hit!, size_bytes: hit!.size_bytes - 1 }, corruptOut)).rejects.toBeInstanceOf(CacheIntegrityError);
    expect(existsSync(corruptOut)).toBe(false);

    // Another project sees none of it.
    const other = await protectedProject();
    const stranger = await claimed(other.project, other.pipeline, runner);
    expect(stranger.job.trust).toBe("protected");
    expect(await stranger.cache.find("gradle-linux-abc", ["gradle-"])).toBeNull();

    // A lower-trust build of the same project (a branch outside the protection: open) on an open runner sees nothing a
    // protected build wrote, and what it writes is never restored by a protected build.
    const openRunner = await registerRunner(d.api, d.ownerToken);
    expect((await d.api.call("PATCH", `/v1/runners/${openRunner.id}`, { token: d.ownerToken, body: { trust: "open" } })).status).toBe(200);
    const open = await claimed(project, pipeline, openRunner, "feature");
    expect(open.job.trust).toBe("open");
    expect(await open.cache.find("gradle-linux-abc", ["gradle-"])).toBeNull();
    const poison = new Uint8Array([6, 6, 6]);
    await open.cache.upload("gradle-linux-poison", archive("poison.tar", poison), poison.length, sha(poison));
    expect((await open.cache.find("gradle-linux-poison", []))?.key).toBe("gradle-linux-poison");
    const third = await claimed(project, pipeline, runner);
    expect(third.job.trust).toBe("protected");
    expect((await third.cache.find("gradle-linux-poison", ["gradle-linux-"]))?.key).toBe("gradle-linux-abc");
  });
});
