// Every table of the UI on a 375-pixel screen (docs/api.md §21): a wide table scrolls sideways inside its own
// wrapper, never the page. Real Chromium visits each page that has a table, filled with long names and many columns,
// and checks that the document itself is no wider than the screen.
import type { Browser, BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createLocalLoginCode } from "../../src/domain/auth/local-login-codes.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { launchBrowser, newContext, serveTestApp, type ServedApp } from "../helpers/browser.ts";
import { appendLog, claim, createPipeline, createProject, queueBuild, registerRunner, reportStatus } from "../helpers/builds.ts";
import { completeLocalSetup, createUser } from "../helpers/factories.ts";

vi.setConfig({ testTimeout: 120_000 });

const LONG = "a-rather-long-unbroken-name-that-does-not-wrap-anywhere-at-all-0123456789";

let t: TestApp;
let served: ServedApp;
let browser: Browser;
let ctx: BrowserContext;
const pages: string[] = [];

beforeAll(async () => {
  t = await makeTestApp();
  const { ownerToken } = await completeLocalSetup(t);
  const project = await createProject(t, ownerToken, { name: `Project ${LONG}`, repo_url: `https://git.example.com/${LONG}/${LONG}.git` });
  const pipeline = await createPipeline(
    t,
    ownerToken,
    project.id,
    { platform: "android", steps: [{ name: `step ${LONG}`, run: "true" }], schedules: [{ cron: "0 3 * * *", branch: `release/${LONG}` }] } as never,
    `pipeline-${LONG}`,
  );
  const runner = await registerRunner(t, ownerToken, { name: `runner-${LONG}`, platforms: ["android", "ios", "macos"] });
  await registerRunner(t, ownerToken, { name: "never-started", platforms: ["ios"] });
  const build = await queueBuild(t, ownerToken, project.id, pipeline.id, { branch: `feature/${LONG}` });
  await claim(t, runner);
  await reportStatus(t, runner, build.id, { status: "running" });
  await appendLog(t, runner, build.id, 0, `${LONG} ${LONG} ${LONG}\n`);
  const bytes = new TextEncoder().encode("apk bytes");
  const created = await t.call("POST", `/v1/runners/${runner.id}/jobs/${build.id}/artifacts`, {
    token: runner.token,
    body: { filename: `${LONG}.apk`, size_bytes: bytes.length, content_type: "application/octet-stream" },
  });
  await t.app.request(new URL(created.body.upload.url).pathname, { method: "PUT", body: bytes }, { peerAddress: "127.0.0.1" });
  await t.call("POST", `/v1/runners/${runner.id}/jobs/${build.id}/artifacts/${created.body.artifact.id}/complete`, { token: runner.token });
  await reportStatus(t, runner, build.id, { status: "succeeded", exit_code: 0 });
  const secret = await t.call("PUT", `/v1/projects/${project.id}/secrets/SECRET_${"X".repeat(50)}`, { token: ownerToken, body: { value: "s3cret" } });
  const channel = await t.call("POST", `/v1/projects/${project.id}/channels`, {
    token: ownerToken,
    body: { name: `channel-${LONG}`, pipeline_id: pipeline.id },
  });
  await t.call("POST", `/v1/projects/${project.id}/channels/${channel.body.id}/testers`, {
    token: ownerToken,
    body: { email: `${LONG}@example.com`, name: LONG },
  });
  await createUser(t, { email: `${LONG}@example.com`, role: "developer", status: "invited" });
  if (secret.status >= 300 || channel.status >= 300) throw new Error(`setup: ${secret.status} ${channel.status} ${channel.text}`);
  pages.push(
    "/builds",
    `/builds/${build.id}`,
    "/projects",
    `/projects/${project.id}`,
    `/projects/${project.id}/channels/${channel.body.id}`,
    "/runners",
    "/users",
    "/audit",
    "/api",
    "/settings",
  );
  [served, browser] = await Promise.all([serveTestApp(t), launchBrowser()]);
  ctx = await newContext(browser, { viewport: { width: 375, height: 812 } });
  ctx.setDefaultTimeout(20_000);
  const p = await ctx.newPage();
  const { code } = await createLocalLoginCode(t.deps, {});
  await p.goto(`${served.url}/login/local/${code}`);
  await p.close();
});

afterAll(async () => {
  await ctx?.close();
  await browser?.close();
  await served?.close();
  await t?.close();
});

describe("tables at 375 px", () => {
  it("no page with a table is wider than a 375-pixel screen; each table scrolls inside its own wrapper", async () => {
    const page = await ctx.newPage();
    const wide: string[] = [];
    let tables = 0;
    for (const path of pages) {
      const res = await page.goto(`${served.url}${path}`);
      expect(res?.status(), path).toBe(200);
      // A string, not a function: the test's TypeScript has no DOM types (the page runs it as it is).
      const measured = (await page.evaluate(`(() => {
        const doc = document.scrollingElement ?? document.documentElement;
        const found = [...document.querySelectorAll("table")];
        return {
          scrollWidth: doc.scrollWidth,
          tables: found.length,
          // Every table sits in a wrapper no wider than the screen, which scrolls when the table is wider.
          unwrapped: found.filter((table) => {
            const wrap = table.closest(".table-wrap");
            return !wrap || wrap.getBoundingClientRect().right > 375 || getComputedStyle(wrap).overflowX !== "auto";
          }).length,
        };
      })()`)) as { scrollWidth: number; tables: number; unwrapped: number };
      tables += measured.tables;
      if (measured.scrollWidth > 375 || measured.unwrapped > 0) wide.push(`${path}: ${JSON.stringify(measured)}`);
    }
    expect(wide).toEqual([]);
    // The pages above show tables (not only empty states), so the check measured something.
    expect(tables).toBeGreaterThanOrEqual(pages.length);
    await page.close();
  });
});
