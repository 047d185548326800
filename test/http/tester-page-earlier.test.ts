// The tester page /apps/{token} (docs/api.md §18) of a channel with a long history: the latest release, the 20
// newest earlier ones, and a link to the page listing every earlier release (docs/benchmarks.md "Tester page").
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { artifacts, builds } from "../../src/db/schema/index.ts";
import { eq } from "drizzle-orm";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { artifactWorld, insertBuild, type ArtifactWorld } from "../helpers/artifact-world.ts";

const RELEASES = 25;
let t: TestApp;
let w: ArtifactWorld;
let pagePath: string;

async function page(path: string): Promise<string> {
  const res = await t.app.request(path, { headers: { "user-agent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/126.0.0.0 Safari/537.36" } });
  expect(res.status).toBe(200);
  return res.text();
}

const versionsShown = (html: string) => [...html.matchAll(/Version <bdi[^>]*>1\.(\d+)<\/bdi>/g)].map((m) => Number(m[1]));

beforeAll(async () => {
  t = await makeTestApp();
  w = await artifactWorld(t);
  const pipelineId = (await t.deps.db.select({ pipelineId: builds.pipelineId }).from(builds).where(eq(builds.id, w.buildId)).get())!.pipelineId;
  for (let i = 1; i <= RELEASES; i++) {
    t.clock.advance(60);
    const buildId = await insertBuild(t, w.projectId, pipelineId, w.runner.id, "succeeded", { buildNumber: 1000 + i });
    const now = t.clock.now();
    await t.deps.db.insert(artifacts).values({
      id: crypto.randomUUID(),
      buildId,
      runnerId: w.runner.id,
      filename: i % 2 ? "app.apk" : "APP.APK",
      sizeBytes: 1000,
      contentType: "application/vnd.android.package-archive",
      status: "available",
      storageLocation: { provider: "local", key: `x/${i}` },
      appMetadata: {
        platform: "android",
        name: "Demo",
        bundle_identifier: "com.example.demo",
        version: `1.${i}`,
        build: String(i),
        min_os: "24",
        has_icon: false,
        signing: null,
      },
      completedAt: now,
      createdAt: now,
      updatedAt: now,
    });
  }
  const base = `/v1/projects/${w.projectId}/channels`;
  const ch = await t.call("POST", base, { token: w.ownerToken, body: { name: "beta", pipeline_id: pipelineId } });
  expect(ch.status, ch.text).toBe(200);
  const added = await t.call("POST", `${base}/${ch.body.id}/testers`, { token: w.ownerToken, body: { email: "t@example.com" } });
  expect(added.status, added.text).toBe(200);
  pagePath = new URL(added.body.page_url as string).pathname;
});

afterAll(async () => {
  await t.close();
});

describe("tester page with many releases", () => {
  it("shows the latest and the 20 newest earlier releases, then a link to all of them", async () => {
    const html = await page(pagePath);
    expect(versionsShown(html)).toEqual(Array.from({ length: 21 }, (_, i) => RELEASES - i));
    expect(html.match(/name="artifact_id"/g)).toHaveLength(21);
    expect(html).toContain(`href="${pagePath}?earlier=all"`);
    expect(html).toMatch(/id="all-earlier"[^>]*>\s*All 24 earlier builds/);
  });

  it("?earlier=all lists every earlier release, each with its Install", async () => {
    const html = await page(`${pagePath}?earlier=all`);
    expect(versionsShown(html)).toEqual(Array.from({ length: RELEASES }, (_, i) => RELEASES - i));
    expect(html.match(/name="artifact_id"/g)).toHaveLength(RELEASES);
    expect(html).not.toContain('id="all-earlier"');
  });
});
