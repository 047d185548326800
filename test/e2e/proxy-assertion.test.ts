// Team access through a signing access gateway (docs/api.md §21, docs/team-access.md): a real nginx terminating TLS
// with an openssl certificate in front of the real daemon, forwarding a signed assertion from a local key set
// issuer (as Cloudflare Access does), and a real browser signing in through it. A second nginx site passes the
// client's headers through untouched, to show what the daemon refuses.
import { rmSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHROMIUM_ARGS, CHROMIUM_PATH } from "../helpers/browser.ts";
import { http, makeDataDir, runCli, startDaemon, type Daemon } from "../helpers/daemon.ts";
import { type JwksIssuer, startJwksIssuer } from "../helpers/jwks-issuer.ts";
import { httpsJson, type Nginx, startNginx } from "../helpers/nginx.ts";

const HEADER = "Cf-Access-Jwt-Assertion";
const AUDIENCE = "hangar-e2e-audience";
const OWNER = "owner@example.com";
const TEAMMATE = "teammate@example.com";

const nowS = () => Math.floor(Date.now() / 1000);

let daemon: Daemon;
let dataDir: string;
let issuer: JwksIssuer;
let nginx: Nginx;
let browser: Browser;
let ownerToken: string;

beforeAll(async () => {
  dataDir = makeDataDir();
  const env = { HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0" };
  [daemon, issuer] = await Promise.all([startDaemon(env, 60_000), startJwksIssuer()]);
  // Site 0 is the gateway: it signs in the teammate and says so with a signed assertion. Site 1 passes through.
  const teammateAssertion = await issuer.sign(TEAMMATE, { nowS: nowS(), audience: AUDIENCE, expiresInS: 900 });
  const ownerAssertion = await issuer.sign(OWNER, { nowS: nowS(), audience: AUDIENCE, expiresInS: 900 });
  nginx = await startNginx([
    { upstream: daemon.url, setHeaders: { [HEADER]: teammateAssertion, "X-Hangar-User-Email": OWNER } },
    { upstream: daemon.url },
  ]);
  const passThrough = nginx.ports[1]!;

  // Setup: remote mode behind the proxy, with the assertion; the owner claims through nginx.
  const made = await runCli(["setup-token"], env);
  const verified = await http(daemon.url, "POST", "/v1/setup/bootstrap-token/verify", { body: { token: made.stdout.trim() } });
  const setup = verified.body.session_token as string;
  expect(
    (await http(daemon.url, "POST", "/v1/setup/preferences", { token: setup, body: { runtime_mode: "remote", remote_auth_mode: "trusted_proxy" } }))
      .status,
  ).toBe(200);
  const configured = await http(daemon.url, "POST", "/v1/setup/trusted-proxy/configure", {
    token: setup,
    body: { assertion: { header: HEADER, jwks_url: issuer.jwksUrl, issuer: issuer.issuer, audience: AUDIENCE } },
  });
  expect(configured.status, JSON.stringify(configured.body)).toBe(200);
  const claimed = await httpsJson(nginx, passThrough, "POST", "/v1/setup/owner/claim-trusted-proxy", {
    token: setup,
    headers: { [HEADER]: ownerAssertion },
  });
  expect(claimed.status, JSON.stringify(claimed.body)).toBe(200);
  expect((await http(daemon.url, "POST", "/v1/setup/complete", { token: setup })).status).toBe(200);
  const login = await httpsJson(nginx, passThrough, "POST", "/v1/auth/trusted-proxy/login", { headers: { [HEADER]: ownerAssertion } });
  expect(login.status).toBe(200);
  ownerToken = login.body.session_token;
  // The public URL is the gateway's; the teammate is invited.
  const network = await http(daemon.url, "PUT", "/v1/settings/external-access/network", {
    token: ownerToken,
    body: { public_url: nginx.urls[0], allowed_origins: [nginx.urls[0]] },
  });
  expect(network.status, JSON.stringify(network.body)).toBe(200);
  expect((await http(daemon.url, "POST", "/v1/users/invite", { token: ownerToken, body: { email: TEAMMATE, role: "developer" } })).status).toBe(200);

  browser = await chromium.launch({
    executablePath: CHROMIUM_PATH,
    // The certificate's name resolves to nginx on 127.0.0.1.
    args: [...CHROMIUM_ARGS, `--host-resolver-rules=MAP ${nginx.hostName} 127.0.0.1`],
    headless: true,
  });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await nginx?.close();
  await issuer?.close();
  await daemon?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

describe("sign-in through nginx with a signed assertion", { timeout: 120_000 }, () => {
  it("a teammate signs in from a browser through the gateway, as the assertion says (not the plain header)", async () => {
    // The certificate is openssl's own, not a public CA's: the browser is told to accept it for this test only.
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    try {
      const page = await context.newPage();
      await page.goto(`${nginx.urls[0]}/login`);
      await page.getByRole("button", { name: "Continue with your company sign-in" }).click();
      await page.waitForURL((url) => !url.pathname.startsWith("/login"));
      expect(page.url().startsWith(nginx.urls[0]!)).toBe(true);
      await expect.poll(() => page.locator("body").innerText()).toContain(TEAMMATE);
      expect(await page.locator("body").innerText()).not.toContain(OWNER);
    } finally {
      await context.close();
    }
    const users = await http(daemon.url, "GET", "/v1/users", { token: ownerToken });
    const teammate = (users.body.users ?? users.body.items ?? users.body).find((u: { email: string }) => u.email === TEAMMATE);
    expect(teammate.status).toBe("active");
  });

  it("refuses what a proxy that does not sign passes through: no assertion, a forged one, the plain header", async () => {
    const passThrough = nginx.ports[1]!;
    const login = (headers: Record<string, string>) => httpsJson(nginx, passThrough, "POST", "/v1/auth/trusted-proxy/login", { headers });
    const plain = await login({ "X-Hangar-User-Email": OWNER });
    expect([plain.status, plain.body.code]).toEqual([401, "trusted_proxy_assertion_missing"]);
    const otherAudience = await issuer.sign(OWNER, { nowS: nowS(), audience: "another-app" });
    const wrongAud = await login({ [HEADER]: otherAudience });
    expect([wrongAud.status, wrongAud.body.code]).toEqual([401, "trusted_proxy_assertion_invalid"]);
    const forged = await issuer.sign(OWNER, { nowS: nowS(), audience: AUDIENCE, key: await issuer.newKey() });
    const unknownKey = await login({ [HEADER]: forged });
    expect([unknownKey.status, unknownKey.body.code]).toEqual([401, "trusted_proxy_assertion_invalid"]);
  });
});
