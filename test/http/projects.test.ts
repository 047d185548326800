import { eq } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { projects } from "../../src/db/schema/index.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { createPipeline, createProject } from "../helpers/builds.ts";
import { completeLocalSetup, userWithRole } from "../helpers/factories.ts";
import { androidSigningBody, iosSigningBody } from "../helpers/signing-material.ts";

describe("projects and pipelines (docs/api.md §5)", () => {
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

  it("creates a project with default_branch main and only has_* flags", async () => {
    const res = await t.call("POST", "/v1/projects", { token: developer, body: { name: "Ios App", repo_url: "https://github.com/acme/app.git" } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: expect.any(String),
      name: "Ios App",
      repo_url: "https://github.com/acme/app.git",
      default_branch: "main",
      has_source_credentials: false,
      has_android_signing: false,
      has_ios_signing: false,
      config_path: ".hangar.yml",
      created_at: t.clock.now(),
      updated_at: t.clock.now(),
    });
    const got = await t.call("GET", `/v1/projects/${res.body.id}`, { token: viewer });
    expect(got.body).toEqual(res.body);
    const list = await t.call("GET", "/v1/projects", { token: viewer });
    expect(list.body.map((p: { id: string }) => p.id)).toContain(res.body.id);
  });

  it("accepts ssh, scp-like, file URLs and absolute paths; refuses option-like or odd URLs (400 invalid_input)", async () => {
    for (const repo_url of ["ssh://git@host/x.git", "git@github.com:acme/app.git", "file:///srv/git/app", "/srv/git/app"]) {
      expect((await t.call("POST", "/v1/projects", { token: owner, body: { name: `x ${repo_url}`, repo_url } })).status).toBe(200);
    }
    for (const repo_url of ["--upload-pack=touch /tmp/x", "ext::sh -c touch% /tmp/pwned", "https://host/a b", "relative/path", ""]) {
      const res = await t.call("POST", "/v1/projects", { token: owner, body: { name: "x", repo_url } });
      expect([repo_url, res.status, res.body.code]).toEqual([repo_url, 400, "invalid_input"]);
    }
    for (const default_branch of ["-x", "a..b", "has space", "end/"]) {
      const res = await t.call("POST", "/v1/projects", { token: owner, body: { name: "x", repo_url: "/srv/x", default_branch } });
      expect([default_branch, res.status, res.body.code]).toEqual([default_branch, 400, "invalid_input"]);
    }
  });

  it("lets qa_viewer read but not create (403 forbidden); no session is 401 missing_auth", async () => {
    const res = await t.call("POST", "/v1/projects", { token: viewer, body: { name: "x", repo_url: "/srv/x" } });
    expect([res.status, res.body.code]).toEqual([403, "forbidden"]);
    const anon = await t.call("GET", "/v1/projects");
    expect([anon.status, anon.body.code]).toEqual([401, "missing_auth"]);
  });

  it("answers 404 not_found for an unknown project", async () => {
    for (const [method, path, body] of [
      ["GET", "/v1/projects/nope", undefined],
      ["GET", "/v1/projects/nope/pipelines", undefined],
      ["POST", "/v1/projects/nope/pipelines", { name: "p", config: { platform: "ios", steps: [{ name: "a", run: "true" }] } }],
      ["PUT", "/v1/projects/nope/source-credentials", { token: "x" }],
    ] as const) {
      const res = await t.call(method, path, { token: owner, body });
      expect([path, res.status, res.body.code]).toEqual([path, 404, "not_found"]);
    }
  });

  it("creates and lists pipelines with the config as given", async () => {
    const project = await createProject(t, owner);
    const config = {
      platform: "android",
      steps: [{ name: "assemble", run: "./gradlew assembleRelease" }],
      artifacts: ["app/build/**/*.apk"],
      env: { CI: "1" },
      timeout_s: 900,
    };
    const res = await t.call("POST", `/v1/projects/${project.id}/pipelines`, { token: developer, body: { name: "release", config } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: expect.any(String),
      project_id: project.id,
      name: "release",
      config,
      source: "stored",
      file: null,
      created_at: t.clock.now(),
      updated_at: t.clock.now(),
    });
    const list = await t.call("GET", `/v1/projects/${project.id}/pipelines`, { token: developer });
    expect(list.body).toEqual([res.body]);
    // A qa_viewer reads it without `env` (test/http/hardening-round3.test.ts).
    const { env: _env, ...withoutEnv } = config;
    expect((await t.call("GET", `/v1/projects/${project.id}/pipelines`, { token: viewer })).body).toEqual([{ ...res.body, config: withoutEnv }]);
    const denied = await t.call("POST", `/v1/projects/${project.id}/pipelines`, { token: viewer, body: { name: "x", config } });
    expect([denied.status, denied.body.code]).toEqual([403, "forbidden"]);
  });

  it("refuses invalid pipeline configs with 400 invalid_input", async () => {
    const project = await createProject(t, owner);
    for (const config of [
      { platform: "ios", steps: [] },
      { platform: "windows", steps: [{ name: "a", run: "b" }] },
      { platform: "ios", steps: [{ name: "a" }] },
      { platform: "ios", steps: [{ name: "a", run: "b" }], env: { "BAD NAME": "x" } },
      { platform: "ios", steps: [{ name: "a", run: "b" }], timeout_s: 0 },
    ]) {
      const res = await t.call("POST", `/v1/projects/${project.id}/pipelines`, { token: owner, body: { name: "p", config } });
      expect([res.status, res.body.code]).toEqual([400, "invalid_input"]);
    }
  });

  it("stores source and signing credentials sealed; answers carry only has_* flags", async () => {
    const project = await createProject(t, owner);
    const src = await t.call("PUT", `/v1/projects/${project.id}/source-credentials`, {
      token: developer,
      body: { username: "bot", token: "ghp_TOPSECRET" },
    });
    expect(src.status).toBe(200);
    expect(src.body.has_source_credentials).toBe(true);
    expect(src.text).not.toContain("ghp_TOPSECRET");
    const android = await t.call("PUT", `/v1/projects/${project.id}/signing/android`, {
      token: developer,
      body: androidSigningBody({ storePassword: "STOREPASS", keyPassword: "KEYPASS" }),
    });
    expect(android.body).toMatchObject({ has_android_signing: true, has_ios_signing: false });
    const ios = await t.call("PUT", `/v1/projects/${project.id}/signing/ios`, {
      token: developer,
      body: iosSigningBody("P12PASS"),
    });
    expect(ios.body).toMatchObject({ has_source_credentials: true, has_android_signing: true, has_ios_signing: true });
    for (const text of [android.text, ios.text]) for (const s of ["STOREPASS", "KEYPASS", "P12PASS", "a2V5c3RvcmU"]) expect(text).not.toContain(s);
    const row = await t.deps.db.select().from(projects).where(eq(projects.id, project.id)).get();
    const stored = JSON.stringify(row);
    for (const s of ["ghp_TOPSECRET", "STOREPASS", "KEYPASS", "P12PASS", "a2V5c3RvcmU"]) expect(stored).not.toContain(s);
    expect(row?.sourceCredentialsSealed?.startsWith("v1.")).toBe(true);
    expect(JSON.parse(await t.deps.secrets.open(row!.sourceCredentialsSealed!))).toEqual({ username: "bot", token: "ghp_TOPSECRET" });
  });

  it("validates credential bodies (400 invalid_input) and roles (403 forbidden)", async () => {
    const project = await createProject(t, owner);
    const cases: Array<[string, unknown]> = [
      ["source-credentials", { username: "x" }],
      ["signing/android", { keystore_base64: "not base64!", keystore_password: "a", key_alias: "b", key_password: "c" }],
      ["signing/ios", { certificate_p12_base64: "cDEy" }],
    ];
    for (const [path, body] of cases) {
      const res = await t.call("PUT", `/v1/projects/${project.id}/${path}`, { token: owner, body });
      expect([path, res.status, res.body.code]).toEqual([path, 400, "invalid_input"]);
      const denied = await t.call("PUT", `/v1/projects/${project.id}/${path}`, { token: viewer, body });
      expect([path, denied.status, denied.body.code]).toEqual([path, 403, "forbidden"]);
    }
  });

  it("refuses a pipeline id of another project when triggering (404 not_found)", async () => {
    const a = await createProject(t, owner);
    const b = await createProject(t, owner);
    const pl = await createPipeline(t, owner, b.id);
    const res = await t.call("POST", `/v1/projects/${a.id}/builds`, { token: owner, body: { pipeline_id: pl.id, commit_sha: "abcdef1" } });
    expect([res.status, res.body.code]).toEqual([404, "not_found"]);
  });
});
