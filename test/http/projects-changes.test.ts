// Changing and deleting projects and pipelines, strict pipeline configs, rerun and "why queued" (docs/api.md §5, §13).
import { beforeAll, describe, expect, it } from "vitest";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { appendLog, claim, createPipeline, createProject, DEFAULT_SHA, queueBuild, registerRunner, reportStatus } from "../helpers/builds.ts";
import { completeLocalSetup, setInstance, userWithRole } from "../helpers/factories.ts";

const CONFIG = { platform: "any", steps: [{ name: "a", run: "true" }] } as const;

let t: TestApp;
let owner: string;
let developer: string;
let viewer: string;

beforeAll(async () => {
  t = await makeTestApp();
  owner = (await completeLocalSetup(t)).ownerToken;
  developer = (await userWithRole(t, "developer")).token;
  viewer = (await userWithRole(t, "qa_viewer")).token;
});

async function auditActions(targetId: string): Promise<string[]> {
  const res = await t.call("GET", "/v1/audit-events?limit=500", { token: owner });
  return (res.body as Array<{ action: string; target_id: string }>)
    .filter((e) => e.target_id === targetId)
    .map((e) => e.action)
    .reverse();
}

/** A build that ran to the end on a throwaway runner (of every platform), with one log line. */
async function finishedBuild(projectId: string, pipelineId: string): Promise<{ id: string; runner: { id: string; token: string } }> {
  const runner = await registerRunner(t, owner, { platforms: ["ios", "android", "macos"] });
  const build = await queueBuild(t, developer, projectId, pipelineId);
  const job = await claim(t, runner);
  expect(job?.build_id).toBe(build.id);
  expect((await reportStatus(t, runner, build.id, { status: "running" })).status).toBe(200);
  expect((await appendLog(t, runner, build.id, 0, "hello log\n")).status).toBe(200);
  // Remove the runner from the field so later claims in this file are not taken by it.
  await t.call("PATCH", `/v1/runners/${runner.id}`, { token: runner.token, body: { status: "draining" } });
  return { id: build.id, runner };
}

describe("PATCH and DELETE /v1/projects/{id}", () => {
  it("changes name, repo_url and default_branch; audited", async () => {
    const p = await createProject(t, developer);
    t.clock.advance(5);
    const res = await t.call("PATCH", `/v1/projects/${p.id}`, {
      token: developer,
      body: { name: `${p.name}-renamed`, repo_url: "https://git.example.com/other.git", default_branch: "develop" },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: p.id, name: `${p.name}-renamed`, repo_url: "https://git.example.com/other.git", default_branch: "develop" });
    expect(res.body.updated_at).toBe(p.updated_at + 5);
    const partial = await t.call("PATCH", `/v1/projects/${p.id}`, { token: developer, body: { default_branch: "main" } });
    expect(partial.body).toMatchObject({ name: `${p.name}-renamed`, default_branch: "main" });
    expect(await auditActions(p.id)).toEqual(["project.create", "project.update", "project.update"]);
  });

  it("keeps project names unique (ASCII case ignored): 409 already_exists on create and rename", async () => {
    const a = await createProject(t, owner, { name: "Unique-Alpha" });
    const b = await createProject(t, owner, { name: "unique-beta" });
    const dupCreate = await t.call("POST", "/v1/projects", { token: owner, body: { name: "unique-alpha", repo_url: "/srv/x" } });
    expect([dupCreate.status, dupCreate.body.code]).toEqual([409, "already_exists"]);
    const dupRename = await t.call("PATCH", `/v1/projects/${b.id}`, { token: owner, body: { name: "UNIQUE-ALPHA" } });
    expect([dupRename.status, dupRename.body.code]).toEqual([409, "already_exists"]);
    // Renaming to its own name (another case) is no conflict.
    const self = await t.call("PATCH", `/v1/projects/${a.id}`, { token: owner, body: { name: "unique-ALPHA" } });
    expect(self.status).toBe(200);
  });

  it("two concurrent creates of one name: exactly one lands", async () => {
    const name = `race-${crypto.randomUUID().slice(0, 6)}`;
    const results = await Promise.all(
      Array.from({ length: 6 }, () => t.call("POST", "/v1/projects", { token: owner, body: { name, repo_url: "/srv/x" } })),
    );
    expect(results.map((r) => r.status).sort()).toEqual([200, 409, 409, 409, 409, 409]);
    const list = await t.call("GET", "/v1/projects", { token: owner });
    expect((list.body as Array<{ name: string }>).filter((p) => p.name === name)).toHaveLength(1);
  });

  it("refuses bad input (400 invalid_input, the unknown key named), viewers (403 forbidden), unknown ids (404 not_found)", async () => {
    const p = await createProject(t, owner);
    for (const body of [{ repo_url: "--upload-pack=x" }, { default_branch: "a..b" }, { name: "" }, { nmae: "typo" }]) {
      const res = await t.call("PATCH", `/v1/projects/${p.id}`, { token: owner, body });
      expect([JSON.stringify(body), res.status, res.body.code]).toEqual([JSON.stringify(body), 400, "invalid_input"]);
    }
    const typo = await t.call("PATCH", `/v1/projects/${p.id}`, { token: owner, body: { nmae: "typo" } });
    expect(typo.body.issues).toContainEqual({ path: "nmae", message: expect.any(String) });
    for (const [method, body] of [
      ["PATCH", { name: "x" }],
      ["DELETE", undefined],
    ] as const) {
      const denied = await t.call(method, `/v1/projects/${p.id}`, { token: viewer, body });
      expect([method, denied.status, denied.body.code]).toEqual([method, 403, "forbidden"]);
      const missing = await t.call(method, "/v1/projects/nope", { token: owner, body });
      expect([method, missing.status, missing.body.code]).toEqual([method, 404, "not_found"]);
      const anon = await t.call(method, `/v1/projects/${p.id}`, { body });
      expect([method, anon.status, anon.body.code]).toEqual([method, 401, "missing_auth"]);
    }
  });

  it("DELETE answers 409 project_busy while a build is queued, assigned or running, then deletes once it is final", async () => {
    const p = await createProject(t, owner);
    const pl = await createPipeline(t, owner, p.id, { platform: "macos" });
    const queued = await queueBuild(t, owner, p.id, pl.id);
    const busy = await t.call("DELETE", `/v1/projects/${p.id}`, { token: owner });
    expect([busy.status, busy.body.code]).toEqual([409, "project_busy"]);
    const runner = await registerRunner(t, owner, { platforms: ["macos"] });
    expect((await claim(t, runner))?.build_id).toBe(queued.id);
    expect((await t.call("DELETE", `/v1/projects/${p.id}`, { token: owner })).body.code).toBe("project_busy"); // assigned
    await reportStatus(t, runner, queued.id, { status: "running" });
    expect((await t.call("DELETE", `/v1/projects/${p.id}`, { token: owner })).body.code).toBe("project_busy"); // running
    await reportStatus(t, runner, queued.id, { status: "succeeded" });
    await t.call("PATCH", `/v1/runners/${runner.id}`, { token: runner.token, body: { status: "draining" } });
    const gone = await t.call("DELETE", `/v1/projects/${p.id}`, { token: developer });
    expect(gone.status).toBe(204);
    expect(await auditActions(p.id)).toEqual(["project.create", "project.delete"]);
  });

  it("deleting keeps finished builds, their logs and artifacts readable; the project leaves lists and lookups; its name is free again", async () => {
    const p = await createProject(t, owner);
    const pl = await createPipeline(t, owner, p.id);
    await t.call("PUT", `/v1/projects/${p.id}/source-credentials`, { token: owner, body: { token: "ghp_GONEWITHPROJECT" } });
    const { id: buildId, runner } = await finishedBuild(p.id, pl.id);
    // An artifact uploaded through the runner's real flow.
    const created = await t.call("POST", `/v1/runners/${runner.id}/jobs/${buildId}/artifacts`, {
      token: runner.token,
      body: { filename: "report.txt", size_bytes: 5, content_type: "text/plain" },
    });
    expect(created.status).toBe(200);
    const put = await t.app.request(created.body.upload.url, { method: "PUT", body: "hello" }, { peerAddress: "127.0.0.1" });
    expect(put.status).toBe(200);
    const complete = await t.call("POST", `/v1/runners/${runner.id}/jobs/${buildId}/artifacts/${created.body.artifact.id}/complete`, {
      token: runner.token,
    });
    expect(complete.status).toBe(200);
    await reportStatus(t, runner, buildId, { status: "succeeded" });

    expect((await t.call("DELETE", `/v1/projects/${p.id}`, { token: owner })).status).toBe(204);
    for (const path of [`/v1/projects/${p.id}`, `/v1/projects/${p.id}/pipelines`, `/v1/projects/${p.id}/pipelines/${pl.id}`]) {
      const res = await t.call("GET", path, { token: owner });
      expect([path, res.status, res.body.code]).toEqual([path, 404, "not_found"]);
    }
    const again = await t.call("DELETE", `/v1/projects/${p.id}`, { token: owner });
    expect([again.status, again.body.code]).toEqual([404, "not_found"]);
    const list = await t.call("GET", "/v1/projects", { token: owner });
    expect((list.body as Array<{ id: string }>).map((x) => x.id)).not.toContain(p.id);
    const trigger = await t.call("POST", `/v1/projects/${p.id}/builds`, { token: owner, body: { pipeline_id: pl.id, commit_sha: DEFAULT_SHA } });
    expect([trigger.status, trigger.body.code]).toEqual([404, "not_found"]);

    const build = await t.call("GET", `/v1/builds/${buildId}`, { token: viewer });
    expect(build.body).toMatchObject({ id: buildId, project_id: p.id, status: "succeeded" });
    const byProject = await t.call("GET", `/v1/builds?project_id=${p.id}`, { token: viewer });
    expect(byProject.body.map((b: { id: string }) => b.id)).toEqual([buildId]);
    const log = await t.call("GET", `/v1/builds/${buildId}/logs`, { token: viewer });
    expect(log.text).toBe("hello log\n");
    const artifacts = await t.call("GET", `/v1/builds/${buildId}/artifacts`, { token: viewer });
    expect(artifacts.body.map((a: { filename: string }) => a.filename)).toEqual(["report.txt"]);
    const link = await t.call("POST", `/v1/artifacts/${created.body.artifact.id}/download-link`, { token: viewer });
    expect(link.status).toBe(200);
    const download = await t.app.request(new URL(link.body.url, "http://127.0.0.1").pathname, {}, { peerAddress: "127.0.0.1" });
    expect([download.status, await download.text()]).toEqual([200, "hello"]);

    // The credentials went with the project; the name can be taken again.
    const { projects } = await import("../../src/db/schema/index.ts");
    const { eq } = await import("drizzle-orm");
    const row = await t.deps.db.select().from(projects).where(eq(projects.id, p.id)).get();
    expect(row?.sourceCredentialsSealed).toBeNull();
    expect(row?.deletedAt).toBe(t.clock.now());
    expect((await t.call("POST", "/v1/projects", { token: owner, body: { name: p.name, repo_url: "/srv/x" } })).status).toBe(200);
  });
});

describe("pipelines: GET one, PATCH, DELETE", () => {
  it("renames and changes the config; the new config applies to builds queued after, queued ones keep their snapshot", async () => {
    const p = await createProject(t, owner);
    const pl = await createPipeline(t, owner, p.id, { platform: "ios", steps: [{ name: "old", run: "echo old" }] });
    const before = await queueBuild(t, owner, p.id, pl.id);
    const newConfig = {
      platform: "android",
      steps: [{ name: "new", run: "echo new" }],
      artifacts: ["out/*.apk", { path: "reports/**", when: "always" }],
    };
    const res = await t.call("PATCH", `/v1/projects/${p.id}/pipelines/${pl.id}`, { token: developer, body: { name: "renamed", config: newConfig } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: pl.id, name: "renamed", config: newConfig });
    const got = await t.call("GET", `/v1/projects/${p.id}/pipelines/${pl.id}`, { token: viewer });
    expect(got.body).toEqual(res.body);
    const after = await queueBuild(t, owner, p.id, pl.id);
    expect((await t.call("GET", `/v1/builds/${before.id}`, { token: owner })).body.config_snapshot.steps[0].name).toBe("old");
    expect((await t.call("GET", `/v1/builds/${after.id}`, { token: owner })).body.config_snapshot).toEqual(newConfig);
    expect(await auditActions(pl.id)).toEqual(["pipeline.create", "pipeline.update"]);
  });

  it("names are unique per project (409 already_exists), free across projects", async () => {
    const p = await createProject(t, owner);
    const other = await createProject(t, owner);
    const a = await createPipeline(t, owner, p.id, {}, "release");
    await createPipeline(t, owner, p.id, {}, "debug");
    await createPipeline(t, owner, other.id, {}, "release");
    const dup = await t.call("POST", `/v1/projects/${p.id}/pipelines`, { token: owner, body: { name: "Release", config: CONFIG } });
    expect([dup.status, dup.body.code]).toEqual([409, "already_exists"]);
    const rename = await t.call("PATCH", `/v1/projects/${p.id}/pipelines/${a.id}`, { token: owner, body: { name: "debug" } });
    expect([rename.status, rename.body.code]).toEqual([409, "already_exists"]);
  });

  it("DELETE: 409 project_busy while a build of it is not final; then 204, gone from lists, its builds readable, no rerun", async () => {
    const p = await createProject(t, owner);
    const pl = await createPipeline(t, owner, p.id, { platform: "macos" });
    const queued = await queueBuild(t, owner, p.id, pl.id);
    const busy = await t.call("DELETE", `/v1/projects/${p.id}/pipelines/${pl.id}`, { token: owner });
    expect([busy.status, busy.body.code]).toEqual([409, "project_busy"]);
    await t.call("POST", `/v1/builds/${queued.id}/cancel`, { token: owner });
    expect((await t.call("DELETE", `/v1/projects/${p.id}/pipelines/${pl.id}`, { token: developer })).status).toBe(204);
    expect((await t.call("GET", `/v1/projects/${p.id}/pipelines`, { token: owner })).body).toEqual([]);
    expect((await t.call("GET", `/v1/builds/${queued.id}`, { token: owner })).body.status).toBe("canceled");
    const trigger = await t.call("POST", `/v1/projects/${p.id}/builds`, { token: owner, body: { pipeline_id: pl.id, commit_sha: DEFAULT_SHA } });
    expect([trigger.status, trigger.body.code]).toEqual([404, "not_found"]);
    const rerun = await t.call("POST", `/v1/builds/${queued.id}/rerun`, { token: owner });
    expect([rerun.status, rerun.body.code]).toEqual([404, "not_found"]);
    // The name is free again in this project.
    await createPipeline(t, owner, p.id, {}, pl.name);
    expect(await auditActions(pl.id)).toEqual(["pipeline.create", "pipeline.delete"]);
  });

  it("answers 404 not_found, 403 forbidden and 400 invalid_input where due", async () => {
    const p = await createProject(t, owner);
    const other = await createProject(t, owner);
    const pl = await createPipeline(t, owner, p.id);
    for (const [method, body] of [
      ["GET", undefined],
      ["PATCH", { name: "x" }],
      ["DELETE", undefined],
    ] as const) {
      for (const path of [
        `/v1/projects/${p.id}/pipelines/nope`,
        `/v1/projects/${other.id}/pipelines/${pl.id}`,
        `/v1/projects/nope/pipelines/${pl.id}`,
      ]) {
        const res = await t.call(method, path, { token: owner, body });
        expect([method, path, res.status, res.body.code]).toEqual([method, path, 404, "not_found"]);
      }
    }
    for (const [method, body] of [
      ["PATCH", { name: "x" }],
      ["DELETE", undefined],
    ] as const) {
      const res = await t.call(method, `/v1/projects/${p.id}/pipelines/${pl.id}`, { token: viewer, body });
      expect([method, res.status, res.body.code]).toEqual([method, 403, "forbidden"]);
    }
    const bad = await t.call("PATCH", `/v1/projects/${p.id}/pipelines/${pl.id}`, { token: owner, body: { config: { platform: "ios", steps: [] } } });
    expect([bad.status, bad.body.code]).toEqual([400, "invalid_input"]);
  });
});

describe("one pipeline: who may read and change it", () => {
  it("a qa_viewer reads it (200) but may not change it; without a session every route answers 401 missing_auth", async () => {
    const p = await createProject(t, owner);
    const pl = await createPipeline(t, owner, p.id, { platform: "android" }, "read-me");
    const read = await t.call("GET", `/v1/projects/${p.id}/pipelines/${pl.id}`, { token: viewer });
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ id: pl.id, project_id: p.id, name: "read-me", config: { platform: "android" } });
    for (const [method, body] of [
      ["GET", undefined],
      ["PATCH", { name: "x" }],
      ["DELETE", undefined],
    ] as const) {
      const anon = await t.call(method, `/v1/projects/${p.id}/pipelines/${pl.id}`, { body });
      expect([method, anon.status, anon.body.code]).toEqual([method, 401, "missing_auth"]);
    }
    const renamed = await t.call("PATCH", `/v1/projects/${p.id}/pipelines/${pl.id}`, { token: developer, body: { name: "renamed" } });
    expect([renamed.status, renamed.body.name]).toEqual([200, "renamed"]);
  });
});

describe("GET /v1/builds filters on pipeline_id and branch", () => {
  it("answers only the builds of that pipeline, of that branch, and of both", async () => {
    const p = await createProject(t, owner);
    const a = await createPipeline(t, owner, p.id, { platform: "macos" }, "a");
    const b = await createPipeline(t, owner, p.id, { platform: "macos" }, "b");
    const aMain = await queueBuild(t, owner, p.id, a.id, { branch: "main" });
    const aFeat = await queueBuild(t, owner, p.id, a.id, { branch: "feature/x" });
    const bFeat = await queueBuild(t, owner, p.id, b.id, { branch: "feature/x" });
    const ids = async (query: string) =>
      ((await t.call("GET", `/v1/builds?project_id=${p.id}&${query}`, { token: viewer })).body as Array<{ id: string }>).map((x) => x.id).sort();
    expect(await ids(`pipeline_id=${a.id}`)).toEqual([aMain.id, aFeat.id].sort());
    expect(await ids("branch=feature%2Fx")).toEqual([aFeat.id, bFeat.id].sort());
    expect(await ids(`pipeline_id=${b.id}&branch=feature%2Fx`)).toEqual([bFeat.id]);
    expect(await ids(`pipeline_id=${b.id}&branch=main`)).toEqual([]);
    for (const build of [aMain, aFeat, bFeat]) await t.call("POST", `/v1/builds/${build.id}/cancel`, { token: owner });
  });
});

describe("strict pipeline config (docs/api.md §5)", () => {
  const base = { platform: "ios", steps: [{ name: "a", run: "b" }] };
  const cases: Array<[string, Record<string, unknown>, string[]]> = [
    ["a top-level typo", { ...base, on: "push" }, ["config.on"]],
    [
      "a step key",
      {
        ...base,
        steps: [
          { name: "a", run: "b" },
          { name: "c", runs: "d" },
        ],
      },
      ["config.steps.1.run", "config.steps.1.runs"],
    ],
    ["an artifact object key", { ...base, artifacts: ["x", { path: "y", whne: "always" }] }, ["config.artifacts.1.whne"]],
    ["a trigger key", { ...base, triggers: [{ event: "push", branch: ["main"] }] }, ["config.triggers.0.branch"]],
  ];
  for (const [what, config, paths] of cases) {
    it(`refuses ${what} with the unknown key's own path ${paths.at(-1)}`, async () => {
      const p = await createProject(t, owner);
      const res = await t.call("POST", `/v1/projects/${p.id}/pipelines`, { token: owner, body: { name: "p", config } });
      expect([res.status, res.body.code]).toEqual([400, "invalid_input"]);
      expect(res.body.issues.map((i: { path: string }) => i.path).sort()).toEqual(paths);
      const pl = await createPipeline(t, owner, p.id, {}, "ok");
      const patched = await t.call("PATCH", `/v1/projects/${p.id}/pipelines/${pl.id}`, { token: owner, body: { config } });
      expect([patched.status, patched.body.code, patched.body.issues?.map((i: { path: string }) => i.path).sort()]).toEqual([
        400,
        "invalid_input",
        paths,
      ]);
    });
  }

  it("names the wrong value inside an artifact object and a trigger", async () => {
    const p = await createProject(t, owner);
    for (const [config, path] of [
      [{ ...base, artifacts: [{ path: "y", when: "sometimes" }] }, "config.artifacts.0.when"],
      [{ ...base, artifacts: [{ path: 3 }] }, "config.artifacts.0.path"],
      [{ ...base, triggers: [{ event: "merge" }] }, "config.triggers.0.event"],
      [{ ...base, triggers: [{ event: "tag", tags: "v*" }] }, "config.triggers.0.tags"],
    ] as const) {
      const res = await t.call("POST", `/v1/projects/${p.id}/pipelines`, { token: owner, body: { name: "p", config } });
      expect([res.status, res.body.code, res.body.issues?.map((i: { path: string }) => i.path)]).toEqual([400, "invalid_input", [path]]);
    }
  });

  it("takes triggers and artifact items with when (default on_success)", async () => {
    const p = await createProject(t, owner);
    const config = {
      ...base,
      artifacts: ["build/*.ipa", { path: "reports/*.xml", when: "always" }, { path: "out/*.dSYM.zip" }],
      triggers: [{ event: "push", branches: ["main", "release/**"] }, { event: "tag", tags: ["v*"] }, { event: "pull_request" }],
    };
    const res = await t.call("POST", `/v1/projects/${p.id}/pipelines`, { token: owner, body: { name: "p", config } });
    expect(res.status).toBe(200);
    expect(res.body.config.artifacts).toEqual([
      "build/*.ipa",
      { path: "reports/*.xml", when: "always" },
      { path: "out/*.dSYM.zip", when: "on_success" },
    ]);
    expect(res.body.config.triggers).toEqual(config.triggers);
    const empty = await t.call("POST", `/v1/projects/${p.id}/pipelines`, { token: owner, body: { name: "q", config: { ...base, triggers: [] } } });
    expect(empty.body.config.triggers).toEqual([]);
  });
});

describe("POST /v1/builds/{id}/rerun", () => {
  it("queues a new manual build of the same pipeline, commit and branch with the current config and rerun_of; audited", async () => {
    const p = await createProject(t, owner);
    const pl = await createPipeline(t, owner, p.id, { platform: "ios", steps: [{ name: "v1", run: "true" }] });
    const original = await queueBuild(t, owner, p.id, pl.id, {
      branch: "feature/x",
      commit_sha: "abcdef1234567",
      trigger_ref: "refs/heads/feature/x",
    });
    await t.call("POST", `/v1/builds/${original.id}/cancel`, { token: owner });
    await t.call("PATCH", `/v1/projects/${p.id}/pipelines/${pl.id}`, {
      token: owner,
      body: { config: { platform: "ios", steps: [{ name: "v2", run: "true" }] } },
    });
    const res = await t.call("POST", `/v1/builds/${original.id}/rerun`, { token: developer });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: expect.any(String),
      project_id: p.id,
      pipeline_id: pl.id,
      build_number: original.build_number + 1,
      status: "queued",
      trigger_type: "manual",
      branch: "feature/x",
      rerun_of: original.id,
      queued_at: t.clock.now(),
      created_at: t.clock.now(),
      updated_at: t.clock.now(),
    });
    const full = await t.call("GET", `/v1/builds/${res.body.id}`, { token: viewer });
    expect(full.body).toMatchObject({ commit_sha: "abcdef1234567", branch: "feature/x", rerun_of: original.id, trigger_ref: "refs/heads/feature/x" });
    expect(full.body.config_snapshot.steps[0].name).toBe("v2");
    expect((await t.call("GET", `/v1/builds/${original.id}`, { token: viewer })).body.rerun_of).toBeNull();
    expect(await auditActions(res.body.id)).toEqual(["build.rerun"]);
  });

  it("answers 404 not_found for an unknown build, 403 forbidden for a qa_viewer, 401 without a session", async () => {
    const missing = await t.call("POST", "/v1/builds/nope/rerun", { token: owner });
    expect([missing.status, missing.body.code]).toEqual([404, "not_found"]);
    const p = await createProject(t, owner);
    const pl = await createPipeline(t, owner, p.id);
    const b = await queueBuild(t, owner, p.id, pl.id);
    const denied = await t.call("POST", `/v1/builds/${b.id}/rerun`, { token: viewer });
    expect([denied.status, denied.body.code]).toEqual([403, "forbidden"]);
    const anon = await t.call("POST", `/v1/builds/${b.id}/rerun`);
    expect([anon.status, anon.body.code]).toEqual([401, "missing_auth"]);
  });

  it("checks the repository rules again: a file:// project's build is not rerun in remote mode (422 source_not_allowed)", async () => {
    const u = await makeTestApp();
    const { ownerToken } = await completeLocalSetup(u);
    const p = await createProject(u, ownerToken, { repo_url: "file:///srv/git/app.git" });
    const pl = await createPipeline(u, ownerToken, p.id);
    const b = await queueBuild(u, ownerToken, p.id, pl.id);
    await u.call("POST", `/v1/builds/${b.id}/cancel`, { token: ownerToken });
    await setInstance(u, { runtimeMode: "remote" });
    const refused = await u.call("POST", `/v1/builds/${b.id}/rerun`, { token: ownerToken });
    expect([refused.status, refused.body.code]).toEqual([422, "source_not_allowed"]);
    const builds = (await u.call("GET", "/v1/builds", { token: ownerToken })).body as unknown[];
    expect(builds).toHaveLength(1);
  });
});

describe("why queued (docs/api.md §13)", () => {
  it("walks no_matching_runner → no_runner_online → waiting_for_runner, with counts and positions", async () => {
    // A fresh instance: no runner from other tests counts here.
    const u = await makeTestApp();
    const { ownerToken } = await completeLocalSetup(u);
    const p = await createProject(u, ownerToken);
    const ios = await createPipeline(u, ownerToken, p.id, { platform: "ios" }, "ios");
    const android = await createPipeline(u, ownerToken, p.id, { platform: "android" }, "android");
    const any = await createPipeline(u, ownerToken, p.id, { platform: "any" }, "any");
    const get = async (id: string) => (await u.call("GET", `/v1/builds/${id}`, { token: ownerToken })).body;

    const first = await queueBuild(u, ownerToken, p.id, ios.id);
    expect((await get(first.id)).queue).toEqual({
      position: null,
      matching_runners: { online: 0, busy: 0, draining: 0, offline: 0 },
      reason: "no_matching_runner",
    });

    // An Android runner does not offer iOS; it does take `any` builds.
    const droid = await registerRunner(u, ownerToken, { platforms: ["android"] });
    expect((await get(first.id)).queue.reason).toBe("no_matching_runner");
    u.clock.advance(1);
    const anyBuild = await queueBuild(u, ownerToken, p.id, any.id);
    expect((await get(anyBuild.id)).queue).toEqual({
      position: 1,
      matching_runners: { online: 1, busy: 0, draining: 0, offline: 0 },
      reason: "waiting_for_runner",
    });

    const mac = await registerRunner(u, ownerToken, { platforms: ["ios", "macos"] });
    await u.call("PATCH", `/v1/runners/${mac.id}`, { token: mac.token, body: { status: "draining" } });
    expect((await get(first.id)).queue).toEqual({
      position: 1,
      matching_runners: { online: 0, busy: 0, draining: 1, offline: 0 },
      reason: "no_runner_online",
    });
    // Offline after the window, as the sweeper sees it.
    u.clock.advance(u.deps.config.runnerOfflineAfterS + 1);
    const { sweep } = await import("../../src/domain/builds/sweeper.ts");
    await sweep(u.deps);
    const offline = (await get(first.id)).queue;
    expect(offline.reason).toBe("no_runner_online");
    expect(offline.matching_runners.offline + offline.matching_runners.draining).toBe(1);

    await u.call("PATCH", `/v1/runners/${mac.id}`, { token: mac.token, body: { status: "online" } });
    u.clock.advance(1);
    const second = await queueBuild(u, ownerToken, p.id, ios.id);
    const androidBuild = await queueBuild(u, ownerToken, p.id, android.id);
    // The iOS runner could take: first (ios), anyBuild (any), second (ios); not the android one.
    expect((await get(first.id)).queue).toMatchObject({ position: 1, reason: "waiting_for_runner" });
    expect((await get(anyBuild.id)).queue.position).toBe(2); // every runner matches: first (ios) is older
    expect((await get(second.id)).queue).toEqual({
      position: 3,
      matching_runners: { online: 1, busy: 0, draining: 0, offline: 0 },
      reason: "waiting_for_runner",
    });
    expect((await get(androidBuild.id)).queue.position).toBe(2); // anyBuild, then itself

    // Once claimed, the build carries queue: null.
    const job = await claim(u, mac);
    expect(job?.build_id).toBe(first.id);
    expect((await get(first.id)).queue).toBeNull();
    expect((await get(second.id)).queue.position).toBe(2);
    void droid;
  });
});
