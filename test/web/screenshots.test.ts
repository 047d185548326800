import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { makeTestApp } from "../helpers/app.ts";
import { launchBrowser, newContext, serveTestApp } from "../helpers/browser.ts";
import { completeLocalSetup, createUser } from "../helpers/factories.ts";
import { PROJECT_ROOT } from "../helpers/daemon.ts";

// Screenshots of each page at 1280 and 375 px, light and dark. `HANGAR_WRITE_SCREENSHOTS=1 npx vitest run
// test/web/screenshots.test.ts` writes them to docs/screenshots/ (shown in the README); otherwise they go to a
// temporary directory, so that `npm test` still renders every page in both schemes without touching the tree.
vi.setConfig({ testTimeout: 240_000 });

const OUT = process.env.HANGAR_WRITE_SCREENSHOTS === "1" ? join(PROJECT_ROOT, "docs", "screenshots") : mkdtempSync(join(tmpdir(), "hangar-shots-"));
let browser: Browser;

beforeAll(async () => {
  browser = await launchBrowser();
  mkdirSync(OUT, { recursive: true });
});
afterAll(async () => {
  await browser?.close();
  if (!OUT.startsWith(PROJECT_ROOT)) rmSync(OUT, { recursive: true, force: true });
});

describe("screenshots", () => {
  it("renders setup, sign-in, users, runners, settings and audit at 1280 and 375 px, light and dark", async () => {
    const t = await makeTestApp();
    const s = await serveTestApp(t);
    try {
      // Before setup: the wizard's first step.
      const shots: string[] = [];
      for (const width of [1280, 375]) {
        for (const scheme of ["light", "dark"] as const) {
          const ctx = await newContext(browser, { viewport: { width, height: width === 375 ? 812 : 800 }, colorScheme: scheme });
          const p = await ctx.newPage();
          await p.goto(`${s.url}/setup`);
          const file = join(OUT, `setup-${width}-${scheme}.png`);
          await p.screenshot({ path: file, fullPage: true });
          shots.push(file);
          await ctx.close();
        }
      }
      const { ownerToken } = await completeLocalSetup(t, "olive@example.com");
      await createUser(t, { email: "dev@example.com", role: "developer" });
      await createUser(t, { email: "qa@example.com", role: "qa_viewer", status: "invited" });
      await t.call("POST", "/v1/runners/register", { token: ownerToken, body: { name: "mac-mini-1", capabilities: { platforms: ["ios", "macos"] } } });
      await t.call("POST", "/v1/runners/register", { token: ownerToken, body: { name: "linux-android", capabilities: { platforms: ["android"] } } });
      for (const width of [1280, 375]) {
        for (const scheme of ["light", "dark"] as const) {
          const ctx = await newContext(browser, { viewport: { width, height: width === 375 ? 812 : 800 }, colorScheme: scheme });
          const p = await ctx.newPage();
          await p.goto(`${s.url}/login`);
          await p.screenshot({ path: join(OUT, `login-${width}-${scheme}.png`), fullPage: true });
          shots.push(join(OUT, `login-${width}-${scheme}.png`));
          await p.getByRole("button", { name: "Sign in on this machine" }).click();
          await p.getByLabel("Email").fill("olive@example.com");
          await p.getByRole("button", { name: "Sign in on this machine" }).click().catch(() => {});
          await p.waitForURL((u) => u.pathname !== "/login");
          for (const path of ["users", "runners", "settings", "audit"]) {
            await p.goto(`${s.url}/${path}`);
            const file = join(OUT, `${path}-${width}-${scheme}.png`);
            await p.screenshot({ path: file, fullPage: true });
            shots.push(file);
            // Nothing sticks out sideways at 375 px except inside a scrolling table.
            if (width === 375) {
              const overflow = await p.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth");
              expect(overflow, `${path} at 375 px`).toBeLessThanOrEqual(0);
            }
          }
          await ctx.close();
        }
      }
      expect(shots).toHaveLength(24);
      for (const file of shots) expect(readFileSync(file).subarray(1, 4).toString()).toBe("PNG");
    } finally {
      await s.close();
    }
  });
});
