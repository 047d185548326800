// Runner affinity with real runner processes (docs/api.md §16, docs/decisions.md "Runner affinity"): two runners
// long-poll the same daemon; once one has built a pipeline, the pipeline's next builds go to that runner, whose
// persistent workspace is warm (the same directory, fetched into rather than cloned anew). The rules
// themselves (the window, a warm runner that is busy, offline or low on disk) are test/http/affinity.test.ts's.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPipeline, createProject, makeGitRepo, queueBuild, registerRunner, type GitRepo } from "../helpers/builds.ts";
import {
  getLog,
  removeDir,
  startReadyDaemon,
  startRunner,
  stopRunner,
  waitFor,
  waitForFinal,
  type ReadyDaemon,
  type RunnerProcess,
} from "./runner-harness.ts";

let d: ReadyDaemon;
let repo: GitRepo;
let scratch: string;
const runners: Array<{ id: string; proc: RunnerProcess }> = [];

beforeAll(async () => {
  // A window long enough for the warm runner to end its job and claim again on a busy machine.
  d = await startReadyDaemon({ HANGAR_AFFINITY_WAIT_MS: "10000" });
  repo = makeGitRepo({ "README.md": "affinity\n" });
  scratch = mkdtempSync(join(tmpdir(), "hangar-runner-affinity-"));
  for (const name of ["a", "b"]) {
    const r = await registerRunner(d.api, d.ownerToken);
    runners.push({ id: r.id, proc: startRunner(d.daemon.url, r, [], join(scratch, `work-${name}`)) });
  }
});

afterAll(async () => {
  for (const r of runners) await stopRunner(r.proc);
  await d?.daemon.stop("SIGKILL");
  removeDir(d.dataDir);
  repo?.remove();
  removeDir(scratch);
});

describe("runner affinity between two runner processes", () => {
  it("gives a pipeline's next builds to the runner holding its warm workspace while the other one waits idle", async () => {
    // Both runners are long-polling before anything is queued.
    await waitFor("both runners online", () => runners.every((r) => r.proc.stderr().includes("online at")) || undefined, 60_000);
    const project = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const pipeline = await createPipeline(d.api, d.ownerToken, project.id, { steps: [{ name: "where", run: 'echo "PWD=$PWD"' }] });
    const builds: Array<{ runner: string; log: string }> = [];
    for (let i = 0; i < 4; i++) {
      const b = await queueBuild(d.api, d.ownerToken, project.id, pipeline.id, { commit_sha: repo.shas.main });
      const done = await waitForFinal(d, b.id, 60_000);
      const log = await getLog(d, b.id);
      expect(done.status, log).toBe("succeeded");
      builds.push({ runner: done.runner_id, log });
    }
    const warm = builds[0]!.runner;
    expect(runners.map((r) => r.id)).toContain(warm);
    // Every later build went to the same runner (by chance alone, 1 in 8), into the same directory, reused.
    expect(builds.map((b) => b.runner)).toEqual(builds.map(() => warm));
    const pwd = (log: string) => /^PWD=(.*)$/m.exec(log)?.[1];
    expect(new Set(builds.map((b) => pwd(b.log))).size).toBe(1);
    expect(builds.map((b) => b.log.includes("hangar: reusing the persistent workspace"))).toEqual([false, true, true, true]);
    const cold = runners.find((r) => r.id !== warm)!;
    expect(cold.proc.stderr()).not.toContain("claimed build");
  });
});
