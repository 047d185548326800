// The tester page's device hint in real Chromium (docs/api.md §18): an iPhone at 375 px with JavaScript off sees
// that it has registered no device and a link to the enrolment profile; once its device's signed answer arrives
// (openssl cms around a real plist), the page says whether that device is in the ad-hoc build's profile.
import { eq } from "drizzle-orm";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { builds, pipelines } from "../../src/db/schema/index.ts";
import { NETWORK_SETTING } from "../../src/domain/settings/network-settings.ts";
import { writeSetting } from "../../src/domain/settings/instance-settings.ts";
import { cmsSign, DEMO_INFO, makeIpaArchive, makePlist, makeProfile } from "../helpers/app-fixtures.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { artifactWorld, insertBuild, uploadArtifact } from "../helpers/artifact-world.ts";
import { launchBrowser, serveTestApp, type ServedApp } from "../helpers/browser.ts";

const IPHONE_UA =
  "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";

let browser: Browser;
let t: TestApp;
let served: ServedApp;
let link: string;

beforeAll(async () => {
  browser = await launchBrowser();
  t = await makeTestApp();
  const w = await artifactWorld(t);
  served = await serveTestApp(t);
  await writeSetting(t.deps, NETWORK_SETTING, { public_url: served.url, artifact_delivery_url: null, allowed_origins: [served.url] });
  const pipelineId = (await t.deps.db.select().from(pipelines).where(eq(pipelines.projectId, w.projectId)).get())!.id;
  const buildId = await insertBuild(t, w.projectId, pipelineId, w.runner.id);
  await t.deps.db.update(builds).set({ branch: "main" }).where(eq(builds.id, buildId));
  const ipa = makeIpaArchive({ info: DEMO_INFO, profile: makeProfile({ kind: "ad_hoc", devices: 3 }) });
  await uploadArtifact(t, { ...w, buildId, jobPath: `/v1/runners/${w.runner.id}/jobs/${buildId}/artifacts` }, "Demo.ipa", ipa);
  await t.call("POST", `/v1/runners/${w.runner.id}/jobs/${buildId}/status`, { token: w.runner.token, body: { status: "succeeded" } });
  const base = `/v1/projects/${w.projectId}/channels`;
  const ch = (await t.call("POST", base, { token: w.ownerToken, body: { name: "ios", pipeline_id: pipelineId, platforms: ["ios"] } })).body;
  link = (await t.call("POST", `${base}/${ch.id}/testers`, { token: w.ownerToken, body: { email: "ada@example.com" } })).body.page_url;
});

afterAll(async () => {
  await served?.close();
  await browser?.close();
});

describe("tester page device hint in Chromium", () => {
  it("iPhone, JavaScript off: no device yet and the enrolment link, then 'in this build' once the device answered", async () => {
    const ctx = await browser.newContext({
      javaScriptEnabled: false,
      userAgent: IPHONE_UA,
      viewport: { width: 375, height: 812 },
      isMobile: true,
      hasTouch: true,
    });
    const p = await ctx.newPage();
    await p.goto(link);
    expect(await p.locator("#hint-devices").innerText()).toContain("You have registered no device yet");
    const href = await p.locator("#enroll-link").getAttribute("href");
    expect(href).toBe(`${new URL(link).pathname}/enroll`);
    // What Safari downloads from the link: the profile, whose callback the device answers.
    const profile = await p.request.get(new URL(href!, link).href);
    expect(profile.headers()["content-type"]).toBe("application/x-apple-aspen-config");
    expect(await profile.text()).toContain(`${link}/enroll/callback`);
    const device = await fetch(`${link}/enroll/callback`, {
      method: "POST",
      headers: { "content-type": "application/pkcs7-signature" },
      body: cmsSign(makePlist({ UDID: "00008110-0000000000000002", PRODUCT: "iPhone15,2", VERSION: "21F90" })),
      redirect: "manual",
    });
    expect(device.status).toBe(301);
    await p.goto(new URL(device.headers.get("location")!, link).href);
    expect(await p.locator("h1").innerText()).toBe("Device registered");
    await p.locator("a.btn-primary").click();
    expect(await p.locator("#hint-devices").innerText()).toContain("Your registered device is in this build.");
    // Nothing on the page is wider than the phone.
    expect(await p.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(375);
    await ctx.close();
  });
});
