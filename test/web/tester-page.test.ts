// The tester page /apps/{token} (docs/spec.md §18) in real Chromium: an iPhone at 375 px with JavaScript off, a
// desktop whose QR code decodes back to the tester's link, and an Android phone that installs through the page
// with JavaScript off (the POST makes an install session, whose download then counts for the tester).
import jsQR from "jsqr";
import { eq } from "drizzle-orm";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { builds, pipelines } from "../../src/db/schema/index.ts";
import { writeSetting } from "../../src/domain/settings/instance-settings.ts";
import { NETWORK_SETTING } from "../../src/domain/settings/network-settings.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { DEMO_INFO, decodePng, encodeCgbi, encodePng, makeApk, makeIpaArchive, makeProfile, samplePixels } from "../helpers/app-fixtures.ts";
import { artifactWorld, insertBuild, pathOf, uploadArtifact, type ArtifactWorld } from "../helpers/artifact-world.ts";
import { launchBrowser, serveTestApp, type ServedApp } from "../helpers/browser.ts";

const IPHONE_UA =
  "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
const ANDROID_UA = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36";
const DESKTOP_UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36";
const HOSTILE_NOTES = `Fixed <img src=x onerror=alert(1)> crash\nSecond line`;

let browser: Browser;
let t: TestApp;
let w: ArtifactWorld;
let served: ServedApp;
let pipelineId: string;
let iosLink: string;
let androidLink: string;
let androidChannel: string;

async function release(branch: string, name: string, bytes: Uint8Array, report: Record<string, unknown>) {
  t.clock.advance(60);
  const buildId = await insertBuild(t, w.projectId, pipelineId, w.runner.id);
  await t.deps.db.update(builds).set({ branch }).where(eq(builds.id, buildId));
  await uploadArtifact(t, { ...w, buildId, jobPath: `/v1/runners/${w.runner.id}/jobs/${buildId}/artifacts` }, name, bytes);
  const r = await t.call("POST", `/v1/runners/${w.runner.id}/jobs/${buildId}/status`, {
    token: w.runner.token,
    body: { status: "succeeded", ...report },
  });
  expect(r.status, r.text).toBe(200);
}

async function tester(platform: "ios" | "android", email: string) {
  const base = `/v1/projects/${w.projectId}/channels`;
  const ch = await t.call("POST", base, { token: w.ownerToken, body: { name: `beta-${platform}`, pipeline_id: pipelineId, platforms: [platform] } });
  expect(ch.status, ch.text).toBe(200);
  const added = await t.call("POST", `${base}/${ch.body.id}/testers`, { token: w.ownerToken, body: { email } });
  expect(added.status, added.text).toBe(200);
  return { channelId: ch.body.id as string, pageUrl: added.body.page_url as string };
}

beforeAll(async () => {
  browser = await launchBrowser();
  t = await makeTestApp();
  w = await artifactWorld(t);
  served = await serveTestApp(t);
  pipelineId = (await t.deps.db.select().from(pipelines).where(eq(pipelines.projectId, w.projectId)).get())!.id;
  const profile = makeProfile({ kind: "ad_hoc", devices: 3, name: "Beta AdHoc", expires: "2028-01-01T00:00:00Z" });
  const icons = { "AppIcon60x60@3x.png": encodeCgbi(60, 60, samplePixels(60, 60)) };
  await release(
    "main",
    "Demo.ipa",
    makeIpaArchive({ info: { ...DEMO_INFO, CFBundleShortVersionString: "1.0", CFBundleVersion: "10" }, profile, icons }),
    { release_notes: "The first beta" },
  );
  await release("main", "Demo.ipa", makeIpaArchive({ info: DEMO_INFO, profile, icons }), { release_notes: HOSTILE_NOTES });
  await release(
    "main",
    "demo.apk",
    makeApk({ label: "Demo Android", versionName: "3.0", versionCode: 30, icons: [{ density: 480, png: encodePng(48, 48, samplePixels(48, 48)) }] }),
    {},
  );
  // Links are given out at the address the test listener serves, so every button works in the browser.
  await writeSetting(t.deps, NETWORK_SETTING, { public_url: served.url, artifact_delivery_url: null, allowed_origins: [served.url] });
  iosLink = (await tester("ios", "ios@example.com")).pageUrl;
  const android = await tester("android", "android@example.com");
  androidLink = android.pageUrl;
  androidChannel = android.channelId;
});

afterAll(async () => {
  await served?.close();
  await browser?.close();
});

async function device(kind: "iphone" | "android" | "desktop", javaScriptEnabled: boolean): Promise<BrowserContext> {
  const mobile = kind !== "desktop";
  return browser.newContext({
    javaScriptEnabled,
    userAgent: { iphone: IPHONE_UA, android: ANDROID_UA, desktop: DESKTOP_UA }[kind],
    viewport: mobile ? { width: 375, height: 812 } : { width: 1280, height: 800 },
    deviceScaleFactor: mobile ? 2 : 1,
    isMobile: mobile,
    hasTouch: mobile,
    acceptDownloads: true,
  });
}

async function decodeQr(p: Page): Promise<string | null> {
  const shot = await p.locator("#qr svg").screenshot();
  const { width, height, data } = decodePng(new Uint8Array(shot));
  return jsQR(new Uint8ClampedArray(data.buffer, data.byteOffset, data.byteLength), width, height)?.data ?? null;
}

describe("tester page in Chromium", () => {
  it("iPhone, JavaScript off, 375 px: icon, name, latest release with version, build, date and notes (escaped), Install, hints, earlier releases", async () => {
    const ctx = await device("iphone", false);
    const p = await ctx.newPage();
    const res = await p.goto(iosLink);
    expect(res?.status()).toBe(200);
    expect(res?.headers()["referrer-policy"]).toBe("no-referrer");
    expect(await p.locator("h1").innerText()).toBe(DEMO_INFO.CFBundleDisplayName);
    expect(await p.locator("#version").innerText()).toBe(`Version ${DEMO_INFO.CFBundleShortVersionString} (${DEMO_INFO.CFBundleVersion})`);
    expect(await p.locator("#released").innerText()).toMatch(/^Build #\d+ on main · \d{4}-\d{2}-\d{2}$/);
    // The notes are text: the hostile tag shows as written and runs nothing.
    expect(await p.locator("#notes").innerText()).toBe(HOSTILE_NOTES);
    expect(await p.locator("#notes img").count()).toBe(0);
    const icon = p.locator("img.app-icon");
    expect(await icon.evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth)).toBe(60);
    expect(await p.locator("#hint-safari").innerText()).toContain("Open this page in Safari");
    expect(await p.locator("#hint-udid").innerText()).toMatch(/3 devices registered in its provisioning profile “Beta AdHoc”/);
    const install = p.locator("#install");
    expect(await install.innerText()).toBe("Install");
    const box = await install.boundingBox();
    expect(box!.x).toBeGreaterThanOrEqual(0);
    expect(box!.x + box!.width).toBeLessThanOrEqual(375);
    expect(await p.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(375);
    // The earlier release, with its own notes and Install; no QR code on the phone itself.
    expect(await p.locator("#earlier li").count()).toBe(1);
    expect(await p.locator("#earlier li").innerText()).toContain("The first beta");
    expect(await p.locator("#qr").count()).toBe(0);
    await ctx.close();
  });

  it("desktop: the QR code decodes back to the tester's link", async () => {
    const ctx = await device("desktop", true);
    const p = await ctx.newPage();
    await p.goto(iosLink);
    expect(await p.locator("#qr").isVisible()).toBe(true);
    expect(await decodeQr(p)).toBe(iosLink);
    await ctx.close();
  });

  it("Android, JavaScript off: Install makes a session, its page downloads the APK, and the install counts for the tester", async () => {
    const ctx = await device("android", false);
    const p = await ctx.newPage();
    await p.goto(androidLink);
    expect(await p.locator("h1").innerText()).toBe("Demo Android");
    await p.locator("#install").click();
    await p.waitForLoadState();
    expect(p.url(), await p.content()).toMatch(/\/install\/[A-Za-z0-9_-]{43}$/);
    const button = p.getByRole("link", { name: "Install", exact: true });
    const [download] = await Promise.all([p.waitForEvent("download"), button.click()]);
    expect(download.suggestedFilename()).toBe("demo.apk");
    expect(await download.failure()).toBeNull();
    await ctx.close();
    const testers = await t.call("GET", `/v1/projects/${w.projectId}/channels/${androidChannel}/testers`, { token: w.ownerToken });
    expect(testers.body[0].installs).toBe(1);
    const releases = await t.call("GET", `/v1/projects/${w.projectId}/channels/${androidChannel}/releases`, { token: w.ownerToken });
    expect(releases.body[0].installs).toBe(1);
  });

  it("a revoked or unknown link shows a page in words, with no-referrer", async () => {
    const res = await t.app.request(`/apps/${"x".repeat(43)}`, {}, { peerAddress: "198.51.100.7" });
    expect(res.status).toBe(404);
    expect(res.headers.get("referrer-policy")).toBe("no-referrer");
    expect(await res.text()).toContain("This link is not valid");
    expect(pathOf(iosLink)).toMatch(/^\/apps\//);
  });
});
