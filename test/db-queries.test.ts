import { describe, expect, it } from "vitest";
import { claimBuild, reportBuildStatus } from "../src/db/queries/claim.ts";
import { outboxHasWorkAt } from "../src/db/queries/outbox.ts";
import { queueVersion } from "../src/db/queries/queue-version.ts";
import { lookupSessionByTokenHash } from "../src/db/queries/sessions.ts";
import { readTesterPageLink } from "../src/db/queries/tester-page.ts";
import { artifacts, builds, channels, devices, testers } from "../src/db/schema/index.ts";
import { eq } from "drizzle-orm";
import { sha256Hex } from "../src/domain/common/crypto.ts";
import { makeTestApp } from "./helpers/app.ts";
import { artifactWorld } from "./helpers/artifact-world.ts";
import { buildWorld, DEFAULT_SHA, queueBuild } from "./helpers/builds.ts";
import { completeLocalSetup } from "./helpers/factories.ts";

// Every fixed SQL statement of src/db/queries/ run against a database migrated from drizzle/: a schema change
// that breaks one (a renamed column, a dropped table) fails here, not on the first request that needs it.

describe("src/db/queries against a migrated database", () => {
  it("looks a session up by its token hash, with every user column decoded as drizzle would", async () => {
    const t = await makeTestApp();
    const { ownerToken, owner } = await completeLocalSetup(t);
    const found = await lookupSessionByTokenHash(t.deps.db, await sha256Hex(ownerToken));
    expect(found?.user).toEqual(owner);
    expect(found?.expiresAt).toBeGreaterThan(t.clock.now());
    expect(await lookupSessionByTokenHash(t.deps.db, await sha256Hex("not-a-token"))).toBeUndefined();
  });

  it("reads the queue version and the outbox's idle check", async () => {
    const t = await makeTestApp();
    expect(await queueVersion(t.deps.db)).toBeGreaterThanOrEqual(0);
    expect(await outboxHasWorkAt(t.deps.db, Date.now())).toBe(false);
  });

  it("claims a queued build with the runner's heartbeat, then applies and refuses status reports", async () => {
    const t = await makeTestApp();
    const { ownerToken, project, pipeline, runner } = await buildWorld(t);
    const now = t.clock.now();
    const claimArgs = {
      runnerId: runner.id,
      leaseExpiresAt: now + 600,
      now,
      jobTokenHash: await sha256Hex("job-token"),
      affinityWindowS: 0,
      runnerOfflineAfterS: 60,
    };
    // Nothing queued: no row, and a long-poll retry leaves the runner row as it was.
    expect(await claimBuild(t.deps.db, claimArgs, { heartbeat: false })).toBeUndefined();
    const build = await queueBuild(t, ownerToken, project.id, pipeline.id);
    const claimed = await claimBuild(t.deps.db, claimArgs, { heartbeat: true });
    expect(claimed).toMatchObject({
      id: build.id,
      project_id: project.id,
      pipeline_id: pipeline.id,
      pipeline_name: pipeline.name,
      branch: build.branch,
      commit_sha: DEFAULT_SHA,
      lease_expires_at: now + 600,
      trust: "open",
    });
    expect(JSON.parse(String(claimed?.config_snapshot))).toMatchObject({ platform: "any" });
    const runnerRow = await t.deps.db.query.runners.findFirst({ where: (r, { eq }) => eq(r.id, runner.id) });
    expect(runnerRow).toMatchObject({ status: "busy", lastHeartbeatAt: now });
    expect(await claimBuild(t.deps.db, claimArgs, { heartbeat: true })).toBeUndefined();

    const report = {
      status: "running" as const,
      final: false,
      leaseExpiresAt: now + 900,
      now: now + 1,
      exitCode: null,
      failureReason: null,
      stepResultsJson: null,
      endStoredSteps: false,
      buildId: build.id,
      runnerId: runner.id,
      allowedFrom: ["assigned", "running"],
      releaseNotes: null,
      commitsJson: null,
      cachesJson: null,
    };
    expect(await reportBuildStatus(t.deps.db, report)).toEqual({ id: build.id, status: "running", cancel_requested: 0, lease_expires_at: now + 900 });
    // Another runner's report, or one from a state the build is not in, matches nothing.
    expect(await reportBuildStatus(t.deps.db, { ...report, runnerId: "someone-else" })).toBeUndefined();
    expect(await reportBuildStatus(t.deps.db, { ...report, allowedFrom: ["assigned"] })).toBeUndefined();
    const done = await reportBuildStatus(t.deps.db, {
      ...report,
      status: "failed",
      final: true,
      exitCode: 2,
      failureReason: "nonzero_exit",
      releaseNotes: "notes",
      commitsJson: "[]",
    });
    expect(done).toMatchObject({ status: "failed", lease_expires_at: now + 900 });
    const stored = await t.deps.db.query.builds.findFirst({ where: (b, { eq }) => eq(b.id, build.id) });
    expect(stored).toMatchObject({ status: "failed", exitCode: 2, failureReason: "nonzero_exit", finishedAt: now + 1, releaseNotes: "notes" });
  });

  it("reads a tester link with its channel decoded as drizzle would, and the counters the triggers bump", async () => {
    const t = await makeTestApp();
    const { projectId, pipelineId, buildId, runner } = await artifactWorld(t);
    const now = t.clock.now();
    const channel = {
      id: "ch",
      projectId,
      pipelineId,
      name: "beta",
      branches: ["main"],
      platforms: ["ios"],
      createdBy: null,
      createdAt: now,
      updatedAt: now,
    };
    await t.deps.db.insert(channels).values(channel);
    await t.deps.db
      .insert(testers)
      .values({ id: "t1", channelId: "ch", email: "a@example.com", name: "Ada", tokenHash: "h1", createdAt: now, updatedAt: now });
    const read = () => readTesterPageLink(t.deps.db, "h1", "external_access_network");
    expect(await read()).toEqual({
      tester: { id: "t1", name: "Ada" },
      channel: (await t.deps.db.select().from(channels).where(eq(channels.id, "ch")).get())!,
      releasesVersion: null,
      devicesVersion: null,
      networkJson: null,
    });
    expect(await readTesterPageLink(t.deps.db, "unknown", "external_access_network")).toBeNull();

    // A running build and its file are no release yet; its success is, and so is any later change to it or its files.
    const file = {
      id: "f1",
      buildId,
      runnerId: runner.id,
      filename: "a.ipa",
      sizeBytes: 1,
      contentType: "application/octet-stream",
      createdAt: now,
      updatedAt: now,
    };
    await t.deps.db.insert(artifacts).values({ ...file, status: "pending", storageLocation: { provider: "local", key: "k" } });
    await t.deps.db.update(artifacts).set({ status: "available" }).where(eq(artifacts.id, "f1"));
    expect((await read())?.releasesVersion).toBeNull();
    await t.deps.db.update(builds).set({ status: "succeeded" }).where(eq(builds.id, buildId));
    expect((await read())?.releasesVersion).toBe(1);
    await t.deps.db.update(artifacts).set({ status: "expired" }).where(eq(artifacts.id, "f1"));
    await t.deps.db.update(builds).set({ releaseNotes: "notes" }).where(eq(builds.id, buildId));
    await t.deps.db.delete(builds).where(eq(builds.id, buildId));
    expect((await read())?.releasesVersion).toBe(4);

    await t.deps.db.insert(devices).values({ id: "d1", projectId, udid: "U", testerId: "t1", createdAt: now, updatedAt: now });
    await t.deps.db.update(devices).set({ testerId: null }).where(eq(devices.id, "d1"));
    expect((await read())?.devicesVersion).toBe(2);
    await t.deps.db.delete(devices).where(eq(devices.id, "d1"));
    expect((await read())?.devicesVersion).toBe(3);
  });
});
