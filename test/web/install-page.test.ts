// The tester's install page /install/{token} (docs/api.md §10), in real Chromium with iPhone, Android and desktop
// viewports and user agents, JavaScript off, plus the HTTP answers (expired, unknown, headers, escaping).
import jsQR from "jsqr";
import type { Browser, BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeSetting } from "../../src/domain/settings/instance-settings.ts";
import { NETWORK_SETTING } from "../../src/domain/settings/network-settings.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { DEMO_INFO, decodePng, encodeCgbi, encodePng, makeApk, makeIpaArchive, makeProfile, samplePixels } from "../helpers/app-fixtures.ts";
import { artifactWorld, pathOf, uploadArtifact, type ArtifactWorld } from "../helpers/artifact-world.ts";
import { launchBrowser, serveTestApp, type ServedApp } from "../helpers/browser.ts";
import { page } from "../helpers/web.ts";

const IPHONE_UA =
  "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1";
const IPHONE_CHROME_UA =
  "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/126.0.6478.54 Mobile/15E148 Safari/604.1";
const ANDROID_UA = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36";
const DESKTOP_UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36";

let browser: Browser;
let t: TestApp;
let w: ArtifactWorld;
let served: ServedApp;
let ipaId: string;
let enterpriseId: string;
let apkId: string;

beforeAll(async () => {
  browser = await launchBrowser();
  t = await makeTestApp();
  w = await artifactWorld(t);
  served = await serveTestApp(t);
  const ipa = makeIpaArchive({
    info: DEMO_INFO,
    profile: makeProfile({ kind: "ad_hoc", devices: 7, name: "Demo AdHoc", expires: "2028-01-01T00:00:00Z" }),
    icons: { "AppIcon60x60@3x.png": encodeCgbi(60, 60, samplePixels(60, 60)) },
  });
  ipaId = (await uploadArtifact(t, w, "Demo.ipa", ipa)).id;
  const enterprise = makeIpaArchive({
    info: { ...DEMO_INFO, CFBundleDisplayName: "In\u202eHouse" },
    profile: makeProfile({ kind: "enterprise", team: "Big <Corp>" }),
  });
  enterpriseId = (await uploadArtifact(t, w, "InHouse.ipa", enterprise)).id;
  const apk = makeApk({ label: "Demo Android", icons: [{ density: 480, png: encodePng(48, 48, samplePixels(48, 48)) }] });
  apkId = (await uploadArtifact(t, w, "demo.apk", apk, { content_type: "application/vnd.android.package-archive" })).id;
});

afterAll(async () => {
  await served?.close();
  await browser?.close();
});

/** iOS links need an HTTPS base; the page is then opened on the test listener by its path. */
async function iosLink(artifactId: string) {
  await writeSetting(t.deps, NETWORK_SETTING, {
    public_url: "https://ci.example.com",
    artifact_delivery_url: null,
    allowed_origins: ["https://ci.example.com"],
  });
  const r = await t.call("POST", `/v1/artifacts/${artifactId}/install-link`, { token: w.ownerToken });
  expect(r.status).toBe(200);
  return r.body as { install_url: string; page_url: string; manifest_url: string; expires_at: number };
}

/** Android accepts an http base: the test listener itself, so the button really downloads. */
async function androidLink(artifactId: string) {
  await writeSetting(t.deps, NETWORK_SETTING, { public_url: served.url, artifact_delivery_url: null, allowed_origins: [served.url] });
  const r = await t.call("POST", `/v1/artifacts/${artifactId}/install-link`, { token: w.ownerToken });
  expect(r.status).toBe(200);
  return r.body as { install_url: string; download_url: string; page_url: string; expires_at: number };
}

async function phone(kind: "iphone" | "iphone-chrome" | "android" | "desktop", javaScriptEnabled = true): Promise<BrowserContext> {
  const mobile = kind !== "desktop";
  return browser.newContext({
    javaScriptEnabled,
    userAgent: { iphone: IPHONE_UA, "iphone-chrome": IPHONE_CHROME_UA, android: ANDROID_UA, desktop: DESKTOP_UA }[kind],
    viewport: kind === "desktop" ? { width: 1280, height: 800 } : kind === "android" ? { width: 412, height: 915 } : { width: 375, height: 812 },
    deviceScaleFactor: mobile ? 2 : 1,
    isMobile: mobile,
    hasTouch: mobile,
    acceptDownloads: true,
  });
}

/** The QR code on the page, screenshotted and decoded back to text by jsQR. */
async function decodeQr(p: import("playwright-core").Page): Promise<string | null> {
  const shot = await p.locator("#qr svg").screenshot();
  const { width, height, data } = decodePng(new Uint8Array(shot));
  return jsQR(new Uint8ClampedArray(data.buffer, data.byteOffset, data.byteLength), width, height)?.data ?? null;
}

describe("install page in Chromium", () => {
  it("iPhone, JavaScript off, 375 px: icon, name, version and build, build number, branch, commit, expiry, one itms-services Install button, hints", async () => {
    const link = await iosLink(ipaId);
    t.clock.advance(60);
    const ctx = await phone("iphone", false);
    const p = await ctx.newPage();
    const res = await p.goto(`${served.url}${pathOf(link.page_url)}`);
    expect(res?.status()).toBe(200);
    expect(res?.headers()["referrer-policy"]).toBe("no-referrer");
    expect(res?.headers()["content-type"]).toContain("text/html");
    expect(await p.locator("h1").innerText()).toBe("Demo <b>App</b>");
    expect(await p.locator("#version").innerText()).toBe("Version 2.3 (45)");
    expect(await p.locator("#build").innerText()).toMatch(/^Build #\d+ on main · commit 0123456$/);
    expect(await p.locator("#expiry").innerText()).toBe("This link expires in 59 minutes");
    // Exactly one Install button, pointing at the manifest through itms-services.
    const buttons = p.getByRole("link", { name: "Install", exact: true });
    expect(await buttons.count()).toBe(1);
    const href = await buttons.getAttribute("href");
    expect(href).toBe(link.install_url);
    expect(new URL(href!).searchParams.get("url")).toBe(link.manifest_url);
    // The icon is the restored PNG, loaded through the public token path.
    const icon = p.locator("img.app-icon");
    expect(await icon.getAttribute("src")).toBe(`/install/icon/${pathOf(link.page_url).split("/").pop()}`);
    expect(await icon.evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth)).toBe(60);
    // Hints: Safari, and the ad-hoc profile's device count.
    expect(await p.locator("#hint-safari").innerText()).toContain("Open this page in Safari");
    expect(await p.locator("#hint-udid").innerText()).toMatch(/for the 7 devices registered in its provisioning profile “Demo AdHoc”.*UDID/);
    // Fits a 375-pixel screen: nothing scrolls sideways.
    expect(await p.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(375);
    const box = await buttons.boundingBox();
    expect(box!.x).toBeGreaterThanOrEqual(0);
    expect(box!.x + box!.width).toBeLessThanOrEqual(375);
    // The QR code is there for another device, folded away on the phone.
    expect(await p.locator("details summary").innerText()).toContain("QR code");
    await ctx.close();
  });

  it("desktop: the QR code decodes back to the page URL", async () => {
    const link = await iosLink(ipaId);
    const ctx = await phone("desktop");
    const p = await ctx.newPage();
    await p.goto(`${served.url}${pathOf(link.page_url)}`);
    expect(await p.locator("#qr").isVisible()).toBe(true);
    expect(await decodeQr(p)).toBe(link.page_url);
    expect(await p.locator("#qr figcaption").innerText()).toContain("Scan with your iPhone's camera");
    await ctx.close();
  });

  it("Android: the Install button downloads the APK; the QR code (opened) decodes to the page URL", async () => {
    const link = await androidLink(apkId);
    const ctx = await phone("android");
    const p = await ctx.newPage();
    await p.goto(link.page_url);
    expect(await p.locator("h1").innerText()).toBe("Demo Android");
    expect(await p.locator("#version").innerText()).toBe("Version 2.3.1 (112)");
    const button = p.getByRole("link", { name: "Install", exact: true });
    expect(await button.getAttribute("href")).toBe(link.install_url);
    expect(await p.locator("#hint-android").innerText()).toContain("API level 24");
    const [download] = await Promise.all([p.waitForEvent("download"), button.click()]);
    expect(download.suggestedFilename()).toBe("demo.apk");
    expect(await download.failure()).toBeNull();
    await p.locator("details summary").click();
    expect(await decodeQr(p)).toBe(link.page_url);
    await ctx.close();
  });

  it("an expired link shows a page saying so, not JSON (JavaScript off)", async () => {
    const link = await iosLink(ipaId);
    t.clock.advance(3601);
    const ctx = await phone("iphone", false);
    const p = await ctx.newPage();
    const res = await p.goto(`${served.url}${pathOf(link.page_url)}`);
    expect(res?.status()).toBe(410);
    expect(res?.headers()["content-type"]).toContain("text/html");
    expect(await p.locator("h1").innerText()).toBe("This link has expired");
    expect(await p.locator("#expired").innerText()).toContain("Ask the person who sent it for a new link");
    await ctx.close();
  });
});

describe("install page over HTTP", () => {
  it("answers 404 with a page for an unknown token, and 404 for its icon", async () => {
    const r = await page(t, "GET", `/install/${"x".repeat(43)}`);
    expect(r.status).toBe(404);
    expect(r.headers.get("content-type")).toContain("text/html");
    expect(r.headers.get("referrer-policy")).toBe("no-referrer");
    expect(r.text).toContain("This link is not valid");
    const icon = await t.app.request(`/install/icon/${"x".repeat(43)}`);
    expect(icon.status).toBe(404);
    expect(((await icon.json()) as { code: string }).code).toBe("not_found");
  });

  it("serves the icon of a live session as PNG with no-referrer, and 410 link_expired after the hour", async () => {
    const link = await iosLink(ipaId);
    const token = pathOf(link.page_url).split("/").pop()!;
    const icon = await t.app.request(`/install/icon/${token}`);
    expect(icon.status).toBe(200);
    expect(icon.headers.get("content-type")).toBe("image/png");
    expect(icon.headers.get("referrer-policy")).toBe("no-referrer");
    expect(decodePng(new Uint8Array(await icon.arrayBuffer())).width).toBe(60);
    t.clock.advance(3601);
    const gone = await t.app.request(`/install/icon/${token}`);
    expect(gone.status).toBe(410);
    expect(((await gone.json()) as { code: string }).code).toBe("link_expired");
  });

  it("enterprise: the trust hint names the team, escaped; bidi controls in the app name are neutralised; another iOS browser is told to use Safari", async () => {
    const link = await iosLink(enterpriseId);
    const r = await page(t, "GET", pathOf(link.page_url), { headers: { "user-agent": IPHONE_CHROME_UA } });
    expect(r.status).toBe(200);
    expect(r.text).toContain("Big &lt;Corp&gt;");
    expect(r.text).not.toContain("Big <Corp>");
    expect(r.text).toContain("VPN &amp; Device Management");
    expect(r.text).not.toContain("\u202e");
    expect(r.text).toContain("&lt;U+202E&gt;");
    expect(r.text).toMatch(/<strong>Open this page in Safari\. <\/strong>/);
    expect(r.text).not.toContain('id="hint-udid"');
    // No icon in this IPA: a placeholder letter, no broken image.
    expect(r.text).not.toContain("/install/icon/");
    expect(r.headers.get("content-security-policy")).not.toContain("'unsafe-inline'");
  });

  it("an Android phone opening an iOS link is told it will not install there", async () => {
    const link = await iosLink(ipaId);
    const r = await page(t, "GET", pathOf(link.page_url), { headers: { "user-agent": ANDROID_UA } });
    expect(r.text).toContain('id="wrong-device"');
    expect(r.text).toContain("This build is for iPhone and iPad");
  });

  it("signed in: POST /artifacts/{id}/install-link answers the page URL and a QR code; refusals are pages in words; the icon needs a session", async () => {
    await iosLink(ipaId);
    const made = await page(t, "POST", `/artifacts/${ipaId}/install-link`, { session: w.ownerToken });
    expect(made.status).toBe(200);
    const pageUrl = /value="(https:\/\/ci\.example\.com\/install\/[A-Za-z0-9_-]{43})"/.exec(made.text)?.[1];
    expect(pageUrl).toBeDefined();
    expect(made.text).toContain("<svg");
    expect(made.text).toContain(`href="${pageUrl}"`);
    // The page it names is live.
    expect((await page(t, "GET", pathOf(pageUrl!))).status).toBe(200);

    // A cross-site form cannot make one.
    const forged = await page(t, "POST", `/artifacts/${ipaId}/install-link`, { session: w.ownerToken, origin: "https://evil.example" });
    expect(forged.status).toBe(403);

    const store = await uploadArtifact(t, w, "Store.ipa", makeIpaArchive({ info: DEMO_INFO, profile: makeProfile({ kind: "app_store" }) }));
    const refused = await page(t, "POST", `/artifacts/${store.id}/install-link`, { session: w.ownerToken });
    expect(refused.status).toBe(400);
    expect(refused.headers.get("content-type")).toContain("text/html");
    expect(refused.text).toContain("signed for the App Store");

    const icon = await page(t, "GET", `/artifacts/${ipaId}/icon`, { session: w.ownerToken });
    expect(icon.status).toBe(200);
    expect(icon.headers.get("content-type")).toBe("image/png");
    const anonymous = await page(t, "GET", `/artifacts/${ipaId}/icon`);
    expect(anonymous.status).toBe(303);
    expect(anonymous.location).toMatch(/^\/login/);
  });
});
