import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { makeTestApp } from "../helpers/app.ts";
import { launchBrowser, newContext, serveTestApp } from "../helpers/browser.ts";
import { appendLog, claim, createPipeline, createProject, queueBuild, registerRunner, reportStatus } from "../helpers/builds.ts";
import { completeLocalSetup, createUser } from "../helpers/factories.ts";
import { PROJECT_ROOT } from "../helpers/daemon.ts";
import { eq } from "drizzle-orm";
import { builds } from "../../src/db/schema/index.ts";
import { createLocalLoginCode } from "../../src/domain/auth/local-login-codes.ts";
import { writeSetting } from "../../src/domain/settings/instance-settings.ts";
import { NETWORK_SETTING } from "../../src/domain/settings/network-settings.ts";
import { encodePng, makeApk, samplePixels } from "../helpers/app-fixtures.ts";
import { artifactWorld, insertBuild, uploadArtifact } from "../helpers/artifact-world.ts";

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

/**
 * A full-page screenshot named `<name>-<width>-<scheme>.png`; at 375 px nothing may stick out sideways except
 * inside a scrolling table.
 */
async function shoot(p: Page, name: string, width: number, scheme: string, what: string): Promise<string> {
  const file = join(OUT, `${name}-${width}-${scheme}.png`);
  await p.screenshot({ path: file, fullPage: true });
  if (width === 375) {
    const overflow = await p.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth");
    expect(overflow, `${what} at 375 px`).toBeLessThanOrEqual(0);
  }
  return file;
}

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
            shots.push(await shoot(p, path, width, scheme, path));
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
            shots.push(await shoot(p, name, width, scheme, path));
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
  it("renders a tester's install page, a build's test results and the log search at 1280 and 375 px, light and dark", async () => {
    const t = await makeTestApp();
    const s = await serveTestApp(t);
    try {
      const w = await artifactWorld(t);
      // A build with a JUnit report (one failure) and a log worth searching.
      const xml = `<testsuites><testsuite name="LoginTests" tests="3" failures="1">
        <testcase classname="LoginTests" name="testSignIn" time="0.41"/>
        <testcase classname="LoginTests" name="testSignOut" time="0.12"/>
        <testcase classname="LoginTests" name="testWrongPassword" time="1.25"><failure message="XCTAssertEqual failed: (&quot;401&quot;) is not equal to (&quot;403&quot;)">LoginTests.swift:42: error: -[LoginTests testWrongPassword] : XCTAssertEqual failed</failure></testcase>
      </testsuite></testsuites>`;
      await uploadArtifact(t, w, "TEST-LoginTests.xml", new TextEncoder().encode(xml), { kind: "junit" });
      await appendLog(
        t,
        w.runner,
        w.buildId,
        0,
        "$ xcodebuild test -scheme Demo\nTest Suite 'LoginTests' started\nerror: Provisioning profile \"Demo AdHoc\" expired on 2026-11-01\n** TEST FAILED **\n",
      );
      // Two Android releases on a channel, and a tester with a personal link.
      const release = async (versionName: string, versionCode: number, notes: string) => {
        t.clock.advance(3600);
        const buildId = await insertBuild(t, w.projectId, w.pipelineId, w.runner.id);
        await t.deps.db.update(builds).set({ branch: "main" }).where(eq(builds.id, buildId));
        const apk = makeApk({ label: "Demo", versionName, versionCode, icons: [{ density: 480, png: encodePng(48, 48, samplePixels(48, 48)) }] });
        await uploadArtifact(t, { ...w, buildId, jobPath: `/v1/runners/${w.runner.id}/jobs/${buildId}/artifacts` }, "demo.apk", apk);
        const done = await t.call("POST", `/v1/runners/${w.runner.id}/jobs/${buildId}/status`, {
          token: w.runner.token,
          body: { status: "succeeded", release_notes: notes },
        });
        expect(done.status, done.text).toBe(200);
      };
      await release("2.3.0", 230, "New sign-in screen\nFaster start on older phones");
      await release("2.4.0", 240, "Dark mode for the settings\nFixed: the app crashed when the network dropped during sign-in");
      await writeSetting(t.deps, NETWORK_SETTING, { public_url: s.url, artifact_delivery_url: null, allowed_origins: [s.url] });
      const channels = `/v1/projects/${w.projectId}/channels`;
      const channel = await t.call("POST", channels, {
        token: w.ownerToken,
        body: { name: "beta", pipeline_id: w.pipelineId, platforms: ["android"] },
      });
      expect(channel.status, channel.text).toBe(200);
      const tester = await t.call("POST", `${channels}/${channel.body.id}/testers`, { token: w.ownerToken, body: { email: "tess@example.com" } });
      expect(tester.status, tester.text).toBe(200);
      const shots: string[] = [];
      for (const width of [1280, 375]) {
        for (const scheme of ["light", "dark"] as const) {
          const ctx = await newContext(browser, { viewport: { width, height: width === 375 ? 812 : 900 }, colorScheme: scheme });
          const p = await ctx.newPage();
          const { code } = await createLocalLoginCode(t.deps, {});
          await p.goto(`${s.url}/login/local/${code}`);
          for (const [name, path] of [
            ["tests", `/builds/${w.buildId}#tests`],
            ["search", `/builds?q=${encodeURIComponent('"profile" expired')}`],
            ["tester", new URL(tester.body.page_url as string).pathname],
          ] as const) {
            await p.goto(`${s.url}${path}`);
            if (name === "tests") await expect.poll(() => p.locator("#tests-summary").textContent()).toContain("3 tests");
            if (name === "search") expect(await p.locator("#search-results li").count()).toBe(1);
            if (name === "tester") expect(await p.getByText("2.4.0").count()).toBeGreaterThan(0);
            shots.push(await shoot(p, name, width, scheme, path));
          }
          await ctx.close();
        }
      }
      expect(shots).toHaveLength(12);
      for (const file of shots) expect(readFileSync(file).subarray(1, 4).toString()).toBe("PNG");
    } finally {
      await s.close();
    }
  });
});
