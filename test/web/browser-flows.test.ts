import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createLocalLoginCode } from "../../src/domain/auth/local-login-codes.ts";
import { issueBootstrapToken } from "../../src/domain/setup/setup.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { launchBrowser, newContext, serveTestApp, type ServedApp } from "../helpers/browser.ts";
import { completeLocalSetup } from "../helpers/factories.ts";
import { startOidcProvider, TEST_CLIENT_ID, TEST_CLIENT_SECRET } from "../helpers/oidc-provider.ts";

// Whole sign-in flows through a real browser (and a real OIDC provider) on a shared 2-core machine.
vi.setConfig({ testTimeout: 120_000 });

let browser: Browser;
const cleanups: (() => Promise<void>)[] = [];

beforeAll(async () => {
  browser = await launchBrowser();
});

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await browser?.close();
});

async function served(t: TestApp): Promise<ServedApp> {
  const s = await serveTestApp(t);
  cleanups.push(() => s.close());
  return s;
}

/** A browser context that never reaches the internet (the OIDC provider's page imports a web font). */
async function context(options: Parameters<typeof newContext>[1] = {}): Promise<BrowserContext> {
  const ctx = await newContext(browser, options);
  // A clear locator error well before the test's own time limit.
  ctx.setDefaultTimeout(20_000);
  await ctx.route(/^https?:\/\/(?!127\.0\.0\.1[:/]|localhost[:/])/, (route) => route.abort());
  // Confirm dialogs (data-confirm forms) are accepted, as a user clicking OK.
  ctx.on("page", (p) => p.on("dialog", (d) => void d.accept()));
  return ctx;
}

async function sessionUser(t: TestApp, ctx: BrowserContext, url: string): Promise<{ email: string; role: string }> {
  const cookie = (await ctx.cookies(url)).find((c) => c.name === "__Host-hangar_session");
  if (!cookie) throw new Error("no session cookie");
  return (await t.call("GET", "/v1/users/me", { token: cookie.value })).body;
}

const pathOf = (p: Page) => new URL(p.url()).pathname;

/** A reverse proxy on 127.0.0.1 that adds headers to every request, as an access gateway in front of Hangar would. */
async function headerProxy(target: string, extra: Record<string, string>): Promise<string> {
  const to = new URL(target);
  const server: Server = createServer((req, res) => {
    const upstream = httpRequest(
      { host: to.hostname, port: to.port, method: req.method, path: req.url, headers: { ...req.headers, ...extra } },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    upstream.on("error", () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe("the setup wizard in Chromium", () => {
  it("walks token → local mode → owner → complete with JavaScript on, and is signed in", async () => {
    const t = await makeTestApp();
    const s = await served(t);
    const { token } = await issueBootstrapToken(t.deps);
    const ctx = await context();
    const p = await ctx.newPage();
    await p.goto(`${s.url}/`);
    expect(pathOf(p)).toBe("/setup");
    await p.getByLabel("Setup token").fill("0".repeat(64));
    await p.getByRole("button", { name: "Continue" }).click();
    await expect.poll(() => p.locator("#setup-error").textContent()).toContain("That setup token is not right");
    await p.getByLabel("Setup token").fill(token);
    await p.getByRole("button", { name: "Continue" }).click();
    await p.getByText("Local: only this machine").click();
    await p.getByRole("button", { name: "Continue" }).click();
    await p.getByLabel("Owner's email").fill("owner@example.com");
    await p.getByRole("button", { name: "Create the owner" }).click();
    await p.getByRole("button", { name: "Complete setup" }).click();
    await p.waitForURL((u) => u.pathname === "/builds");
    expect(await sessionUser(t, ctx, s.url)).toMatchObject({ email: "owner@example.com", role: "owner" });
    await ctx.close();
  });

  it("walks the trusted-proxy wizard through a proxy with JavaScript off: presets, custom header, claim, complete", async () => {
    const t = await makeTestApp();
    const s = await served(t);
    const secret = "gateway-shared-secret-0123456789";
    const proxy = await headerProxy(s.url, { "x-gateway-username": "boss@example.com", "x-hangar-trusted-proxy-secret": secret });
    const { token } = await issueBootstrapToken(t.deps);
    const ctx = await context({ javaScriptEnabled: false });
    const p = await ctx.newPage();
    await p.goto(`${proxy}/setup`);
    await p.getByLabel("Setup token").fill(token);
    await p.getByRole("button", { name: "Continue" }).click();
    await p.getByText("Remote behind a trusted proxy").click();
    await p.getByRole("button", { name: "Continue" }).click();
    // The presets, and without JavaScript the custom field is always there.
    const options = await p.locator("#f-header-preset option").allTextContents();
    expect(options).toEqual(["Generic proxy (x-hangar-user-email)", "Access gateway (x-gateway-username)", "Custom header name"]);
    expect(await p.locator("#custom-header-field").isVisible()).toBe(true);
    // A bad custom header is explained in words.
    await p.getByLabel("Identity header").selectOption("custom");
    await p.getByLabel("Custom header name").fill("not a header");
    await p.getByRole("button", { name: "Save" }).click();
    await expect.poll(() => p.locator(".field.has-error .error").first().textContent()).toContain("must be an HTTP header name");
    await p.getByLabel("Identity header").selectOption("x-gateway-username");
    await p.getByLabel("Shared secret").fill(secret);
    await p.getByLabel("Expected owner email").fill("boss@example.com");
    await p.getByRole("button", { name: "Save" }).click();
    await p.getByRole("button", { name: "Claim ownership" }).click();
    await p.getByRole("button", { name: "Complete setup" }).click();
    await p.waitForURL((u) => u.pathname === "/builds");
    expect(await sessionUser(t, ctx, proxy)).toMatchObject({ email: "boss@example.com", role: "owner" });

    // Sign-in later through the same proxy, from a fresh browser.
    const later = await context({ javaScriptEnabled: false });
    const q = await later.newPage();
    await q.goto(`${proxy}/login`);
    await q.getByRole("button", { name: "Continue with your company sign-in" }).click();
    await q.waitForURL((u) => u.pathname === "/builds");
    expect(await sessionUser(t, later, proxy)).toMatchObject({ email: "boss@example.com" });
    // The daemon directly (no proxy headers) does not sign anyone in.
    const stranger = await context({ javaScriptEnabled: false });
    const direct = await stranger.newPage();
    await direct.goto(`${s.url}/login`);
    await direct.getByRole("button", { name: "Continue with your company sign-in" }).click();
    await expect.poll(() => direct.locator(".flash-error").textContent()).toContain("shared secret is missing or wrong");
    await ctx.close();
    await later.close();
    await stranger.close();
  });

  it("hides the custom header field with JavaScript on until “custom” is chosen", async () => {
    const t = await makeTestApp();
    const s = await served(t);
    const { token } = await issueBootstrapToken(t.deps);
    const ctx = await context();
    const p = await ctx.newPage();
    await p.goto(`${s.url}/setup`);
    await p.getByLabel("Setup token").fill(token);
    await p.getByRole("button", { name: "Continue" }).click();
    await p.getByText("Remote behind a trusted proxy").click();
    await p.getByRole("button", { name: "Continue" }).click();
    await expect.poll(() => p.locator("#custom-header-field").isVisible()).toBe(false);
    await p.getByLabel("Identity header").selectOption("custom");
    await expect.poll(() => p.locator("#custom-header-field").isVisible()).toBe(true);
    await ctx.close();
  });
});

describe("signing in in Chromium", () => {
  it("opens a `hangar login` link once: signed in, and the same link again is refused", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const s = await served(t);
    const { code } = await createLocalLoginCode(t.deps, {});
    const ctx = await context();
    const p = await ctx.newPage();
    const res = await p.goto(`${s.url}/login/local/${code}`);
    expect(pathOf(p)).toBe("/builds");
    expect(res?.request().redirectedFrom()?.url()).toContain("/login/local/");
    expect(await sessionUser(t, ctx, s.url)).toMatchObject({ email: "owner@example.com" });
    const other = await context();
    const q = await other.newPage();
    const again = await q.goto(`${s.url}/login/local/${code}`);
    expect(again?.status()).toBe(410);
    expect(await q.locator("main").textContent()).toContain("already used or has expired");
    expect((await other.cookies(s.url)).some((c) => c.name === "__Host-hangar_session")).toBe(false);
    await ctx.close();
    await other.close();
  });

  it("signs in with OIDC against oidc-provider: the state cookie binds the flow to this browser", async () => {
    const t = await makeTestApp();
    // The provider signs ID tokens with the real time; the daemon checks them against its clock.
    t.clock.set(Math.floor(Date.now() / 1000));
    const { ownerToken } = await completeLocalSetup(t);
    const s = await served(t);
    const provider = await startOidcProvider({ redirectUris: [`${s.url}/auth/oidc/callback`] });
    cleanups.push(() => provider.close());
    const configured = await t.call("PUT", "/v1/settings/external-access/oidc", {
      token: ownerToken,
      body: { issuer_url: provider.issuer, client_id: TEST_CLIENT_ID, client_secret: TEST_CLIENT_SECRET },
    });
    expect(configured.status, configured.text).toBe(200);
    expect((await t.call("POST", "/v1/users/invite", { token: ownerToken, body: { email: "dev@example.com", role: "developer" } })).status).toBe(200);

    const ctx = await context();
    const p = await ctx.newPage();
    await p.goto(`${s.url}/login`);
    await p.getByRole("link", { name: `Sign in with ${new URL(provider.issuer).host}` }).click();
    await p.waitForURL((u) => u.origin === provider.issuer);
    // The state cookie is set for the daemon's origin, HttpOnly.
    const stateCookie = (await ctx.cookies(s.url)).find((c) => c.name === "__Host-hangar_oidc");
    expect(stateCookie).toMatchObject({ httpOnly: true, secure: true, sameSite: "Lax" });
    await p.locator("input[name=login]").fill("dev-sub");
    await p.locator("input[name=password]").fill("any password");
    await p.locator("button[type=submit]").click();
    await p.locator("button[type=submit]", { hasText: "Continue" }).click();
    await p.waitForURL((u) => u.origin === s.url && u.pathname === "/builds");
    expect(await sessionUser(t, ctx, s.url)).toMatchObject({ email: "dev@example.com", role: "developer", status: "active" });
    expect((await ctx.cookies(s.url)).some((c) => c.name === "__Host-hangar_oidc")).toBe(false);

    // A callback URL carried to another browser (no state cookie there) is refused.
    const start = await t.call("GET", `/v1/auth/oidc/start?redirect_uri=${encodeURIComponent(`${s.url}/auth/oidc/callback`)}`, {});
    const { code, state } = await provider.authorize(start.body.authorization_url, "dev-sub");
    const other = await context();
    const q = await other.newPage();
    const res = await q.goto(`${s.url}/auth/oidc/callback?code=${encodeURIComponent(code)}&state=${encodeURIComponent(state)}`);
    expect(res?.status()).toBe(400);
    expect(await q.locator("main").textContent()).toContain("did not start in this browser");
    expect((await other.cookies(s.url)).some((c) => c.name === "__Host-hangar_session")).toBe(false);
    await ctx.close();
    await other.close();
  });
});

describe("administration in Chromium", () => {
  it("invites a teammate and changes their role", async () => {
    const t = await makeTestApp();
    const { ownerToken } = await completeLocalSetup(t);
    const s = await served(t);
    const ctx = await context();
    const p = await ctx.newPage();
    await p.goto(`${s.url}/login?next=%2Fusers`);
    await p.getByRole("button", { name: "Sign in on this machine" }).click();
    await p.waitForURL((u) => u.pathname === "/users");
    await p.getByLabel("Email").fill("tester@example.com");
    await p.locator("#invite").getByLabel("Role").selectOption("qa_viewer");
    await p.getByRole("button", { name: "Invite" }).click();
    await expect.poll(() => p.locator(".flash-ok").textContent()).toContain("Invited tester@example.com as qa viewer.");
    const row = p.locator('tr[data-user="tester@example.com"]');
    await row.getByLabel("Role of tester@example.com").selectOption("developer");
    await row.getByRole("button", { name: "Change role" }).click();
    await expect.poll(() => p.locator(".flash-ok").textContent()).toContain("tester@example.com is now developer.");
    const users = (await t.call("GET", "/v1/users", { token: ownerToken })).body as { email: string; role: string; status: string }[];
    expect(users.find((u) => u.email === "tester@example.com")).toMatchObject({ role: "developer", status: "invited" });
    await ctx.close();
  });

  it("switches External Access on: the preflight fails, then passes once network and OIDC are set", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const s = await served(t);
    const provider = await startOidcProvider({ redirectUris: ["https://ci.example.com/auth/oidc/callback"] });
    cleanups.push(() => provider.close());
    const ctx = await context();
    const p = await ctx.newPage();
    await p.goto(`${s.url}/login?next=%2Fsettings`);
    await p.getByRole("button", { name: "Sign in on this machine" }).click();
    await p.waitForURL((u) => u.pathname === "/settings");
    expect(await p.locator("#preflight li.fail").count()).toBeGreaterThan(0);
    await p.getByRole("button", { name: "Switch External Access on" }).click();
    await expect.poll(() => p.locator("#mode-error").textContent()).toContain("Set a public URL first");

    await p.getByLabel("Public URL").fill("https://ci.example.com");
    await p.getByLabel("Allowed origins").fill("https://ci.example.com");
    await p.getByRole("button", { name: "Save network settings" }).click();
    await expect.poll(() => p.locator(".flash-ok").textContent()).toContain("Network settings saved.");
    await p.getByLabel("Issuer URL").fill(provider.issuer);
    await p.getByLabel("Client ID").fill(TEST_CLIENT_ID);
    await p.getByLabel("Client secret").fill(TEST_CLIENT_SECRET);
    await p.getByRole("button", { name: "Save and check the provider" }).click();
    await expect.poll(() => p.locator(".flash-ok").textContent()).toContain("sign-in with OIDC is configured");
    expect(await p.locator("#preflight li.fail").count()).toBe(0);
    // The five checks remote mode needs pass; the host's own checks (free disk, a trusted proxy's secret) only warn.
    for (const id of ["public_url_set", "public_url_https", "public_url_origin_allowed", "remote_auth_configured", "artifact_delivery_https"]) {
      expect(await p.locator(`#preflight li.pass[data-check="${id}"]`).count(), id).toBe(1);
    }

    await p.getByRole("button", { name: "Switch External Access on" }).click();
    await p.waitForURL((u) => u.pathname === "/login");
    expect(await p.locator(".flash-ok").textContent()).toContain("External Access is on");
    expect((await ctx.cookies(s.url)).some((c) => c.name === "__Host-hangar_session")).toBe(false);
    await ctx.close();
  });
});
