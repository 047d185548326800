import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pipelines } from "../../src/db/schema/index.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { buildWorld, claim, createPipeline, createProject, makeGitRepo, queueBuild, reportStatus, type GitRepo } from "../helpers/builds.ts";
import { userWithRole } from "../helpers/factories.ts";
import { startGitHttpServer } from "../helpers/git-http.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON
type Json = any;

describe("trigger with branch resolution through real git", () => {
  let t: TestApp;
  let w: Awaited<ReturnType<typeof buildWorld>>;
  let repo: GitRepo;
  beforeAll(async () => {
    repo = makeGitRepo();
    repo.commit("feature/login", { "login.txt": "x" });
    t = await makeTestApp();
    w = await buildWorld(t, { repo_url: repo.url });
  });
  afterAll(() => repo.remove());

  it("resolves the default branch to its current commit and answers the create subset", async () => {
    const res = await t.call("POST", `/v1/projects/${w.project.id}/builds`, {
      token: w.ownerToken,
      body: { pipeline_id: w.pipeline.id, trigger_ref: "pr-7" },
    });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(
      ["id", "project_id", "pipeline_id", "build_number", "status", "trigger_type", "branch", "queued_at", "created_at", "updated_at"].sort(),
    );
    expect(res.body).toMatchObject({
      project_id: w.project.id,
      pipeline_id: w.pipeline.id,
      status: "queued",
      trigger_type: "manual",
      branch: "main",
      queued_at: t.clock.now(),
    });
    const full = await t.call("GET", `/v1/builds/${res.body.id}`, { token: w.ownerToken });
    expect(full.body).toMatchObject({
      commit_sha: repo.shas.main,
      trigger_ref: "pr-7",
      config_snapshot: w.pipeline.config,
      runner_id: null,
      step_results: [],
      failure_reason: null,
    });
  });

  it("resolves a named branch (path-style URL too) and keeps a given commit_sha without asking git", async () => {
    const res = await t.call("POST", `/v1/projects/${w.project.id}/builds`, {
      token: w.ownerToken,
      body: { pipeline_id: w.pipeline.id, branch: "feature/login" },
    });
    const full = await t.call("GET", `/v1/builds/${res.body.id}`, { token: w.ownerToken });
    expect(full.body).toMatchObject({ branch: "feature/login", commit_sha: repo.shas["feature/login"] });

    const pathProject = await createProject(t, w.ownerToken, { repo_url: repo.path });
    const pl = await createPipeline(t, w.ownerToken, pathProject.id);
    const viaPath = await t.call("POST", `/v1/projects/${pathProject.id}/builds`, { token: w.ownerToken, body: { pipeline_id: pl.id } });
    expect((await t.call("GET", `/v1/builds/${viaPath.body.id}`, { token: w.ownerToken })).body.commit_sha).toBe(repo.shas.main);

    const unreachable = await createProject(t, w.ownerToken, { repo_url: "file:///nonexistent/hangar/repo" });
    const pu = await createPipeline(t, w.ownerToken, unreachable.id);
    const given = await t.call("POST", `/v1/projects/${unreachable.id}/builds`, {
      token: w.ownerToken,
      body: { pipeline_id: pu.id, commit_sha: "ABCDEF1" },
    });
    expect(given.status).toBe(200);
    expect((await t.call("GET", `/v1/builds/${given.body.id}`, { token: w.ownerToken })).body.commit_sha).toBe("abcdef1");
  });

  it("answers 422 branch_not_found for an unknown branch", async () => {
    const res = await t.call("POST", `/v1/projects/${w.project.id}/builds`, {
      token: w.ownerToken,
      body: { pipeline_id: w.pipeline.id, branch: "nope" },
    });
    expect([res.status, res.body.code]).toEqual([422, "branch_not_found"]);
  });

  it("answers 422 source_unreachable for a repository that cannot be read", async () => {
    const p = await createProject(t, w.ownerToken, { repo_url: "file:///nonexistent/hangar/repo" });
    const pl = await createPipeline(t, w.ownerToken, p.id);
    const res = await t.call("POST", `/v1/projects/${p.id}/builds`, { token: w.ownerToken, body: { pipeline_id: pl.id } });
    expect([res.status, res.body.code]).toEqual([422, "source_unreachable"]);
    expect(res.text).not.toContain("nonexistent");
  });

  it("refuses a malformed commit_sha or branch (400 invalid_input) and unknown ids (404 not_found)", async () => {
    for (const body of [
      { pipeline_id: w.pipeline.id, commit_sha: "abc12" },
      { pipeline_id: w.pipeline.id, commit_sha: "z".repeat(40) },
      { pipeline_id: w.pipeline.id, commit_sha: "a".repeat(41) },
      { pipeline_id: w.pipeline.id, branch: "--upload-pack=x" },
      {},
    ]) {
      const res = await t.call("POST", `/v1/projects/${w.project.id}/builds`, { token: w.ownerToken, body });
      expect([res.status, res.body.code]).toEqual([400, "invalid_input"]);
    }
    const noProject = await t.call("POST", "/v1/projects/nope/builds", { token: w.ownerToken, body: { pipeline_id: w.pipeline.id } });
    expect([noProject.status, noProject.body.code]).toEqual([404, "not_found"]);
    const noPipeline = await t.call("POST", `/v1/projects/${w.project.id}/builds`, { token: w.ownerToken, body: { pipeline_id: "nope" } });
    expect([noPipeline.status, noPipeline.body.code]).toEqual([404, "not_found"]);
  });

  it("freezes config_snapshot at queue time", async () => {
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    await t.deps.db
      .update(pipelines)
      .set({ config: { platform: "ios", steps: [{ name: "changed", run: "false" }] } })
      .where(eq(pipelines.id, w.pipeline.id));
    const full = await t.call("GET", `/v1/builds/${b.id}`, { token: w.ownerToken });
    expect(full.body.config_snapshot).toEqual(w.pipeline.config);
  });
});

describe("private repository over authenticated smart HTTP", () => {
  it("passes the project's source credentials to git ls-remote, never in the URL or on the command line", async () => {
    const repo = makeGitRepo();
    const server = await startGitHttpServer(repo.path, { username: "bot", password: "s3cr3t-token" });
    // A shim first on PATH records git's argv (what `ps` would show), then runs the real git.
    const shimDir = mkdtempSync(join(tmpdir(), "hangar-git-shim-"));
    const realGit = execFileSync("sh", ["-c", "command -v git"], { encoding: "utf8" }).trim();
    writeFileSync(join(shimDir, "git"), `#!/bin/sh\nprintf '%s\\n' "$*" >> "${shimDir}/argv.log"\nexec "${realGit}" "$@"\n`, { mode: 0o755 });
    const savedPath = process.env.PATH;
    process.env.PATH = `${shimDir}:${savedPath}`;
    try {
      const t = await makeTestApp();
      const w = await buildWorld(t, { repo_url: server.url });
      const denied = await t.call("POST", `/v1/projects/${w.project.id}/builds`, { token: w.ownerToken, body: { pipeline_id: w.pipeline.id } });
      expect([denied.status, denied.body.code]).toEqual([422, "source_unreachable"]);

      await t.call("PUT", `/v1/projects/${w.project.id}/source-credentials`, {
        token: w.ownerToken,
        body: { username: "bot", token: "s3cr3t-token" },
      });
      const ok = await t.call("POST", `/v1/projects/${w.project.id}/builds`, { token: w.ownerToken, body: { pipeline_id: w.pipeline.id } });
      expect(ok.status).toBe(200);
      expect((await t.call("GET", `/v1/builds/${ok.body.id}`, { token: w.ownerToken })).body.commit_sha).toBe(repo.shas.main);
      expect(server.seen).toContain(`Basic ${Buffer.from("bot:s3cr3t-token").toString("base64")}`);
      expect(JSON.stringify(t.logs)).not.toContain("s3cr3t-token");
      const argv = readFileSync(join(shimDir, "argv.log"), "utf8");
      expect(argv).toContain(`ls-remote -- ${server.url} refs/heads/main`);
      expect(argv).not.toContain("s3cr3t-token");
      expect(argv).not.toContain(Buffer.from("bot:s3cr3t-token").toString("base64"));
    } finally {
      process.env.PATH = savedPath;
      rmSync(shimDir, { recursive: true, force: true });
      await server.close();
      repo.remove();
    }
  });
});

describe("build numbers", () => {
  it("stay gap-free and unique under 30 concurrent triggers, per project", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const other = await createProject(t, w.ownerToken);
    const otherPl = await createPipeline(t, w.ownerToken, other.id);
    const results = await Promise.all([
      ...Array.from({ length: 30 }, () => queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id)),
      ...Array.from({ length: 5 }, () => queueBuild(t, w.ownerToken, other.id, otherPl.id)),
    ]);
    const numbers = results
      .filter((b: Json) => b.project_id === w.project.id)
      .map((b: Json) => b.build_number)
      .sort((a: number, b: number) => a - b);
    expect(numbers).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
    const otherNumbers = results
      .filter((b: Json) => b.project_id === other.id)
      .map((b: Json) => b.build_number)
      .sort();
    expect(otherNumbers).toEqual([1, 2, 3, 4, 5]);
  });
});

describe("list, get and cancel", () => {
  let t: TestApp;
  let w: Awaited<ReturnType<typeof buildWorld>>;
  let viewer: string;
  let developer: string;
  let otherProject: Json;
  const ids: string[] = [];
  beforeAll(async () => {
    t = await makeTestApp();
    // The other project's builds are macos-only, which this runner cannot take, so claims stay predictable.
    w = await buildWorld(t, { platforms: ["ios", "android"] });
    viewer = (await userWithRole(t, "qa_viewer")).token;
    developer = (await userWithRole(t, "developer")).token;
    otherProject = await createProject(t, w.ownerToken);
    const pl = await createPipeline(t, w.ownerToken, otherProject.id, { platform: "macos" });
    for (let i = 0; i < 12; i++) {
      ids.push((await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id)).id);
      if (i % 4 === 0) await queueBuild(t, w.ownerToken, otherProject.id, pl.id);
    }
  });

  it("lists newest first, filters by project and status, and pages with a cursor", async () => {
    const all = await t.call("GET", "/v1/builds", { token: viewer });
    expect(all.status).toBe(200);
    expect(all.body).toHaveLength(15);
    expect(all.headers.get("x-next-cursor")).toBeNull();
    const mine = await t.call("GET", `/v1/builds?project_id=${w.project.id}`, { token: viewer });
    expect(mine.body.map((b: Json) => b.id)).toEqual([...ids].reverse());

    const seen: string[] = [];
    let url = `/v1/builds?project_id=${w.project.id}&limit=5`;
    for (let page = 0; page < 5; page++) {
      const res = await t.call("GET", url, { token: viewer });
      seen.push(...res.body.map((b: Json) => b.id));
      const cursor = res.headers.get("x-next-cursor");
      if (!cursor) break;
      expect(res.headers.get("link")).toContain(`cursor=${cursor}`);
      url = `/v1/builds?project_id=${w.project.id}&limit=5&cursor=${cursor}`;
    }
    expect(seen).toEqual([...ids].reverse());

    await claim(t, w.runner);
    const assigned = await t.call("GET", "/v1/builds?status=assigned", { token: viewer });
    expect(assigned.body.map((b: Json) => b.id)).toEqual([ids[0]]);
    expect(assigned.body[0]).toMatchObject({ runner_id: w.runner.id, attempt_count: 1 });
  });

  it("refuses bad list parameters with 400 invalid_input", async () => {
    for (const q of ["status=done", "limit=0", "limit=201", "cursor=%%%", "cursor=YWJj"]) {
      const res = await t.call("GET", `/v1/builds?${q}`, { token: viewer });
      expect([q, res.status, res.body.code]).toEqual([q, 400, "invalid_input"]);
    }
  });

  it("gets one build in full, 404 not_found for an unknown one, 401 without a session", async () => {
    const res = await t.call("GET", `/v1/builds/${ids[1]}`, { token: viewer });
    expect(res.body).toMatchObject({
      id: ids[1],
      build_number: 2,
      status: "queued",
      trigger_type: "manual",
      trigger_actor: "owner@example.com",
      trigger_event: null,
      exit_code: null,
      started_at: null,
      finished_at: null,
      runner_id: null,
      step_results: [],
    });
    const missing = await t.call("GET", "/v1/builds/nope", { token: viewer });
    expect([missing.status, missing.body.code]).toEqual([404, "not_found"]);
    const anon = await t.call("GET", "/v1/builds");
    expect([anon.status, anon.body.code]).toEqual([401, "missing_auth"]);
  });

  it("cancels a queued build; the runner never gets it", async () => {
    const res = await t.call("POST", `/v1/builds/${ids[1]}/cancel`, { token: developer });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: ids[1], status: "canceled", finished_at: t.clock.now(), failure_reason: "canceled_by_user" });
    const next = await claim(t, w.runner);
    expect(next.build_id).toBe(ids[2]);
  });

  it("cancels an assigned or running build at once and tells the runner", async () => {
    const running = ids[2]!;
    await reportStatus(t, w.runner, running, { status: "running" });
    const res = await t.call("POST", `/v1/builds/${running}/cancel`, { token: w.ownerToken });
    expect(res.body.status).toBe("canceled");
    const hb = await t.call("POST", `/v1/runners/${w.runner.id}/heartbeat`, { token: w.runner.token, body: {} });
    expect(hb.body.cancel_job_ids).toEqual([running]);
    const job = await t.call("GET", `/v1/runners/${w.runner.id}/jobs/${running}`, { token: w.runner.token });
    expect(job.body).toMatchObject({ status: "canceled", cancel_requested: true });
    for (const status of ["running", "succeeded", "failed", "canceled"]) {
      const report = await reportStatus(t, w.runner, running, { status });
      expect([status, report.status, report.body.code]).toEqual([status, 409, "build_canceled"]);
    }
    // The assigned one (ids[0]) too.
    expect((await t.call("POST", `/v1/builds/${ids[0]}/cancel`, { token: w.ownerToken })).body.status).toBe("canceled");
    // After a lease period the canceled jobs drop out of cancel_job_ids.
    t.clock.advance(t.deps.config.jobLeaseS + 1);
    const later = await t.call("POST", `/v1/runners/${w.runner.id}/heartbeat`, { token: w.runner.token, body: {} });
    expect(later.body.cancel_job_ids).toEqual([]);
    expect(later.body.runner.status).toBe("online");
  });

  it("answers 200 with the build unchanged when it is already finished", async () => {
    const b = ids[3]!;
    await claim(t, w.runner);
    await reportStatus(t, w.runner, b, { status: "running" });
    await reportStatus(t, w.runner, b, { status: "succeeded" });
    const { queue, ...before } = (await t.call("GET", `/v1/builds/${b}`, { token: viewer })).body;
    expect(queue).toBeNull();
    t.clock.advance(10);
    const res = await t.call("POST", `/v1/builds/${b}/cancel`, { token: w.ownerToken });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(before);
    const again = await t.call("POST", `/v1/builds/${ids[1]}/cancel`, { token: w.ownerToken });
    expect([again.status, again.body.status]).toEqual([200, "canceled"]);
  });

  it("refuses trigger and cancel to qa_viewer (403 forbidden) and cancel of an unknown build (404 not_found)", async () => {
    const trig = await t.call("POST", `/v1/projects/${w.project.id}/builds`, {
      token: viewer,
      body: { pipeline_id: w.pipeline.id, commit_sha: "abcdef1" },
    });
    expect([trig.status, trig.body.code]).toEqual([403, "forbidden"]);
    const cancel = await t.call("POST", `/v1/builds/${ids[4]}/cancel`, { token: viewer });
    expect([cancel.status, cancel.body.code]).toEqual([403, "forbidden"]);
    const missing = await t.call("POST", "/v1/builds/nope/cancel", { token: w.ownerToken });
    expect([missing.status, missing.body.code]).toEqual([404, "not_found"]);
    const dev = await t.call("POST", `/v1/projects/${w.project.id}/builds`, {
      token: developer,
      body: { pipeline_id: w.pipeline.id, commit_sha: "abcdef1" },
    });
    expect(dev.status).toBe(200);
  });
});
