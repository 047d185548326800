import { afterAll, describe, expect, it } from "vitest";
import { openDb, type OpenedDb } from "../../src/db/client.ts";
import { builds, runners } from "../../src/db/schema/index.ts";
import {
  appendLog,
  claim,
  createPipeline,
  createProject,
  daemonCaller,
  makeGitRepo,
  queueBuild,
  registerRunner,
  reportStatus,
  type Caller,
} from "../helpers/builds.ts";
import { startDaemon, type Daemon } from "../helpers/daemon.ts";
import { startReadyDaemon, waitFor, type ReadyDaemon } from "./runner-harness.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON
type Json = any;

const daemons: Daemon[] = [];
const opened: OpenedDb[] = [];
afterAll(async () => {
  for (const db of opened) db.close();
  await Promise.all(daemons.map((d) => d.stop("SIGKILL")));
});

async function ready(env: Record<string, string>): Promise<ReadyDaemon> {
  const d = await startReadyDaemon({ HANGAR_LOG_REQUESTS: "0", ...env });
  daemons.push(d.daemon);
  return d;
}

describe("the build lifecycle on the real daemon", () => {
  it("resolves a branch with git, wakes a long-polling claim, streams masked logs and propagates a cancel", async () => {
    const repo = makeGitRepo();
    try {
      const d = await ready({});
      const project = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
      await d.api.call("PUT", `/v1/projects/${project.id}/source-credentials`, { token: d.ownerToken, body: { token: "tok-SECRET-1" } });
      const pipeline = await createPipeline(d.api, d.ownerToken, project.id, { platform: "ios" });
      const runner = await registerRunner(d.api, d.ownerToken, { platforms: ["ios"] });

      const started = Date.now();
      const waiting = claim(d.api, runner, 10);
      await new Promise((r) => setTimeout(r, 200));
      const trig = await d.api.call("POST", `/v1/projects/${project.id}/builds`, { token: d.ownerToken, body: { pipeline_id: pipeline.id } });
      expect(trig.status).toBe(200);
      const job = await waiting;
      expect(Date.now() - started).toBeLessThan(3000);
      expect(job).toMatchObject({ build_id: trig.body.id, commit_sha: repo.shas.main, branch: "main", repo_url: repo.url });

      expect((await reportStatus(d.api, runner, job.build_id, { status: "running" })).status).toBe(200);
      const jobPath = `/v1/runners/${runner.id}/jobs/${job.build_id}`;
      const auth = await d.api.call("GET", `${jobPath}/checkout-auth`, { token: runner.token });
      expect(auth.body).toMatchObject({ username: "x-access-token", password: "tok-SECRET-1" });
      const signing = await d.api.call("GET", `${jobPath}/android-signing`, { token: runner.token });
      // The project holds no signing material or secret: its builds are open, and open builds get none.
      expect(job.trust).toBe("open");
      expect([signing.status, signing.body.code]).toEqual([403, "secrets_withheld"]);
      const listed = await d.api.call("GET", `/v1/builds?project_id=${project.id}&status=running`, { token: d.ownerToken });
      expect(listed.body.map((b: Json) => b.id)).toEqual([job.build_id]);
      await appendLog(d.api, runner, job.build_id, 0, "using tok-SECRET-1\n");
      const log = await d.api.call("GET", `/v1/builds/${job.build_id}/logs`, { token: d.ownerToken });
      expect(log.text).toBe("using ***\n");

      const canceled = await d.api.call("POST", `/v1/builds/${job.build_id}/cancel`, { token: d.ownerToken });
      expect(canceled.body.status).toBe("canceled");
      const hb = await d.api.call("POST", `/v1/runners/${runner.id}/heartbeat`, { token: runner.token, body: {} });
      expect(hb.body.cancel_job_ids).toEqual([job.build_id]);
      const late = await reportStatus(d.api, runner, job.build_id, { status: "succeeded" });
      expect([late.status, late.body.code]).toEqual([409, "build_canceled"]);
      const none = await d.api.call("POST", `/v1/runners/${runner.id}/claim`, { token: runner.token });
      expect([none.status, none.text]).toEqual([204, ""]);
    } finally {
      repo.remove();
    }
  });
});

/** A runner loop: claim (long-poll), report running then succeeded, until `stop()` says so. */
function runLoop(api: Caller, runner: { id: string; token: string }, claimed: string[], stop: () => boolean) {
  return (async () => {
    while (!stop()) {
      let job: Json;
      try {
        job = await claim(api, runner, 1);
      } catch (err) {
        // Only a dead connection (the killed daemon) ends a loop quietly; an error answer fails the test.
        if (err instanceof TypeError) return;
        throw err;
      }
      if (!job) continue;
      claimed.push(job.build_id);
      const running = await reportStatus(api, runner, job.build_id, { status: "running" });
      if (running.status !== 200) throw new Error(`running: ${running.status} ${running.text}`);
      const done = await reportStatus(api, runner, job.build_id, { status: "succeeded" });
      if (done.status !== 200) throw new Error(`succeeded: ${done.status} ${done.text}`);
    }
  })();
}

describe("two daemons on one database file", () => {
  it("claims each of 500 builds exactly once, then survives a SIGKILL of one daemon through the other's sweeper", async () => {
    const env = {
      HANGAR_JOB_LEASE_S: "4",
      HANGAR_RUNNER_OFFLINE_AFTER_S: "3",
      HANGAR_SWEEP_INTERVAL_MS: "200",
    };
    const a = await ready(env);
    const b = await startDaemon(a.env);
    daemons.push(b);
    const apiA = a.api;
    const apiB = daemonCaller(b.url);
    const db = await openDb(`file:${a.dataDir}/hangar.db`);
    opened.push(db);

    const project = await createProject(apiA, a.ownerToken);
    const pipeline = await createPipeline(apiA, a.ownerToken, project.id);
    const fleetA = await Promise.all(Array.from({ length: 5 }, () => registerRunner(apiA, a.ownerToken)));
    // Registered through B: the daemons share everything, sessions included.
    const fleetB = await Promise.all(Array.from({ length: 5 }, () => registerRunner(apiB, a.ownerToken)));

    // Phase 1: 500 builds triggered through both daemons while 10 runners (5 per daemon) claim and finish them.
    const claimed: string[] = [];
    let stopAll = false;
    const loops = [...fleetA.map((r) => runLoop(apiA, r, claimed, () => stopAll)), ...fleetB.map((r) => runLoop(apiB, r, claimed, () => stopAll))];
    const triggered: Json[] = [];
    for (let batch = 0; batch < 25; batch++) {
      triggered.push(
        ...(await Promise.all(Array.from({ length: 20 }, (_, i) => queueBuild(i % 2 ? apiB : apiA, a.ownerToken, project.id, pipeline.id)))),
      );
    }
    await waitFor(
      "500 builds finished",
      async () => {
        const rows = await db.db.select({ status: builds.status }).from(builds);
        return rows.length === 500 && rows.every((r) => r.status === "succeeded");
      },
      60_000,
    );
    stopAll = true;
    await Promise.all(loops);
    for (const out of [a.daemon.stderr(), b.stderr()]) expect(out).not.toContain("unhandled error");

    expect(new Set(triggered.map((t) => t.build_number)).size).toBe(500);
    expect(Math.max(...triggered.map((t) => t.build_number))).toBe(500);
    expect(claimed).toHaveLength(500);
    expect(new Set(claimed).size).toBe(500);
    const rows = await db.db.select().from(builds);
    expect(rows.every((r) => r.attemptCount === 1 && r.status === "succeeded")).toBe(true);
    const byRunner = new Set(rows.map((r) => r.runnerId));
    expect([...fleetA, ...fleetB].some((r) => byRunner.has(r.id))).toBe(true);

    // Phase 2: B's runners take jobs (half start them), then B is killed, and its runners with it.
    const second: Json[] = [];
    for (let i = 0; i < 20; i++) second.push(await queueBuild(apiA, a.ownerToken, project.id, pipeline.id));
    const heldRunning: string[] = [];
    const heldAssigned: string[] = [];
    for (const r of fleetB) {
      for (let j = 0; j < 4; j++) {
        const job = await claim(apiB, r);
        if (j < 2) {
          expect((await reportStatus(apiB, r, job.build_id, { status: "running" })).status).toBe(200);
          heldRunning.push(job.build_id);
        } else {
          heldAssigned.push(job.build_id);
        }
      }
    }
    // The queue is empty now: a long-polling claim is in flight on B when it dies.
    const inFlight = claim(apiB, fleetB[0], 5).catch(() => "connection lost");
    await new Promise((r) => setTimeout(r, 100));
    await b.stop("SIGKILL");
    expect(await inFlight).toBe("connection lost");
    for (let i = 0; i < 20; i++) second.push(await queueBuild(apiA, a.ownerToken, project.id, pipeline.id));

    // A's runners carry on; A's sweeper requeues B's assigned jobs and fails its running ones.
    const claimedAfter: string[] = [];
    let stopA = false;
    const loopsA = fleetA.map((r) => runLoop(apiA, r, claimedAfter, () => stopA));
    const final = await waitFor(
      "no build left non-final",
      async () => {
        const all = await db.db.select().from(builds);
        return all.every((r) => ["succeeded", "failed", "canceled", "timed_out", "expired"].includes(r.status)) ? all : undefined;
      },
      40_000,
    );
    stopA = true;
    await Promise.all(loopsA);
    expect(a.daemon.stderr()).not.toContain("unhandled error");

    const byId = new Map(final.map((r) => [r.id, r]));
    for (const id of heldRunning) expect(byId.get(id)).toMatchObject({ status: "failed", failureReason: "runner_lost" });
    for (const id of heldAssigned) {
      expect(byId.get(id)).toMatchObject({ status: "succeeded", attemptCount: 2 });
      expect(fleetA.map((r) => r.id)).toContain(byId.get(id)!.runnerId);
    }
    expect(final.filter((r) => r.status === "failed")).toHaveLength(10);
    expect(final.filter((r) => r.status === "succeeded")).toHaveLength(530);
    // Each build of phase 2 that A's runners took was claimed once by them.
    expect(new Set(claimedAfter).size).toBe(claimedAfter.length);
    expect(claimedAfter).toHaveLength(30);
    await waitFor(
      "B's runners offline",
      async () => {
        const rows = await db.db.select().from(runners);
        return fleetB.every((r) => rows.find((x) => x.id === r.id)?.status === "offline");
      },
      15_000,
    );
  }, 150_000);
});
