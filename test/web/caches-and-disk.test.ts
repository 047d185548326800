// In Chromium: the build page's cache table (docs/api.md §16: per entry hit, partial or miss, the restored key, size,
// restore and save times; hostile keys shown as text) and the Runners page's free-disk column and low-disk warning.
import type { Browser, BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CacheEntryReport } from "../../src/cli/runner/cache-remote-types.ts";
import { createLocalLoginCode } from "../../src/domain/auth/local-login-codes.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { launchBrowser, newContext, serveTestApp, type ServedApp } from "../helpers/browser.ts";
import { buildWorld, claim, queueBuild, registerRunner, reportStatus } from "../helpers/builds.ts";

const HOSTILE_KEY = `deps-<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">`;

let browser: Browser;
let t: TestApp;
let served: ServedApp;
let ctx: BrowserContext;
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON
let w: any;

beforeAll(async () => {
  browser = await launchBrowser();
  t = await makeTestApp();
  w = await buildWorld(t);
  served = await serveTestApp(t);
  ctx = await newContext(browser);
  const { code } = await createLocalLoginCode(t.deps, {});
  await (await ctx.newPage()).goto(`${served.url}/login/local/${code}`);
});
afterAll(async () => {
  await ctx?.close();
  await served?.close();
  await browser?.close();
});

describe("caches and disk in the browser", () => {
  it("shows the build's cache entries as a table, a hostile key as plain text", async () => {
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    await claim(t, w.runner);
    await reportStatus(t, w.runner, b.id, { status: "running" });
    const caches: CacheEntryReport[] = [
      {
        key: "gradle-linux-3f2a",
        result: "exact",
        restored_key: "gradle-linux-3f2a",
        source: "local",
        size_bytes: 3 * 2 ** 20,
        restore_ms: 420,
        save_ms: null,
        saved: false,
      },
      { key: HOSTILE_KEY, result: "partial", restored_key: "deps-", source: "shared", size_bytes: 1536, restore_ms: 2500, save_ms: 900, saved: true },
      { key: "pods-macos", result: "miss", restored_key: null, source: null, size_bytes: 2048, restore_ms: null, save_ms: 1300, saved: true },
    ];
    expect((await reportStatus(t, w.runner, b.id, { status: "succeeded", caches } as never)).status).toBe(200);

    const p = await ctx.newPage();
    await p.goto(`${served.url}/builds/${b.id}`);
    const rows = p.locator("#caches-table tbody tr");
    expect(await rows.count()).toBe(3);
    const cells = async (i: number) => (await rows.nth(i).locator("td").allInnerTexts()).map((s) => s.replace(/\s+/g, " ").trim());
    expect(await cells(0)).toEqual([
      "gradle-linux-3f2a",
      "hit",
      "gradle-linux-3f2a from the runner's local cache",
      "3.0 MB",
      "420 ms",
      "not needed (exact hit)",
    ]);
    expect(await cells(1)).toEqual([HOSTILE_KEY, "partial", "deps- from the shared (S3/R2) cache", "1.5 KB", "2.5 s", "900 ms"]);
    expect(await cells(2)).toEqual(["pods-macos", "miss", "nothing", "2.0 KB", "–", "1.3 s"]);
    // The key is text: no script ran, no element was made from it.
    expect(await p.evaluate(() => (globalThis as { __pwned?: number }).__pwned)).toBeUndefined();
    expect(await p.locator("#caches-table img").count()).toBe(0);
    await p.close();

    // A build without a report has no cache section.
    const other = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    const q = await ctx.newPage();
    await q.goto(`${served.url}/builds/${other.id}`);
    expect(await q.locator("#caches").count()).toBe(0);
    await q.close();
  });

  it("shows each runner's free disk, marks one low on disk and says what to do", async () => {
    const low = await registerRunner(t, w.ownerToken, { name: "mac-mini-full" });
    const roomy = await registerRunner(t, w.ownerToken, { name: "mac-mini-roomy" });
    const silent = await registerRunner(t, w.ownerToken, { name: "mac-mini-old" });
    const beat = (r: { id: string; token: string }, body: object) => t.call("POST", `/v1/runners/${r.id}/heartbeat`, { token: r.token, body });
    expect((await beat(low, { free_disk_bytes: 4 * 2 ** 30, low_disk: true })).status).toBe(200);
    expect((await beat(roomy, { free_disk_bytes: 120 * 2 ** 30, low_disk: false })).status).toBe(200);

    const p = await ctx.newPage();
    await p.goto(`${served.url}/runners`);
    const disk = async (id: string) => (await p.locator(`tr[data-runner="${id}"] td.runner-disk`).innerText()).replace(/\s+/g, " ").trim();
    expect(await disk(low.id)).toBe("4.0 GB low on disk: takes no builds");
    expect(await disk(roomy.id)).toBe("120 GB");
    expect(await disk(silent.id)).toBe("not reported");
    const warning = p.locator("#low-disk-warning");
    expect(await warning.isVisible()).toBe(true);
    const text = await warning.innerText();
    expect(text).toContain("mac-mini-full");
    expect(text).not.toContain("mac-mini-roomy");
    expect(text).toContain("--min-free-gb");
    expect(text).toContain("Free space");

    // Once it reports enough space again, the warning goes.
    await beat(low, { free_disk_bytes: 60 * 2 ** 30, low_disk: false });
    await p.reload();
    expect(await p.locator("#low-disk-warning").count()).toBe(0);
    await p.close();
  });
});
