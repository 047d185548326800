// The build page in real Chromium while the build ends (docs/api.md §21 "The build page finishes"): the final
// status, times, steps and artifacts appear without a reload; a log line of 1 MiB neither stalls the viewer nor
// makes it ask for the log again and again (it is cut for display, with a link to the raw log). The build is driven
// over HTTP as a runner would drive it, while the page is open.
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createLocalLoginCode } from "../../src/domain/auth/local-login-codes.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { launchBrowser, newContext, serveTestApp, type ServedApp } from "../helpers/browser.ts";
import { appendLog, buildWorld, claim, queueBuild, reportStatus } from "../helpers/builds.ts";

vi.setConfig({ testTimeout: 90_000 });

let t: TestApp;
let w: Awaited<ReturnType<typeof buildWorld>>;
let served: ServedApp;
let browser: Browser;
let ctx: BrowserContext;

beforeAll(async () => {
  t = await makeTestApp();
  w = await buildWorld(t, { platforms: ["android"] });
  [served, browser] = await Promise.all([serveTestApp(t), launchBrowser()]);
  ctx = await newContext(browser);
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

/** A running build of the world's pipeline, claimed by the world's runner. */
async function runningBuild(steps: unknown[] = []): Promise<string> {
  const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
  expect((await claim(t, w.runner))?.build_id).toBe(b.id);
  const running = await reportStatus(t, w.runner, b.id, { status: "running", step_results: steps });
  expect(running.status, running.text).toBe(200);
  return b.id;
}

async function uploadArtifact(buildId: string, filename: string): Promise<void> {
  const bytes = new TextEncoder().encode(`bytes of ${filename}`);
  const created = await t.call("POST", `/v1/runners/${w.runner.id}/jobs/${buildId}/artifacts`, {
    token: w.runner.token,
    body: { filename, size_bytes: bytes.length, content_type: "application/octet-stream" },
  });
  expect(created.status, created.text).toBe(200);
  const put = await t.app.request(new URL(created.body.upload.url).pathname, { method: "PUT", body: bytes }, { peerAddress: "127.0.0.1" });
  expect(put.status).toBe(200);
  const done = await t.call("POST", `/v1/runners/${w.runner.id}/jobs/${buildId}/artifacts/${created.body.artifact.id}/complete`, {
    token: w.runner.token,
  });
  expect(done.status, done.text).toBe(200);
}

/** Counts the page's requests for the log and its event stream. */
function countLogRequests(page: Page, buildId: string): { log: number; events: number } {
  const counts = { log: 0, events: 0 };
  page.on("request", (req) => {
    const path = new URL(req.url()).pathname;
    if (path === `/builds/${buildId}/log`) counts.log++;
    if (path === `/builds/${buildId}/events`) counts.events++;
  });
  return counts;
}

describe("the build page finishes by itself", () => {
  it("shows the final status, finish time, steps and artifacts when the build ends, without a reload", async () => {
    const start = t.clock.now();
    const buildId = await runningBuild([{ name: "assemble", status: "running", started_at: start }]);
    await appendLog(t, w.runner, buildId, 0, "> Task :app:assembleRelease\n");
    const page = await ctx.newPage();
    let loads = 0;
    page.on("load", () => loads++);
    await page.goto(`${served.url}/builds/${buildId}`);
    await page.locator("#log[data-ready=true]").waitFor();
    expect(await page.locator("#build-status").textContent()).toBe("running");
    expect(await page.locator("#artifacts").textContent()).toContain("Artifacts appear here once the runner uploads them.");
    // A marker that a reload would wipe.
    await page.evaluate(() => {
      (globalThis as unknown as { samePage: boolean }).samePage = true;
    });

    await uploadArtifact(buildId, "app-release.apk");
    t.clock.advance(42);
    const done = await reportStatus(t, w.runner, buildId, {
      status: "succeeded",
      exit_code: 0,
      step_results: [{ name: "assemble", status: "succeeded", exit_code: 0, started_at: start, finished_at: start + 42 }],
    });
    expect(done.status, done.text).toBe(200);

    await page.locator("body[data-build-finished=true]").waitFor({ timeout: 15_000 });
    expect(await page.locator("#build-status").textContent()).toBe("succeeded");
    expect(await page.locator("#steps").textContent()).toMatch(/succeeded\s+assemble\s+42 s/);
    const details = (await page.locator("#details").textContent()) ?? "";
    expect(details).toMatch(/Duration\s*42 s/);
    expect(details).not.toMatch(/Finished\s*–/);
    expect(await page.locator("#artifacts").textContent()).toContain("app-release.apk");
    expect(await page.locator("#artifacts form[action$='/download'] button").count()).toBe(1);
    // The cancel button went with the running build; the log box is the live one, not a fresh copy.
    expect(await page.getByRole("button", { name: "Cancel build" }).count()).toBe(0);
    expect(await page.locator("#log[data-ready=true] .ln").count()).toBeGreaterThan(0);
    expect(await page.locator("#log").textContent()).toContain("> Task :app:assembleRelease");
    expect(await page.evaluate(() => (globalThis as unknown as { samePage?: boolean }).samePage)).toBe(true);
    expect(loads).toBe(1);
    await page.close();
  });

  it("a 1 MiB line is cut for display with a raw-log link, and the page asks for the log a bounded number of times", async () => {
    const buildId = await runningBuild();
    const long = "x".repeat(1024 * 1024);
    const text = `first line\n${long}\n`;
    for (let at = 0; at < text.length; at += 256 * 1024) {
      const res = await appendLog(t, w.runner, buildId, at, text.slice(at, at + 256 * 1024));
      expect(res.status, res.text).toBe(200);
    }
    const page = await ctx.newPage();
    const counts = countLogRequests(page, buildId);
    await page.goto(`${served.url}/builds/${buildId}`);
    await page.locator("#log[data-ready=true]").waitFor();
    // Scrolled to the top, where the earlier windows are loaded from.
    await page.locator("#log").evaluate((el) => {
      el.scrollTop = 0;
    });
    await page.waitForTimeout(4000);
    // The tail, the windows back to the line's start and the first line: a handful, never a loop.
    expect(counts.log, JSON.stringify(counts)).toBeLessThanOrEqual(6);
    expect(counts.events, JSON.stringify(counts)).toBeLessThanOrEqual(3);
    const cut = page.locator("#log a.ln-cut");
    expect(await cut.count()).toBe(1);
    expect(await cut.getAttribute("href")).toBe(`/builds/${buildId}/log`);
    const longest = await page.locator("#log .ln-text").evaluateAll((els) => Math.max(...els.map((e) => (e.textContent ?? "").length)));
    expect(longest).toBeLessThan(2100);
    expect(await page.locator("#L1 .ln-text").textContent()).toBe("first line");

    // The build ends with one more line; the long line is still shown cut, and the page settles.
    const more = await appendLog(t, w.runner, buildId, text.length, "done\n");
    expect(more.status, more.text).toBe(200);
    expect((await reportStatus(t, w.runner, buildId, { status: "succeeded", exit_code: 0 })).status).toBe(200);
    await page.locator("body[data-build-finished=true]").waitFor({ timeout: 15_000 });
    await page.locator("#log").evaluate((el) => {
      el.scrollTop = el.scrollHeight;
    });
    await page.locator("#L3").waitFor();
    expect(await page.locator("#L3 .ln-text").textContent()).toBe("done");
    const settled = { ...counts };
    await page.waitForTimeout(2000);
    expect(counts).toEqual(settled);
    await page.close();
  });

  it("a long line the window starts inside (the tail of a line longer than it) is shown as a piece, and the viewer moves on", async () => {
    const buildId = await runningBuild();
    const text = `head\n${"y".repeat(600 * 1024)}`;
    for (let at = 0; at < text.length; at += 256 * 1024) {
      expect((await appendLog(t, w.runner, buildId, at, text.slice(at, at + 256 * 1024))).status).toBe(200);
    }
    // The tail window (256 KiB) starts inside the unfinished second line.
    const tail = await t.app.request(`/builds/${buildId}/log?tail=${256 * 1024}`, {
      headers: { cookie: `__Host-hangar_session=${w.ownerToken}` },
    });
    expect(tail.headers.get("x-log-mid-line")).toBe("true");
    expect(tail.headers.get("x-log-lines-before")).toBe("1");
    const page = await ctx.newPage();
    const counts = countLogRequests(page, buildId);
    await page.goto(`${served.url}/builds/${buildId}`);
    await page.locator("#log[data-ready=true]").waitFor();
    await page.locator("#L1").waitFor();
    expect(await page.locator("#L1 .ln-text").textContent()).toBe("head");
    expect(await page.locator("#L2 .ln-text").textContent()).toMatch(/^…y{1990,2000} … \d+ more characters: raw log$/);
    await page.waitForTimeout(2000);
    expect(counts.log, JSON.stringify(counts)).toBeLessThanOrEqual(4);
    await page.close();
  });
  it("keeps the log live after its stream is answered with an error (a proxy's 503 while the daemon restarts)", async () => {
    const buildId = await runningBuild();
    expect((await appendLog(t, w.runner, buildId, 0, "before the restart\n")).status).toBe(200);
    const page = await ctx.newPage();
    // The first three event streams are refused as a reverse proxy refuses them while the daemon is down; a browser
    // gives an EventSource up for good after such an answer, so only the page can open a new one.
    let refused = 0;
    await page.route(`**/builds/${buildId}/events**`, async (route) => {
      if (refused < 3) {
        refused++;
        await route.fulfill({ status: 503, contentType: "text/html", body: "<h1>502 Bad Gateway</h1>" });
      } else await route.continue();
    });
    const counts = countLogRequests(page, buildId);
    await page.goto(`${served.url}/builds/${buildId}`);
    await page.locator("#log[data-ready=true]").waitFor();
    expect(await page.locator("#L1 .ln-text").textContent()).toBe("before the restart");
    const line = "after the restart\n";
    expect((await appendLog(t, w.runner, buildId, "before the restart\n".length, line)).status).toBe(200);
    await page.locator("#L2").waitFor({ timeout: 30_000 });
    expect(await page.locator("#L2 .ln-text").textContent()).toBe("after the restart");
    expect(refused).toBe(3);
    // Backed off between attempts: a handful of streams, not a loop.
    expect(counts.events, JSON.stringify(counts)).toBeLessThanOrEqual(6);
    expect((await reportStatus(t, w.runner, buildId, { status: "succeeded", exit_code: 0 })).status).toBe(200);
    await page.locator("body[data-build-finished=true]").waitFor({ timeout: 15_000 });
    await page.close();
  });
});
