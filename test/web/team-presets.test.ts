// Team-access presets on the Settings page (docs/api.md §21): links that re-render the form filled, with JavaScript
// off, in a real browser; the fields stay editable and saving stores the trusted proxy with its signed assertion.
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestApp } from "../helpers/app.ts";
import { launchBrowser, newContext, serveTestApp } from "../helpers/browser.ts";
import { completeLocalSetup } from "../helpers/factories.ts";
import { issueBootstrapToken } from "../../src/domain/setup/setup.ts";
import { CookieJar, page } from "../helpers/web.ts";
import { type JwksIssuer, startJwksIssuer } from "../helpers/jwks-issuer.ts";

let browser: Browser;
let issuer: JwksIssuer;
beforeAll(async () => {
  [browser, issuer] = await Promise.all([launchBrowser(), startJwksIssuer()]);
});
afterAll(async () => {
  await browser?.close();
  await issuer?.close();
});

describe("team-access presets", { timeout: 60_000 }, () => {
  it("fill the trusted-proxy and OIDC fields without JavaScript; the owner edits and saves them", async () => {
    const t = await makeTestApp();
    const { ownerToken } = await completeLocalSetup(t, "owner@example.com");
    const served = await serveTestApp(t);
    const context = await newContext(browser, { javaScriptEnabled: false });
    try {
      const p = await context.newPage();
      await p.goto(`${served.url}/login`);
      await p.getByRole("button", { name: "Sign in on this machine" }).click();
      await p.goto(`${served.url}/settings`);

      await p.locator('#proxy-presets a[data-preset="cloudflare"]').click();
      expect(p.url()).toContain("proxy_preset=cloudflare");
      const section = p.locator("#trusted-proxy");
      expect(await section.locator('input[name="assertion_header"]').inputValue()).toBe("Cf-Access-Jwt-Assertion");
      expect(await section.locator('input[name="jwks_url"]').inputValue()).toBe("https://<team>.cloudflareaccess.com/cdn-cgi/access/certs");
      expect(await section.locator('input[name="assertion_issuer"]').inputValue()).toBe("https://<team>.cloudflareaccess.com");
      expect(await p.locator("#proxy-presets-note").innerText()).toContain("Audience (AUD) tag");

      await p.locator('#proxy-presets a[data-preset="tailscale"]').click();
      expect(await section.locator('input[name="user_email_header"]').inputValue()).toBe("Tailscale-User-Login");
      expect(await section.locator('input[name="jwks_url"]').inputValue()).toBe("");

      await p.locator('#oidc-presets a[data-preset="entra"]').click();
      expect(await p.locator('#oidc input[name="issuer_url"]').inputValue()).toBe("https://login.microsoftonline.com/<tenant-id>/v2.0");

      // Back to Cloudflare, with this test's key set issuer in place of the team's.
      await p.locator('#proxy-presets a[data-preset="cloudflare"]').click();
      await section.locator('input[name="jwks_url"]').fill(issuer.jwksUrl);
      await section.locator('input[name="assertion_issuer"]').fill(issuer.issuer);
      await section.locator('input[name="audience"]').fill("aud-tag-123");
      await section.getByRole("button", { name: "Save the trusted proxy" }).click();
      expect(await p.locator(".flash").first().innerText()).toContain("trusted proxy is saved");
      // Shown again as stored.
      expect(await p.locator('#trusted-proxy input[name="audience"]').inputValue()).toBe("aud-tag-123");

      // A refusal re-renders the section with its message and the values sent.
      await p.locator('#proxy-presets a[data-preset="cloudflare"]').click();
      await section.locator('input[name="audience"]').fill("aud");
      await section.locator('input[name="jwks_url"]').fill("https://10.0.0.8/certs");
      await section.getByRole("button", { name: "Save the trusted proxy" }).click();
      expect(await p.locator("#trusted-proxy-error").innerText()).toContain("not allowed");
      expect(await p.locator('#trusted-proxy input[name="audience"]').inputValue()).toBe("aud");
    } finally {
      await context.close();
      await served.close();
    }
    const stored = await t.call("GET", "/v1/settings/trusted-proxy", { token: ownerToken });
    expect(stored.body).toMatchObject({
      configured: true,
      in_use: true,
      assertion: {
        header: "cf-access-jwt-assertion",
        jwks_url: issuer.jwksUrl,
        issuer: issuer.issuer,
        audience: "aud-tag-123",
        email_claim: "email",
      },
    });
  });
});

describe("team-access presets in the setup wizard", () => {
  it("fill the proxy step (identity header or signed assertion) and the OIDC step; saving stores the assertion", async () => {
    const t = await makeTestApp();
    const jar = new CookieJar();
    const { token } = await issueBootstrapToken(t.deps);
    expect((await page(t, "POST", "/setup/token", { jar, form: { token } })).status).toBe(303);
    await page(t, "POST", "/setup/mode", { jar, form: { mode: "trusted_proxy" } });

    const tailscale = await page(t, "GET", "/setup?step=proxy&preset=tailscale", { jar });
    expect(tailscale.text).toContain('value="Tailscale-User-Login"');
    const pomerium = await page(t, "GET", "/setup?step=proxy&preset=pomerium", { jar });
    expect(pomerium.text).toContain('value="X-Pomerium-Jwt-Assertion"');
    expect(pomerium.text).toContain('value="https://&lt;route-host&gt;/.well-known/pomerium/jwks.json"');

    const form = {
      header_preset: "x-hangar-user-email",
      trusted_proxy_cidrs: "",
      shared_secret: "",
      assertion_header: "X-Pomerium-Jwt-Assertion",
      jwks_url: issuer.jwksUrl,
      assertion_issuer: "ci.example.com",
      audience: "",
    };
    const missingAudience = await page(t, "POST", "/setup/proxy", { jar, form });
    expect(missingAudience.status).toBe(400);
    expect(missingAudience.text).toContain("Required for a signed assertion.");
    const saved = await page(t, "POST", "/setup/proxy", { jar, form: { ...form, audience: "ci.example.com" } });
    expect(saved.status, saved.text).toBe(303);
    const shown = await page(t, "GET", "/setup", { jar });
    expect(shown.text).toContain(`value="${issuer.jwksUrl}"`);

    await page(t, "GET", "/setup?step=mode", { jar });
    await page(t, "POST", "/setup/mode", { jar, form: { mode: "oidc" } });
    const gitlab = await page(t, "GET", "/setup?step=oidc&preset=gitlab", { jar });
    expect(gitlab.text).toContain('value="https://gitlab.com"');
  });
});
