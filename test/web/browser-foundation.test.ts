import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { launchBrowser, newContext, serveTestApp, type ServedApp } from "../helpers/browser.ts";
import { completeLocalSetup } from "../helpers/factories.ts";

let browser: Browser;
let t: TestApp;
let served: ServedApp;

beforeAll(async () => {
  browser = await launchBrowser();
  t = await makeTestApp();
  await completeLocalSetup(t);
  served = await serveTestApp(t);
});

afterAll(async () => {
  await served?.close();
  await browser?.close();
});

describe("browser foundation in Chromium", () => {
  it("signs in on this machine over http://127.0.0.1: Chromium keeps the Secure __Host- cookie and sends it back", async () => {
    const ctx = await newContext(browser);
    const p = await ctx.newPage();
    await p.goto(`${served.url}/`);
    expect(new URL(p.url()).pathname).toBe("/login");
    await p.getByRole("button", { name: "Sign in on this machine" }).click();
    await p.waitForURL((u) => u.pathname === "/builds");
    const cookies = await ctx.cookies(served.url);
    const session = cookies.find((c) => c.name === "__Host-hangar_session");
    expect(session).toMatchObject({ httpOnly: true, secure: true, sameSite: "Lax", path: "/", domain: "127.0.0.1" });
    // Sent back: /login now leads home.
    await p.goto(`${served.url}/login`);
    expect(new URL(p.url()).pathname).toBe("/builds");
    // Scripts cannot read it.
    expect(await p.evaluate("document.cookie")).not.toContain("hangar_session");
    await ctx.close();
  });

  it("enforces the CSP: our script file runs, an injected inline script does not", async () => {
    const ctx = await newContext(browser);
    const p = await ctx.newPage();
    const violations: string[] = [];
    p.on("console", (m) => {
      if (/Content Security Policy/i.test(m.text())) violations.push(m.text());
    });
    await p.goto(`${served.url}/login`);
    // Strings, not functions: the test program has no DOM types. These run in the page, as injected markup would.
    await p.evaluate(`(() => {
      const s = document.createElement("script");
      s.textContent = "window.__injected = true";
      document.body.appendChild(s);
      const img = document.createElement("img");
      img.setAttribute("onerror", "window.__handler = true");
      img.src = "data:,broken";
      document.body.appendChild(img);
    })()`);
    await p.waitForTimeout(200);
    expect(await p.evaluate("window.__injected")).toBeUndefined();
    expect(await p.evaluate("window.__handler")).toBeUndefined();
    expect(violations.length).toBeGreaterThan(0);
    // The framed page refuses to render inside another origin's frame (frame-ancestors 'none').
    const res = await p.request.get(`${served.url}/login`);
    expect(res.headers()["content-security-policy"]).toContain("frame-ancestors 'none'");
    await ctx.close();
  });

  it("refuses a cross-site form POST: the session survives a forged sign-out", async () => {
    const ctx = await newContext(browser);
    const p = await ctx.newPage();
    await p.goto(`${served.url}/login`);
    await p.getByRole("button", { name: "Sign in on this machine" }).click();
    await p.waitForURL((u) => u.pathname === "/builds");

    // An attacker's page on another origin auto-submits a form to our sign-out.
    const evil = createServer((_req, res) => {
      res.setHeader("content-type", "text/html");
      res.end(`<form id=f method=post action="${served.url}/logout"></form><script>document.getElementById('f').submit()</script>`);
    });
    await new Promise<void>((r) => evil.listen(0, "127.0.0.1", () => r()));
    const evilUrl = `http://localhost:${(evil.address() as AddressInfo).port}/`;
    const responses: number[] = [];
    p.on("response", (r) => {
      if (r.url() === `${served.url}/logout`) responses.push(r.status());
    });
    await p.goto(evilUrl);
    await p.waitForURL(`${served.url}/logout`);
    expect(responses).toEqual([403]);
    await new Promise<void>((r) => evil.close(() => r()));

    await p.goto(`${served.url}/login`);
    expect(new URL(p.url()).pathname).toBe("/builds");
    await ctx.close();
  });
});
