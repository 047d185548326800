// Tester channels (docs/spec.md §18) through the public interface: the JSON API, the tester page and real
// downloads of install sessions; releases are made by a runner's real status reports.
import { eq } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { builds, pipelines } from "../../src/db/schema/index.ts";
import { writeSetting } from "../../src/domain/settings/instance-settings.ts";
import { NETWORK_SETTING } from "../../src/domain/settings/network-settings.ts";
import { makeApk } from "../helpers/app-fixtures.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { artifactWorld, insertBuild, makeIpa, pathOf, uploadArtifact, type ArtifactWorld } from "../helpers/artifact-world.ts";
import { userWithRole } from "../helpers/factories.ts";
import { page } from "../helpers/web.ts";

const HOSTILE = `<script>alert(1)</script>&"'`;

describe("tester channels", () => {
  let t: TestApp;
  let w: ArtifactWorld;
  let pipelineId: string;
  let qa: string;
  let dev: string;
  let base: string;

  /** A build on `branch` that uploads `file` and succeeds with the runner's final report (notes, commits). */
  async function release(
    branch: string,
    file: { name: string; bytes: Uint8Array },
    report: Record<string, unknown> = {},
    status: "succeeded" | "failed" = "succeeded",
  ) {
    t.clock.advance(10);
    const buildId = await insertBuild(t, w.projectId, pipelineId, w.runner.id);
    const commits = report.commits as Array<{ sha: string }> | undefined;
    const commitSha = commits?.[0]?.sha ?? crypto.randomUUID().replaceAll("-", "").padEnd(40, "0");
    await t.deps.db.update(builds).set({ branch, commitSha }).where(eq(builds.id, buildId));
    const world = { ...w, buildId, jobPath: `/v1/runners/${w.runner.id}/jobs/${buildId}/artifacts` };
    const artifact = await uploadArtifact(t, world, file.name, file.bytes);
    const r = await t.call("POST", `/v1/runners/${w.runner.id}/jobs/${buildId}/status`, {
      token: w.runner.token,
      body: status === "succeeded" ? { status, ...report } : { status, exit_code: 1 },
    });
    expect(r.status, r.text).toBe(200);
    return { buildId, artifactId: artifact.id as string };
  }

  const apk = (label: string, versionName: string, versionCode: number) => ({ name: "app.apk", bytes: makeApk({ label, versionName, versionCode }) });

  beforeAll(async () => {
    t = await makeTestApp();
    w = await artifactWorld(t);
    pipelineId = (await t.deps.db.select().from(pipelines).where(eq(pipelines.projectId, w.projectId)).get())!.id;
    qa = (await userWithRole(t, "qa_viewer")).token;
    dev = (await userWithRole(t, "developer")).token;
    base = `/v1/projects/${w.projectId}/channels`;
    // Install sessions need a delivery base (plain HTTP is enough for Android).
    await writeSetting(t.deps, NETWORK_SETTING, {
      public_url: "http://localhost",
      artifact_delivery_url: null,
      allowed_origins: ["http://localhost"],
    });
  });

  it("builders create, read, change and delete channels; every role reads; each refusal has its code", async () => {
    const created = await t.call("POST", base, {
      token: dev,
      body: { name: "beta", pipeline_id: pipelineId, branches: ["main", "release/*"], platforms: ["android"] },
    });
    expect(created.status, created.text).toBe(200);
    expect(created.body).toMatchObject({ name: "beta", pipeline_id: pipelineId, branches: ["main", "release/*"], platforms: ["android"] });
    expect(created.body.page_url).toBe(`http://localhost/projects/${w.projectId}/channels/${created.body.id}`);

    const cases: Array<[string, string, unknown, string | undefined, number, string]> = [
      ["POST", base, { name: "x", pipeline_id: pipelineId }, qa, 403, "forbidden"],
      ["POST", base, { name: "x", pipeline_id: pipelineId }, undefined, 401, "missing_auth"],
      ["POST", base, { name: "x", pipeline_id: "nope" }, dev, 400, "invalid_input"],
      ["POST", base, { name: "x", pipeline_id: pipelineId, platforms: ["macos"] }, dev, 400, "invalid_input"],
      ["POST", base, { name: "x", pipeline_id: pipelineId, branches: [] }, dev, 400, "invalid_input"],
      ["POST", base, { name: "", pipeline_id: pipelineId }, dev, 400, "invalid_input"],
      ["POST", base, { name: "beta", pipeline_id: pipelineId }, dev, 409, "already_exists"],
      ["POST", `/v1/projects/nope/channels`, { name: "x", pipeline_id: pipelineId }, dev, 404, "not_found"],
      ["PATCH", `${base}/${created.body.id}`, { name: "y" }, qa, 403, "forbidden"],
      ["PATCH", `${base}/${created.body.id}`, { pipeline_id: "nope" }, dev, 400, "invalid_input"],
      ["PATCH", `${base}/nope`, { name: "y" }, dev, 404, "not_found"],
      ["DELETE", `${base}/${created.body.id}`, undefined, qa, 403, "forbidden"],
      ["GET", `${base}/nope/releases`, undefined, qa, 404, "not_found"],
    ];
    for (const [method, path, body, token, status, code] of cases) {
      const r = await t.call(method, path, { token, body });
      expect([method, path, r.status, r.body.code]).toEqual([method, path, status, code]);
    }

    const listed = await t.call("GET", base, { token: qa });
    expect(listed.status).toBe(200);
    expect(listed.body.map((c: { name: string }) => c.name)).toEqual(["beta"]);
    const patched = await t.call("PATCH", `${base}/${created.body.id}`, { token: dev, body: { name: "nightly", branches: null } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toMatchObject({ name: "nightly", branches: null, platforms: ["android"] });
    expect((await t.call("DELETE", `${base}/${created.body.id}`, { token: dev })).status).toBe(204);
    const gone = await t.call("GET", `${base}/${created.body.id}`, { token: qa });
    expect([gone.status, gone.body.code]).toEqual([404, "not_found"]);
  });

  it("releases: succeeded builds of the pipeline on matching branches with an installable file, newest first, with notes", async () => {
    const ch = (
      await t.call("POST", base, {
        token: dev,
        body: { name: "android-main", pipeline_id: pipelineId, branches: ["main", "release/**"], platforms: ["android"] },
      })
    ).body;
    const first = await release("main", apk("Demo", "1.0", 1), { commits: [{ sha: "a".repeat(40), subject: "first commit", author: "Ada" }] });
    await release("feature/x", apk("Demo", "9.9", 99)); // branch not in the channel
    await release("main", { name: "notes.txt", bytes: new TextEncoder().encode("x") }); // nothing installable
    await release("main", apk("Demo", "1.1", 2), {}, "failed"); // not succeeded
    await release("main", makeIpaFile()); // an iOS build in an Android channel
    const second = await release("release/2.0", apk("Demo", "2.0", 3), {
      commits: [
        { sha: "c".repeat(40), subject: "Fix the login <b>crash</b>", author: "Bob" },
        { sha: "b".repeat(40), subject: "Add dark mode", author: "Ada" },
        { sha: "a".repeat(40), subject: "first commit", author: "Ada" },
      ],
    });
    const third = await release("main", apk("Demo", "2.1", 4), { release_notes: "Hand-written notes\nsecond line" });

    const r = await t.call("GET", `${base}/${ch.id}/releases`, { token: qa });
    expect(r.status, r.text).toBe(200);
    expect(r.body.map((x: { build_id: string }) => x.build_id)).toEqual([third.buildId, second.buildId, first.buildId]);
    expect(r.body[0]).toMatchObject({
      branch: "main",
      app: { name: "Demo", version: "2.1", build: "4" },
      release_notes: "Hand-written notes\nsecond line",
      installs: 0,
      platform: "android",
    });
    // Commit subjects down to the previous release's commit.
    expect(r.body[1].release_notes).toBe("Fix the login <b>crash</b>\nAdd dark mode");
    expect(r.body[2].release_notes).toBe("first commit");
    expect(r.body[2].artifact_id).toBe(first.artifactId);

    const tooLong = await t.call("POST", `/v1/runners/${w.runner.id}/jobs/${second.buildId}/status`, {
      token: w.runner.token,
      body: { status: "succeeded", release_notes: "x".repeat(64 * 1024 + 1) },
    });
    expect([tooLong.status, tooLong.body.code]).toEqual([400, "invalid_input"]);
  });

  it("testers: a personal link shown once, install counts per tester and per release, revocation answers 404", async () => {
    const ch = (await t.call("POST", base, { token: dev, body: { name: "testers", pipeline_id: pipelineId, platforms: ["android"] } })).body;
    await release("main", apk(HOSTILE, "3.0", 5), { release_notes: `Notes ${HOSTILE}` });
    const added = await t.call("POST", `${base}/${ch.id}/testers`, { token: dev, body: { email: "Tess@Example.com", name: "Tess" } });
    expect(added.status, added.text).toBe(200);
    expect(added.body).toMatchObject({ email: "tess@example.com", name: "Tess", installs: 0, mail_opt_out: false });
    expect(added.body.page_url).toMatch(/^http:\/\/localhost\/apps\/[A-Za-z0-9_-]{43}$/);

    for (const [body, token, status, code] of [
      [{ email: "not an email" }, dev, 400, "invalid_input"],
      [{ email: "tess@example.com" }, dev, 409, "already_exists"],
      [{ email: "x@example.com" }, qa, 403, "forbidden"],
    ] as const) {
      const r = await t.call("POST", `${base}/${ch.id}/testers`, { token, body });
      expect([r.status, r.body.code]).toEqual([status, code]);
    }
    const unknownTester = await t.call("DELETE", `${base}/${ch.id}/testers/nope`, { token: dev });
    expect([unknownTester.status, unknownTester.body.code]).toEqual([404, "not_found"]);

    // The page: escaped hostile strings, no-referrer, the Install form.
    const path = pathOf(added.body.page_url);
    const shown = await page(t, "GET", path);
    expect(shown.status).toBe(200);
    expect(shown.headers.get("referrer-policy")).toBe("no-referrer");
    expect(shown.text).not.toContain("<script>alert(1)");
    expect(shown.text).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    expect(shown.text).toContain(`action="${path}/install"`);

    // Install: a POST makes a session and goes to its page; the session's downloads count once.
    const releases = (await t.call("GET", `${base}/${ch.id}/releases`, { token: qa })).body;
    const install = await page(t, "POST", `${path}/install`, { form: { artifact_id: releases[0].artifact_id } });
    expect(install.status, install.text).toBe(303);
    expect(install.location).toMatch(/^http:\/\/localhost\/install\/[A-Za-z0-9_-]{43}$/);
    const sessionToken = install.location!.split("/").pop()!;
    for (let i = 0; i < 2; i++) {
      const res = await t.app.request(`/install/download/${sessionToken}`, {}, { peerAddress: "198.51.100.7" });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    // A second session of the same tester is a second install.
    const again = await page(t, "POST", `${path}/install`, { form: { artifact_id: releases[0].artifact_id } });
    const res = await t.app.request(pathOf(again.location!.replace("/install/", "/install/download/")), {}, { peerAddress: "198.51.100.7" });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    // A session with no download counts nothing.
    await page(t, "POST", `${path}/install`, { form: { artifact_id: releases[0].artifact_id } });

    const testers = (await t.call("GET", `${base}/${ch.id}/testers`, { token: qa })).body;
    expect(testers).toEqual([expect.objectContaining({ id: added.body.id, installs: 2 })]);
    const after = (await t.call("GET", `${base}/${ch.id}/releases`, { token: qa })).body;
    expect(after[0].installs).toBe(2);

    // A release of another channel, or no release at all, cannot be installed through this link.
    const foreign = await page(t, "POST", `${path}/install`, { form: { artifact_id: "nope" } });
    expect(foreign.status).toBe(404);
    const noOrigin = await page(t, "POST", `${path}/install`, { form: { artifact_id: releases[0].artifact_id }, origin: null });
    expect(noOrigin.status).toBe(403);
    const foreignOrigin = await page(t, "POST", `${path}/install`, {
      form: { artifact_id: releases[0].artifact_id },
      origin: "https://evil.example",
    });
    expect(foreignOrigin.status).toBe(403);

    expect((await t.call("DELETE", `${base}/${ch.id}/testers/${added.body.id}`, { token: dev })).status).toBe(204);
    const revoked = await page(t, "GET", path);
    expect(revoked.status).toBe(404);
    expect(revoked.headers.get("referrer-policy")).toBe("no-referrer");
    const revokedInstall = await page(t, "POST", `${path}/install`, { form: { artifact_id: releases[0].artifact_id } });
    expect(revokedInstall.status).toBe(404);
  });

  it("tester links use the artifact delivery URL when one is set", async () => {
    await writeSetting(t.deps, NETWORK_SETTING, {
      public_url: "https://ci.example.com",
      artifact_delivery_url: "https://dl.example.com/",
      allowed_origins: ["https://ci.example.com"],
    });
    const ch = (await t.call("POST", base, { token: dev, body: { name: "delivery", pipeline_id: pipelineId } })).body;
    expect(ch.page_url).toBe(`https://ci.example.com/projects/${w.projectId}/channels/${ch.id}`);
    const added = await t.call("POST", `${base}/${ch.id}/testers`, { token: dev, body: { email: "d@example.com" } });
    expect(added.body.page_url).toMatch(/^https:\/\/dl\.example\.com\/apps\/[A-Za-z0-9_-]{43}$/);
    await writeSetting(t.deps, NETWORK_SETTING, { public_url: null, artifact_delivery_url: null, allowed_origins: [] });
  });
});

function makeIpaFile() {
  return {
    name: "Demo.ipa",
    bytes: makeIpa({
      plist: { CFBundleIdentifier: "com.example.demo", CFBundleVersion: "7", CFBundleShortVersionString: "1.0", CFBundleDisplayName: "Demo" },
    }),
  };
}
