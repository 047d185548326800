// The build page's Tests section and the Builds page's log search in real Chromium: failures with message and
// output, highlighted matches linking to the log line, and hostile strings from reports and logs shown as text.
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { artifactWorld, insertBuild, uploadArtifact, type ArtifactWorld } from "../helpers/artifact-world.ts";
import { appendLog } from "../helpers/builds.ts";
import { launchBrowser, newContext, serveTestApp, type ServedApp } from "../helpers/browser.ts";

vi.setConfig({ testTimeout: 60_000 });

const HOSTILE = `<img src=x onerror="window.__pwned='report'">`;

let t: TestApp;
let w: ArtifactWorld;
let served: ServedApp;
let browser: Browser;
let ctx: BrowserContext;
let page: Page;

beforeAll(async () => {
  t = await makeTestApp();
  w = await artifactWorld(t);
  [served, browser] = await Promise.all([serveTestApp(t), launchBrowser()]);
  const xml = `<testsuite name="LoginTests">
    <testcase classname="LoginTests" name="testOk" time="0.5"/>
    <testcase classname="LoginTests" name="testWrongPassword" time="1.25"><failure message="expected &lt;error&gt; ${HOSTILE.replace(/</g, "&lt;").replace(/"/g, "&quot;")}">LoginTests.swift:42: assertion failed</failure><system-out>typed password ${HOSTILE.replace(/</g, "&lt;")}</system-out></testcase>
  </testsuite>`;
  await uploadArtifact(t, w, "junit.xml", new TextEncoder().encode(xml), { kind: "junit" });
  await appendLog(t, w.runner, w.buildId, 0, `Compiling\nerror: Provisioning profile expired ${HOSTILE}\nDone\n`);
  const other = await insertBuild(t, w.projectId, w.pipelineId, w.runner.id);
  await appendLog(t, w.runner, other, 0, "nothing to see\n");
  ctx = await newContext(browser);
  ctx.setDefaultTimeout(20_000);
  page = await ctx.newPage();
  await page.goto(`${served.url}/login`);
  await page.getByLabel("Email").fill("owner@example.com");
  await page.getByRole("button", { name: "Sign in on this machine" }).click();
  await page.waitForURL((u) => u.pathname !== "/login");
});

afterAll(async () => {
  await ctx?.close();
  await browser?.close();
  await served?.close();
  await t?.close();
});

describe("tests and log search in the browser", () => {
  it("the build page shows the summary and each failure with its message and output, escaped", async () => {
    await page.goto(`${served.url}/builds/${w.buildId}`);
    await expect.poll(() => page.locator("#tests-summary").textContent()).toContain("2 tests · 1 passed · 1 failed");
    const failure = page.locator("#test-failures li").first();
    expect(await failure.locator("summary").textContent()).toContain(`LoginTests.testWrongPassword — expected <error> ${HOSTILE}`);
    await failure.locator("summary").click();
    const output = failure.locator("pre.test-output");
    expect(await output.isVisible()).toBe(true);
    expect(await output.textContent()).toBe(`LoginTests.swift:42: assertion failed\n\ntyped password ${HOSTILE}`);
    expect(await page.locator("#tests img").count()).toBe(0);
    expect(await page.evaluate("window.__pwned")).toBeUndefined();
  });

  it("the Builds page's search box lists matches with the terms highlighted, linking to the line", async () => {
    await page.goto(`${served.url}/builds`);
    await page.getByLabel("Search logs").fill('"profile expired" onerr*');
    await page.getByRole("button", { name: "Search" }).click();
    await page.waitForURL((u) => u.searchParams.get("q") === '"profile expired" onerr*');
    const items = page.locator("#search-results li");
    expect(await items.count()).toBe(1);
    expect(await items.locator("code").textContent()).toBe(`error: Provisioning profile expired ${HOSTILE}`);
    expect(await items.locator("mark").allTextContents()).toEqual(["profile expired", "onerror"]);
    expect(await page.locator("#search-results img").count()).toBe(0);
    const link = items.locator("a");
    expect(await link.getAttribute("href")).toBe(`/builds/${w.buildId}#L2`);
    await link.click();
    await page.waitForURL((u) => u.pathname === `/builds/${w.buildId}` && u.hash === "#L2");
    await page.locator("#L2").waitFor();
    expect(await page.evaluate("window.__pwned")).toBeUndefined();
  });

  it("a malformed query shows the error on the page instead of failing it", async () => {
    await page.goto(`${served.url}/builds?q=${encodeURIComponent('"unterminated')}`);
    expect(await page.locator("#search-results [role=alert]").textContent()).toContain("not valid");
  });

  it("the flaky-tests page says when there are none", async () => {
    await page.goto(`${served.url}/projects/${w.projectId}/flaky-tests`);
    expect(await page.locator("h1").textContent()).toContain("Flaky tests");
    expect(await page.locator(".empty-title").textContent()).toBe("No flaky test found");
  });
});
