// Caches, persistent workspaces and disk care end to end (docs/caches.md, docs/api.md §16): a real daemon, the real
// `hangar runner` (started anew for each build, as after a restart), real git repositories, the local cache store.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createPipeline, createProject, makeGitRepo, queueBuild, registerRunner, type GitRepo } from "../helpers/builds.ts";
import { androidSigningBody } from "../helpers/signing-material.ts";
import {
  getBuild,
  getLog,
  removeDir,
  startReadyDaemon,
  startRunner,
  stopRunner,
  waitFor,
  type ReadyDaemon,
  type RunnerProcess,
} from "./runner-harness.ts";

let d: ReadyDaemon;
let scratch: string;
const repos: GitRepo[] = [];
const runners: RunnerProcess[] = [];

beforeAll(async () => {
  d = await startReadyDaemon();
  scratch = mkdtempSync(join(tmpdir(), "hangar-runner-cache-"));
});

afterEach(async () => {
  for (const r of runners.splice(0)) await stopRunner(r);
});

afterAll(async () => {
  await d?.daemon.stop("SIGKILL");
  removeDir(d.dataDir);
  for (const r of repos) r.remove();
  removeDir(scratch);
});

interface Machine {
  runner: { id: string; token: string };
  workdir: string;
  cacheDir: string;
  home: string;
}

/** A registered runner with its own work root, cache directory and HOME (steps' `~/`). */
async function machine(): Promise<Machine> {
  const runner = await registerRunner(d.api, d.ownerToken);
  const base = join(scratch, runner.id);
  const m = { runner, workdir: join(base, "work"), cacheDir: join(base, "caches"), home: join(base, "home") };
  mkdirSync(m.home, { recursive: true });
  return m;
}

/** Runs one build of `pipelineId` at `sha` on the machine with `--once`; answers the finished build and its log. */
async function build(m: Machine, projectId: string, pipelineId: string, sha: string, args: string[] = [], branch = "main") {
  const queued = await queueBuild(d.api, d.ownerToken, projectId, pipelineId, { commit_sha: sha, branch });
  const r = startRunner(d.daemon.url, m.runner, ["--once", "--cache-dir", m.cacheDir, "--min-free-gb", "0", ...args], m.workdir, {
    HOME: m.home,
    HANGAR_RUNNER_ONCE_WAIT_S: "10",
  });
  runners.push(r);
  await r.exited;
  const done = await getBuild(d, queued.id);
  return { build: done, log: await getLog(d, queued.id), runner: r };
}

/** The keys of the entries in a project's store (trust class `open` unless said). */
function storedKeys(m: Machine, projectId: string, trust = "open"): string[] {
  const dir = join(m.cacheDir, projectId, trust);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names
    .filter((n) => n.endsWith(".json"))
    .map((n) => (JSON.parse(readFileSync(join(dir, n), "utf8")) as { key: string }).key)
    .sort();
}

function lineOf(log: string, prefix: string): string {
  return log.split("\n").find((l) => l.startsWith(prefix)) ?? "";
}

const DEPS_STEP = [
  'echo "hit=$HANGAR_CACHE_HIT"',
  // What a dependency fetch does: downloads once, reuses what the cache brought back.
  "if [ -f deps/lib.txt ]; then echo restored=$(cat deps/lib.txt); else mkdir -p deps && echo fetched-$$-$(date +%s%N) > deps/lib.txt; fi",
  'if [ -f "$HOME/.hcache/tool" ]; then echo home=$(cat "$HOME/.hcache/tool"); else mkdir -p "$HOME/.hcache" && echo tool-$$ > "$HOME/.hcache/tool"; fi',
  "echo made=$(cat deps/lib.txt)",
].join("\n");

describe("cache entries", () => {
  it("miss, save, then an exact hit with the files back; a changed lock file is a partial hit through restore_keys", async () => {
    const repo = makeGitRepo({ "lock.txt": "v1\n" });
    repos.push(repo);
    const p = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const pipeline = await createPipeline(d.api, d.ownerToken, p.id, {
      steps: [{ name: "deps", run: DEPS_STEP }],
      // Fresh workspaces: whatever comes back, came from the cache.
      workspace: "fresh",
      cache: [{ key: 'deps-{{ os }}-{{ hash "lock.txt" }}', paths: ["deps", "~/.hcache"], restore_keys: ["deps-{{ os }}-"] }],
    });
    const m = await machine();

    const first = await build(m, p.id, pipeline.id, repo.shas.main!);
    expect(first.build.status).toBe("succeeded");
    expect(first.log).toContain("hit=miss");
    const key = /hangar: cache (deps-linux-[0-9a-f]{64}): miss/.exec(first.log)?.[1];
    expect(key).toBeDefined();
    expect(first.log).toMatch(/hangar: cache deps-linux-[0-9a-f]{64}: saved/);
    expect(storedKeys(m, p.id)).toEqual([key]);
    const made = lineOf(first.log, "made=").slice(5);
    // Nothing of the first build's files is left on the runner but the cache.
    removeDir(join(m.home, ".hcache"));

    const second = await build(m, p.id, pipeline.id, repo.shas.main!);
    expect(second.build.status).toBe("succeeded");
    expect(second.log).toContain("hit=exact");
    expect(lineOf(second.log, "restored=")).toBe(`restored=${made}`);
    expect(lineOf(second.log, "home=")).toMatch(/^home=tool-\d+$/);
    // An exact hit is not saved again.
    expect(second.log).not.toMatch(/: saved /);

    const sha2 = repo.commit("main", { "lock.txt": "v2\n" });
    const third = await build(m, p.id, pipeline.id, sha2);
    expect(third.build.status).toBe("succeeded");
    expect(third.log).toContain("hit=partial");
    expect(lineOf(third.log, "restored=")).toBe(`restored=${made}`);
    expect(third.log).toContain(`partial hit (${key})`);
    const keys = storedKeys(m, p.id);
    expect(keys).toHaveLength(2);
    expect(keys).toContain(key);
  });

  it("saves nothing from a failed build", async () => {
    const repo = makeGitRepo({ "lock.txt": "v1\n" });
    repos.push(repo);
    const p = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const pipeline = await createPipeline(d.api, d.ownerToken, p.id, {
      steps: [{ name: "deps then fail", run: `${DEPS_STEP}\nexit 3` }],
      workspace: "fresh",
      cache: [{ key: "deps-{{ branch }}", paths: ["deps"] }],
    });
    const m = await machine();
    const first = await build(m, p.id, pipeline.id, repo.shas.main!);
    expect(first.build.status).toBe("failed");
    expect(first.log).toContain("hangar: cache deps-main: miss");
    expect(first.log).not.toMatch(/: saved /);
    expect(storedKeys(m, p.id)).toEqual([]);
    const second = await build(m, p.id, pipeline.id, repo.shas.main!);
    expect(second.log).toContain("hit=miss");
  });

  it("never puts a file equal to the job's signing material in an archive, even a step's copy of the keystore", async () => {
    const repo = makeGitRepo({ "README.md": "signed app\n" });
    repos.push(repo);
    const p = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const signing = androidSigningBody();
    const put = await d.api.call("PUT", `/v1/projects/${p.id}/signing/android`, { token: d.ownerToken, body: signing });
    expect(put.status).toBe(200);
    const pipeline = await createPipeline(d.api, d.ownerToken, p.id, {
      platform: "android",
      steps: [
        {
          name: "copy the keystore",
          run: 'mkdir -p out/nested && cp "$HANGAR_ANDROID_KEYSTORE_PATH" out/upload.jks && cp "$HANGAR_ANDROID_KEYSTORE_PATH" out/nested/again && echo ordinary > out/plain.txt',
        },
      ],
      workspace: "fresh",
      cache: [{ key: "signed", paths: ["out"] }],
    });
    const m = await machine();
    const done = await build(m, p.id, pipeline.id, repo.shas.main!);
    expect(done.build.status).toBe("succeeded");
    expect(done.log).toContain("hangar: cache signed: 2 file(s) equal to signing material or secrets left out");
    // A protected build (the project holds signing material): its entries are kept apart from open builds'.
    expect(storedKeys(m, p.id, "protected")).toEqual(["signed"]);
    const tars = readdirSync(join(m.cacheDir, p.id, "protected")).filter((n) => n.endsWith(".tar"));
    const members = execFileSync("tar", ["-tf", join(m.cacheDir, p.id, "protected", tars[0]!)], { encoding: "utf8" }).split("\n");
    expect(members).toContain("w/out/plain.txt");
    expect(members.filter((n) => n.includes("upload.jks") || n.includes("again"))).toEqual([]);
    // And no archive byte-for-byte holds the keystore.
    const archive = readFileSync(join(m.cacheDir, p.id, "protected", tars[0]!));
    expect(archive.includes(Buffer.from(signing.keystore_base64, "base64"))).toBe(false);
  });

  it("evicts the least recently used entries at a small cap", async () => {
    const repo = makeGitRepo({ "README.md": "lru\n" });
    repos.push(repo);
    const p = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const pipeline = await createPipeline(d.api, d.ownerToken, p.id, {
      // ~20 KiB archives (a 10 KiB file plus tar's blocks), one key per branch.
      steps: [{ name: "blob", run: "mkdir -p blob && head -c 10240 /dev/urandom > blob/data" }],
      workspace: "fresh",
      cache: [{ key: "blob-{{ branch }}", paths: ["blob"] }],
    });
    const m = await machine();
    // A cap of 0.00005 GiB (~52 KiB) holds two entries.
    const cap = ["--cache-max-gb", "0.00005"];
    const keysAfter: string[][] = [];
    for (const branch of ["b1", "b2", "b3"]) {
      const sha = repo.commit(branch, { "n.txt": `${branch}\n` });
      const done = await build(m, p.id, pipeline.id, sha, cap, branch);
      expect(done.build.status).toBe("succeeded");
      keysAfter.push(storedKeys(m, p.id));
    }
    expect(keysAfter).toEqual([["blob-b1"], ["blob-b1", "blob-b2"], ["blob-b2", "blob-b3"]]);
  });
});

describe("workspaces", () => {
  const STEP = ["pwd", "ls -a | tr '\\n' ' '; echo", "touch untracked.txt build-output.o", "mkdir -p keep && echo kept > keep/k"].join("\n");

  it("a persistent workspace has the same path on every build; untracked files go, cache paths stay", async () => {
    const repo = makeGitRepo({ "README.md": "persistent\n", ".gitignore": "*.o\n" });
    repos.push(repo);
    const p = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    // The build fails: nothing is saved, so whatever of `keep/` is there was kept by the clean, not restored.
    const pipeline = await createPipeline(d.api, d.ownerToken, p.id, {
      steps: [{ name: "look", run: `${STEP}\nexit 1` }],
      cache: [{ key: "keep", paths: ["keep"] }],
    });
    const m = await machine();
    const first = await build(m, p.id, pipeline.id, repo.shas.main!);
    const sha2 = repo.commit("main", { "second.txt": "two\n" });
    const second = await build(m, p.id, pipeline.id, sha2);
    const pwd1 = first.log.split("\n").find((l) => l.startsWith("/"));
    const pwd2 = second.log.split("\n").find((l) => l.startsWith("/"));
    expect(pwd1).toContain("/workspaces/");
    expect(pwd2).toBe(pwd1);
    expect(second.log).toContain("hangar: reusing the persistent workspace");
    const listing = lineOf(second.log, ". ..");
    expect(listing).toContain("second.txt");
    expect(listing).toContain("keep");
    expect(listing).not.toContain("untracked.txt");
    expect(listing).not.toContain("build-output.o");
    expect(second.log).not.toContain("hangar: cache keep: exact");
  });

  it("`fresh` clones into a new directory each time", async () => {
    const repo = makeGitRepo({ "README.md": "fresh\n" });
    repos.push(repo);
    const p = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const pipeline = await createPipeline(d.api, d.ownerToken, p.id, { steps: [{ name: "look", run: STEP }], workspace: "fresh" });
    const m = await machine();
    const first = await build(m, p.id, pipeline.id, repo.shas.main!);
    const second = await build(m, p.id, pipeline.id, repo.shas.main!);
    const pwd1 = first.log.split("\n").find((l) => l.startsWith("/"));
    const pwd2 = second.log.split("\n").find((l) => l.startsWith("/"));
    expect(pwd1).toBeDefined();
    expect(pwd2).not.toBe(pwd1);
    expect(lineOf(second.log, ". ..")).not.toContain("untracked.txt");
  });
});

describe("the workspace lock", () => {
  it("keeps a second runner process sharing the work root out of a workspace in use; a dead process's lock is taken over", async () => {
    const repo = makeGitRepo({ "README.md": "locked\n" });
    repos.push(repo);
    const p = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const pipeline = await createPipeline(d.api, d.ownerToken, p.id, { steps: [{ name: "hold", run: "pwd\nsleep 4" }] });
    const a = await machine();
    const b = await machine();
    const shared = join(scratch, `shared-${p.id}`);
    // A lock left by a process that is gone (this host, a pid that cannot be alive).
    const wsName = `${p.id}-${pipeline.id}-open`;
    mkdirSync(join(shared, "workspaces"), { recursive: true });
    writeFileSync(join(shared, "workspaces", `${wsName}.lock`), `4194304999 ${hostname()}`);
    for (const m of [a, b]) {
      const r = startRunner(d.daemon.url, m.runner, ["--once", "--cache-dir", m.cacheDir, "--min-free-gb", "0"], shared, {
        HOME: m.home,
        HANGAR_RUNNER_ONCE_WAIT_S: "60",
      });
      runners.push(r);
    }
    // Both online (each cleans the work root's job directories as it starts) before the builds are queued.
    for (const r of runners) await waitFor("the runner online", () => (r.stdout() + r.stderr()).includes(" online at "), 60_000);
    const builds = [];
    for (let i = 0; i < 2; i++) builds.push(await queueBuild(d.api, d.ownerToken, p.id, pipeline.id, { commit_sha: repo.shas.main }));
    await Promise.all(runners.map((r) => r.exited));
    const logs = await Promise.all(builds.map((x) => getLog(d, x.id)));
    for (const [i, x] of builds.entries()) expect((await getBuild(d, x.id)).status, logs[i]).toBe("succeeded");
    const pwds = logs.map((l) => l.split("\n").find((line) => line.startsWith("/")));
    expect(pwds.filter((w) => w?.endsWith(`/workspaces/${wsName}`))).toHaveLength(1);
    expect(pwds[0]).not.toBe(pwds[1]);
    expect(logs.filter((l) => l.includes("the persistent workspace is in use by another job"))).toHaveLength(1);
  });
});

describe("disk care", () => {
  it("below --min-free-gb the runner claims nothing but keeps heartbeating", async () => {
    const repo = makeGitRepo({ "README.md": "low disk\n" });
    repos.push(repo);
    const p = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const pipeline = await createPipeline(d.api, d.ownerToken, p.id, { steps: [{ name: "never", run: "echo never-run" }] });
    const m = await machine();
    const queued = await queueBuild(d.api, d.ownerToken, p.id, pipeline.id, { commit_sha: repo.shas.main });
    // More free space than any disk here has: a runner with a full disk.
    const r = startRunner(d.daemon.url, m.runner, ["--cache-dir", m.cacheDir, "--min-free-gb", "1000000"], m.workdir, { HOME: m.home });
    runners.push(r);
    await waitFor("the low-disk warning", () => r.stderr().includes("low disk") || r.stdout().includes("low disk"));
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the runner JSON is asserted below
    const runnerJson = async (): Promise<any> =>
      ((await d.api.call("GET", "/v1/runners", { token: d.ownerToken })).body as Array<{ id: string }>).find((x) => x.id === m.runner.id);
    const firstBeat = await waitFor("a heartbeat", async () => (await runnerJson())?.last_heartbeat_at ?? undefined);
    // The heartbeats go on while nothing is claimed (the next one within the daemon's interval).
    const laterBeat = await waitFor(
      "a later heartbeat",
      async () => {
        const at = (await runnerJson())?.last_heartbeat_at;
        return at && at > firstBeat ? at : undefined;
      },
      30_000,
    );
    expect(laterBeat).toBeGreaterThan(firstBeat);
    expect((await getBuild(d, queued.id)).status).toBe("queued");
    expect((await runnerJson()).status).toBe("online");
    await stopRunner(r);
    await d.api.call("POST", `/v1/builds/${queued.id}/cancel`, { token: d.ownerToken });
    // Two heartbeats 20 s apart (the default interval) and a runner start: more than the default 30 s under load.
  }, 90_000);
});
