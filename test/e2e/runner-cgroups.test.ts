// Several runner processes on one machine share the cgroup their jobs' groups are made under: a runner starting up
// removes the groups that dead runners left (a crash), and never the group of a job another live runner is running
// (docs/runner-isolation.md).
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
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
const runners: RunnerProcess[] = [];
const strays: number[] = [];

beforeAll(async () => {
  d = await startReadyDaemon();
  repo = makeGitRepo({ "README.md": "cgroups\n" });
  scratch = mkdtempSync(join(tmpdir(), "hangar-runner-cgroups-"));
});

afterAll(async () => {
  for (const r of runners) await stopRunner(r);
  for (const pid of strays) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone, as the test expects
    }
  }
  await d?.daemon.stop("SIGKILL");
  if (d) removeDir(d.dataDir);
  repo?.remove();
  if (scratch) removeDir(scratch);
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("job cgroups shared by several runner processes", () => {
  it("a runner starting up ends a dead runner's leftover group, and leaves another runner's running job alone", async () => {
    const project = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const pipeline = await createPipeline(d.api, d.ownerToken, project.id, {
      steps: [{ name: "long", run: "echo started; sleep 4; echo survived" }],
    });
    const first = startRunner(d.daemon.url, await registerRunner(d.api, d.ownerToken), [], join(scratch, "work-first"));
    runners.push(first);
    const build = await queueBuild(d.api, d.ownerToken, project.id, pipeline.id, { commit_sha: repo.shas.main });
    await waitFor("the step to start", async () => (await getLog(d, build.id)).includes("started\n"), 60_000);

    const said = /each job runs in a cgroup of its own under (\S+),/.exec(first.stderr());
    // Without cgroup v2 delegation (not root, an old kernel) there are no groups to mix up; the runner says why.
    if (!said) {
      expect(first.stderr()).toContain("no cgroup per job");
      return;
    }
    const base = said[1]!;
    // What a runner killed with SIGKILL leaves: its job's group, named after its pid, with a process still in it.
    const dead = spawnSync("true").pid;
    const leftover = join(base, `hangar-job-${dead}-${randomBytes(16).toString("hex")}`);
    mkdirSync(leftover);
    const stray = spawn("sleep", ["600"], { stdio: "ignore" });
    strays.push(stray.pid!);
    writeFileSync(join(leftover, "cgroup.procs"), `${stray.pid}\n`);

    // A second runner process starts on the same machine while the first one's job runs.
    const second = startRunner(d.daemon.url, await registerRunner(d.api, d.ownerToken), [], join(scratch, "work-second"));
    runners.push(second);
    await waitFor("the second runner online", () => second.stderr().includes("online at"), 60_000);
    expect(second.stderr()).toContain("ended 1 process(es) left in the cgroups of an earlier run's jobs");
    await waitFor("the stray process ended", () => !alive(stray.pid!), 10_000);
    expect(existsSync(leftover)).toBe(false);

    const done = await waitForFinal(d, build.id, 60_000);
    const log = await getLog(d, build.id);
    expect(done.status, log).toBe("succeeded");
    expect(log).toContain("survived\n");
  }, 120_000);
});
