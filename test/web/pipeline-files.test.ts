// The project page for a repository's pipeline file, in real Chromium: the pipeline's source (file and commit),
// its parsed config read-only, the schedules with their next run, and the validate box telling line and column.
import type { Browser, BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { launchBrowser, newContext, serveTestApp, type ServedApp } from "../helpers/browser.ts";
import { createProject, makeGitRepo, type GitRepo } from "../helpers/builds.ts";
import { completeLocalSetup } from "../helpers/factories.ts";

vi.setConfig({ testTimeout: 120_000 });

const FILE = `pipelines:
  "app <b>":
    platform: android
    steps: ["./gradlew assembleDebug"]
schedules:
  - {pipeline: "app <b>", cron: "0 3 * * *", timezone: Europe/Berlin}
`;

let browser: Browser;
let t: TestApp;
let served: ServedApp;
let repo: GitRepo;
let ctx: BrowserContext;

beforeAll(async () => {
  [browser, t] = await Promise.all([launchBrowser(), makeTestApp()]);
  const { ownerToken } = await completeLocalSetup(t, "owner@example.com");
  repo = makeGitRepo({ ".hangar.yml": FILE });
  await createProject(t, ownerToken, { name: "mobile", repo_url: repo.path, config_path: ".hangar.yml" });
  served = await serveTestApp(t);
  ctx = await newContext(browser);
  ctx.setDefaultTimeout(20_000);
});

afterAll(async () => {
  await ctx?.close();
  await served?.close();
  await browser?.close();
  repo?.remove();
});

describe("the project page with a pipeline file", () => {
  it("shows the source, the parsed config read-only and the schedule; the validate box locates problems", async () => {
    const page = await ctx.newPage();
    await page.goto(`${served.url}/login`);
    await page.getByLabel("Email").fill("owner@example.com");
    await page.getByRole("button", { name: "Sign in on this machine" }).click();
    await page.waitForURL((u) => u.pathname !== "/login");
    await page.goto(`${served.url}/projects`);
    await page.getByRole("link", { name: "mobile" }).click();

    const card = page.locator("article.pipeline");
    await expect.poll(() => card.count()).toBe(1);
    // The name came from the repository: escaped, never markup.
    expect(await card.locator("h3").innerText()).toContain("app <b>");
    expect(await card.locator("b").count()).toBe(0);
    expect(await card.locator(".pipeline-source").innerText()).toBe(`From the repository: .hangar.yml at ${repo.shas.main!.slice(0, 12)}`);
    const config = JSON.parse(await card.locator("pre.pipeline-config").innerText());
    expect(config).toEqual({ platform: "android", steps: [{ name: "./gradlew assembleDebug", run: "./gradlew assembleDebug" }] });
    // Read-only: a repository pipeline has no edit form.
    expect(await card.locator("form").count()).toBe(0);

    const schedule = page.locator("#schedule-list tbody tr");
    expect(await schedule.count()).toBe(1);
    const cells = await schedule.locator("td").allInnerTexts();
    expect(cells.slice(0, 5)).toEqual(["app <b>", "0 3 * * *", "Europe/Berlin", "main", "pipeline file"]);
    expect(await schedule.locator("time").getAttribute("datetime")).toMatch(/T02:00:00/);

    await page.getByLabel("Pipeline file (YAML)").fill("pipelines:\n  ios:\n    platform: ios\n    runs_on: mac\n    steps: [make]\n");
    await page.getByRole("button", { name: "Validate" }).click();
    const result = page.locator(".validate-result");
    await expect.poll(() => result.count()).toBe(1);
    expect(await result.innerText()).toContain('line 4, column 5: pipelines.ios.runs_on: unknown key "runs_on"');
    // The pasted text stays in the box to be fixed.
    expect(await page.getByLabel("Pipeline file (YAML)").inputValue()).toContain("runs_on: mac");

    await page.getByLabel("Pipeline file (YAML)").fill("pipelines:\n  ios:\n    platform: ios\n    steps: [make]\n");
    await page.getByRole("button", { name: "Validate" }).click();
    await expect.poll(async () => page.locator(".validate-result").innerText()).toContain("Valid: 1 pipeline (ios).");
  });
});
