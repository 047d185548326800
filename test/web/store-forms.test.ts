// The store keys on the project page in a real browser without JavaScript (docs/publishing.md): an App Store
// Connect key and a Google Play service account saved through plain forms, what is stored shown (issuer, key
// id, e-mail) and never the key; refusals in words beside their form. Then the build page's publishes.
import { eq } from "drizzle-orm";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { builds } from "../../src/db/schema/index.ts";
import { createLocalLoginCode } from "../../src/domain/auth/local-login-codes.ts";
import { runPublishesOnce } from "../../src/domain/publishing/publisher.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { artifactWorld, uploadArtifact, type ArtifactWorld } from "../helpers/artifact-world.ts";
import { launchBrowser, newContext, serveTestApp, type ServedApp } from "../helpers/browser.ts";
import { makeAscKey, makeServiceAccount } from "../helpers/store-keys.ts";

vi.setConfig({ testTimeout: 120_000 });

const asc = makeAscKey();
const google = makeServiceAccount("https://oauth2.googleapis.com/token");
let browser: Browser;
let t: TestApp;
let s: ServedApp;
let ctx: BrowserContext;
let page: Page;
let world: ArtifactWorld;

beforeAll(async () => {
  browser = await launchBrowser();
  t = await makeTestApp();
  world = await artifactWorld(t);
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
  await page.goto(`${s.url}/projects/${world.projectId}`);
  await page.locator("summary", { hasText: summary }).click();
}

/** The key's base64 body lines, none of which may appear on a page. */
const secretLines = (pem: string) => pem.split("\n").filter((l) => l.length > 40 && !l.startsWith("-----"));

describe("store keys on the project page (no JavaScript)", () => {
  it("saves an App Store Connect key, shows its issuer and key id but never the key; refusals in words", async () => {
    await page.goto(`${s.url}/projects/${world.projectId}`);
    expect(await page.locator("#asc-state").innerText()).toContain("Not set");

    await openForm("Set an App Store Connect key");
    await page.fill("#asc-issuer", "69a6de70-03db-47e3-e053-5b8c7c11a4d1");
    await page.fill("#asc-key-id", "AB-12");
    await page.fill("#asc-p8", asc.privatePem);
    await page.click("#asc-form button");
    expect(await page.locator("#asc-form .error").innerText()).toBe("Key ID is letters and digits.");
    expect(await page.inputValue("#asc-issuer")).toBe("69a6de70-03db-47e3-e053-5b8c7c11a4d1");
    expect(await page.inputValue("#asc-p8")).toBe("");

    await page.fill("#asc-key-id", asc.keyId);
    await page.fill("#asc-p8", "-----BEGIN PRIVATE KEY-----\nnot-a-key\n-----END PRIVATE KEY-----");
    await page.click("#asc-form button");
    expect(await page.locator("#asc-form .error").innerText()).toBe(
      "The private key is not an App Store Connect API key (an EC P-256 private key in a PEM .p8 file).",
    );
    expect(await page.content()).not.toContain("not-a-key");

    await page.fill("#asc-issuer", asc.issuerId);
    await page.fill("#asc-p8", asc.privatePem);
    await page.click("#asc-form button");
    expect(new URL(page.url()).pathname).toBe(`/projects/${world.projectId}`);
    expect(await page.locator(".flash-ok").innerText()).toContain("not shown again");
    const state = await page.locator("#asc-state").innerText();
    expect(state).toContain(asc.issuerId);
    expect(state).toContain(asc.keyId);
    expect(state).toContain("Stored");
    const html = await page.content();
    for (const line of secretLines(asc.privatePem)) expect(html).not.toContain(line);
    const api = await t.call("GET", `/v1/projects/${world.projectId}/stores`, { token: world.ownerToken });
    expect(api.body.app_store_connect).toEqual({ issuer_id: asc.issuerId, key_id: asc.keyId, has_private_key: true });
  });

  it("saves a Google Play service account, shows its e-mail but never the key; refusals in words", async () => {
    await openForm("Set a service account");
    await page.fill("#play-json", "{ this is not json");
    await page.click("#play-form button");
    expect(await page.locator("#play-form .error").innerText()).toBe(
      "The service account key is not JSON: paste the whole key file Google Cloud made.",
    );
    await page.fill(
      "#play-json",
      JSON.stringify({ ...JSON.parse(google.json), private_key: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n" }),
    );
    await page.click("#play-form button");
    expect(await page.locator("#play-form .error").innerText()).toBe("The service account key's private_key is not an RSA private key in PEM.");
    await page.fill("#play-json", google.json);
    await page.click("#play-form button");
    expect(await page.locator(".flash-ok").innerText()).toContain("not shown again");
    const state = await page.locator("#play-state").innerText();
    expect(state).toContain(google.clientEmail);
    expect(state).toContain("Stored");
    const html = await page.content();
    for (const line of secretLines(google.privatePem)) expect(html).not.toContain(line);
    expect(await page.inputValue("#play-json")).toBe("");
  });

  it("shows each publish of a build and its detail on the build page (a refusal no attempt can fix fails at once)", async () => {
    // A succeeded protected build with an .ipa; its manual publish fails at the store's door (no server there).
    await uploadArtifact(t, world, "Demo.ipa", new Uint8Array(1000));
    await t.deps.db.update(builds).set({ status: "succeeded", trust: "protected" }).where(eq(builds.id, world.buildId));
    for (const to of ["testflight", "google_play"]) {
      const res = await t.call("POST", `/v1/builds/${world.buildId}/publish`, { token: world.ownerToken, body: { to } });
      expect(res.status).toBe(200);
    }
    await runPublishesOnce(t.deps, "browser-test");
    await page.goto(`${s.url}/builds/${world.buildId}`);
    const rows = page.locator("#publishes tr[data-publish]");
    expect(await rows.count()).toBe(2);
    const testflight = await page.locator('#publishes tr[data-publish="testflight"]').innerText();
    expect(testflight).toContain("TestFlight");
    expect(testflight).toContain("failed");
    expect(testflight).toContain("missing_app_metadata");
    expect(testflight).not.toContain("retrying");
    const play = await page.locator('#publishes tr[data-publish="google_play"]').innerText();
    expect(play).toContain("Google Play");
    expect(play).toContain("failed");
    expect(play).toContain("no_artifact: the build has no .aab or .apk artifact");
  });
});
