// The Runners and Users pages in real Chromium (docs/api.md §21): a runner that never called in says "not started
// yet" (never "online") until its first heartbeat; owners and admins edit its name, platforms and trust; registration
// needs a platform; an invite shows the sign-in link to copy, or what to do while External Access is off.
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createLocalLoginCode } from "../../src/domain/auth/local-login-codes.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { launchBrowser, newContext, serveTestApp, type ServedApp } from "../helpers/browser.ts";
import { registerRunner } from "../helpers/builds.ts";
import { completeLocalSetup } from "../helpers/factories.ts";

vi.setConfig({ testTimeout: 90_000 });

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON
type Json = any;

let t: TestApp;
let ownerToken: string;
let served: ServedApp;
let browser: Browser;
let ctx: BrowserContext;
let page: Page;

beforeAll(async () => {
  t = await makeTestApp();
  ({ ownerToken } = await completeLocalSetup(t));
  [served, browser] = await Promise.all([serveTestApp(t), launchBrowser()]);
  ctx = await newContext(browser);
  ctx.setDefaultTimeout(20_000);
  // Confirm dialogs are accepted, as a user clicking OK.
  ctx.on("page", (p) => p.on("dialog", (d) => void d.accept()));
  page = await ctx.newPage();
  const { code } = await createLocalLoginCode(t.deps, {});
  await page.goto(`${served.url}/login/local/${code}`);
});

afterAll(async () => {
  await ctx?.close();
  await browser?.close();
  await served?.close();
  await t?.close();
});

const row = (id: string) => page.locator(`tr[data-runner="${id}"]`);

describe("the Runners page", () => {
  it('says "not started yet" for a runner that never called in, and its status once it has', async () => {
    const runner = await registerRunner(t, ownerToken, { name: "fresh-mac", platforms: ["ios"] });
    await page.goto(`${served.url}/runners`);
    const status = row(runner.id).locator("td.runner-status");
    expect((await status.textContent())?.trim()).toBe("not started yet");
    expect(await status.textContent()).not.toContain("online");
    const hb = await t.call("POST", `/v1/runners/${runner.id}/heartbeat`, { token: runner.token, body: {} });
    expect(hb.status).toBe(200);
    await page.reload();
    expect((await status.textContent())?.trim()).toBe("online");
  });

  it("edits a runner's name, platforms and trust through its Edit form", async () => {
    const runner = await registerRunner(t, ownerToken, { name: "old-name", platforms: ["android"] });
    await page.goto(`${served.url}/runners`);
    const r = row(runner.id);
    await r.locator("summary", { hasText: "Edit" }).click();
    const form = r.locator(`#edit-${runner.id}`);
    await form.getByLabel("Name").fill("mac-mini-7");
    await form.getByLabel("iOS").check();
    await form.getByLabel("macOS").check();
    await form.getByLabel("Android").uncheck();
    await form.getByLabel("Trust").selectOption("open");
    await form.getByRole("button", { name: "Save" }).click();
    await page.waitForURL((u) => u.pathname === "/runners");
    expect(await page.locator(".flash-ok").textContent()).toContain("Runner mac-mini-7 saved: it builds for ios, macos and is open.");
    const saved = (await t.call("GET", "/v1/runners", { token: ownerToken })).body.find((x: Json) => x.id === runner.id);
    expect(saved).toMatchObject({ name: "mac-mini-7", trust: "open", capabilities: { platforms: ["ios", "macos"] } });
    expect(await row(runner.id).textContent()).toContain("mac-mini-7");

    // Unticking every platform is refused in words; nothing changes.
    await row(runner.id).locator("summary", { hasText: "Edit" }).click();
    const again = row(runner.id).locator(`#edit-${runner.id}`);
    await again.getByLabel("iOS").uncheck();
    await again.getByLabel("macOS").uncheck();
    await again.getByRole("button", { name: "Save" }).click();
    await page.waitForURL((u) => u.pathname === "/runners");
    expect(await page.locator(".flash-error").textContent()).toContain("Choose at least one platform");
    const unchanged = (await t.call("GET", "/v1/runners", { token: ownerToken })).body.find((x: Json) => x.id === runner.id);
    expect(unchanged.capabilities.platforms).toEqual(["ios", "macos"]);
  });

  it("refuses to register a runner without a platform, saying so beside the platforms", async () => {
    await page.goto(`${served.url}/runners`);
    const before = (await t.call("GET", "/v1/runners", { token: ownerToken })).body.length;
    await page.locator("#register").getByLabel("Name").fill("no-platform");
    await page.locator("#register").getByRole("button", { name: "Register" }).click();
    expect(await page.locator("#register-platforms .error").textContent()).toBe("Choose at least one platform the runner builds for.");
    expect((await t.call("GET", "/v1/runners", { token: ownerToken })).body.length).toBe(before);
  });
});

describe("the Users page", () => {
  it("after an invite, says what to do while External Access is off; with it on, shows the sign-in link with a Copy button", async () => {
    await page.goto(`${served.url}/users`);
    await page.locator("#invite").getByLabel("Email").fill("teammate@example.com");
    await page.locator("#invite").getByRole("button", { name: "Invite" }).click();
    await page.waitForURL((u) => u.pathname === "/users");
    expect(await page.locator(".flash-ok").textContent()).toContain("Invited teammate@example.com");
    expect(await page.locator("#sign-in-note").textContent()).toContain("External Access is off");
    expect(await page.locator("#sign-in-url").count()).toBe(0);

    // External Access on (as the remote-mode switch would leave it): the link is the public sign-in page.
    const network = await t.call("PUT", "/v1/settings/external-access/network", {
      token: ownerToken,
      body: { public_url: "https://ci.example.com", allowed_origins: ["https://ci.example.com"] },
    });
    expect(network.status).toBe(200);
    await t.opened.client.execute("UPDATE instance SET runtime_mode = 'remote'");
    await page.goto(`${served.url}/users`);
    const field = page.locator("#sign-in-url");
    expect(await field.inputValue()).toBe("https://ci.example.com/login");
    expect(await field.getAttribute("readonly")).not.toBeNull();
    const copy = page.locator("#sign-in-link button.copy-btn");
    // The Copy button appears only where the clipboard can be written; the field's text is selectable either way.
    const hasClipboard = await page.evaluate(`"clipboard" in navigator`);
    expect(await copy.isVisible()).toBe(hasClipboard);

    // Without JavaScript: no button, the link as selectable text in a read-only field.
    const noJs = await newContext(browser, { javaScriptEnabled: false });
    try {
      const plain = await noJs.newPage();
      const { code } = await createLocalLoginCode(t.deps, {});
      await plain.goto(`${served.url}/login/local/${code}`);
      await plain.goto(`${served.url}/users`);
      expect(await plain.locator("#sign-in-url").inputValue()).toBe("https://ci.example.com/login");
      expect(await plain.locator("#sign-in-link button.copy-btn").isVisible()).toBe(false);
    } finally {
      await noJs.close();
    }
  });
});
