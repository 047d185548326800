import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { builds, retentionPasses } from "../../src/db/schema/index.ts";
import { createApp } from "../../src/app.ts";
import { openDb } from "../../src/db/client.ts";
import type { AppDeps } from "../../src/deps.ts";
import { runScheduledRetention } from "../../src/domain/retention/pass.ts";
import { makeTestApp, toCallResult, type TestApp } from "../helpers/app.ts";
import { pathOf, useS3Storage } from "../helpers/artifact-world.ts";
import { appendLog } from "../helpers/builds.ts";
import { sessionFor, userWithRole } from "../helpers/factories.ts";
import { artifactFile, DAY, insertPipeline, insertProject, madeBuild, makeWorld, nextBuildNumber, type World } from "../helpers/retention-world.ts";
import { startTestS3, type TestS3 } from "../helpers/s3rver.ts";

describe("retention policies: roles, validation, key-by-key overrides", () => {
  let t: TestApp;
  let w: World;
  beforeAll(async () => {
    t = await makeTestApp();
    w = await makeWorld(t);
  });

  it("answers every rule (null: keep) before any PUT, and stores what is PUT", async () => {
    const empty = await t.call("GET", "/v1/settings/retention", { token: w.ownerToken });
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual({ artifacts: { keep_last: null, max_age_days: null }, logs: { max_age_days: null } });
    const put = await t.call("PUT", "/v1/settings/retention", {
      token: w.ownerToken,
      body: { artifacts: { keep_last: 10, max_age_days: 90 }, logs: { max_age_days: 30 } },
    });
    expect(put.status).toBe(200);
    expect(put.body).toEqual({ artifacts: { keep_last: 10, max_age_days: 90 }, logs: { max_age_days: 30 } });
    expect((await t.call("GET", "/v1/settings/retention", { token: w.ownerToken })).body).toEqual(put.body);
  });

  it("merges a project override key by key: a missing key inherits, null keeps", async () => {
    await t.call("PUT", "/v1/settings/retention", {
      token: w.ownerToken,
      body: { artifacts: { keep_last: 10, max_age_days: 90 }, logs: { max_age_days: 30 } },
    });
    const put = await t.call("PUT", `/v1/projects/${w.projectId}/retention`, {
      token: w.ownerToken,
      body: { artifacts: { keep_last: 3, max_age_days: null } },
    });
    expect(put.status).toBe(200);
    expect(put.body.artifacts).toEqual({ keep_last: 3, max_age_days: null });
    expect(put.body.effective).toEqual({ artifacts: { keep_last: 3, max_age_days: null }, logs: { max_age_days: 30 } });
    const got = await t.call("GET", `/v1/projects/${w.projectId}/retention`, { token: w.ownerToken });
    expect(got.body).toEqual(put.body);
  });

  it("refuses a developer with forbidden on the project endpoint and insufficient_role on the settings ones", async () => {
    const { token } = await userWithRole(t, "developer");
    const body = { artifacts: { keep_last: 1 } };
    for (const [method, path, code] of [
      ["PUT", `/v1/projects/${w.projectId}/retention`, "forbidden"],
      ["GET", `/v1/projects/${w.projectId}/retention`, "forbidden"],
      ["PUT", "/v1/settings/retention", "insufficient_role"],
      ["GET", "/v1/settings/retention", "insufficient_role"],
      ["POST", "/v1/settings/retention/run", "insufficient_role"],
      ["GET", "/v1/settings/disk", "insufficient_role"],
    ] as const) {
      const r = await t.call(method, path, { token, body: method === "GET" ? undefined : path.endsWith("/run") ? { dry_run: true } : body });
      expect([path, r.status, r.body.code]).toEqual([path, 403, code]);
    }
    const admin = await userWithRole(t, "admin");
    expect((await t.call("PUT", `/v1/projects/${w.projectId}/retention`, { token: admin.token, body })).status).toBe(200);
  });

  it("answers 400 invalid_input for bad values and 404 for an unknown project", async () => {
    for (const body of [
      { artifacts: { keep_last: -1 } },
      { artifacts: { max_age_days: 1.5 } },
      { artifacts: { max_age_days: "30" } },
      { logs: { max_age_days: -3 } },
      { logs: { keep_last: 3 } },
      { artifacts: {}, extra: true },
    ]) {
      const r = await t.call("PUT", "/v1/settings/retention", { token: w.ownerToken, body });
      expect([JSON.stringify(body), r.status, r.body.code]).toEqual([JSON.stringify(body), 400, "invalid_input"]);
      const p = await t.call("PUT", `/v1/projects/${w.projectId}/retention`, { token: w.ownerToken, body });
      expect(p.status).toBe(400);
      expect(p.body.code).toBe("invalid_input");
    }
    const run = await t.call("POST", "/v1/settings/retention/run", { token: w.ownerToken, body: { dry_run: "yes" } });
    expect([run.status, run.body.code]).toEqual([400, "invalid_input"]);
    const unknown = await t.call("PUT", `/v1/projects/${crypto.randomUUID()}/retention`, { token: w.ownerToken, body: { artifacts: {} } });
    expect([unknown.status, unknown.body.code]).toEqual([404, "not_found"]);
  });
});

describe("a pass: dry run, keep_last per pipeline and branch, protected builds, 410s, audit", () => {
  let t: TestApp;
  let w: World;
  const kept: Array<{ id: string; artifactIds: string[] }> = [];
  const doomed: Array<{ id: string; artifactIds: string[] }> = [];
  let pinned: { id: string; artifactIds: string[] };
  let running: { id: string; artifactIds: string[] };
  let downloadUrl: string;

  beforeAll(async () => {
    t = await makeTestApp();
    w = await makeWorld(t);
    const base = t.clock.now() - 100 * DAY;
    // Four builds on each of two pipelines × two branches; keep_last 2 keeps the two newest of each of the four.
    for (const pipelineId of w.pipelineIds) {
      for (const branch of ["main", "feature/x"]) {
        for (let i = 0; i < 4; i++) {
          const b = await madeBuild(t, w, { pipelineId, branch, finishedAt: base + i * DAY, files: 2 });
          (i >= 2 ? kept : doomed).push(b);
        }
      }
    }
    // The oldest of all, pinned: counted by keep_last (it holds artifacts) but never deleted.
    pinned = await madeBuild(t, w, { branch: "release", finishedAt: base - DAY });
    for (let i = 0; i < 2; i++) kept.push(await madeBuild(t, w, { branch: "release", finishedAt: base + (i + 1) * DAY }));
    running = await madeBuild(t, w, { branch: "main", finishedAt: base - 2 * DAY, status: "running" });
    const pin = await t.call("POST", `/v1/builds/${pinned.id}/pin`, { token: w.ownerToken });
    expect(pin.status).toBe(200);
    expect(pin.body.pinned).toBe(true);
    const link = await t.call("POST", `/v1/artifacts/${doomed[0]!.artifactIds[0]}/download-link`, { token: w.ownerToken });
    downloadUrl = link.body.url;
    const put = await t.call("PUT", "/v1/settings/retention", { token: w.ownerToken, body: { artifacts: { keep_last: 2 } } });
    expect(put.status).toBe(200);
  });

  it("lets builders pin and unpin (the build JSON carries pinned), not a QA viewer", async () => {
    const dev = await userWithRole(t, "developer");
    const other = kept[0]!.id;
    const on = await t.call("POST", `/v1/builds/${other}/pin`, { token: dev.token });
    expect([on.status, on.body.pinned]).toEqual([200, true]);
    expect((await t.call("GET", `/v1/builds/${other}`, { token: dev.token })).body.pinned).toBe(true);
    const off = await t.call("DELETE", `/v1/builds/${other}/pin`, { token: dev.token });
    expect([off.status, off.body.pinned]).toEqual([200, false]);
    const qa = await userWithRole(t, "qa_viewer");
    const refused = await t.call("POST", `/v1/builds/${other}/pin`, { token: qa.token });
    expect([refused.status, refused.body.code]).toEqual([403, "forbidden"]);
    const unknown = await t.call("POST", `/v1/builds/${crypto.randomUUID()}/pin`, { token: dev.token });
    expect([unknown.status, unknown.body.code]).toEqual([404, "not_found"]);
  });

  it("a dry run deletes nothing and lists exactly what the real run then deletes", async () => {
    const dry = await t.call("POST", "/v1/settings/retention/run", { token: w.ownerToken, body: { dry_run: true } });
    expect(dry.status).toBe(200);
    const expectedIds = doomed.flatMap((b) => b.artifactIds).sort();
    expect(dry.body.items.map((i: { artifact_id: string }) => i.artifact_id).sort()).toEqual(expectedIds);
    expect(dry.body.items.every((i: { reason: string }) => i.reason === "artifacts.keep_last")).toBe(true);
    expect(dry.body.artifacts.count).toBe(expectedIds.length);
    expect(dry.body.artifacts.bytes).toBe(dry.body.items.reduce((n: number, i: { bytes: number }) => n + i.bytes, 0));
    expect(dry.body.logs).toEqual({ count: 0, bytes: 0 });
    // Nothing went: every file is there, every artifact available, no audit event, no pass recorded.
    for (const b of doomed) for (const a of b.artifactIds) expect(existsSync(artifactFile(t, b.id, a))).toBe(true);
    expect((await t.call("GET", `/v1/artifacts/${doomed[0]!.artifactIds[0]}`, { token: w.ownerToken })).body.status).toBe("available");
    expect(await t.deps.db.select().from(retentionPasses)).toEqual([]);

    const real = await t.call("POST", "/v1/settings/retention/run", { token: w.ownerToken, body: { dry_run: false } });
    expect(real.status).toBe(200);
    expect(real.body).toEqual(dry.body);

    for (const b of doomed) for (const a of b.artifactIds) expect(existsSync(artifactFile(t, b.id, a))).toBe(false);
    for (const b of [...kept, pinned, running]) for (const a of b.artifactIds) expect(existsSync(artifactFile(t, b.id, a))).toBe(true);
    // The emptied build directories went too: only kept builds' directories remain.
    expect(readdirSync(join(t.dataDir, "artifacts")).sort()).toEqual([...kept, pinned, running].map((b) => b.id).sort());
  });

  it("lists expired artifacts with that status and answers 410 artifact_expired for links and downloads", async () => {
    const id = doomed[0]!.artifactIds[0]!;
    const listed = await t.call("GET", `/v1/builds/${doomed[0]!.id}/artifacts`, { token: w.ownerToken });
    expect(listed.body.map((a: { status: string }) => a.status)).toEqual(["expired", "expired"]);
    expect((await t.call("GET", `/v1/artifacts/${id}`, { token: w.ownerToken })).body.status).toBe("expired");
    for (const path of [`/v1/artifacts/${id}/download-link`, `/v1/artifacts/${id}/install-link`]) {
      const r = await t.call("POST", path, { token: w.ownerToken });
      expect([path, r.status, r.body.code]).toEqual([path, 410, "artifact_expired"]);
    }
    const old = await t.call("GET", pathOf(downloadUrl));
    expect([old.status, old.body.code]).toEqual([410, "artifact_expired"]);
  });

  it("records one audit event for the pass that deleted, none for a pass with nothing to delete", async () => {
    const again = await t.call("POST", "/v1/settings/retention/run", { token: w.ownerToken, body: { dry_run: false } });
    expect(again.body).toEqual({ artifacts: { count: 0, bytes: 0 }, logs: { count: 0, bytes: 0 }, items: [] });
    const audit = await t.call("GET", "/v1/audit-events?limit=50", { token: w.ownerToken });
    const passes = (audit.body.events ?? audit.body).filter((e: { action: string }) => e.action === "retention.pass");
    expect(passes).toHaveLength(1);
    expect(passes[0].actor_email).toBe("owner@example.com");
    expect(passes[0].details).toMatchObject({ trigger: "manual", artifacts: { count: doomed.length * 2 }, logs: { count: 0, bytes: 0 } });
  });
});

describe("logs: max_age_days deletes old logs (410 log_expired), keeps builds and step results", () => {
  let t: TestApp;
  let w: World;
  beforeAll(async () => {
    t = await makeTestApp();
    w = await makeWorld(t);
  });

  it("deletes logs older than the rule, keeps recent and pinned ones, and project overrides decide per project", async () => {
    const now = t.clock.now();
    const old = await madeBuild(t, w, { finishedAt: now - 10 * DAY, files: 0, log: "old line\n".repeat(100) });
    const recent = await madeBuild(t, w, { finishedAt: now - DAY, files: 0, log: "recent\n" });
    const pinnedOld = await madeBuild(t, w, { finishedAt: now - 10 * DAY, files: 0, log: "pinned\n" });
    await t.call("POST", `/v1/builds/${pinnedOld.id}/pin`, { token: w.ownerToken });
    // A second project that keeps its logs: null replaces the instance rule.
    const keeper = await insertProject(t);
    const keeperPipeline = await insertPipeline(t, keeper, "build");
    const kept = await madeBuild(t, w, { projectId: keeper, pipelineId: keeperPipeline, finishedAt: now - 10 * DAY, files: 0, log: "kept\n" });
    await t.call("PUT", `/v1/projects/${keeper}/retention`, { token: w.ownerToken, body: { logs: { max_age_days: null } } });
    await t.call("PUT", "/v1/settings/retention", { token: w.ownerToken, body: { logs: { max_age_days: 5 } } });

    const dry = await t.call("POST", "/v1/settings/retention/run", { token: w.ownerToken, body: { dry_run: true } });
    expect(dry.body.items).toEqual([{ build_id: old.id, bytes: 900, reason: "logs.max_age_days" }]);
    expect(dry.body.logs).toEqual({ count: 1, bytes: 900 });
    expect((await t.call("GET", `/v1/builds/${old.id}/logs`, { token: w.ownerToken })).status).toBe(200);

    const real = await t.call("POST", "/v1/settings/retention/run", { token: w.ownerToken, body: { dry_run: false } });
    expect(real.body).toEqual(dry.body);
    const gone = await t.call("GET", `/v1/builds/${old.id}/logs`, { token: w.ownerToken });
    expect([gone.status, gone.body.code]).toEqual([410, "log_expired"]);
    const build = await t.call("GET", `/v1/builds/${old.id}`, { token: w.ownerToken });
    expect(build.status).toBe(200);
    expect(build.body.step_results).toEqual([{ name: "build", status: "succeeded", exit_code: 0 }]);
    for (const b of [recent, pinnedOld, kept]) expect((await t.call("GET", `/v1/builds/${b.id}/logs`, { token: w.ownerToken })).status).toBe(200);
    // A late chunk for the deleted log is refused rather than starting a new log.
    const late = await appendLog(t, w.runner, old.id, 900, "late\n");
    expect(late.status).toBe(409);
  });
});

describe("max_age_days for artifacts and the daily schedule", () => {
  let t: TestApp;
  let w: World;
  beforeAll(async () => {
    t = await makeTestApp();
    w = await makeWorld(t);
  });

  it("runs a scheduled pass once a day, by the clock, and counts max_age_days from finished_at (0: every final build)", async () => {
    const now = t.clock.now();
    const old = await madeBuild(t, w, { finishedAt: now - 31 * DAY });
    const young = await madeBuild(t, w, { finishedAt: now - 29 * DAY });
    const failed = await madeBuild(t, w, { finishedAt: now - 40 * DAY, status: "failed" });
    await t.call("PUT", "/v1/settings/retention", { token: w.ownerToken, body: { artifacts: { max_age_days: 30 } } });
    expect(await runScheduledRetention(t.deps, "daemon-a")).toBe(true);
    expect(existsSync(artifactFile(t, old.id, old.artifactIds[0]!))).toBe(false);
    expect(existsSync(artifactFile(t, failed.id, failed.artifactIds[0]!))).toBe(false);
    expect(existsSync(artifactFile(t, young.id, young.artifactIds[0]!))).toBe(true);
    // Not again within the day, by any daemon.
    t.clock.advance(DAY - 10);
    expect(await runScheduledRetention(t.deps, "daemon-b")).toBe(false);
    t.clock.advance(10);
    // A day later the first session has lapsed: the owner signs in again.
    w.ownerToken = await sessionFor(t, { id: w.ownerId });
    await t.call("PUT", "/v1/settings/retention", { token: w.ownerToken, body: { artifacts: { max_age_days: 0 } } });
    expect(await runScheduledRetention(t.deps, "daemon-b")).toBe(true);
    expect(existsSync(artifactFile(t, young.id, young.artifactIds[0]!))).toBe(false);
    const audit = await t.call("GET", "/v1/audit-events?limit=50", { token: w.ownerToken });
    const passes = (audit.body.events ?? audit.body).filter((e: { action: string }) => e.action === "retention.pass");
    expect(passes.map((p: { details: { trigger: string } }) => p.details.trigger)).toEqual(["scheduled", "scheduled"]);
    expect(passes[0].actor_email).toBeNull();
  });
});

describe("two daemons on one database", () => {
  let t: TestApp;
  let w: World;
  beforeAll(async () => {
    t = await makeTestApp();
    w = await makeWorld(t);
  });

  it("run a pass once: one claims it, the other finds nothing due, and each artifact is deleted once", async () => {
    const now = t.clock.now();
    const made = [];
    for (let i = 0; i < 30; i++) made.push(await madeBuild(t, w, { finishedAt: now - 10 * DAY - i, files: 1 }));
    await t.call("PUT", "/v1/settings/retention", { token: w.ownerToken, body: { artifacts: { max_age_days: 1 } } });
    // A second daemon: its own connection to the same database file and its own app.
    const second = await openDb(`file:${t.dbPath}`);
    afterAll(() => second.close());
    const deps2: AppDeps = { ...t.deps, db: second.db, metrics: undefined, logSignal: undefined };
    const app2 = createApp(deps2);
    const results = await Promise.all([runScheduledRetention(t.deps, "daemon-a"), runScheduledRetention(deps2, "daemon-b")]);
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(await t.deps.db.select().from(retentionPasses)).toHaveLength(1);
    for (const b of made) expect(existsSync(artifactFile(t, b.id, b.artifactIds[0]!))).toBe(false);
    const [pass] = await t.deps.db.select().from(retentionPasses);
    expect([pass!.artifactsCount, pass!.finishedAt]).toEqual([30, now]);

    // Manual runs racing on both: one deletes, the other gets 409 or finds nothing left; never a double count.
    for (let i = 0; i < 10; i++) made.push(await madeBuild(t, w, { finishedAt: now - 10 * DAY, files: 1 }));
    const call2 = async (body: unknown) =>
      toCallResult(
        await app2.request(
          "/v1/settings/retention/run",
          { method: "POST", headers: { authorization: `Bearer ${w.ownerToken}`, "content-type": "application/json" }, body: JSON.stringify(body) },
          { peerAddress: "127.0.0.1" },
        ),
      );
    const [a, b] = await Promise.all([
      t.call("POST", "/v1/settings/retention/run", { token: w.ownerToken, body: { dry_run: false } }),
      call2({ dry_run: false }),
    ]);
    const answers = [a, b].filter((r) => r.status === 200);
    expect([a, b].every((r) => r.status === 200 || (r.status === 409 && r.body.code === "retention_pass_running"))).toBe(true);
    expect(answers.reduce((n, r) => n + r.body.artifacts.count, 0)).toBe(10);
  });
});

describe("S3 storage: a pass deletes the objects", () => {
  let s3: TestS3;
  let t: TestApp;
  let w: World;
  beforeAll(async () => {
    s3 = await startTestS3();
    t = await makeTestApp();
    // s3rver checks presigned expiry against the real clock.
    t.clock.set(Math.floor(Date.now() / 1000));
    w = await makeWorld(t);
  });
  afterAll(async () => s3?.close());

  it("removes the S3 object of an expired artifact and keeps the others", async () => {
    await useS3Storage(t, s3.endpoint, s3.bucket);
    const now = t.clock.now();
    const ids: Record<string, string> = {};
    for (const [name, finishedAt] of [
      ["old", now - 10 * DAY],
      ["new", now],
    ] as const) {
      const id = crypto.randomUUID();
      await t.deps.db.insert(builds).values({
        id,
        projectId: w.projectId,
        pipelineId: w.pipelineIds[0]!,
        buildNumber: nextBuildNumber(),
        status: "running",
        platform: "any",
        triggerType: "manual",
        commitSha: "0123456789abcdef0123456789abcdef01234567",
        branch: "main",
        configSnapshot: { platform: "any", steps: [{ name: "b", run: "true" }] },
        timeoutS: 3600,
        runnerId: w.runner.id,
        queuedAt: now,
        createdAt: now,
        updatedAt: now,
      });
      const jobPath = `/v1/runners/${w.runner.id}/jobs/${id}/artifacts`;
      const data = new Uint8Array(5000).fill(3);
      const created = await t.call("POST", jobPath, {
        token: w.runner.token,
        body: { filename: `${name}.apk`, size_bytes: data.length, content_type: "application/octet-stream" },
      });
      const put = await fetch(created.body.upload.url, { method: "PUT", headers: created.body.upload.headers, body: data });
      expect(put.status).toBe(200);
      expect((await t.call("POST", `${jobPath}/${created.body.artifact.id}/complete`, { token: w.runner.token })).status).toBe(200);
      await t.deps.db.update(builds).set({ status: "succeeded", finishedAt }).where(eq(builds.id, id));
      ids[name] = created.body.artifact.id;
    }
    const objectUrl = (artifactId: string): string => s3.requests.find((r) => r.method === "PUT" && r.path.endsWith(artifactId))!.path;
    const exists = async (artifactId: string) => {
      const link = await t.call("POST", `/v1/artifacts/${artifactId}/download-link`, { token: w.ownerToken });
      return link.status === 200 ? (await fetch(link.body.url)).status : link.status;
    };
    expect(await exists(ids.old!)).toBe(200);
    await t.call("PUT", "/v1/settings/retention", { token: w.ownerToken, body: { artifacts: { max_age_days: 5 } } });
    const run = await t.call("POST", "/v1/settings/retention/run", { token: w.ownerToken, body: { dry_run: false } });
    expect(run.body.items.map((i: { artifact_id: string }) => i.artifact_id)).toEqual([ids.old]);
    expect(s3.requests.some((r) => r.method === "DELETE" && r.verified && r.path === objectUrl(ids.old!))).toBe(true);
    // The object is gone from the bucket: a GET signed like a download answers 404.
    const store = t.deps.openArtifactStore({
      provider: "s3",
      endpoint: s3.endpoint,
      region: "us-east-1",
      bucket: s3.bucket,
      accessKeyId: "S3RVER",
      secretAccessKey: "S3RVER",
      forcePathStyle: true,
    });
    expect(await store.head(`ci/${objectUrl(ids.old!).split("/ci/")[1]}`)).toBeNull();
    expect(await store.head(`ci/${objectUrl(ids.new!).split("/ci/")[1]}`)).toEqual({ sizeBytes: 5000 });
    expect(await exists(ids.old!)).toBe(410);
    expect(await exists(ids.new!)).toBe(200);
  });
});

describe("disk: API, metrics, preflight and the banner", () => {
  it("answers the data directory's space and what is stored, per project", async () => {
    const t = await makeTestApp();
    const w = await makeWorld(t);
    await madeBuild(t, w, { finishedAt: t.clock.now(), files: 2, size: 4000, log: "hello\n" });
    const disk = await t.call("GET", "/v1/settings/disk", { token: w.ownerToken });
    expect(disk.status).toBe(200);
    expect(disk.body.data_dir.total_bytes).toBeGreaterThan(0);
    expect(disk.body.data_dir.free_bytes).toBeGreaterThan(0);
    expect(disk.body.database_bytes).toBeGreaterThan(0);
    expect(disk.body.artifacts_bytes).toBe(8000);
    expect(disk.body.logs_bytes).toBe(6);
    expect(disk.body.projects).toEqual([{ project_id: w.projectId, artifacts_bytes: 8000, logs_bytes: 6 }]);
    const metrics = await t.call("GET", "/metrics");
    expect(metrics.text).toMatch(/^hangar_data_dir_free_bytes \d+$/m);
  });

  it("below 10 % free: a failing preflight check that does not gate remote mode, and a banner on every page", async () => {
    const lowOnSpace = async () => ({ freeBytes: 5 * 1024 ** 3, totalBytes: 100 * 1024 ** 3 });
    const t = await makeTestApp({ deps: { diskSpace: lowOnSpace } });
    const w = await makeWorld(t);
    const preflight = await t.call("GET", "/v1/settings/external-access/preflight", { token: w.ownerToken });
    const check = preflight.body.checks.find((c: { id: string }) => c.id === "data_dir_free_space");
    expect(check).toMatchObject({ ok: false, failure_code: "data_dir_low_space" });
    expect(check.message).toContain("5.0 GiB");
    const metrics = await t.call("GET", "/metrics");
    expect(metrics.text).toContain(`hangar_data_dir_free_bytes ${5 * 1024 ** 3}`);
  });
});

describe("a tester channel's latest release is never deleted", () => {
  it("keeps the newest release of each channel and deletes the rest under max_age_days 0", async () => {
    const t = await makeTestApp();
    const w = await makeWorld(t);
    const [channelPipeline, otherPipeline] = w.pipelineIds as [string, string];
    const channel = await t.call("POST", `/v1/projects/${w.projectId}/channels`, {
      token: w.ownerToken,
      body: { name: "beta", pipeline_id: channelPipeline, branches: ["main"], platforms: ["android"] },
    });
    expect(channel.status).toBe(200);
    const base = t.clock.now() - 10 * DAY;
    const older = await madeBuild(t, w, { pipelineId: channelPipeline, branch: "main", finishedAt: base });
    const latest = await madeBuild(t, w, { pipelineId: channelPipeline, branch: "main", finishedAt: base + DAY });
    // Not a release of the channel: another branch, and another pipeline.
    const otherBranch = await madeBuild(t, w, { pipelineId: channelPipeline, branch: "feature/x", finishedAt: base + 2 * DAY });
    const otherPipelineBuild = await madeBuild(t, w, { pipelineId: otherPipeline, branch: "main", finishedAt: base + 2 * DAY });
    const releases = await t.call("GET", `/v1/projects/${w.projectId}/channels/${channel.body.id}/releases`, { token: w.ownerToken });
    expect(releases.body.map((r: { build_id: string }) => r.build_id)).toEqual([latest.id, older.id]);

    expect((await t.call("PUT", "/v1/settings/retention", { token: w.ownerToken, body: { artifacts: { max_age_days: 0 } } })).status).toBe(200);
    const dry = await t.call("POST", "/v1/settings/retention/run", { token: w.ownerToken, body: { dry_run: true } });
    const doomed = [older, otherBranch, otherPipelineBuild].flatMap((b) => b.artifactIds).sort();
    expect(dry.body.items.map((i: { artifact_id: string }) => i.artifact_id).sort()).toEqual(doomed);
    const real = await t.call("POST", "/v1/settings/retention/run", { token: w.ownerToken, body: { dry_run: false } });
    expect(real.body).toEqual(dry.body);
    for (const a of latest.artifactIds) {
      expect((await t.call("GET", `/v1/artifacts/${a}`, { token: w.ownerToken })).body.status).toBe("available");
      expect(existsSync(artifactFile(t, latest.id, a))).toBe(true);
    }
    for (const a of older.artifactIds) expect((await t.call("GET", `/v1/artifacts/${a}`, { token: w.ownerToken })).body.status).toBe("expired");
  });
});
