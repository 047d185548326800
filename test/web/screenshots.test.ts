import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { makeTestApp } from "../helpers/app.ts";
import { launchBrowser, newContext, serveTestApp } from "../helpers/browser.ts";
import { appendLog, claim, createPipeline, createProject, queueBuild, registerRunner, reportStatus } from "../helpers/builds.ts";
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
      await t.call("POST", "/v1/runners/register", {
        token: ownerToken,
        body: { name: "mac-mini-1", capabilities: { platforms: ["ios", "macos"] } },
      });
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
          await p
            .getByRole("button", { name: "Sign in on this machine" })
            .click()
            .catch(() => {});
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

  it("renders projects, a project, builds and a running build's page with its live log at 1280 and 375 px, light and dark", async () => {
    const t = await makeTestApp();
    const s = await serveTestApp(t);
    try {
      const { ownerToken } = await completeLocalSetup(t, "olive@example.com");
      const project = await createProject(t, ownerToken, { name: "Demo app", repo_url: "https://git.example.com/demo/app.git" });
      const pipeline = await createPipeline(
        t,
        ownerToken,
        project.id,
        {
          platform: "android",
          steps: [
            { name: "checkout", run: "git fetch" },
            { name: "assemble", run: "./gradlew assembleRelease" },
            { name: "test", run: "./gradlew test" },
          ],
          artifacts: ["app/build/outputs/apk/release/*.apk"],
        },
        "release",
      );
      const runner = await registerRunner(t, ownerToken, { name: "linux-android", platforms: ["android"] });
      const done = await queueBuild(t, ownerToken, project.id, pipeline.id, { branch: "main" });
      await claim(t, runner);
      await reportStatus(t, runner, done.id, { status: "running" });
      await reportStatus(t, runner, done.id, { status: "succeeded", exit_code: 0 });
      const live = await queueBuild(t, ownerToken, project.id, pipeline.id, { branch: "feature/login" });
      await claim(t, runner);
      const now = t.clock.now();
      await reportStatus(t, runner, live.id, {
        status: "running",
        step_results: [
          { name: "checkout", status: "succeeded", started_at: now - 95, finished_at: now - 92, exit_code: 0 },
          { name: "assemble", status: "running", started_at: now - 92 },
          { name: "test", status: "pending" },
        ],
      });
      const log =
        [
          "\u001b[1m$ git fetch\u001b[0m",
          "From https://git.example.com/demo/app",
          " * branch            feature/login -> FETCH_HEAD",
          "\u001b[1m$ ./gradlew assembleRelease\u001b[0m",
          ...Array.from(
            { length: 40 },
            (_, i) =>
              `> Task :app:${["compileReleaseKotlin", "mergeReleaseResources", "processReleaseManifest", "dexBuilderRelease"][i % 4]} ${i % 7 === 3 ? "\u001b[33mw: 'onBackPressed()' is deprecated\u001b[0m" : "\u001b[32mUP-TO-DATE\u001b[0m"}`,
          ),
          "Downloading https://services.gradle.org/distributions/gradle-8.9-bin.zip 100%",
        ].join("\n") + "\n";
      await appendLog(t, runner, live.id, 0, log);
      await t.call("POST", `/v1/projects/${project.id}/builds`, {
        token: ownerToken,
        body: { pipeline_id: pipeline.id, commit_sha: "abcdef0123456789abcdef0123456789abcdef01", branch: "main" },
      });
      const shots: string[] = [];
      for (const width of [1280, 375]) {
        for (const scheme of ["light", "dark"] as const) {
          const ctx = await newContext(browser, { viewport: { width, height: width === 375 ? 812 : 900 }, colorScheme: scheme });
          const p = await ctx.newPage();
          await p.goto(`${s.url}/login`);
          await p.getByLabel("Email").fill("olive@example.com");
          await p.getByRole("button", { name: "Sign in on this machine" }).click();
          await p.waitForURL((u) => u.pathname !== "/login");
          for (const [name, path] of [
            ["projects", "/projects"],
            ["project", `/projects/${project.id}`],
            ["builds", "/builds"],
            ["build", `/builds/${live.id}`],
          ] as const) {
            await p.goto(`${s.url}${path}`);
            if (name === "build") await p.locator('#log[data-ready="true"]').waitFor();
            const file = join(OUT, `${name}-${width}-${scheme}.png`);
            await p.screenshot({ path: file, fullPage: true });
            shots.push(file);
            if (width === 375) {
              const overflow = await p.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth");
              expect(overflow, `${path} at 375 px`).toBeLessThanOrEqual(0);
            }
          }
          await ctx.close();
        }
      }
      expect(shots).toHaveLength(16);
      for (const file of shots) expect(readFileSync(file).subarray(1, 4).toString()).toBe("PNG");
    } finally {
      await s.close();
    }
  });
});
