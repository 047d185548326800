// The instance's shared cache end to end (docs/caches.md, docs/api.md §16): a real daemon whose artifact storage is
// S3 (s3rver behind the SigV4 check), two real runners on two "machines" (their own work roots and cache
// directories). The first one misses and saves; the second one, whose local store is empty, restores the same
// files from the shared store.
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createPipeline, createProject, makeGitRepo, queueBuild, registerRunner, type GitRepo } from "../helpers/builds.ts";
import { s3StorageSettingsBody, startTestS3, type TestS3 } from "../helpers/s3rver.ts";
import { getBuild, getLog, removeDir, startReadyDaemon, startRunner, stopRunner, type ReadyDaemon, type RunnerProcess } from "./runner-harness.ts";

let s3: TestS3;
let d: ReadyDaemon;
let scratch: string;
let repo: GitRepo;
const runners: RunnerProcess[] = [];

beforeAll(async () => {
  s3 = await startTestS3();
  d = await startReadyDaemon({ HANGAR_LOG_REQUESTS: "0" });
  scratch = mkdtempSync(join(tmpdir(), "hangar-cache-shared-"));
  repo = makeGitRepo({ "lock.txt": "v1\n" });
  const settings = await d.api.call("PUT", "/v1/settings/artifact-storage", {
    token: d.ownerToken,
    body: s3StorageSettingsBody(s3),
  });
  expect(settings.status, settings.text).toBe(200);
});

afterEach(async () => {
  for (const r of runners.splice(0)) await stopRunner(r);
});

afterAll(async () => {
  await d?.daemon.stop("SIGKILL");
  removeDir(d?.dataDir);
  repo?.remove();
  await s3?.close();
  removeDir(scratch);
});

/** One build on a machine of its own (work root, cache directory, HOME), with `--once`: the finished build and its log. */
async function buildOn(machine: string, runner: { id: string; token: string }, projectId: string, pipelineId: string) {
  const base = join(scratch, machine);
  mkdirSync(join(base, "home"), { recursive: true });
  const queued = await queueBuild(d.api, d.ownerToken, projectId, pipelineId, { commit_sha: repo.shas.main });
  const r = startRunner(d.daemon.url, runner, ["--once", "--cache-dir", join(base, "caches"), "--min-free-gb", "0"], join(base, "work"), {
    HOME: join(base, "home"),
    HANGAR_RUNNER_ONCE_WAIT_S: "10",
  });
  runners.push(r);
  await r.exited;
  const build = await getBuild(d, queued.id);
  return { build, log: await getLog(d, queued.id), json: (await d.api.call("GET", `/v1/builds/${queued.id}`, { token: d.ownerToken })).body };
}

const lineOf = (log: string, prefix: string) => log.split("\n").find((l) => l.startsWith(prefix)) ?? "";

describe("the shared cache", () => {
  it("a second runner restores from S3 what the first one saved, with the same bytes", async () => {
    const project = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const pipeline = await createPipeline(d.api, d.ownerToken, project.id, {
      steps: [
        {
          name: "deps",
          run: [
            'echo "hit=$HANGAR_CACHE_HIT"',
            "if [ -f deps/lib.txt ]; then echo restored=$(cat deps/lib.txt); else mkdir -p deps && echo fetched-$$-$(date +%s%N) > deps/lib.txt; fi",
            "echo made=$(cat deps/lib.txt)",
          ].join("\n"),
        },
      ],
      workspace: "fresh",
      cache: [{ key: 'deps-{{ hash "lock.txt" }}', paths: ["deps"] }],
    });
    const first = await buildOn("mac-1", await registerRunner(d.api, d.ownerToken), project.id, pipeline.id);
    expect(first.build.status, first.log).toBe("succeeded");
    expect(lineOf(first.log, "hit="), first.log).toBe("hit=miss");
    const made = lineOf(first.log, "made=").slice("made=".length);
    expect(made).toMatch(/^fetched-/);
    expect(first.json.caches, JSON.stringify(first.json.caches)).toMatchObject([{ result: "miss", saved: true }]);

    const second = await buildOn("mac-2", await registerRunner(d.api, d.ownerToken), project.id, pipeline.id);
    expect(second.build.status, second.log).toBe("succeeded");
    expect(lineOf(second.log, "hit="), second.log).toBe("hit=exact");
    expect(lineOf(second.log, "restored="), second.log).toBe(`restored=${made}`);
    expect(second.json.caches, JSON.stringify(second.json.caches)).toMatchObject([{ result: "exact", source: "shared", saved: false }]);
  }, 180_000);
});
