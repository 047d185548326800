// README "Quick start in the browser", followed as a newcomer does it, in real Chromium against the real daemon
// process: the setup token from `hangar setup-token`, the setup wizard, a project and a pipeline from their forms,
// a runner registered on the Runners page and started with the very command the page shows (run by bash, as
// pasted into a terminal), a build triggered from the project page, its log lines appearing live, and the artifact
// downloaded from the build page. If this test fails, the README's first steps are wrong.
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { launchBrowser, newContext } from "../helpers/browser.ts";
import { makeDataDir, PROJECT_ROOT, runCli, startDaemon, type Daemon } from "../helpers/daemon.ts";
import { removeDir } from "../e2e/runner-harness.ts";

vi.setConfig({ testTimeout: 150_000 });

let browser: Browser;
let daemon: Daemon;
let dataDir: string;
let scratch: string;
let runnerShell: ChildProcess | undefined;
let runnerOutput = "";

beforeAll(async () => {
  dataDir = makeDataDir();
  scratch = mkdtempSync(join(tmpdir(), "hangar-quickstart-"));
  [daemon, browser] = await Promise.all([startDaemon({ HANGAR_DATA_DIR: dataDir }), launchBrowser()]);
});

afterAll(async () => {
  // The pasted command runs in its own process group (bash → npx → node): end the whole group, as Ctrl-C would.
  if (runnerShell?.pid && runnerShell.exitCode === null) {
    try {
      process.kill(-runnerShell.pid, "SIGTERM");
    } catch {
      // already gone
    }
    await new Promise((r) => setTimeout(r, 500));
    try {
      process.kill(-runnerShell.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  await browser?.close();
  await daemon?.stop("SIGKILL");
  if (dataDir) removeDir(dataDir);
  if (scratch) removeDir(scratch);
});

describe("README: quick start in the browser", () => {
  it("goes from a setup token to a first build, its live log and its artifact, with the commands the pages show", async () => {
    // Terminal 2: npx hangar setup-token.
    const issued = await runCli(["setup-token"], { HANGAR_DATA_DIR: dataDir });
    expect(issued.code, issued.stderr).toBe(0);
    const token = issued.stdout.trim();

    // 1. Setup.
    const ctx = await newContext(browser);
    ctx.setDefaultTimeout(30_000);
    const page = await ctx.newPage();
    await page.goto(`${daemon.url}/`);
    await page.getByLabel("Setup token").fill(token);
    await page.getByRole("button", { name: "Continue" }).click();
    await page.getByText("Local: only this machine").click();
    await page.getByRole("button", { name: "Continue" }).click();
    await page.getByLabel("Owner's email").fill("you@example.com");
    await page.getByRole("button", { name: "Create the owner" }).click();
    await page.getByRole("button", { name: "Complete setup" }).click();
    await page.waitForURL((u) => u.pathname === "/builds");

    // 2. A repository (the README's two git commands).
    const repo = join(scratch, "hangar-demo");
    const git = (...args: string[]) => execFileSync("git", args, { cwd: scratch, encoding: "utf8" });
    git("init", "-q", "-b", "main", repo);
    execFileSync("sh", ["-c", `echo "Hello from Hangar" > ${repo}/README.md`]);
    git("-C", repo, "add", "README.md");
    git("-C", repo, "-c", "user.name=you", "-c", "user.email=you@example.com", "commit", "-q", "-m", "first commit");

    // 3. A project and a pipeline, with the README's config (a misspelt key first: refused with its path).
    await page.getByRole("link", { name: "Projects" }).first().click();
    const newProject = page.locator("#new-project");
    await newProject.getByLabel("Name").fill("demo");
    await newProject.getByLabel("Repository URL").fill(repo);
    await page.getByRole("button", { name: "Create project" }).click();
    await page.waitForURL((u) => /^\/projects\/[^/]+$/.test(u.pathname));
    const projectUrl = page.url();
    const config = {
      platform: "any",
      steps: [
        { name: "greet", run: 'for i in 1 2 3 4 5; do echo "line $i"; sleep 1; done; cat README.md' },
        { name: "package", run: "mkdir -p out && cp README.md out/hello.txt" },
      ],
      artifacts: ["out/*.txt"],
    };
    await page.getByText("New pipeline").click();
    await page.locator("#new-pipeline-name").fill("build");
    await page.locator("#new-pipeline-config").fill(JSON.stringify({ ...config, steps: [{ name: "greet", runs: "echo" }] }, null, 2));
    await page.getByRole("button", { name: "Create pipeline" }).click();
    await expect.poll(() => page.locator("body").textContent()).toContain("config.steps.0.runs");
    expect(await page.locator("#new-pipeline-name").inputValue()).toBe("build");
    await page.locator("#new-pipeline-config").fill(JSON.stringify(config, null, 2));
    await page.getByRole("button", { name: "Create pipeline" }).click();
    await expect.poll(() => page.locator("#trigger-pipeline option").allTextContents()).toEqual(["build"]);

    // 4. A runner: registered on the Runners page, started with the command the page shows.
    await page.goto(`${daemon.url}/runners`);
    await page.getByLabel("Name").fill("my-laptop");
    await page.getByLabel("Android").check();
    await page.getByRole("button", { name: "Register" }).click();
    const startCommand = await page.locator("#runner-start").inputValue();
    expect(startCommand).toContain("npx hangar runner --url");
    const home = join(scratch, "home");
    execFileSync("mkdir", ["-p", home]);
    runnerShell = spawn("bash", ["-c", startCommand], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, HOME: home },
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    runnerShell.stdout!.on("data", (d: Buffer) => (runnerOutput += d.toString()));
    runnerShell.stderr!.on("data", (d: Buffer) => (runnerOutput += d.toString()));
    // The token went into a file only its owner can read, as the page says.
    const envFile = join(home, ".hangar-runner.env");
    await expect.poll(() => (existsSync(envFile) ? readFileSync(envFile, "utf8") : ""), { timeout: 10_000 }).toMatch(/^HANGAR_RUNNER_TOKEN=hgr_/m);
    expect(statSync(envFile).mode & 0o077).toBe(0);
    await expect
      .poll(
        async () => {
          await page.reload();
          return page.locator("#runners-table").textContent();
        },
        { timeout: 60_000, interval: 1000 },
      )
      .toMatch(/online|busy/);

    // 5. A build, triggered from the project page; the build page follows it live.
    await page.goto(projectUrl);
    await page.locator("#trigger-branch").fill("main");
    await page.getByRole("button", { name: "Trigger build" }).click();
    await page.waitForURL((u) => /^\/builds\/[^/]+$/.test(u.pathname));
    const seenBeforeEnd: string[] = [];
    await expect
      .poll(
        async () => {
          const text = (await page.locator("#log").textContent()) ?? "";
          for (const n of [1, 2, 3, 4, 5]) if (text.includes(`line ${n}`) && !seenBeforeEnd.includes(`line ${n}`)) seenBeforeEnd.push(`line ${n}`);
          return page.locator("#build-status").textContent();
        },
        { timeout: 90_000, interval: 250, message: `runner output:\n${runnerOutput}` },
      )
      .toBe("succeeded");
    // Lines arrived while the build ran, without a reload: at least some were seen before the end.
    expect(seenBeforeEnd.length).toBeGreaterThan(0);
    // The rest of the log follows the status by at most one stream poll.
    await expect.poll(() => page.locator("#log").textContent(), { timeout: 10_000 }).toContain("hangar: build succeeded");
    const log = (await page.locator("#log").textContent()) ?? "";
    for (const n of [1, 2, 3, 4, 5]) expect(log).toContain(`line ${n}`);
    expect(log).toContain("Hello from Hangar");

    // The artifact: the finished page shows its artifacts without a reload, then Download fetches hello.txt.
    await expect.poll(() => page.locator("#artifacts").textContent(), { timeout: 30_000 }).toContain("hello.txt");
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Download" }).first().click()]);
    const saved = join(scratch, "hello.txt");
    await download.saveAs(saved);
    expect(readFileSync(saved, "utf8")).toBe("Hello from Hangar\n");
    await ctx.close();
  });
});
