import { describe, expect, it } from "vitest";
import { claimBuild, reportBuildStatus } from "../src/db/queries/claim.ts";
import { outboxHasWorkAt } from "../src/db/queries/outbox.ts";
import { queueVersion } from "../src/db/queries/queue-version.ts";
import { lookupSessionByTokenHash } from "../src/db/queries/sessions.ts";
import { sha256Hex } from "../src/domain/common/crypto.ts";
import { makeTestApp } from "./helpers/app.ts";
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
});
