// The runner's way from claim to final report, kept short (docs/benchmarks.md, the runner's overhead): the remote is
// written without a git process, running reports close together are sent as one, and neither changes what a build
// shows: the remote as git writes it, every step's result, the final report after the last log chunk.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPipeline, createProject, makeGitRepo, queueBuild, registerRunner, type GitRepo } from "../helpers/builds.ts";
import {
  getBuild,
  getLog,
  removeDir,
  startReadyDaemon,
  startRunner,
  stopRunner,
  waitForFinal,
  type ReadyDaemon,
  type RunnerProcess,
} from "./runner-harness.ts";

let d: ReadyDaemon;
let repo: GitRepo;
let scratch: string;
let runner: RunnerProcess;

beforeAll(async () => {
  d = await startReadyDaemon();
  repo = makeGitRepo({ "README.md": "overhead\n" });
  scratch = mkdtempSync(join(tmpdir(), "hangar-runner-overhead-"));
  const r = await registerRunner(d.api, d.ownerToken);
  runner = startRunner(d.daemon.url, r, [], join(scratch, "work"));
});

afterAll(async () => {
  await stopRunner(runner);
  await d?.daemon.stop("SIGKILL");
  removeDir(d.dataDir);
  repo?.remove();
  removeDir(scratch);
});

/** The daemon's request log lines of one job's runner calls: when each began (ms) and what it was. */
function jobRequests(buildId: string): Array<{ start: number; end: number; kind: string; status: number }> {
  return `${d.daemon.stdout()}\n${d.daemon.stderr()}`
    .split("\n")
    .filter((line) => line.startsWith("{") && line.includes(`/jobs/${buildId}/`))
    .map((line) => JSON.parse(line) as { time: string; path: string; status: number; duration_ms: number })
    .map((r) => {
      const end = Date.parse(r.time);
      return { start: end - r.duration_ms, end, kind: r.path.slice(r.path.lastIndexOf("/") + 1), status: r.status };
    })
    .sort((a, b) => a.start - b.start);
}

describe("the runner's path from claim to final report", () => {
  it("writes the origin remote as git would, whatever the repository's path holds (quotes, backslashes, # and ;)", async () => {
    // The daemon refuses whitespace and control characters in a repository URL; everything else may be in a path.
    const odd = join(scratch, 'repo"with\\odd#chars;x');
    mkdirSync(odd);
    execFileSync("git", ["clone", "-q", "--bare", repo.path, join(odd, "app.git")]);
    const url = join(odd, "app.git");
    // What git itself writes for that remote.
    const byGit = join(scratch, "by-git");
    execFileSync("git", ["init", "-q", byGit]);
    execFileSync("git", ["remote", "add", "origin", url], { cwd: byGit });
    const gitSection = readFileSync(join(byGit, ".git", "config"), "utf8").slice(
      readFileSync(join(byGit, ".git", "config"), "utf8").indexOf('[remote "origin"]'),
    );
    expect(gitSection).toContain("url = ");

    const project = await createProject(d.api, d.ownerToken, { repo_url: url });
    const pipeline = await createPipeline(d.api, d.ownerToken, project.id, {
      steps: [{ name: "remote", run: 'printf "REMOTE=%s\\n" "$(git remote get-url origin)"; printf "CONFIG=%s\\n" "$(base64 -w0 .git/config)"' }],
      workspace: "fresh",
    });
    const b = await queueBuild(d.api, d.ownerToken, project.id, pipeline.id, { commit_sha: repo.shas.main });
    const done = await waitForFinal(d, b.id, 60_000);
    const log = await getLog(d, b.id);
    expect(done.status, log).toBe("succeeded");
    expect(log).toContain(`REMOTE=${url}\n`);
    const config = Buffer.from(/^CONFIG=(\S*)$/m.exec(log)?.[1] ?? "", "base64").toString("utf8");
    expect(config.endsWith(gitSection), config).toBe(true);
    expect(log).toContain(`$ git remote add origin ${url}\n`);
  });

  it("sends running reports at least 250 ms apart, every step's result, and the final report after the last log chunk", async () => {
    const project = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const steps = Array.from({ length: 6 }, (_, i) => ({ name: `quick ${i}`, run: `echo step-${i}` }));
    const pipeline = await createPipeline(d.api, d.ownerToken, project.id, { steps, workspace: "fresh" });
    const b = await queueBuild(d.api, d.ownerToken, project.id, pipeline.id, { commit_sha: repo.shas.main });
    const done = await waitForFinal(d, b.id, 60_000);
    const log = await getLog(d, b.id);
    expect(done.status, log).toBe("succeeded");
    const build = await getBuild(d, b.id);
    expect(build.step_results.map((s: { status: string }) => s.status)).toEqual(steps.map(() => "succeeded"));
    for (let i = 0; i < steps.length; i++) expect(log).toContain(`step-${i}\n`);

    const calls = jobRequests(b.id);
    const reports = calls.filter((c) => c.kind === "status");
    expect(reports.every((r) => r.status === 200)).toBe(true);
    // Six steps, each with a report at its start and a last one after them, would be eight reports, a few
    // milliseconds apart; the runner waits 250 ms after a running report before the next one (less as the daemon
    // sees it when the earlier report travelled slower on a busy machine).
    const running = reports.slice(0, -1);
    for (let i = 1; i < running.length; i++) expect(running[i]!.start - running[i - 1]!.start).toBeGreaterThanOrEqual(150);
    expect(reports.length).toBeLessThan(8);
    // The final report begins only once the daemon has answered the last log chunk (1 ms: the log's times are
    // whole milliseconds).
    const lastLog = calls.filter((c) => c.kind.startsWith("logs")).at(-1)!;
    expect(reports.at(-1)!.start).toBeGreaterThanOrEqual(lastLog.end - 1);
  });

  it("starts the first step's process during the checkout with the secrets in its environment, and never lets it run when the checkout fails", async () => {
    const project = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const put = await d.api.call("PUT", `/v1/projects/${project.id}/secrets/EARLY_SECRET`, {
      token: d.ownerToken,
      body: { value: "early-s3cret-value" },
    });
    expect(put.status).toBe(200);
    const marker = join(scratch, `ran-${project.id}`);
    const steps = [
      { name: "first", run: `test "$EARLY_SECRET" = early-s3cret-value && echo secret-seen; touch '${marker}'` },
      { name: "second", run: "echo second-ran" },
    ];
    const pipeline = await createPipeline(d.api, d.ownerToken, project.id, { steps, workspace: "fresh" });

    // A commit the repository does not have: both fetches are tried and the checkout fails.
    const missing = await queueBuild(d.api, d.ownerToken, project.id, pipeline.id, { commit_sha: "0123456789abcdef0123456789abcdef01234567" });
    const failed = await waitForFinal(d, missing.id, 60_000);
    const failedLog = await getLog(d, missing.id);
    expect(failed.status, failedLog).toBe("failed");
    expect(failedLog).toContain("checkout of 0123456789abcdef0123456789abcdef01234567 failed");
    expect(failedLog).not.toContain("secret-seen");
    expect(existsSync(marker)).toBe(false);
    expect((await getBuild(d, missing.id)).step_results.map((r: { status: string }) => r.status)).toEqual(["skipped", "skipped"]);

    const good = await queueBuild(d.api, d.ownerToken, project.id, pipeline.id, { commit_sha: repo.shas.main });
    const done = await waitForFinal(d, good.id, 60_000);
    const log = await getLog(d, good.id);
    expect(done.status, log).toBe("succeeded");
    expect(log).toContain("secret-seen\n");
    expect(log).toContain("second-ran\n");
    expect(log).not.toContain("early-s3cret-value");
    expect(existsSync(marker)).toBe(true);
    // The first step's output comes after its heading: nothing of it ran before its go.
    expect(log.indexOf("secret-seen")).toBeGreaterThan(log.indexOf("==> [1/2] first"));
  });
});
