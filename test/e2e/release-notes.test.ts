// Release notes for tester channels with the real daemon, the real runner and a real git repository: the commit
// subjects since the channel's previous release, and the pipeline's release_notes file when the commit has one.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPipeline, createProject, makeGitRepo, queueBuild, registerRunner, type GitRepo } from "../helpers/builds.ts";
import { removeDir, startReadyDaemon, startRunner, stopRunner, type ReadyDaemon, type RunnerProcess } from "./runner-harness.ts";

let d: ReadyDaemon;
let repo: GitRepo;
let scratch: string;
const started: RunnerProcess[] = [];

beforeAll(async () => {
  d = await startReadyDaemon();
  repo = makeGitRepo({ "README.md": "hello\n" });
  scratch = mkdtempSync(join(tmpdir(), "hangar-notes-"));
});

afterAll(async () => {
  for (const r of started) await stopRunner(r);
  await d?.daemon.stop("SIGKILL");
  removeDir(d.dataDir);
  repo?.remove();
  removeDir(scratch);
});

describe("release notes reported by the runner", () => {
  it("commit subjects down to the previous release, else the release_notes file; releases newest first", async () => {
    const p = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const pipeline = await createPipeline(d.api, d.ownerToken, p.id, {
      steps: [{ name: "build", run: "printf 'not really an apk' > app.apk" }],
      artifacts: ["app.apk"],
      release_notes: "NOTES.md",
    } as Parameters<typeof createPipeline>[3]);
    const channel = await d.api.call("POST", `/v1/projects/${p.id}/channels`, {
      token: d.ownerToken,
      body: { name: "beta", pipeline_id: pipeline.id },
    });
    expect(channel.status, channel.text).toBe(200);
    const runner = await registerRunner(d.api, d.ownerToken);
    const build = async (sha: string) => {
      await queueBuild(d.api, d.ownerToken, p.id, pipeline.id, { commit_sha: sha });
      const r = startRunner(d.daemon.url, runner, ["--once"], join(scratch, "work"));
      started.push(r);
      expect(await r.exited, r.stderr()).toBe(0);
    };

    await build(repo.shas.main!);
    repo.commit("main", { "a.txt": "a" });
    repo.commit("main", { "b.txt": "b" });
    await build(repo.shas.main!);
    repo.commit("main", { "NOTES.md": "Hand-written <notes>\n" });
    await build(repo.shas.main!);

    const releases = await d.api.call("GET", `/v1/projects/${p.id}/channels/${channel.body.id}/releases`, { token: d.ownerToken });
    expect(releases.status, releases.text).toBe(200);
    expect(releases.body.map((r: { release_notes: string }) => r.release_notes)).toEqual([
      "Hand-written <notes>\n",
      "commit on main\ncommit on main",
      "initial",
    ]);
  }, 120_000);
});
