// The project page's credential forms in a real browser without JavaScript (docs/signing.md): files uploaded
// as multipart forms, what is stored described, and no secret ever shown again; signing health on the page and
// its summary on the Builds page.
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createLocalLoginCode } from "../../src/domain/auth/local-login-codes.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { launchBrowser, newContext, serveTestApp, type ServedApp } from "../helpers/browser.ts";
import { createProject } from "../helpers/builds.ts";
import { completeLocalSetup } from "../helpers/factories.ts";
import { makeKeystore, makeSigningIdentity, makeSigningProfile, P12_PASSWORD, writeTempFile } from "../helpers/signing-material.ts";

vi.setConfig({ testTimeout: 120_000 });

const APP_UUID = "11111111-2222-4333-8444-555555555555";
const WIDGET_UUID = "66666666-7777-4888-9999-AAAAAAAAAAAA";
const SOURCE_TOKEN = "glpat-source-token-never-shown";
const SECRET_VALUE = "asc-key-value-never-shown";

let browser: Browser;
let t: TestApp;
let s: ServedApp;
let ctx: BrowserContext;
let page: Page;
let projectId: string;

beforeAll(async () => {
  browser = await launchBrowser();
  t = await makeTestApp();
  const { ownerToken } = await completeLocalSetup(t);
  projectId = (await createProject(t, ownerToken)).id;
  s = await serveTestApp(t);
  ctx = await newContext(browser, { javaScriptEnabled: false });
  ctx.setDefaultTimeout(30_000);
  page = await ctx.newPage();
  const { code } = await createLocalLoginCode(t.deps, {});
  await page.goto(`${s.url}/login/local/${code}`);
}, 120_000);

afterAll(async () => {
  await ctx?.close();
  await browser?.close();
  await s?.close();
});

async function openForm(summary: string): Promise<void> {
  await page.goto(`${s.url}/projects/${projectId}`);
  await page.locator("summary", { hasText: summary }).click();
}

async function html(): Promise<string> {
  return page.content();
}

describe("the credentials section of the project page (no JavaScript)", () => {
  it("uploads a .p12 and two profiles, describes them, and never shows the password again; a wrong password is refused beside the form", async () => {
    const identity = makeSigningIdentity({ days: 300 });
    const expiresAt = Math.floor(Date.now() / 1000) + 200 * 86_400;
    const app = writeTempFile(
      "app.mobileprovision",
      makeSigningProfile({ certificates: [identity.certDer], uuid: APP_UUID, bundleId: "com.example.app", expiresAt, name: "App <b>Store</b>" }),
    );
    const widget = writeTempFile(
      "widget.mobileprovision",
      makeSigningProfile({
        certificates: [identity.certDer],
        uuid: WIDGET_UUID,
        bundleId: "com.example.app.widget",
        expiresAt: Math.floor(Date.now() / 1000) - 86_400,
        name: "Widget",
      }),
    );
    const p12 = writeTempFile("dist.p12", identity.p12);

    await openForm("Upload a certificate and profiles");
    await page.setInputFiles("#ios-certificate", p12);
    await page.fill("#ios-password", "definitely-wrong");
    await page.setInputFiles("#ios-profiles-input", [app, widget]);
    await page.click("#ios-form button");
    expect(await page.locator("#ios-form .error").innerText()).toContain("password does not open");
    expect(await page.inputValue("#ios-password")).toBe("");
    expect(await html()).not.toContain("definitely-wrong");

    await page.setInputFiles("#ios-certificate", p12);
    await page.fill("#ios-password", P12_PASSWORD);
    await page.setInputFiles("#ios-profiles-input", [app, widget]);
    await page.click("#ios-form button");
    expect(new URL(page.url()).pathname).toBe(`/projects/${projectId}`);
    expect(await page.locator(".flash-ok").innerText()).toContain("not shown again");
    const profiles = await page.locator("#ios-profiles").innerText();
    expect(profiles).toContain(APP_UUID);
    expect(profiles).toContain(WIDGET_UUID);
    expect(profiles).toContain("ABCDE12345.com.example.app.widget");
    // A profile's name from the file is text, never markup.
    expect(profiles).toContain("App <b>Store</b>");
    expect(await page.locator("#ios-state").innerText()).toContain("Apple Distribution: Example Team (ABCDE12345)");
    const health = await page.locator("#signing-health").innerText();
    expect(health).toMatch(/Widget[\s\S]*expired/);
    expect(health).toMatch(/App <b>Store<\/b>[\s\S]*ok/);
    expect(await html()).not.toContain(P12_PASSWORD);

    // The Builds page sums it up, linking to the project.
    await page.goto(`${s.url}/builds`);
    const summary = page.locator("#signing-summary");
    expect(await summary.innerText()).toContain("1 expired");
    expect(await summary.locator("a").getAttribute("href")).toBe(`/projects/${projectId}#credentials`);
  });

  it("uploads a JKS keystore with its passwords and shows its alias and certificate only", async () => {
    const ks = makeKeystore("JKS", { alias: "upload" });
    const file = writeTempFile("upload.jks", ks.bytes);
    await openForm("Upload a keystore");
    await page.setInputFiles("#android-keystore", file);
    await page.fill("#android-store-password", ks.storePassword);
    await page.fill("#android-alias", "upload");
    await page.fill("#android-key-password", "not-the-key-password");
    await page.click("#android-form button");
    expect(await page.locator("#android-form .error").innerText()).toContain("key password does not open");
    expect(await page.inputValue("#android-alias")).toBe("upload");

    await page.setInputFiles("#android-keystore", file);
    await page.fill("#android-store-password", ks.storePassword);
    await page.fill("#android-key-password", ks.keyPassword);
    await page.click("#android-form button");
    const state = await page.locator("#android-state").innerText();
    expect(state).toContain("upload");
    expect(state).toContain("CN=Example Upload, O=Example");
    const text = await html();
    expect(text).not.toContain(ks.storePassword);
    expect(text).not.toContain(ks.keyPassword);
  });

  it("sets source credentials, adds, replaces and deletes a secret variable (names only), and changes protection", async () => {
    await openForm("Set source credentials");
    await page.fill("#source-username", "ci-bot");
    await page.fill("#source-token", SOURCE_TOKEN);
    await page.click("#source-form button");
    expect(await page.locator("#source-state").innerText()).toContain("Set");
    expect(await html()).not.toContain(SOURCE_TOKEN);

    for (const value of [SECRET_VALUE, `${SECRET_VALUE}-2`]) {
      await openForm("Add or replace a secret variable");
      await page.fill("#secret-name", "ASC_KEY");
      await page.fill("#secret-value", value);
      await page.click("#secret-form button");
      expect(await page.locator("#secret-variables").innerText()).toContain("ASC_KEY");
      expect(await html()).not.toContain(SECRET_VALUE);
    }
    await openForm("Add or replace a secret variable");
    await page.fill("#secret-name", "bad name");
    await page.fill("#secret-value", SECRET_VALUE);
    await page.click("#secret-form button");
    expect(await page.locator("#secret-form .error").innerText()).toContain("upper case");
    expect(await html()).not.toContain(SECRET_VALUE);

    await page.goto(`${s.url}/projects/${projectId}`);
    await page.locator("#secret-variables form button").click();
    expect(await page.locator("#secret-variables").count()).toBe(0);

    await openForm("Change protection");
    await page.fill("#protection-branches", "main\nrelease/**");
    await page.click("#protection-form button");
    expect(await page.locator("#protection-state").innerText()).toContain("main, release/**");
    const stored = await t.call("GET", `/v1/projects/${projectId}/protection`, {
      token: (await ctx.cookies(s.url)).find((c) => c.name === "__Host-hangar_session")!.value,
    });
    expect(stored.body.branches).toEqual(["main", "release/**"]);
  });
});
