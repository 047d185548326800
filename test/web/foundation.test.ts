import { describe, expect, it } from "vitest";
import { makeTestApp } from "../helpers/app.ts";
import { completeLocalSetup, createUser, sessionFor } from "../helpers/factories.ts";
import { cookieValue, page } from "../helpers/web.ts";
import { neutralise } from "../../src/web/text.ts";
import { stylesheetUrl, scriptUrl } from "../../src/web/assets.ts";

describe("web foundation: redirects, sign-in, sign-out", () => {
  it("/ leads to /setup before ready, to /login without a session, to /builds with one", async () => {
    const t = await makeTestApp();
    expect((await page(t, "GET", "/")).location).toBe("/setup");
    expect((await page(t, "GET", "/login")).location).toBe("/setup");
    const { ownerToken } = await completeLocalSetup(t);
    const anon = await page(t, "GET", "/");
    expect(anon.status).toBe(303);
    expect(anon.location).toBe("/login");
    expect((await page(t, "GET", "/", { session: ownerToken })).location).toBe("/builds");
    expect((await page(t, "GET", "/", { session: "hgu_not-a-session" })).location).toBe("/login");
  });

  it("signs in on this machine with a __Host- cookie (HttpOnly, Secure, SameSite=Lax, Path=/) and signs out", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const login = await page(t, "GET", "/login");
    expect(login.status).toBe(200);
    expect(login.text).toContain("Sign in on this machine");

    const signed = await page(t, "POST", "/login/local", { form: { email: "" } });
    expect(signed.status).toBe(303);
    expect(signed.location).toBe("/builds");
    const line = signed.setCookies.find((l) => l.startsWith("__Host-hangar_session="))!;
    expect(line).toBeDefined();
    expect(line).toMatch(/; HttpOnly/);
    expect(line).toMatch(/; Secure/);
    expect(line).toMatch(/; SameSite=Lax/);
    expect(line).toMatch(/; Path=\//);
    expect(line).not.toMatch(/Domain=/i);
    expect(line).toMatch(/Max-Age=86400/);
    const token = cookieValue(signed.setCookies, "__Host-hangar_session")!;
    expect(token.length).toBeGreaterThanOrEqual(43);

    // The cookie is a user session of the same table: with it, /login goes home; /v1/ does not accept it.
    expect((await page(t, "GET", "/login", { session: token })).location).toBe("/builds");
    const api = await t.call("GET", "/v1/users/me", { headers: { cookie: `__Host-hangar_session=${token}` } });
    expect(api.status).toBe(401);
    expect(api.body.code).toBe("missing_auth");
    expect((await t.call("GET", "/v1/users/me", { token })).status).toBe(200);

    const out = await page(t, "POST", "/logout", { session: token });
    expect(out.status).toBe(303);
    expect(out.location).toBe("/login");
    expect(out.setCookies.some((l) => l.startsWith("__Host-hangar_session=;") && /Max-Age=0/.test(l))).toBe(true);
    // Revoked in the sessions table, not only forgotten by the browser.
    expect((await t.call("GET", "/v1/users/me", { token })).status).toBe(401);
  });

  it("goes back to a same-site `next` after sign-in, never to another host", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    expect((await page(t, "POST", "/login/local?next=%2Fusers%3Fx%3D1", { form: {} })).location).toBe("/users?x=1");
    for (const evil of ["//evil.example", "https://evil.example/", "/\\evil.example", "/login"]) {
      expect((await page(t, "POST", `/login/local?next=${encodeURIComponent(evil)}`, { form: {} })).location).toBe("/builds");
    }
    // One `/` then a path character; no backslash, control or whitespace character anywhere.
    const refused = [
      "/\t/evil.example",
      "/\n/evil.example",
      "/ /evil.example",
      "/\u3000/evil.example",
      "/\u00a0/x",
      "/",
      "/?next=x",
      "/#x",
      "/builds\\x",
      "/builds\r\nSet-Cookie: a=b",
      "/builds\u202e",
      " /builds",
    ];
    for (const evil of refused) {
      const res = await page(t, "POST", `/login/local?next=${encodeURIComponent(evil)}`, { form: {} });
      expect(res.location, JSON.stringify(evil)).toBe("/builds");
    }
    for (const good of ["/projects/abc?tab=hooks#L1", "/builds/%2F%2Fx", "/users"]) {
      expect((await page(t, "POST", `/login/local?next=${encodeURIComponent(good)}`, { form: {} })).location).toBe(good);
    }
  });

  it("shows local sign-in errors in words, with the API's rules", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    await createUser(t, { email: "second@example.com" });
    const several = await page(t, "POST", "/login/local", { form: { email: "" } });
    expect(several.status).toBe(400);
    expect(several.text).toContain("Several people use this Hangar: enter your email.");
    const unknown = await page(t, "POST", "/login/local", { form: { email: "nobody@example.com" } });
    expect(unknown.status).toBe(403);
    expect(unknown.text).toContain("No active user has this email");
    // Not from this machine: no local button, and posting anyway is refused.
    const remote = await page(t, "GET", "/login", { peer: "192.0.2.7" });
    expect(remote.text).not.toContain("Sign in on this machine");
    expect(remote.text).toContain("npx hangar login");
    const refused = await page(t, "POST", "/login/local", { peer: "192.0.2.7", form: { email: "owner@example.com" } });
    expect(refused.status).toBe(403);
    expect(refused.text).toContain("only on the machine Hangar runs on");
    expect(refused.setCookies.some((l) => l.startsWith("__Host-hangar_session=h"))).toBe(false);
  });

  it("a revoked or disabled user's cookie leads to /login and is cleared", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const dev = await createUser(t, { email: "dev@example.com", status: "disabled" });
    const token = await sessionFor(t, { id: dev.id }).catch(() => null);
    expect(token).toBeNull(); // a disabled user gets no session at all
  });
});

describe("web foundation: form posts are same-origin only", () => {
  it("refuses a POST without Origin or with a foreign one (403), accepts the own origin", async () => {
    const t = await makeTestApp();
    const { ownerToken } = await completeLocalSetup(t);
    const none = await page(t, "POST", "/logout", { session: ownerToken, origin: null });
    expect(none.status).toBe(403);
    const foreign = await page(t, "POST", "/logout", { session: ownerToken, origin: "https://evil.example" });
    expect(foreign.status).toBe(403);
    const opaque = await page(t, "POST", "/logout", { session: ownerToken, origin: "null" });
    expect(opaque.status).toBe(403);
    // The session survived all three.
    expect((await t.call("GET", "/v1/users/me", { token: ownerToken })).status).toBe(200);
    const ok = await page(t, "POST", "/logout", { session: ownerToken });
    expect(ok.status).toBe(303);
    expect((await t.call("GET", "/v1/users/me", { token: ownerToken })).status).toBe(401);
  });

  it("leaves /v1/ to its Bearer tokens (no Origin needed there)", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const res = await t.call("POST", "/v1/auth/local/login", { body: {} });
    expect(res.status).toBe(200);
  });
});

describe("web foundation: headers and assets", () => {
  it("every HTML answer carries the CSP (no 'unsafe-inline' for scripts), frame-ancestors, nosniff, Referrer-Policy", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const res = await page(t, "GET", "/login");
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    const csp = res.headers.get("content-security-policy")!;
    const scriptSrc = csp
      .split(";")
      .map((d) => d.trim())
      .find((d) => d.startsWith("script-src"))!;
    expect(scriptSrc).toMatch(/^script-src 'self' 'nonce-[A-Za-z0-9+/=]{24}'$/);
    expect(csp).not.toContain("unsafe-inline");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("object-src 'none'");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("referrer-policy")).toBe("same-origin");
    expect(res.headers.get("cache-control")).toBe("no-store");
    // A fresh nonce per answer.
    const again = await page(t, "GET", "/login");
    expect(again.headers.get("content-security-policy")).not.toBe(csp);
    // Distinct across many answers too: nonces come from a pool of random bytes refilled every 256 answers.
    const nonces = new Set<string>();
    for (let i = 0; i < 300; i++) {
      const policy = (await page(t, "GET", "/login")).headers.get("content-security-policy");
      expect(policy).toContain("'nonce-");
      nonces.add(policy!);
    }
    expect(nonces.size).toBe(300);
    // Error pages too.
    const refused = await page(t, "POST", "/login/local", { peer: "192.0.2.7", form: {} });
    expect(refused.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
  });

  it("serves the stylesheet and script with long caching; the page links them", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const html = (await page(t, "GET", "/login")).text;
    expect(html.startsWith("<!DOCTYPE html>")).toBe(true);
    expect(html).toContain(`href="${stylesheetUrl()}"`);
    expect(html).toContain(`src="${scriptUrl()}"`);
    const css = await page(t, "GET", stylesheetUrl());
    expect(css.status).toBe(200);
    expect(css.headers.get("content-type")).toMatch(/^text\/css/);
    expect(css.text).toContain("prefers-color-scheme:dark");
    expect(css.headers.get("cache-control")).toContain("immutable");
    const js = await page(t, "GET", scriptUrl());
    expect(js.headers.get("content-type")).toMatch(/^text\/javascript/);
    expect(js.headers.get("x-content-type-options")).toBe("nosniff");
  });
});

describe("text neutralisation", () => {
  it("shows bidi and control characters as visible code points", () => {
    expect(neutralise("evil\u202Egpj.exe")).toBe("evil<U+202E>gpj.exe");
    expect(neutralise("a\u2066b\u2069c\u200Fd\u0000e")).toBe("a<U+2066>b<U+2069>c<U+200F>d<U+0000>e");
    expect(neutralise("plain ünïcödé 名前")).toBe("plain ünïcödé 名前");
    expect(neutralise(null)).toBe("");
  });
});
