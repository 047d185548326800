// The build page in real Chromium against the real daemon process and the real reference runner (`hangar runner`)
// building a real git repository: live lines without reload, steps ticking, reconnects that lose and repeat
// nothing, ANSI colours and hostile strings rendered as text, what a qa_viewer sees, cancel and rerun clicked
// from the page, and the build list's filters. The daemon closes every event stream after 2 s
// (HANGAR_LOG_STREAM_MAX_S), so each live build below goes through several reconnects.
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, BrowserContext, Locator, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createPipeline, createProject, makeGitRepo, queueBuild, registerRunner, type GitRepo } from "../helpers/builds.ts";
import { launchBrowser, newContext } from "../helpers/browser.ts";
import { deliver } from "../helpers/hooks.ts";
import {
  getBuild,
  getLog,
  removeDir,
  startReadyDaemon,
  startRunner,
  stopRunner,
  waitFor,
  waitForFinal,
  type ReadyDaemon,
  type RunnerProcess,
} from "../e2e/runner-harness.ts";

vi.setConfig({ testTimeout: 120_000 });

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON shapes are asserted by the tests
type Json = any;

const RLO = "\u202E";
const HOSTILE_NAME = `<img src=x onerror="window.__pwned='name';alert('name')">${RLO}gpj.exe`;
const HOSTILE_BRANCH = `x/"><svg/onload=window.__pwned='branch'>${RLO}evil`;
const HOSTILE_COMMIT = `</script><script>window.__pwned='commit'</script><img src=x onerror=alert('commit')> ${RLO}txt.exe`;
const HOSTILE_ACTOR = `<b onmouseover=alert('actor')>pusher</b>`;

let d: ReadyDaemon;
let repo: GitRepo;
let scratch: string;
let browser: Browser;
let runner: RunnerProcess;
let runnerInfo: Json;
let qaEmail: string;
const contexts: BrowserContext[] = [];
const built: Record<string, Json> = {};

beforeAll(async () => {
  [d, browser] = await Promise.all([startReadyDaemon({ HANGAR_LOG_STREAM_MAX_S: "2" }), launchBrowser()]);
  repo = makeGitRepo({ "README.md": "the live log repository\n" });
  // A real branch with a hostile name whose tip has a hostile commit message.
  const git = (...args: string[]) =>
    execFileSync("git", args, {
      cwd: repo.path,
      encoding: "utf8",
      env: { ...process.env, GIT_AUTHOR_NAME: "t", GIT_AUTHOR_EMAIL: "t@example.com", GIT_COMMITTER_NAME: "t", GIT_COMMITTER_EMAIL: "t@example.com" },
    }).trim();
  git("checkout", "-q", "-b", HOSTILE_BRANCH);
  git("commit", "-q", "--allow-empty", "-m", HOSTILE_COMMIT);
  repo.shas[HOSTILE_BRANCH] = git("rev-parse", "HEAD");
  git("checkout", "-q", "main");
  scratch = mkdtempSync(join(tmpdir(), "hangar-build-live-"));
  qaEmail = "qa@example.com";
  const invited = await d.api.call("POST", "/v1/users/invite", { token: d.ownerToken, body: { email: qaEmail, role: "qa_viewer" } });
  if (invited.status !== 200) throw new Error(`invite: ${invited.status} ${invited.text}`);
  runnerInfo = await registerRunner(d.api, d.ownerToken, { name: HOSTILE_NAME, platforms: ["android"] });
  runner = startRunner(d.daemon.url, runnerInfo, [], join(scratch, "work"));
});

afterAll(async () => {
  for (const ctx of contexts) await ctx.close().catch(() => {});
  await browser?.close();
  if (d) {
    const list = await d.api.call("GET", "/v1/builds", { token: d.ownerToken });
    for (const b of list.body as Array<{ id: string; status: string }>) {
      if (["queued", "assigned", "running"].includes(b.status)) await d.api.call("POST", `/v1/builds/${b.id}/cancel`, { token: d.ownerToken });
    }
  }
  await stopRunner(runner);
  await d?.daemon.stop("SIGKILL");
  if (d) removeDir(d.dataDir);
  repo?.remove();
  if (scratch) removeDir(scratch);
});

/** A signed-in browser context: the local sign-in form, as a person on this machine uses it. */
async function signedIn(email: string): Promise<{ ctx: BrowserContext; page: Page }> {
  const ctx = await newContext(browser);
  contexts.push(ctx);
  ctx.setDefaultTimeout(20_000);
  const page = await ctx.newPage();
  await page.goto(`${d.daemon.url}/login`);
  await page.getByLabel("Email").fill(email);
  await page.getByRole("button", { name: "Sign in on this machine" }).click();
  await page.waitForURL((u) => u.pathname !== "/login");
  return { ctx, page };
}

/** The text of every rendered log line, in order (the log is short enough to be rendered whole). */
async function renderedLines(page: Page): Promise<string[]> {
  return (await page.evaluate(`[...document.querySelectorAll("#log .ln-text")].map((e) => e.textContent)`)) as string[];
}

/** A computed style property of the element (no DOM types in this project's tsconfig: the window is cast). */
async function style(locator: Locator, property: string): Promise<string> {
  return locator.evaluate(
    (el, prop) => (globalThis as unknown as { getComputedStyle(e: unknown): Record<string, string> }).getComputedStyle(el)[prop]!,
    property,
  );
}

/** What the page should show for a raw log: lines without ANSI sequences (the last one is complete). */
function expectedLines(raw: string): string[] {
  // eslint-disable-next-line no-control-regex -- ANSI escape sequences are exactly what is removed
  const lines = raw.replace(/\u001b\[[0-9;]*m/g, "").split("\n");
  if (lines.at(-1) === "") lines.pop();
  return lines;
}

describe("the build page with the real daemon and runner", () => {
  it("shows each line as the step prints it, without reload; the step ticks from running to succeeded with its duration; reconnects lose and repeat nothing", async () => {
    const p = await createProject(d.api, d.ownerToken, { name: "live-log", repo_url: repo.url });
    const pipeline = await createPipeline(d.api, d.ownerToken, p.id, {
      platform: "any",
      steps: [{ name: "tick", run: 'sleep 1; for i in 1 2 3 4 5; do echo "tick $i"; sleep 1; done' }],
    });
    const { page } = await signedIn("owner@example.com");
    // Each line's first appearance in the DOM, in page time.
    await page.addInitScript(`
      window.__seen = {};
      new MutationObserver(() => {
        for (const el of document.querySelectorAll("#log .ln-text")) {
          const t = el.textContent;
          if (/^tick \\d$/.test(t) && !(t in window.__seen)) window.__seen[t] = performance.now();
        }
      }).observe(document, { subtree: true, childList: true, characterData: true });
    `);
    const navigations: string[] = [];
    page.on("framenavigated", (f) => {
      if (f === page.mainFrame()) navigations.push(f.url());
    });
    const streamRequests: Array<Promise<Record<string, string>>> = [];
    page.on("request", (r) => {
      if (new URL(r.url()).pathname.endsWith("/events")) streamRequests.push(r.allHeaders());
    });

    const build = await queueBuild(d.api, d.ownerToken, p.id, pipeline.id, { commit_sha: undefined });
    built.live = build;
    await page.goto(`${d.daemon.url}/builds/${build.id}`);
    await page.locator('#log[data-ready="true"]').waitFor();
    // Mid-build: the first line is there, the step shows running, the last line has not been printed yet.
    await page.locator("#log .ln-text", { hasText: /^tick 1$/ }).waitFor();
    const step = page.locator("#steps li", { hasText: "tick" });
    await expect.poll(() => step.locator(".badge").textContent()).toBe("running");
    expect(await renderedLines(page)).not.toContain("tick 5");
    expect(await page.locator("#build-status").textContent()).toBe("running");

    await page
      .locator("#log .ln-text", { hasText: /^tick 5$/ })
      .waitFor()
      .catch(async (err: Error) => {
        // What the daemon and the runner say tells a slow build from a page that stopped following it.
        const now = await getBuild(d, build.id);
        const log = await getLog(d, build.id);
        throw new Error(`${err.message}\nbuild ${now.status}; stored log:\n${log}\nrunner:\n${runner.stderr().slice(-4000)}`);
      });
    await expect.poll(() => step.locator(".badge").textContent(), { timeout: 20_000 }).toBe("succeeded");
    await expect.poll(() => page.locator("#build-status").textContent(), { timeout: 20_000 }).toBe("succeeded");
    const took = (await step.locator(".muted").textContent()) ?? "";
    expect(took).toMatch(/^\d+ s$/);
    expect(Number.parseInt(took, 10)).toBeGreaterThanOrEqual(5);
    expect(Number.parseInt(took, 10)).toBeLessThan(30);

    // Lines came one by one (a second apart), not in one piece at the end; and the page never reloaded.
    const seen = (await page.evaluate("window.__seen")) as Record<string, number>;
    const times = [1, 2, 3, 4, 5].map((i) => seen[`tick ${i}`]!);
    for (let i = 1; i < times.length; i++) expect(times[i]!).toBeGreaterThan(times[i - 1]!);
    expect(times[4]! - times[0]!).toBeGreaterThan(2500);
    expect(navigations).toHaveLength(1);

    // The stream was cut every 2 s: the browser came back with Last-Event-ID (a byte offset) several times.
    const done = await waitForFinal(d, build.id);
    expect(done.status).toBe("succeeded");
    const streams = (await Promise.all(streamRequests)).map((h) => ({ lastEventId: h["last-event-id"] }));
    const resumed = streams.filter((s) => s.lastEventId !== undefined && Number(s.lastEventId) > 0);
    expect(streams.length).toBeGreaterThanOrEqual(3);
    expect(resumed.length).toBeGreaterThanOrEqual(2);
    // Every line exactly once, in order: the page shows the stored log, no more and no less.
    const raw = await getLog(d, build.id);
    expect(raw).toContain("tick 5\n");
    await expect.poll(() => renderedLines(page)).toEqual(expectedLines(raw));
    for (let i = 1; i <= 5; i++) expect((await renderedLines(page)).filter((l) => l === `tick ${i}`)).toHaveLength(1);
  });

  it("renders ANSI colours and hostile strings (log, branch, commit message, runner, project, step, actor) as text: nothing executes", async () => {
    const p = await createProject(d.api, d.ownerToken, { name: HOSTILE_NAME, repo_url: repo.url });
    const pipeline = await createPipeline(
      d.api,
      d.ownerToken,
      p.id,
      {
        platform: "any",
        triggers: [{ event: "push", branches: ["**"] }],
        steps: [
          {
            name: `step ${HOSTILE_NAME}`,
            run: [
              "printf '\\033[31mred text\\033[0m then \\033[1;32mbold green\\033[0m\\n'",
              `printf '%s\\n' '<img src=x onerror="window.__pwned=1;alert(1)">' '</script><script>window.__pwned=2</script>' "a$(printf '\\342\\200\\256')gpj.exe"`,
              "git log -1 --format=%s",
            ].join("\n"),
          },
        ],
      },
      `pipe ${HOSTILE_NAME}`,
    );
    const hook = await d.api.call("POST", `/v1/projects/${p.id}/webhooks`, { token: d.ownerToken, body: { provider: "github" } });
    expect(hook.status, hook.text).toBe(200);
    const sha = repo.shas[HOSTILE_BRANCH]!;
    const delivered = await deliver(d.api, { ...hook.body, provider: "github" }, "push", {
      ref: `refs/heads/${HOSTILE_BRANCH}`,
      after: sha,
      head_commit: { id: sha, message: HOSTILE_COMMIT },
      repository: { full_name: "acme/app" },
      sender: { login: HOSTILE_ACTOR },
    });
    expect(delivered.status, delivered.text).toBe(200);
    const buildId = delivered.body.builds[0].id as string;
    built.hostile = { id: buildId, projectId: p.id };
    const done = await waitForFinal(d, buildId);
    expect(done.status, await getLog(d, buildId)).toBe("succeeded");
    expect(done.branch).toBe(HOSTILE_BRANCH);

    const { page } = await signedIn("owner@example.com");
    const dialogs: string[] = [];
    page.on("dialog", (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    const cspErrors: string[] = [];
    page.on("console", (m) => {
      if (/Content Security Policy/i.test(m.text())) cspErrors.push(m.text());
    });
    await page.goto(`${d.daemon.url}/builds/${buildId}`);
    await page.locator('#log[data-ready="true"]').waitFor();
    await page.locator("#log .ln-text", { hasText: /^a<U\+202E>gpj\.exe$/ }).waitFor();
    const lines = await renderedLines(page);
    // The log: markup as literal text, the commit message as the step printed it, bidi controls made visible.
    expect(lines).toContain("red text then bold green");
    expect(lines).toContain('<img src=x onerror="window.__pwned=1;alert(1)">');
    expect(lines).toContain("</script><script>window.__pwned=2</script>");
    expect(lines).toContain("a<U+202E>gpj.exe");
    expect(lines).toContain(HOSTILE_COMMIT.replace(RLO, "<U+202E>"));
    // Colours through classes, bold through CSSOM (the CSP refuses style attributes, so nothing was refused).
    const red = page.locator("#log .ln-text span", { hasText: /^red text$/ });
    expect(await red.getAttribute("class")).toContain("ansi-red-fg");
    expect(await style(red, "color")).toBe("rgb(255, 123, 114)");
    const bold = page.locator("#log .ln-text span", { hasText: /^bold green$/ });
    expect(await style(bold, "fontWeight")).toBe("700");
    expect(await style(bold, "color")).toBe("rgb(63, 185, 80)");

    // Names elsewhere on the page: text, with the bidi override shown.
    const shown = (s: string) => s.replace(RLO, "<U+202E>");
    const body = (await page.locator("main").textContent()) ?? "";
    for (const s of [HOSTILE_NAME, HOSTILE_BRANCH, HOSTILE_ACTOR, `pipe ${HOSTILE_NAME}`, `step ${HOSTILE_NAME}`]) expect(body).toContain(shown(s));
    expect(await page.locator("#details").textContent()).toContain(shown(HOSTILE_NAME)); // the runner's name
    expect(await page.locator("#steps li").first().textContent()).toContain(shown(`step ${HOSTILE_NAME}`));

    // The list page shows the same strings as text too.
    await page.goto(`${d.daemon.url}/builds?project_id=${p.id}`);
    const row = (await page.locator("#builds tbody tr").first().textContent()) ?? "";
    for (const s of [HOSTILE_NAME, HOSTILE_BRANCH, HOSTILE_ACTOR]) expect(row).toContain(shown(s));

    // Nothing ran: no dialog, no flag, no element carrying an event handler, no image or svg injected.
    for (const path of [`/builds/${buildId}`, `/builds?project_id=${p.id}`, `/projects/${p.id}`, "/runners"]) {
      await page.goto(`${d.daemon.url}${path}`);
      if (path.startsWith("/builds/")) await page.locator('#log[data-ready="true"]').waitFor();
      expect(await page.evaluate("window.__pwned"), path).toBeUndefined();
      const injected = await page.evaluate(
        `[...document.querySelectorAll("*")].filter((e) => e.tagName === "IMG" && e.getAttribute("src") === "x" || e.tagName.toLowerCase() === "svg" && e.hasAttribute("onload") || [...e.attributes].some((a) => a.name.startsWith("on"))).length`,
      );
      expect(injected, path).toBe(0);
      const scripts = (await page.evaluate(
        `[...document.scripts].map((s) => s.src ? new URL(s.src).pathname : "inline:" + s.text.slice(0, 80))`,
      )) as string[];
      for (const s of scripts) expect(s, path).not.toContain("__pwned");
    }
    expect(dialogs).toEqual([]);
    expect(cspErrors).toEqual([]);
  });

  it("a qa_viewer sees the build and the project but no cancel, rerun or trigger control", async () => {
    const p = await createProject(d.api, d.ownerToken, { name: "qa-view", repo_url: repo.url });
    const pipeline = await createPipeline(d.api, d.ownerToken, p.id, { platform: "ios", steps: [{ name: "never", run: "true" }] });
    // An ios build no runner here offers: it stays queued, so cancel would be offered to a builder.
    const queued = await queueBuild(d.api, d.ownerToken, p.id, pipeline.id, { commit_sha: repo.shas.main });
    const owner = await signedIn("owner@example.com");
    await owner.page.goto(`${d.daemon.url}/builds/${queued.id}`);
    await expect.poll(() => owner.page.getByRole("button", { name: "Cancel build" }).count()).toBe(1);
    expect(await owner.page.getByRole("button", { name: "Rerun" }).count()).toBe(1);
    expect(await owner.page.locator("#why-queued").textContent()).toContain("No registered runner offers this platform");

    const qa = await signedIn(qaEmail);
    for (const id of [queued.id, built.live.id]) {
      await qa.page.goto(`${d.daemon.url}/builds/${id}`);
      await qa.page.locator('#log[data-ready="true"]').waitFor();
      expect(await qa.page.getByRole("button", { name: "Cancel build" }).count()).toBe(0);
      expect(await qa.page.getByRole("button", { name: "Rerun" }).count()).toBe(0);
      expect(await qa.page.locator("form[action$='/cancel'], form[action$='/rerun']").count()).toBe(0);
    }
    await qa.page.goto(`${d.daemon.url}/projects/${p.id}`);
    expect(await qa.page.locator("h1").textContent()).toContain("qa-view");
    expect(await qa.page.getByRole("button", { name: /trigger/i }).count()).toBe(0);
    expect(await qa.page.locator("form[action*='/builds']").count()).toBe(0);
    await owner.page.goto(`${d.daemon.url}/projects/${p.id}`);
    expect(await owner.page.getByRole("button", { name: /trigger/i }).count()).toBeGreaterThan(0);
    await d.api.call("POST", `/v1/builds/${queued.id}/cancel`, { token: d.ownerToken });
  });

  it("cancel clicked on a running build cancels it; rerun clicked queues a new build of the same commit with rerun_of", async () => {
    const p = await createProject(d.api, d.ownerToken, { name: "slow-one", repo_url: repo.url });
    const pipeline = await createPipeline(d.api, d.ownerToken, p.id, { platform: "any", steps: [{ name: "wait", run: "echo started; sleep 120" }] });
    const build = await queueBuild(d.api, d.ownerToken, p.id, pipeline.id, { commit_sha: undefined });
    built.slow = build;
    await waitFor("the slow build to run", async () => (await getLog(d, build.id)).includes("started\n"));
    const { page } = await signedIn("owner@example.com");
    const confirms: string[] = [];
    page.on("dialog", (dialog) => {
      confirms.push(dialog.message());
      void dialog.accept();
    });
    await page.goto(`${d.daemon.url}/builds/${build.id}`);
    await page.locator('#log[data-ready="true"]').waitFor();
    expect(await page.locator("#build-status").textContent()).toBe("running");
    await page.getByRole("button", { name: "Cancel build" }).click();
    await page.locator(".flash", { hasText: "The build was canceled." }).waitFor();
    expect(confirms).toEqual(["Cancel this build?"]);
    expect(await page.locator("#build-status").textContent()).toBe("canceled");
    expect((await getBuild(d, build.id)).status).toBe("canceled");
    // The runner stops the step and takes the next build: the rerun below runs on it.

    await page.getByRole("button", { name: "Rerun" }).click();
    await page.waitForURL((u) => u.pathname.startsWith("/builds/") && !u.pathname.endsWith(build.id));
    const newId = new URL(page.url()).pathname.split("/").at(-1)!;
    await page.locator(".flash", { hasText: "a rerun of the same commit" }).waitFor();
    const rerun = await getBuild(d, newId);
    expect(rerun).toMatchObject({
      rerun_of: build.id,
      commit_sha: (await getBuild(d, build.id)).commit_sha,
      branch: build.branch,
      pipeline_id: pipeline.id,
      trigger_type: "manual",
    });
    expect(rerun.build_number).toBe(build.build_number + 1);
    expect(await page.locator("#details a[href='/builds/" + build.id + "']").count()).toBe(1);
    // The rerun runs on the runner (the canceled step freed it); cancel it from its own page too.
    await waitFor("the rerun to run", async () => (await getLog(d, newId)).includes("started\n"));
    await page.reload();
    await expect.poll(() => page.locator("#build-status").textContent()).toBe("running");
    await page.getByRole("button", { name: "Cancel build" }).click();
    await page.locator(".flash", { hasText: "The build was canceled." }).waitFor();
    expect((await getBuild(d, newId)).status).toBe("canceled");
    built.rerun = rerun;
  });

  it("filters the build list by project, branch and status", async () => {
    const { page } = await signedIn("owner@example.com");
    const rowIds = async () =>
      (
        (await page.evaluate(
          `[...document.querySelectorAll("#builds tbody tr a[href^='/builds/']")].map((a) => a.getAttribute("href").slice(8))`,
        )) as string[]
      ).sort();
    await page.goto(`${d.daemon.url}/builds`);
    expect((await rowIds()).length).toBeGreaterThanOrEqual(5);

    await page.getByLabel("Project").selectOption(built.slow.project_id);
    await page.getByRole("button", { name: "Filter" }).click();
    await page.waitForURL((u) => u.searchParams.get("project_id") === built.slow.project_id);
    expect(await rowIds()).toEqual([built.slow.id, built.rerun.id].sort());

    await page.goto(`${d.daemon.url}/builds`);
    await page.getByLabel("Branch").fill(HOSTILE_BRANCH);
    await page.getByRole("button", { name: "Filter" }).click();
    await page.waitForURL((u) => u.searchParams.get("branch") === HOSTILE_BRANCH);
    expect(await rowIds()).toEqual([built.hostile.id]);

    await page.goto(`${d.daemon.url}/builds`);
    await page.getByLabel("Status").selectOption("succeeded");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.waitForURL((u) => u.searchParams.get("status") === "succeeded");
    expect(await rowIds()).toEqual([built.live.id, built.hostile.id].sort());
    // The filters combine, and the form shows what is applied.
    await page.getByLabel("Branch").fill("main");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.waitForURL((u) => u.searchParams.get("branch") === "main");
    expect(await rowIds()).toEqual([built.live.id]);
    expect(await page.getByLabel("Status").inputValue()).toBe("succeeded");
    expect(await page.getByLabel("Branch").inputValue()).toBe("main");
  });
});
