// Builds on push as a newcomer does it, in real Chromium against the real daemon: add a GitHub webhook on the
// project page, take the URL and secret it shows once, send a signed push to that URL, and see the delivery
// and the build on the pages; add a signed-webhook notification to a loopback receiver and press "Send test":
// the receiver verifies the Standard Webhooks signature with the secret the page showed.
import { rmSync } from "node:fs";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { claim, createPipeline, createProject, daemonCaller, registerRunner, type Caller } from "../helpers/builds.ts";
import { launchBrowser, newContext } from "../helpers/browser.ts";
import { makeDataDir, runCli, startDaemon, type Daemon } from "../helpers/daemon.ts";
import { forgeHeaders } from "../helpers/hooks.ts";
import { startReceiver, type Receiver } from "../helpers/receiver.ts";

// A browser and a daemon on a shared 2-core machine.
vi.setConfig({ testTimeout: 120_000, hookTimeout: 60_000 });

const SHA = "4444444444444444444444444444444444444444";

let browser: Browser;
let daemon: Daemon;
let c: Caller;
let owner: string;
let receiver: Receiver;
const dataDir = makeDataDir();

beforeAll(async () => {
  browser = await launchBrowser();
  receiver = await startReceiver();
  const env = { HANGAR_DATA_DIR: dataDir, HANGAR_OUTBOX_POLL_MS: "50", HANGAR_LOG_REQUESTS: "0" };
  daemon = await startDaemon(env);
  c = daemonCaller(daemon.url);
  const token = (await runCli(["setup-token"], env)).stdout.trim();
  const setup = (await c.call("POST", "/v1/setup/bootstrap-token/verify", { body: { token } })).body.session_token;
  await c.call("POST", "/v1/setup/local-owner/create", { token: setup, body: { email: "owner@example.com" } });
  await c.call("POST", "/v1/setup/complete", { token: setup });
  owner = (await c.call("POST", "/v1/auth/local/login", { body: { email: "owner@example.com" } })).body.session_token;
});

afterAll(async () => {
  await browser?.close();
  await daemon?.stop("SIGTERM");
  rmSync(dataDir, { recursive: true, force: true });
});

/** A signed-in browser tab (the login page's "Sign in on this machine", as on the daemon's own machine). */
async function signedIn(): Promise<{ ctx: BrowserContext; p: Page }> {
  const ctx = await newContext(browser);
  ctx.setDefaultTimeout(20_000);
  // Nothing leaves the machine; the Copy buttons may use the clipboard.
  await ctx.route(/^https?:\/\/(?!127\.0\.0\.1[:/])/, (route) => route.abort());
  await ctx.grantPermissions(["clipboard-read", "clipboard-write"], { origin: daemon.url });
  ctx.on("page", (pg) => pg.on("dialog", (d) => void d.accept()));
  const p = await ctx.newPage();
  await p.goto(`${daemon.url}/login`);
  await p.getByRole("button", { name: "Sign in on this machine" }).click();
  await p.waitForURL((u) => u.pathname === "/builds");
  return { ctx, p };
}

describe("builds on push from the project page", () => {
  it("adds a GitHub webhook, takes the URL and secret shown once, and a signed push builds", async () => {
    const project = await createProject(c, owner, { name: "push-app", default_branch: "main" });
    await createPipeline(c, owner, project.id);
    const { ctx, p } = await signedIn();
    await p.goto(`${daemon.url}/projects/${project.id}`);
    await p.getByLabel("Forge", { exact: true }).selectOption("github");
    await p.getByRole("button", { name: "Add webhook" }).click();
    await p.locator("#webhook-created").waitFor();
    const url = await p.locator("#webhook-url").inputValue();
    const secret = await p.locator("#webhook-secret").inputValue();
    expect(url).toMatch(new RegExp(`^${daemon.url}/v1/hooks/[0-9a-f-]{36}$`));
    expect(secret).toMatch(/^hgw_[A-Za-z0-9_-]{43}$/);
    await expect.poll(() => p.locator("#webhook-created").textContent()).toContain("Payload URL");
    // The Copy button puts the secret on the clipboard.
    await p.locator('button[data-copy="#webhook-secret"]').click();
    await expect.poll(() => p.evaluate("navigator.clipboard.readText()")).toBe(secret);

    // The forge's push: signed with the secret the page showed, sent to the URL it showed.
    const payload = JSON.stringify({
      ref: "refs/heads/main",
      before: "1".repeat(40),
      after: SHA,
      deleted: false,
      head_commit: { id: SHA, message: "Fix the login screen" },
      repository: {
        full_name: "acme/push-app",
        url: "https://api.github.com/repos/acme/push-app",
        html_url: "https://github.com/acme/push-app",
        default_branch: "main",
      },
      sender: { login: "octocat" },
      pusher: { name: "octocat" },
    });
    const res = await fetch(url, { method: "POST", headers: forgeHeaders("github", secret, "push", payload, "gh-delivery-1"), body: payload });
    expect(res.status).toBe(200);
    const answer = (await res.json()) as { builds: Array<{ id: string; build_number: number }> };
    expect(answer.builds).toHaveLength(1);
    const buildId = answer.builds[0]!.id;
    // A runner gets the build.
    const runner = await registerRunner(c, owner);
    expect((await claim(c, runner))?.build_id).toBe(buildId);

    // The delivery and its build on the project page; the secret is gone from it.
    await p.goto(`${daemon.url}/projects/${project.id}`);
    const row = p.locator("table[id^=webhook-deliveries-] tbody tr").first();
    await expect.poll(() => row.textContent()).toContain("gh-delivery-1");
    expect(await row.locator(".badge").textContent()).toBe("built");
    expect(await p.content()).not.toContain(secret);
    // On a phone nothing sticks out sideways (the deliveries table scrolls inside its own box).
    await p.setViewportSize({ width: 375, height: 812 });
    expect(await p.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")).toBeLessThanOrEqual(0);
    await p.setViewportSize({ width: 1280, height: 800 });
    await row.getByRole("link", { name: "#1" }).click();
    await p.waitForURL((u) => u.pathname === `/builds/${buildId}`);
    const main = await p.locator("main").textContent();
    expect(main).toContain("webhook (push)");
    expect(main).toContain("octocat");
    await ctx.close();
  });

  it("adds a signed-webhook notification to a loopback receiver, and Send test shows the verified delivery", async () => {
    const project = await createProject(c, owner, { name: "notify-app" });
    const { ctx, p } = await signedIn();
    await p.goto(`${daemon.url}/projects/${project.id}`);
    const path = `/hangar-${crypto.randomUUID()}`;
    await p.getByLabel("Send to").selectOption("webhook");
    await p.getByLabel("Webhook URL").fill(`${receiver.url}${path}`);
    await p.getByLabel("started").check();
    await p.getByLabel("Branches (optional)").fill("main, release/*");
    await p.getByRole("button", { name: "Add notification" }).click();
    await p.locator("#notification-created").waitFor();
    const secret = await p.locator("#notification-secret").inputValue();
    expect(secret).toMatch(/^whsec_/);

    await p.getByRole("button", { name: "Send test" }).click();
    await expect.poll(() => p.locator(".flash").first().textContent()).toContain("Test message delivered (HTTP 200).");
    const got = receiver.requests.filter((r) => r.path === path);
    expect(got).toHaveLength(1);
    const verified = new Webhook(secret).verify(got[0]!.body, got[0]!.headers as Record<string, string>) as {
      type: string;
      data: { project: { id: string } };
    };
    expect(verified.type).toBe("build.succeeded");
    expect(verified.data.project.id).toBe(project.id);
    // The attempt is listed, the events and branches as chosen, the secret not shown again.
    const card = p.locator("article.notification");
    expect(await card.locator("tbody tr").first().textContent()).toContain("test message");
    expect(await card.locator(".badge").first().textContent()).toBe("delivered");
    const text = await card.textContent();
    expect(text).toContain("started, failed, fixed");
    expect(text).toContain("release/*");
    expect(await p.content()).not.toContain(secret);

    // A receiver failing: the page says so in words.
    receiver.respond = (r) => (r.path === path ? 503 : 200);
    try {
      await p.getByRole("button", { name: "Send test" }).click();
      await expect.poll(() => p.locator(".flash-error").first().textContent()).toContain("Test message not delivered: http_503 (HTTP 503).");
    } finally {
      receiver.respond = () => 200;
    }
    // Delete, confirmed in the dialog.
    await p.getByRole("button", { name: "Delete notification" }).click();
    await expect.poll(() => p.locator(".flash").first().textContent()).toContain("Notification deleted.");
    expect((await c.call("GET", `/v1/projects/${project.id}/notifications`, { token: owner })).body).toEqual([]);
    await ctx.close();
  });
});
