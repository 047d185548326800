import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { appendLog, claim, createPipeline, createProject, makeGitRepo, registerRunner, reportStatus, type GitRepo } from "../helpers/builds.ts";
import { completeLocalSetup } from "../helpers/factories.ts";
import { startGitHttpServer } from "../helpers/git-http.ts";
import { deliver } from "../helpers/hooks.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON shapes are asserted by the tests
type Json = any;

const GOOD = `pipelines:
  build:
    platform: android
    steps:
      - ./gradlew assembleDebug
      - name: test
        run: ./gradlew test
    triggers:
      - event: push
        branches: ["main", "feature/**"]
  nightly:
    platform: ios
    steps: ["xcodebuild -scheme App build"]
`;

let t: TestApp;
let owner: string;
const repos: GitRepo[] = [];

beforeAll(async () => {
  t = await makeTestApp();
  owner = (await completeLocalSetup(t)).ownerToken;
});
afterAll(() => repos.forEach((r) => r.remove()));

function repoWith(files: Record<string, string>): GitRepo {
  const repo = makeGitRepo(files);
  repos.push(repo);
  return repo;
}

async function projectOn(repoUrl: string, extra: Json = {}): Promise<Json> {
  return createProject(t, owner, { repo_url: repoUrl, config_path: ".hangar.yml", ...extra });
}

async function pipelinesOf(projectId: string): Promise<Json[]> {
  const res = await t.call("GET", `/v1/projects/${projectId}/pipelines`, { token: owner });
  expect(res.status).toBe(200);
  return res.body;
}

async function trigger(projectId: string, body: Json) {
  return t.call("POST", `/v1/projects/${projectId}/builds`, { token: owner, body });
}

async function build(id: string): Promise<Json> {
  return (await t.call("GET", `/v1/builds/${id}`, { token: owner })).body;
}

async function logOf(id: string): Promise<string> {
  return (await t.call("GET", `/v1/builds/${id}/logs?offset=0`, { token: owner })).text;
}

describe("the pipeline file at the commit built", () => {
  it("new projects read .hangar.yml; null keeps stored pipelines; PATCH changes it", async () => {
    const created = await t.call("POST", "/v1/projects", { token: owner, body: { name: "defaults", repo_url: "https://git.example.com/x.git" } });
    expect(created.body.config_path).toBe(".hangar.yml");
    const patched = await t.call("PATCH", `/v1/projects/${created.body.id}`, { token: owner, body: { config_path: "ci/hangar.yml" } });
    expect(patched.body.config_path).toBe("ci/hangar.yml");
    const off = await t.call("PATCH", `/v1/projects/${created.body.id}`, { token: owner, body: { config_path: null } });
    expect(off.body.config_path).toBeNull();
    for (const bad of ["/etc/passwd", "../x.yml", "a//b.yml", "-c.yml"]) {
      const res = await t.call("PATCH", `/v1/projects/${created.body.id}`, { token: owner, body: { config_path: bad } });
      expect([res.status, res.body.code]).toEqual([400, "invalid_input"]);
    }
  });

  it("lists the file's pipelines with stable ids, and snapshots the file at each build's own commit", async () => {
    const repo = repoWith({ ".hangar.yml": GOOD });
    const first = repo.shas.main!;
    const project = await projectOn(repo.path);
    const listed = await pipelinesOf(project.id);
    expect(listed.map((p) => [p.name, p.source])).toEqual([
      ["build", "repository"],
      ["nightly", "repository"],
    ]);
    expect(listed[0].file).toMatchObject({ path: ".hangar.yml", commit_sha: first });
    expect((await pipelinesOf(project.id)).map((p) => p.id)).toEqual(listed.map((p) => p.id));
    const buildId = listed[0].id;

    const a = await trigger(project.id, { pipeline_id: buildId });
    expect(a.status).toBe(200);
    const second = repo.commit("main", { ".hangar.yml": GOOD.replace("./gradlew test", "./gradlew check") });
    const b = await trigger(project.id, { pipeline_id: buildId });
    const builtA = await build(a.body.id);
    const builtB = await build(b.body.id);
    expect(builtA.commit_sha).toBe(first);
    expect(builtB.commit_sha).toBe(second);
    // A plain-string step becomes {name: its first 40 characters, run}.
    expect(builtA.config_snapshot.steps).toEqual([
      { name: "./gradlew assembleDebug", run: "./gradlew assembleDebug" },
      { name: "test", run: "./gradlew test" },
    ]);
    expect(builtB.config_snapshot.steps[1]).toEqual({ name: "test", run: "./gradlew check" });
    // The later commit changed nothing for the earlier build; a rerun reads the file at the original commit.
    expect((await build(a.body.id)).config_snapshot.steps[1].run).toBe("./gradlew test");
    const rerun = await t.call("POST", `/v1/builds/${a.body.id}/rerun`, { token: owner });
    expect(rerun.status).toBe(200);
    expect((await build(rerun.body.id)).config_snapshot.steps[1].run).toBe("./gradlew test");
    // An explicit commit is read at that commit.
    const pinned = await trigger(project.id, { pipeline_id: buildId, commit_sha: first });
    expect((await build(pinned.body.id)).config_snapshot.steps[1].run).toBe("./gradlew test");
  });

  it("a stored pipeline of the same name is the same row, with the file's definition where the file names it", async () => {
    const repo = repoWith({ "README.md": "no file yet\n" });
    const project = await projectOn(repo.path);
    const stored = await createPipeline(t, owner, project.id, { platform: "macos", steps: [{ name: "stored", run: "echo stored" }] }, "Build");
    const before = await trigger(project.id, { pipeline_id: stored.id });
    expect((await build(before.body.id)).config_snapshot.steps).toEqual([{ name: "stored", run: "echo stored" }]);
    repo.commit("main", { ".hangar.yml": GOOD });
    const listed = await pipelinesOf(project.id);
    expect(listed.filter((p) => p.name.toLowerCase() === "build")).toHaveLength(1);
    expect(listed.find((p) => p.id === stored.id)).toMatchObject({ source: "stored", file: { path: ".hangar.yml" } });
    const after = await trigger(project.id, { pipeline_id: stored.id });
    expect((await build(after.body.id)).config_snapshot.platform).toBe("android");
  });
});

describe("errors with path, line and column", () => {
  it("422 invalid_pipeline_config for a YAML syntax error and for an unknown key, located in the file", async () => {
    const repo = repoWith({ ".hangar.yml": GOOD });
    const project = await projectOn(repo.path);
    const [pipeline] = await pipelinesOf(project.id);
    repo.commit("main", { ".hangar.yml": "pipelines:\n  build:\n    platform: [android\n" });
    const syntax = await trigger(project.id, { pipeline_id: pipeline.id });
    expect([syntax.status, syntax.body.code]).toEqual([422, "invalid_pipeline_config"]);
    expect(syntax.body.issues[0]).toMatchObject({ line: expect.any(Number), column: expect.any(Number) });
    expect(syntax.body.issues[0].line).toBeGreaterThanOrEqual(3);

    repo.commit("main", { ".hangar.yml": "pipelines:\n  build:\n    platform: android\n    runs_on: mac\n    steps: [make]\n" });
    const unknown = await trigger(project.id, { pipeline_id: pipeline.id });
    expect([unknown.status, unknown.body.code]).toEqual([422, "invalid_pipeline_config"]);
    expect(unknown.body.issues).toEqual([{ path: "pipelines.build.runs_on", message: 'unknown key "runs_on"', line: 4, column: 5 }]);

    repo.commit("main", { ".hangar.yml": "pipelines:\n  build:\n    platform: windows\n    steps: [make]\n" });
    const wrong = await trigger(project.id, { pipeline_id: pipeline.id });
    expect(wrong.body.issues).toEqual([expect.objectContaining({ path: "pipelines.build.platform", line: 3, column: 15 })]);
  });

  it("422 pipeline_not_in_config when the file at that commit lacks the pipeline", async () => {
    const repo = repoWith({ ".hangar.yml": GOOD });
    const project = await projectOn(repo.path);
    const nightly = (await pipelinesOf(project.id)).find((p) => p.name === "nightly");
    repo.commit("main", { ".hangar.yml": GOOD.slice(0, GOOD.indexOf("  nightly:")) });
    const res = await trigger(project.id, { pipeline_id: nightly.id });
    expect([res.status, res.body.code]).toEqual([422, "pipeline_not_in_config"]);
    const stored = await createPipeline(t, owner, project.id, {}, "only-stored");
    const also = await trigger(project.id, { pipeline_id: stored.id });
    expect([also.status, also.body.code]).toEqual([422, "pipeline_not_in_config"]);
  });

  it("422 config_unavailable for a file over 256 KiB and for a refused git read; 422 source_not_allowed outside the guard", async () => {
    const repo = repoWith({ ".hangar.yml": GOOD });
    const project = await projectOn(repo.path);
    const [pipeline] = await pipelinesOf(project.id);
    repo.commit("main", { ".hangar.yml": `${GOOD}# ${"x".repeat(256 * 1024)}\n` });
    const big = await trigger(project.id, { pipeline_id: pipeline.id });
    expect([big.status, big.body.code]).toEqual([422, "config_unavailable"]);

    // A credentialed HTTP git server: the right token reads the file, a wrong one is a git failure.
    const served = repoWith({ ".hangar.yml": GOOD });
    const server = await startGitHttpServer(`${served.path}/.git`, { username: "ci", password: "s3cret-token" });
    try {
      const remote = await projectOn(server.url);
      await t.call("PUT", `/v1/projects/${remote.id}/source-credentials`, { token: owner, body: { username: "ci", token: "s3cret-token" } });
      const stored = await createPipeline(t, owner, remote.id, {}, "stored-one");
      const remotePipelines = await pipelinesOf(remote.id);
      const fromFile = remotePipelines.find((p) => p.name === "build");
      expect(fromFile?.source).toBe("repository");
      const ok = await trigger(remote.id, { pipeline_id: fromFile.id, commit_sha: served.shas.main });
      expect(ok.status).toBe(200);
      expect((await build(ok.body.id)).config_snapshot.platform).toBe("android");
      await t.call("PUT", `/v1/projects/${remote.id}/source-credentials`, { token: owner, body: { username: "ci", token: "wrong" } });
      const refused = await trigger(remote.id, { pipeline_id: stored.id, commit_sha: served.shas.main });
      expect([refused.status, refused.body.code]).toEqual([422, "config_unavailable"]);
    } finally {
      await server.close();
    }

    const guarded = await makeTestApp({ config: { HANGAR_OUTBOUND_ALLOW: "" } });
    const guardedOwner = (await completeLocalSetup(guarded)).ownerToken;
    const p = await createProject(guarded, guardedOwner, { repo_url: "http://127.0.0.1:9/repo.git", config_path: ".hangar.yml" });
    const pl = await createPipeline(guarded, guardedOwner, p.id);
    const notAllowed = await guarded.call("POST", `/v1/projects/${p.id}/builds`, {
      token: guardedOwner,
      body: { pipeline_id: pl.id, commit_sha: "a".repeat(40) },
    });
    expect([notAllowed.status, notAllowed.body.code]).toEqual([422, "source_not_allowed"]);
  });

  it("a stored pipeline whose repository cannot be reached builds with its stored config; its log's first line says why", async () => {
    const project = await projectOn("http://127.0.0.1:9/nothing-listens.git");
    const stored = await createPipeline(t, owner, project.id, { steps: [{ name: "s", run: "echo stored" }] });
    const res = await trigger(project.id, { pipeline_id: stored.id, commit_sha: "b".repeat(40) });
    expect(res.status).toBe(200);
    const b = await build(res.body.id);
    expect(b.status).toBe("queued");
    expect(b.config_snapshot.steps).toEqual([{ name: "s", run: "echo stored" }]);
    expect((await logOf(res.body.id)).split("\n")[0]).toMatch(
      /^hangar: \.hangar\.yml could not be read \(git could not connect to the repository\); building with the pipeline's stored config$/,
    );
  });

  it("the validate box answers 200 with located issues and the pipelines' names", async () => {
    const project = await projectOn("https://git.example.com/v.git");
    const good = await t.call("POST", `/v1/projects/${project.id}/pipeline-config/validate`, { token: owner, body: { content: GOOD } });
    expect(good.body).toEqual({ ok: true, issues: [], pipelines: ["build", "nightly"] });
    const bad = await t.call("POST", `/v1/projects/${project.id}/pipeline-config/validate`, {
      token: owner,
      body: {
        content:
          "pipelines:\n  build:\n    platform: any\n    steps:\n      - {name: x, runs: y}\nschedules:\n  - {pipeline: build, cron: '61 * * * *'}\n",
      },
    });
    expect(bad.status).toBe(200);
    expect(bad.body.ok).toBe(false);
    expect(bad.body.pipelines).toEqual(["build"]);
    expect(bad.body.issues).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: "pipelines.build.steps.0.runs", message: 'unknown key "runs"', line: 5, column: 19 }),
        expect.objectContaining({ path: "pipelines.build.steps.0.run", line: 5, column: 9 }),
        expect.objectContaining({ path: "schedules.0.cron", message: "not a valid 5-field cron expression", line: 7, column: 29 }),
      ]),
    );
    const unknown = await t.call("POST", "/v1/projects/nope/pipeline-config/validate", { token: owner, body: { content: GOOD } });
    expect([unknown.status, unknown.body.code]).toEqual([404, "not_found"]);
  });
});

describe("webhooks read the file at the pushed commit", () => {
  function push(branch: string, sha: string): Json {
    return {
      ref: `refs/heads/${branch}`,
      before: "0".repeat(40),
      after: sha,
      deleted: false,
      repository: {
        full_name: "acme/app",
        html_url: "https://github.com/acme/app",
        url: "https://api.github.com/repos/acme/app",
        owner: { login: "acme" },
        name: "app",
      },
      sender: { login: "dev" },
      pusher: { name: "dev" },
      head_commit: { id: sha, message: "change" },
    };
  }

  async function hookFor(projectId: string) {
    const created = await t.call("POST", `/v1/projects/${projectId}/webhooks`, { token: owner, body: { provider: "github", report_status: false } });
    return { ...created.body, provider: "github" as const };
  }

  it("a push builds each pipeline of the file whose triggers match", async () => {
    const repo = repoWith({ ".hangar.yml": GOOD });
    const project = await projectOn(repo.path);
    const hook = await hookFor(project.id);
    const sha = repo.commit("feature/x", { "a.txt": "a\n" });
    const res = await deliver(t, hook, "push", push("feature/x", sha));
    expect(res.status).toBe(200);
    expect(res.body.builds).toHaveLength(1);
    const b = await build(res.body.builds[0].id);
    expect(b).toMatchObject({ trigger_type: "webhook", commit_sha: sha, branch: "feature/x", status: "queued" });
    expect(b.config_snapshot.platform).toBe("android");
  });

  it("a broken file makes a failed build with failure_reason invalid_config and the issues in its log", async () => {
    const repo = repoWith({ ".hangar.yml": GOOD });
    const project = await projectOn(repo.path);
    const hook = await hookFor(project.id);
    const sha = repo.commit("main", { ".hangar.yml": "pipelines:\n  build:\n    platform: android\n    stepz: [make]\n" });
    const res = await deliver(t, hook, "push", push("main", sha));
    expect(res.body.builds).toHaveLength(1);
    const b = await build(res.body.builds[0].id);
    expect(b).toMatchObject({ status: "failed", failure_reason: "invalid_config", commit_sha: sha });
    const log = await logOf(b.id);
    expect(log).toContain('.hangar.yml:4:5 pipelines.build.stepz: unknown key "stepz"');
    expect(log).toContain("pipelines.build.steps");

    // A file that names no pipeline at all: one failed build of a pipeline named after the file.
    const sha2 = repo.commit("main", { ".hangar.yml": "pipelines: [oops\n" });
    const res2 = await deliver(t, hook, "push", push("main", sha2));
    const b2 = await build(res2.body.builds[0].id);
    expect(b2.failure_reason).toBe("invalid_config");
    const named = (await t.call("GET", `/v1/projects/${project.id}/pipelines/${b2.pipeline_id}`, { token: owner })).body;
    expect(named.name).toBe(".hangar.yml");
  });
});

describe("cancel_previous", () => {
  // A fresh instance: the runner must claim this test's build, not an earlier test's.
  beforeAll(async () => {
    t = await makeTestApp();
    owner = (await completeLocalSetup(t)).ownerToken;
  });

  it("a burst of builds of one pipeline and branch leaves exactly the newest unfinished; a running one is told to stop", async () => {
    const repo = repoWith({ ".hangar.yml": "pipelines:\n  ci:\n    platform: any\n    cancel_previous: true\n    steps: [make]\n" });
    const project = await projectOn(repo.path);
    const [ci] = await pipelinesOf(project.id);
    const runner = await registerRunner(t, owner);
    const first = await trigger(project.id, { pipeline_id: ci.id, commit_sha: repo.shas.main });
    const job = await claim(t, runner);
    expect(job.id ?? job.build_id ?? job.job_id).toBeDefined();
    expect((await reportStatus(t, runner, first.body.id, { status: "running" })).status).toBe(200);

    const burst = await Promise.all(Array.from({ length: 5 }, () => trigger(project.id, { pipeline_id: ci.id, commit_sha: repo.shas.main })));
    expect(burst.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    const all = (await t.call("GET", `/v1/builds?pipeline_id=${ci.id}`, { token: owner })).body as Json[];
    const unfinished = all.filter((b) => b.status === "queued");
    expect(unfinished).toHaveLength(1);
    const newest = Math.max(...all.map((b) => b.build_number));
    expect(unfinished[0].build_number).toBe(newest);
    const superseded = all.filter((b) => b.status === "canceled");
    expect(superseded).toHaveLength(5);
    expect(superseded.every((b) => b.failure_reason === "superseded")).toBe(true);
    // The running build reaches its runner through the cancel path: its next report is refused with build_canceled.
    const report = await appendLog(t, runner, first.body.id, 0, "x\n");
    const status = await reportStatus(t, runner, first.body.id, { status: "succeeded", exit_code: 0 });
    expect([status.status, status.body.code]).toEqual([409, "build_canceled"]);
    expect(report.status).toBeLessThan(500);
  });
});

describe("badges", () => {
  beforeAll(async () => {
    t = await makeTestApp();
    owner = (await completeLocalSetup(t)).ownerToken;
  });

  it("shows unknown, then passing, then failing; other branches and revocation", async () => {
    const project = await createProject(t, owner);
    const pipeline = await createPipeline(t, owner, project.id, {}, `badge <&"'>`);
    const runner = await registerRunner(t, owner);
    const made = await t.call("POST", `/v1/projects/${project.id}/pipelines/${pipeline.id}/badge`, { token: owner });
    expect(made.status).toBe(200);
    const path = new URL(made.body.url).pathname;
    expect(path).toMatch(/^\/badge\/[A-Za-z0-9_-]{43}\.svg$/);
    const svg = async (query = "") => t.call("GET", `${path}${query}`);
    const unknown = await svg();
    expect(unknown.status).toBe(200);
    expect(unknown.headers.get("content-type")).toMatch(/^image\/svg\+xml/);
    expect(unknown.headers.get("cache-control")).toBe("no-cache");
    expect(unknown.text).toContain(">unknown<");
    expect(unknown.text).toContain("badge &lt;&amp;&quot;&apos;&gt;");
    expect(unknown.text).not.toContain(`<&"'>`);

    const finish = async (result: "succeeded" | "failed", branch = "main") => {
      const q = await trigger(project.id, { pipeline_id: pipeline.id, commit_sha: "c".repeat(40), branch });
      await claim(t, runner);
      await reportStatus(t, runner, q.body.id, { status: "running" });
      await reportStatus(t, runner, q.body.id, { status: result, exit_code: result === "succeeded" ? 0 : 1 });
    };
    await finish("succeeded");
    expect((await svg()).text).toContain(">passing<");
    await finish("failed");
    expect((await svg()).text).toContain(">failing<");
    // A canceled build is skipped.
    const canceled = await trigger(project.id, { pipeline_id: pipeline.id, commit_sha: "c".repeat(40) });
    await t.call("POST", `/v1/builds/${canceled.body.id}/cancel`, { token: owner });
    expect((await svg()).text).toContain(">failing<");
    await finish("succeeded", "develop");
    expect((await svg("?branch=develop")).text).toContain(">passing<");
    expect((await svg("?branch=none")).text).toContain(">unknown<");

    const revoked = await t.call("DELETE", `/v1/projects/${project.id}/pipelines/${pipeline.id}/badge`, { token: owner });
    expect(revoked.status).toBe(204);
    const gone = await svg();
    expect([gone.status, gone.body.code]).toEqual([404, "not_found"]);
    const again = await t.call("DELETE", `/v1/projects/${project.id}/pipelines/${pipeline.id}/badge`, { token: owner });
    expect([again.status, again.body.code]).toEqual([404, "not_found"]);
  });
});
