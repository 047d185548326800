import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDb } from "../../src/db/client.ts";
import { JobSignal } from "../../src/domain/builds/job-signal.ts";
import { runMaintenance } from "../../src/domain/setup/maintenance.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { createPipeline, createProject, makeGitRepo, type GitRepo } from "../helpers/builds.ts";
import { completeLocalSetup } from "../helpers/factories.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON shapes are asserted by the tests
type Json = any;

// The ManualClock starts at 1_800_000_000 = 2027-01-15T08:00:00Z.
const START = 1_800_000_000;

let t: TestApp;
let owner: string;
const repos: GitRepo[] = [];

beforeAll(async () => {
  t = await makeTestApp();
  owner = (await completeLocalSetup(t)).ownerToken;
});
afterAll(() => repos.forEach((r) => r.remove()));

async function buildsOf(pipelineId: string): Promise<Json[]> {
  return (await t.call("GET", `/v1/builds?pipeline_id=${pipelineId}`, { token: owner })).body;
}

describe("schedules", () => {
  it("a stored config's schedule fires once at its time in its time zone, as a schedule build without an actor", async () => {
    t.clock.set(START);
    const repo = makeGitRepo();
    repos.push(repo);
    const project = await createProject(t, owner, { repo_url: repo.path });
    const pipeline = await createPipeline(t, owner, project.id, { schedules: [{ cron: "30 9 * * *", timezone: "Europe/Paris" }] } as Json, "paris");
    const listed = (await t.call("GET", `/v1/projects/${project.id}/schedules`, { token: owner })).body;
    // 09:30 in Paris is 08:30 UTC in January.
    expect(listed).toEqual([
      { pipeline_id: pipeline.id, origin: "stored", cron: "30 9 * * *", timezone: "Europe/Paris", branch: null, next_run_at: START + 1800 },
    ]);
    await runMaintenance(t.deps);
    expect(await buildsOf(pipeline.id)).toEqual([]);
    t.clock.set(START + 1805);
    await runMaintenance(t.deps);
    await runMaintenance(t.deps);
    const made = await buildsOf(pipeline.id);
    expect(made).toHaveLength(1);
    expect(made[0]).toMatchObject({
      trigger_type: "schedule",
      trigger_event: "schedule",
      trigger_actor: null,
      branch: "main",
      commit_sha: repo.shas.main,
      status: "queued",
    });

    const bad = await t.call("POST", `/v1/projects/${project.id}/pipelines`, {
      token: owner,
      body: {
        name: "bad",
        config: { platform: "any", steps: ["x"], schedules: [{ cron: "* * * * * *" }, { cron: "0 1 * * *", timezone: "Mars/Olympus" }] },
      },
    });
    expect([bad.status, bad.body.code]).toEqual([400, "invalid_input"]);
    expect(bad.body.issues.map((i: Json) => i.path)).toEqual(["config.schedules.0.cron", "config.schedules.1.timezone"]);
  });

  it("after downtime only the most recent missed run within the last hour is made; older ones never", async () => {
    t.clock.set(START);
    const repo = makeGitRepo({
      ".hangar.yml":
        "pipelines:\n  hourly:\n    platform: any\n    steps: [make]\n  daily:\n    platform: any\n    steps: [make]\nschedules:\n  - {pipeline: hourly, cron: '0 * * * *'}\n  - {pipeline: daily, cron: '15 8 * * *'}\n",
    });
    repos.push(repo);
    const project = await createProject(t, owner, { repo_url: repo.path, config_path: ".hangar.yml" });
    await runMaintenance(t.deps); // reads the file: the schedules exist from now on
    const pipelines = (await t.call("GET", `/v1/projects/${project.id}/pipelines`, { token: owner })).body as Json[];
    const hourly = pipelines.find((p) => p.name === "hourly");
    const daily = pipelines.find((p) => p.name === "daily");
    const schedules = (await t.call("GET", `/v1/projects/${project.id}/schedules`, { token: owner })).body as Json[];
    expect(schedules.map((s) => [s.pipeline_id, s.origin, s.next_run_at]).sort()).toEqual(
      [
        [hourly.id, "file", START + 3600],
        [daily.id, "file", START + 900],
      ].sort(),
    );
    // Down from 08:00 to 13:20: five hourly runs and the 08:15 daily run were missed.
    t.clock.set(START + 5 * 3600 + 1200);
    await runMaintenance(t.deps);
    const hourlyBuilds = await buildsOf(hourly.id);
    expect(hourlyBuilds).toHaveLength(1);
    expect(hourlyBuilds[0].trigger_type).toBe("schedule");
    // The 08:15 run is five hours old: never made.
    expect(await buildsOf(daily.id)).toEqual([]);
  });

  it("two daemons on one database make each run once", async () => {
    t.clock.set(START);
    const repo = makeGitRepo();
    repos.push(repo);
    const project = await createProject(t, owner, { repo_url: repo.path });
    const pipeline = await createPipeline(t, owner, project.id, { schedules: [{ cron: "*/5 * * * *" }] } as Json, "often");
    // A second daemon: its own connection to the same database file, its own wake-up signal.
    const other = await openDb(`file:${t.dbPath}`);
    try {
      const second = { ...t.deps, db: other.db, jobSignal: new JobSignal() };
      for (let minute = 5; minute <= 20; minute += 5) {
        t.clock.set(START + minute * 60 + 1);
        await Promise.all([runMaintenance(t.deps), runMaintenance(second), runMaintenance(t.deps), runMaintenance(second)]);
      }
    } finally {
      other.close();
    }
    const made = await buildsOf(pipeline.id);
    expect(made.map((b) => b.build_number).sort((a, b) => a - b)).toEqual([1, 2, 3, 4]);
  });
});
