// Shared caches (docs/api.md §16): presigned PUT and lookup through the instance's S3 storage (s3rver behind the SigV4
// check), per project and split by trust, every error row, and the maintenance that makes old entries go.
import { createHash, randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { builds, cacheEntries, runners } from "../../src/db/schema/index.ts";
import type { BuildTrust } from "../../src/db/schema/constants.ts";
import { sweepSharedCaches } from "../../src/domain/caches/shared-caches.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { useS3Storage } from "../helpers/artifact-world.ts";
import { buildWorld, claim, createPipeline, createProject, queueBuild, registerRunner, reportStatus } from "../helpers/builds.ts";
import { startTestS3, type TestS3 } from "../helpers/s3rver.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON
type Json = any;

interface Job {
  buildId: string;
  path: string;
  token: string;
  runner: { id: string; token: string };
}

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

/** Queues a build of the pipeline, claims it with `runner` and gives it `trust` (decided at queue time in real life). */
async function jobOf(
  t: TestApp,
  ownerToken: string,
  projectId: string,
  pipelineId: string,
  runner: Json,
  trust: BuildTrust = "protected",
): Promise<Job> {
  await queueBuild(t, ownerToken, projectId, pipelineId);
  const claimed = await claim(t, runner);
  await t.deps.db.update(builds).set({ trust }).where(eq(builds.id, claimed.build_id));
  return { buildId: claimed.build_id, path: `/v1/runners/${runner.id}/jobs/${claimed.build_id}/caches`, token: claimed.job_token, runner };
}

/** POST then the presigned PUT of `bytes`; answers the POST's body. */
async function save(t: TestApp, job: Job, key: string, bytes: Uint8Array): Promise<Json> {
  const created = await t.call("POST", job.path, { token: job.token, body: { key, size_bytes: bytes.length, sha256: sha(bytes) } });
  expect(created.status, created.text).toBe(200);
  const put = await fetch(created.body.upload.url, { method: "PUT", headers: created.body.upload.headers, body: bytes });
  expect(put.status).toBe(200);
  return created.body;
}

function lookupPath(job: Job, key: string, restoreKeys: string[] = []): string {
  const q = new URLSearchParams({ key });
  for (const r of restoreKeys) q.append("restore_key", r);
  return `${job.path}?${q}`;
}

async function lookup(t: TestApp, job: Job, key: string, restoreKeys: string[] = []) {
  return t.call("GET", lookupPath(job, key, restoreKeys), { token: job.token });
}

describe("shared caches with the artifacts on local disk", () => {
  it("answer 409 invalid_state on save and lookup: runners keep their caches locally", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const job = await jobOf(t, w.ownerToken, w.project.id, w.pipeline.id, w.runner);
    const saved = await t.call("POST", job.path, { token: job.token, body: { key: "k", size_bytes: 10, sha256: "a".repeat(64) } });
    expect([saved.status, saved.body.code]).toEqual([409, "invalid_state"]);
    expect(saved.body.message).toContain("S3 or R2");
    const found = await lookup(t, job, "k");
    expect([found.status, found.body.code]).toEqual([409, "invalid_state"]);
  });
});

describe("shared caches on S3 (s3rver with SigV4 verification)", () => {
  let s3: TestS3;
  let t: TestApp;
  let w: { ownerToken: string; project: Json; pipeline: Json; runner: Json };
  beforeAll(async () => {
    s3 = await startTestS3();
    t = await makeTestApp();
    // s3rver and the verifier check presigned expiry against the real clock.
    t.clock.set(Math.floor(Date.now() / 1000));
    w = await buildWorld(t);
    await useS3Storage(t, s3.endpoint, s3.bucket);
  });
  afterAll(async () => s3?.close());

  it("saves through a presigned PUT; the entry is found once uploaded, and its URL gives the bytes back", async () => {
    const job = await jobOf(t, w.ownerToken, w.project.id, w.pipeline.id, w.runner);
    const bytes = new Uint8Array(randomBytes(200_000));
    const created = await t.call("POST", job.path, {
      token: job.token,
      body: { key: "gradle-linux-abc", size_bytes: bytes.length, sha256: sha(bytes) },
    });
    expect(created.status).toBe(200);
    expect(created.body.upload).toMatchObject({ method: "PUT", expires_at: t.clock.now() + 3600 });
    expect(created.body.upload.url.startsWith(`${s3.endpoint}/${s3.bucket}/ci/caches/${w.project.id}/protected/`)).toBe(true);
    expect(created.body.upload.url).toContain("X-Amz-Signature=");

    // Not visible before the object exists.
    const early = await lookup(t, job, "gradle-linux-abc");
    expect([early.status, early.body.code]).toEqual([404, "not_found"]);

    const put = await fetch(created.body.upload.url, { method: "PUT", headers: created.body.upload.headers, body: bytes });
    expect(put.status).toBe(200);
    const found = await lookup(t, job, "gradle-linux-abc");
    expect(found.status).toBe(200);
    expect(found.body).toMatchObject({ key: "gradle-linux-abc", size_bytes: bytes.length, sha256: sha(bytes) });
    const got = await fetch(found.body.url);
    expect(got.status).toBe(200);
    expect(sha(new Uint8Array(await got.arrayBuffer()))).toBe(sha(bytes));
    // The daemon's HEAD was signed too.
    expect(s3.requests.filter((r) => r.method === "HEAD").every((r) => r.verified)).toBe(true);
  });

  it("answers the exact key first, else the newest entry under the first restore key that has one", async () => {
    const project = await createProject(t, w.ownerToken);
    const pipeline = await createPipeline(t, w.ownerToken, project.id);
    const job = await jobOf(t, w.ownerToken, project.id, pipeline.id, w.runner);
    await save(t, job, "deps-a-1", new Uint8Array([1]));
    t.clock.advance(1);
    await save(t, job, "deps-b-1", new Uint8Array([2]));
    t.clock.advance(1);
    await save(t, job, "deps-a-2", new Uint8Array([3, 3]));
    t.clock.advance(1);
    await save(t, job, "other", new Uint8Array([4]));

    expect((await lookup(t, job, "deps-a-1", ["deps-"])).body.key).toBe("deps-a-1");
    expect((await lookup(t, job, "deps-c-9", ["deps-b-", "deps-a-"])).body.key).toBe("deps-b-1");
    expect((await lookup(t, job, "deps-c-9", ["deps-a-", "deps-b-"])).body.key).toBe("deps-a-2");
    expect((await lookup(t, job, "deps-c-9", ["deps-"])).body.key).toBe("deps-a-2");
    expect((await lookup(t, job, "deps-c-9", ["nope-", "deps-b"])).body.key).toBe("deps-b-1");
    const none = await lookup(t, job, "deps-c-9", ["zzz"]);
    expect([none.status, none.body.code]).toEqual([404, "not_found"]);
    // A prefix is text, not a pattern: LIKE's wildcards mean nothing.
    expect((await lookup(t, job, "x", ["deps_%"])).status).toBe(404);

    // The same key saved again: the newer archive wins, the older one is dropped.
    await save(t, job, "deps-a-1", new Uint8Array([9, 9, 9]));
    const again = await lookup(t, job, "deps-a-1");
    expect(again.body.size_bytes).toBe(3);
    const rows = await t.deps.db.select().from(cacheEntries).where(eq(cacheEntries.key, "deps-a-1"));
    expect(rows.map((r) => r.status).sort()).toEqual(["deleting", "ready"]);
  });

  it("keeps an object of another size than declared invisible", async () => {
    const job = await jobOf(t, w.ownerToken, w.project.id, w.pipeline.id, w.runner);
    const created = await t.call("POST", job.path, { token: job.token, body: { key: "short", size_bytes: 100, sha256: "b".repeat(64) } });
    await fetch(created.body.upload.url, { method: "PUT", headers: created.body.upload.headers, body: new Uint8Array(99) });
    expect((await lookup(t, job, "short")).status).toBe(404);
  });

  it("never shares entries across projects, and splits them by trust", async () => {
    const p1 = await createProject(t, w.ownerToken);
    const pipe1 = await createPipeline(t, w.ownerToken, p1.id);
    const p2 = await createProject(t, w.ownerToken);
    const pipe2 = await createPipeline(t, w.ownerToken, p2.id);
    const openRunner = await registerRunner(t, w.ownerToken);
    await t.deps.db.update(runners).set({ trust: "open" }).where(eq(runners.id, openRunner.id));

    const protectedJob = await jobOf(t, w.ownerToken, p1.id, pipe1.id, w.runner, "protected");
    await save(t, protectedJob, "shared-key", new Uint8Array([1]));
    const openJob = await jobOf(t, w.ownerToken, p1.id, pipe1.id, openRunner, "open");
    await save(t, openJob, "open-key", new Uint8Array([2]));
    const forkJob = await jobOf(t, w.ownerToken, p1.id, pipe1.id, openRunner, "fork");
    await save(t, forkJob, "fork-key", new Uint8Array([3]));
    const otherProjectJob = await jobOf(t, w.ownerToken, p2.id, pipe2.id, w.runner, "protected");

    const keyOf = async (job: Job, key: string) => {
      const r = await lookup(t, job, key);
      return r.status === 200 ? r.body.key : r.body.code;
    };
    // Another project sees none of them.
    expect(await keyOf(otherProjectJob, "shared-key")).toBe("not_found");
    expect((await lookup(t, otherProjectJob, "x", ["shared", "open", "fork"])).status).toBe(404);
    // Protected reads protected only: nothing an open or fork build wrote.
    const protectedReader = await jobOf(t, w.ownerToken, p1.id, pipe1.id, w.runner, "protected");
    expect(await keyOf(protectedReader, "shared-key")).toBe("shared-key");
    expect(await keyOf(protectedReader, "open-key")).toBe("not_found");
    expect(await keyOf(protectedReader, "fork-key")).toBe("not_found");
    // Open reads open only: not what a protected build (secrets in its environment) or a fork wrote.
    const openReader = await jobOf(t, w.ownerToken, p1.id, pipe1.id, openRunner, "open");
    expect(await keyOf(openReader, "open-key")).toBe("open-key");
    expect(await keyOf(openReader, "shared-key")).toBe("not_found");
    expect(await keyOf(openReader, "fork-key")).toBe("not_found");
    // A fork reads its own trust's and the open ones.
    const forkReader = await jobOf(t, w.ownerToken, p1.id, pipe1.id, openRunner, "fork");
    expect(await keyOf(forkReader, "fork-key")).toBe("fork-key");
    expect(await keyOf(forkReader, "open-key")).toBe("open-key");
    expect(await keyOf(forkReader, "shared-key")).toBe("not_found");

    // A protected build on a runner demoted to open meanwhile writes open entries only.
    const demotedJob = await jobOf(t, w.ownerToken, p1.id, pipe1.id, w.runner, "protected");
    await t.deps.db.update(runners).set({ trust: "open" }).where(eq(runners.id, w.runner.id));
    const demoted = await save(t, demotedJob, "demoted-key", new Uint8Array([4]));
    expect(demoted.upload.url).toContain(`/caches/${p1.id}/open/`);
    await t.deps.db.update(runners).set({ trust: "protected" }).where(eq(runners.id, w.runner.id));
    expect(await keyOf(protectedReader, "demoted-key")).toBe("not_found");
  });

  it("saves while the build is active or succeeded, restores only while it is active (409 job_not_active)", async () => {
    const succeeded = await jobOf(t, w.ownerToken, w.project.id, w.pipeline.id, w.runner);
    expect((await reportStatus(t, w.runner, succeeded.buildId, { status: "running" })).status).toBe(200);
    expect((await reportStatus(t, w.runner, succeeded.buildId, { status: "succeeded" })).status).toBe(200);
    await save(t, succeeded, "after-success", new Uint8Array([1]));
    const late = await lookup(t, succeeded, "after-success");
    expect([late.status, late.body.code]).toEqual([409, "job_not_active"]);

    const failed = await jobOf(t, w.ownerToken, w.project.id, w.pipeline.id, w.runner);
    expect((await reportStatus(t, w.runner, failed.buildId, { status: "running" })).status).toBe(200);
    expect((await reportStatus(t, w.runner, failed.buildId, { status: "failed", exit_code: 2 })).status).toBe(200);
    const refused = await t.call("POST", failed.path, { token: failed.token, body: { key: "k", size_bytes: 1, sha256: "c".repeat(64) } });
    expect([refused.status, refused.body.code]).toEqual([409, "job_not_active"]);
  });

  it("authenticates like every job call: 401 missing_auth, 401 invalid_runner_token, 403 runner_mismatch, 404 not_found", async () => {
    const job = await jobOf(t, w.ownerToken, w.project.id, w.pipeline.id, w.runner);
    const other = await jobOf(t, w.ownerToken, w.project.id, w.pipeline.id, w.runner);
    const body = { key: "k", size_bytes: 1, sha256: "d".repeat(64) };
    for (const [method, extra] of [
      ["POST", { body }],
      ["GET", {}],
    ] as const) {
      const path = method === "GET" ? lookupPath(job, "k") : job.path;
      const none = await t.call(method, path, extra);
      expect([method, none.status, none.body.code]).toEqual([method, 401, "missing_auth"]);
      const bad = await t.call(method, path, { ...extra, token: "hgr_not_a_token" });
      expect([method, bad.status, bad.body.code]).toEqual([method, 401, "invalid_runner_token"]);
      const badJob = await t.call(method, path, { ...extra, token: "hgj_not_a_token" });
      expect([method, badJob.status, badJob.body.code]).toEqual([method, 401, "invalid_job_token"]);
      // Another job's token on this job's path.
      const mismatch = await t.call(method, path, { ...extra, token: other.token });
      expect([method, mismatch.status, mismatch.body.code]).toEqual([method, 403, "runner_mismatch"]);
      // The runner token on a job that is not this runner's.
      const stranger = await registerRunner(t, w.ownerToken);
      const foreign = path.replace(w.runner.id, stranger.id);
      const notMine = await t.call(method, foreign, { ...extra, token: stranger.token });
      expect([method, notMine.status, notMine.body.code]).toEqual([method, 404, "not_found"]);
    }
  });

  it("refuses bad input with 400 invalid_input", async () => {
    const job = await jobOf(t, w.ownerToken, w.project.id, w.pipeline.id, w.runner);
    const good = { key: "k", size_bytes: 10, sha256: "e".repeat(64) };
    for (const body of [
      { ...good, key: "" },
      { ...good, key: "k".repeat(513) },
      { ...good, key: "a\nb" },
      { ...good, key: 7 },
      { ...good, size_bytes: 0 },
      { ...good, size_bytes: -1 },
      { ...good, size_bytes: 1.5 },
      { ...good, size_bytes: 10 * 2 ** 30 + 1 },
      { ...good, sha256: "e".repeat(63) },
      { ...good, sha256: "g".repeat(64) },
      { key: "k", size_bytes: 10 },
      {},
    ]) {
      const r = await t.call("POST", job.path, { token: job.token, body });
      expect([JSON.stringify(body).slice(0, 60), r.status, r.body.code]).toEqual([JSON.stringify(body).slice(0, 60), 400, "invalid_input"]);
    }
    const upper = await t.call("POST", job.path, { token: job.token, body: { ...good, sha256: "E".repeat(64) } });
    expect(upper.status).toBe(200);
    const tooMany = Array.from({ length: 17 }, (_, i) => `p${i}`);
    for (const path of [
      job.path,
      `${job.path}?key=`,
      lookupPath(job, "k".repeat(513)),
      lookupPath(job, "k", ["r".repeat(513)]),
      lookupPath(job, "k", [""]),
      lookupPath(job, "k", tooMany),
      `${job.path}?key=a&key=b`,
    ]) {
      const r = await t.call("GET", path, { token: job.token });
      expect([path.slice(-40), r.status, r.body.code]).toEqual([path.slice(-40), 400, "invalid_input"]);
    }
  });

  it("makes old entries go: uploads never made, idle entries, entries beyond the project's cap, deleted projects", async () => {
    const project = await createProject(t, w.ownerToken);
    const pipeline = await createPipeline(t, w.ownerToken, project.id);
    const job = await jobOf(t, w.ownerToken, project.id, pipeline.id, w.runner);
    const objectsOf = () => t.deps.db.select().from(cacheEntries).where(eq(cacheEntries.projectId, project.id));

    // Never uploaded, its link long expired.
    await t.call("POST", job.path, { token: job.token, body: { key: "never", size_bytes: 5, sha256: "f".repeat(64) } });
    await t.deps.db
      .update(cacheEntries)
      .set({ uploadExpiresAt: t.clock.now() - 7200 })
      .where(eq(cacheEntries.key, "never"));
    // Idle for 15 days.
    await save(t, job, "idle", new Uint8Array(10));
    expect((await lookup(t, job, "idle")).status).toBe(200);
    await t.deps.db
      .update(cacheEntries)
      .set({ lastUsedAt: t.clock.now() - 15 * 86_400 })
      .where(eq(cacheEntries.key, "idle"));
    // Used lately.
    await save(t, job, "fresh", new Uint8Array(10));
    expect((await lookup(t, job, "fresh")).status).toBe(200);

    const removedBefore = s3.requests.filter((r) => r.method === "DELETE").length;
    await sweepSharedCaches(t.deps);
    expect((await objectsOf()).map((e) => e.key)).toEqual(["fresh"]);
    expect(s3.requests.filter((r) => r.method === "DELETE").length - removedBefore).toBeGreaterThanOrEqual(2);
    const idleGone = await lookup(t, job, "idle");
    expect(idleGone.status).toBe(404);

    // The cap: with 25 bytes per project, the least recently used of three 10-byte entries goes.
    const capped = await makeTestApp({ config: { HANGAR_SHARED_CACHE_MAX_GB: String(25 / 2 ** 30) } });
    capped.clock.set(Math.floor(Date.now() / 1000));
    const cw = await buildWorld(capped);
    await useS3Storage(capped, s3.endpoint, s3.bucket);
    const cjob = await jobOf(capped, cw.ownerToken, cw.project.id, cw.pipeline.id, cw.runner);
    for (const key of ["one", "two", "three"]) {
      await save(capped, cjob, key, new Uint8Array(10));
      expect((await lookup(capped, cjob, key)).status).toBe(200);
      capped.clock.advance(1);
    }
    // "one" is used again: "two" is now the least recently used.
    expect((await lookup(capped, cjob, "one")).status).toBe(200);
    await sweepSharedCaches(capped.deps);
    const left = await capped.deps.db.select().from(cacheEntries);
    expect(left.map((e) => e.key).sort()).toEqual(["one", "three"]);

    // A deleted project's entries go with it (once its build is over: a busy project is not deleted).
    await reportStatus(capped, cw.runner, cjob.buildId, { status: "running" });
    await reportStatus(capped, cw.runner, cjob.buildId, { status: "succeeded" });
    const del = await capped.call("DELETE", `/v1/projects/${cw.project.id}`, { token: cw.ownerToken });
    expect(del.status).toBeLessThan(300);
    await sweepSharedCaches(capped.deps);
    expect(await capped.deps.db.select().from(cacheEntries)).toEqual([]);
  });
});
