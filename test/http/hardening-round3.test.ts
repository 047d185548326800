// Smaller rules of the third hardening round (docs/decisions.md "Hardening, round 3"): no userinfo in repo_url, a
// pipeline's env for builders only (API and pages), bidi controls neutralised in <title>, <option> and the config
// shown on pages, and CSP form-action 'self'.
import { beforeAll, describe, expect, it } from "vitest";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { createPipeline, createProject, queueBuild } from "../helpers/builds.ts";
import { completeLocalSetup, userWithRole } from "../helpers/factories.ts";
import { page } from "../helpers/web.ts";

let t: TestApp;
let owner: string;
let viewer: string;
let developer: string;

beforeAll(async () => {
  t = await makeTestApp();
  owner = (await completeLocalSetup(t)).ownerToken;
  viewer = (await userWithRole(t, "qa_viewer")).token;
  developer = (await userWithRole(t, "developer")).token;
});

describe("repo_url with userinfo", () => {
  it("answers 400 invalid_input on create and on change; an ssh user name without a password is accepted", async () => {
    for (const repo_url of [
      "https://bot:ghp_secret@github.com/a/b.git",
      "https://token@github.com/a/b.git",
      "http://u:p@git.example.com/r",
      "git://x@host/r",
      "ssh://git:pw@host/r.git",
      "ssh://git%3Apw@host/r.git",
    ]) {
      const res = await t.call("POST", "/v1/projects", { token: owner, body: { name: `p-${crypto.randomUUID().slice(0, 6)}`, repo_url } });
      expect([res.status, res.body.code], repo_url).toEqual([400, "invalid_input"]);
      expect(res.text).not.toContain("ghp_secret");
    }
    const project = await createProject(t, owner);
    const patched = await t.call("PATCH", `/v1/projects/${project.id}`, {
      token: owner,
      body: { repo_url: "https://me:pw@git.example.com/app.git" },
    });
    expect([patched.status, patched.body.code]).toEqual([400, "invalid_input"]);
    for (const repo_url of ["ssh://git@git.example.com/app.git", "git@git.example.com:org/app.git", "https://git.example.com/a@b/app.git"]) {
      const ok = await t.call("PATCH", `/v1/projects/${project.id}`, { token: owner, body: { repo_url } });
      expect(ok.status, repo_url).toBe(200);
    }
  });
});

describe("a pipeline's env", () => {
  it("is answered to builders only: pipelines and build config snapshots, API and pages", async () => {
    const project = await createProject(t, developer);
    const pipeline = await createPipeline(t, developer, project.id, { env: { INTERNAL_URL: "https://internal.example/secret-path-4711" } } as never);
    expect(pipeline.config.env).toEqual({ INTERNAL_URL: "https://internal.example/secret-path-4711" });
    const build = await queueBuild(t, developer, project.id, pipeline.id);

    const reads = [
      `/v1/projects/${project.id}/pipelines`,
      `/v1/projects/${project.id}/pipelines/${pipeline.id}`,
      `/v1/builds?project_id=${project.id}`,
      `/v1/builds/${build.id}`,
    ];
    for (const path of reads) {
      const asViewer = await t.call("GET", path, { token: viewer });
      expect(asViewer.status, path).toBe(200);
      expect(asViewer.text, path).not.toContain("secret-path-4711");
      expect(asViewer.text, path).not.toContain('"env"');
      const asDeveloper = await t.call("GET", path, { token: developer });
      expect(asDeveloper.text, path).toContain("secret-path-4711");
    }
    const viewerPage = await page(t, "GET", `/projects/${project.id}`, { session: viewer });
    expect(viewerPage.status).toBe(200);
    expect(viewerPage.text).toContain("echo hello");
    expect(viewerPage.text).not.toContain("secret-path-4711");
    const ownerPage = await page(t, "GET", `/projects/${project.id}`, { session: owner });
    expect(ownerPage.text).toContain("secret-path-4711");
  });
});

describe("bidirectional controls on pages, and form-action", () => {
  it("neutralises them in <title>, <option> and the pipeline config shown; the CSP has form-action 'self'", async () => {
    const name = "invoice\u202Egpj.exe";
    const project = await createProject(t, owner, { name });
    await createPipeline(t, owner, project.id, { steps: [{ name: "step\u2067x\u2069", run: "echo \u202Edone" }] });

    const projectPage = await page(t, "GET", `/projects/${project.id}`, { session: owner });
    const title = /<title>([^<]*)<\/title>/.exec(projectPage.text)?.[1] ?? "";
    expect(title).toContain("invoice&lt;U+202E&gt;gpj.exe");
    // Only the rename field keeps the real name (an edit must not change it); nothing shown does.
    const shown = projectPage.text.replace(/ value="[^"]*"/g, "");
    expect(/.{0,80}[\u202A-\u202E\u2066-\u2069].{0,40}/s.exec(shown)?.[0]).toBeUndefined();
    // The config (edit form) shows them as JSON escapes, which parse back to the same characters.
    expect(projectPage.text).toContain("step\\u2067x\\u2069");
    expect(projectPage.text).toContain("echo \\u202edone");
    const viewerPage = await page(t, "GET", `/projects/${project.id}`, { session: viewer });
    expect(viewerPage.text).toContain("echo \\u202edone");
    expect(viewerPage.text.replace(/ value="[^"]*"/g, "")).not.toMatch(/[\u202A-\u202E\u2066-\u2069]/);

    const buildsPage = await page(t, "GET", "/builds", { session: owner });
    const option = new RegExp(`<option value="${project.id}"[^>]*>([^<]*)</option>`).exec(buildsPage.text)?.[1];
    expect(option).toBe("invoice&lt;U+202E&gt;gpj.exe");
    expect(buildsPage.text.replace(/ value="[^"]*"/g, "")).not.toMatch(/[\u202A-\u202E\u2066-\u2069]/);

    const csp = buildsPage.headers.get("content-security-policy")!;
    expect(csp.split(";").map((d) => d.trim())).toContain("form-action 'self'");
  });
});
