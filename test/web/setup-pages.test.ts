import { describe, expect, it } from "vitest";
import { issueBootstrapToken } from "../../src/domain/setup/setup.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { CookieJar, page } from "../helpers/web.ts";

const PROXY_SECRET = "proxy-shared-secret-0123456789";

async function withSetupSession(t: TestApp): Promise<CookieJar> {
  const jar = new CookieJar();
  const { token } = await issueBootstrapToken(t.deps);
  const res = await page(t, "POST", "/setup/token", { jar, form: { token } });
  expect(res.status, res.text).toBe(303);
  expect(res.location).toBe("/setup?step=mode");
  expect(jar.cookies.has("__Host-hangar_setup")).toBe(true);
  return jar;
}

describe("setup wizard pages (local mode)", () => {
  it("walks token → mode → owner → complete and ends signed in", async () => {
    const t = await makeTestApp();
    const first = await page(t, "GET", "/setup");
    expect(first.status).toBe(200);
    expect(first.text).toContain("npx hangar setup-token");
    expect(first.text).toContain('aria-current="step"');

    const jar = await withSetupSession(t);
    const mode = await page(t, "GET", "/setup?step=mode", { jar });
    expect(mode.text).toContain("Local: only this machine");
    expect(mode.text).toContain("Remote with OIDC");
    expect(mode.text).toContain("Remote behind a trusted proxy");
    const chosen = await page(t, "POST", "/setup/mode", { jar, form: { mode: "local" } });
    expect(chosen.location).toBe("/setup?step=owner");
    const owner = await page(t, "POST", "/setup/owner", { jar, form: { email: "owner@example.com" } });
    expect(owner.location).toBe("/setup?step=complete");
    const complete = await page(t, "GET", "/setup", { jar });
    expect(complete.text).toContain("owner@example.com");
    const done = await page(t, "POST", "/setup/complete", { jar });
    expect(done.location).toBe("/builds");
    expect(jar.cookies.has("__Host-hangar_setup")).toBe(false);
    const session = jar.cookies.get("__Host-hangar_session")!;
    const me = await t.call("GET", "/v1/users/me", { token: session });
    expect(me.body).toMatchObject({ email: "owner@example.com", role: "owner" });
    // Setup is closed for good.
    expect((await page(t, "GET", "/setup", { jar })).location).toBe("/");
    expect((await page(t, "POST", "/setup/token", { form: { token: "a".repeat(64) } })).location).toBe("/");
  });

  it("shows every token error in words", async () => {
    const t = await makeTestApp();
    const none = await page(t, "POST", "/setup/token", { form: { token: "a".repeat(64) } });
    expect(none.status).toBe(500);
    expect(none.text).toContain("No setup token exists yet");

    const malformed = await page(t, "POST", "/setup/token", { form: { token: "not-a-token" } });
    expect(malformed.status).toBe(400);
    expect(malformed.text).toContain("A setup token is 64 characters");

    const { token } = await issueBootstrapToken(t.deps);
    const wrong = await page(t, "POST", "/setup/token", { form: { token: "b".repeat(64) } });
    expect(wrong.status).toBe(401);
    expect(wrong.text).toContain("That setup token is not right");

    expect((await page(t, "POST", "/setup/token", { form: { token } })).status).toBe(303);
    const used = await page(t, "POST", "/setup/token", { form: { token } });
    expect(used.status).toBe(410);
    expect(used.text).toContain("already used");

    const fresh = await issueBootstrapToken(t.deps, 60);
    t.clock.advance(61);
    const expired = await page(t, "POST", "/setup/token", { form: { token: fresh.token } });
    expect(expired.status).toBe(410);
    expect(expired.text).toContain("has expired");

    const another = await issueBootstrapToken(t.deps);
    for (let i = 0; i < 5; i++) await page(t, "POST", "/setup/token", { form: { token: "c".repeat(64) } });
    const locked = await page(t, "POST", "/setup/token", { form: { token: another.token } });
    expect(locked.status).toBe(429);
    expect(locked.text).toContain("Too many wrong tokens");
  });

  it("an expired setup session goes back to the token step with the reason", async () => {
    const t = await makeTestApp();
    const jar = await withSetupSession(t);
    t.clock.advance(31 * 60);
    const res = await page(t, "POST", "/setup/mode", { jar, form: { mode: "local" } });
    expect(res.status).toBe(401);
    expect(res.text).toContain("Your setup session expired");
    expect(res.text).toContain('name="token"');
    // Without any session cookie: the token step, no error.
    const anon = await page(t, "POST", "/setup/owner", { form: { email: "a@example.com" } });
    expect(anon.text).toContain('name="token"');
  });

  it("owner errors: an invalid email, a second owner, the wrong mode", async () => {
    const t = await makeTestApp();
    const jar = await withSetupSession(t);
    const bad = await page(t, "POST", "/setup/owner", { jar, form: { email: "not an email" } });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain("Enter a valid email address");
    expect(bad.text).toContain('aria-invalid="true"');
    expect((await page(t, "POST", "/setup/owner", { jar, form: { email: "owner@example.com" } })).status).toBe(303);
    const again = await page(t, "POST", "/setup/owner", { jar, form: { email: "second@example.com" } });
    expect(again.status).toBe(409);
    expect(again.text).toContain("does not fit where setup is now");
    const modeLate = await page(t, "POST", "/setup/mode", { jar, form: { mode: "oidc" } });
    expect(modeLate.status).toBe(409);

    const t2 = await makeTestApp();
    const jar2 = await withSetupSession(t2);
    await page(t2, "POST", "/setup/mode", { jar: jar2, form: { mode: "oidc" } });
    const wrongMode = await page(t2, "POST", "/setup/owner", { jar: jar2, form: { email: "owner@example.com" } });
    expect(wrongMode.status).toBe(403);
    expect(wrongMode.text).toContain("belongs to another mode");
    const nonsense = await page(t2, "POST", "/setup/mode", { jar: jar2, form: { mode: "ftp" } });
    expect(nonsense.status).toBe(400);
    expect(nonsense.text).toContain("Choose one of the three modes");
  });
});

describe("setup wizard pages (remote modes)", () => {
  it("OIDC step: shows the redirect URI, and a provider that cannot be discovered in words", async () => {
    const t = await makeTestApp();
    const jar = await withSetupSession(t);
    expect((await page(t, "POST", "/setup/mode", { jar, form: { mode: "oidc" } })).location).toBe("/setup?step=oidc");
    const step = await page(t, "GET", "/setup?step=oidc", { jar });
    expect(step.text).toContain("http://localhost/auth/oidc/callback");
    const empty = await page(t, "POST", "/setup/oidc", { jar, form: { issuer_url: "", client_id: "" } });
    expect(empty.status).toBe(400);
    expect(empty.text).toContain("Enter the provider&#39;s issuer URL.");
    const unreachable = await page(t, "POST", "/setup/oidc", {
      jar,
      form: { issuer_url: "http://127.0.0.1:1", client_id: "hangar", client_secret: "s3cret-value" },
    });
    expect(unreachable.status).toBe(400);
    expect(unreachable.text).toContain("could not read the provider");
    // The secret is never echoed back into the form.
    expect(unreachable.text).not.toContain("s3cret-value");
    expect(unreachable.text).toContain('value="http://127.0.0.1:1"');
    const owner = await page(t, "POST", "/setup/oidc/start", { jar });
    expect(owner.status).toBe(409);
  });

  it("trusted proxy: the three header presets, validation in words, claim errors, claim and complete", async () => {
    const t = await makeTestApp();
    const jar = await withSetupSession(t);
    await page(t, "POST", "/setup/mode", { jar, form: { mode: "trusted_proxy" } });
    const step = await page(t, "GET", "/setup?step=proxy", { jar });
    expect(step.text).toContain('value="x-hangar-user-email"');
    expect(step.text).toContain('value="x-gateway-username"');
    expect(step.text).toContain('value="custom"');
    expect(step.text).toContain("Custom header name");

    const invalid = await page(t, "POST", "/setup/proxy", {
      jar,
      form: {
        header_preset: "custom",
        custom_header: "bad header!",
        trusted_proxy_cidrs: "10.0.0.0/33",
        shared_secret: "short",
        setup_owner_email: "nope",
      },
    });
    expect(invalid.status).toBe(400);
    expect(invalid.text).toContain("The header name must be an HTTP header name");
    expect(invalid.text).toContain("Not a valid address range");
    expect(invalid.text).toContain("16 to 512 visible characters");
    expect(invalid.text).toContain("Enter a valid email address, or leave it empty.");

    const claimEarly = await page(t, "POST", "/setup/proxy/claim", { jar });
    expect(claimEarly.status).toBe(409);
    expect(claimEarly.text).toContain("Save the proxy settings first.");

    const saved = await page(t, "POST", "/setup/proxy", {
      jar,
      form: {
        header_preset: "custom",
        custom_header: "X-Auth-Email",
        trusted_proxy_cidrs: "",
        shared_secret: PROXY_SECRET,
        setup_owner_email: "boss@example.com",
      },
    });
    expect(saved.status, saved.text).toBe(303);
    const configured = await page(t, "GET", "/setup", { jar });
    expect(configured.text).toContain("Claim ownership");
    expect(configured.text).toContain('value="x-auth-email"');

    const noSecret = await page(t, "POST", "/setup/proxy/claim", { jar, headers: { "x-auth-email": "boss@example.com" } });
    expect(noSecret.status).toBe(401);
    expect(noSecret.text).toContain("did not send the shared secret");
    const secret = { "x-hangar-trusted-proxy-secret": PROXY_SECRET };
    const noIdentity = await page(t, "POST", "/setup/proxy/claim", { jar, headers: secret });
    expect(noIdentity.text).toContain("The identity header is missing");
    const notEmail = await page(t, "POST", "/setup/proxy/claim", { jar, headers: { ...secret, "x-auth-email": "boss" } });
    expect(notEmail.text).toContain("does not hold a valid email address");
    const farPeer = await page(t, "POST", "/setup/proxy/claim", {
      jar,
      peer: "203.0.113.9",
      headers: { ...secret, "x-auth-email": "boss@example.com" },
    });
    expect(farPeer.status).toBe(403);
    expect(farPeer.text).toContain("did not come from a trusted proxy address");
    const mismatch = await page(t, "POST", "/setup/proxy/claim", { jar, headers: { ...secret, "x-auth-email": "intruder@example.com" } });
    expect(mismatch.status).toBe(403);
    expect(mismatch.text).toContain("someone other than the expected owner");

    const claimed = await page(t, "POST", "/setup/proxy/claim", { jar, headers: { ...secret, "x-auth-email": "boss@example.com" } });
    expect(claimed.location).toBe("/setup?step=complete");
    const done = await page(t, "POST", "/setup/complete", { jar });
    expect(done.location).toBe("/builds");
    const me = await t.call("GET", "/v1/users/me", { token: jar.cookies.get("__Host-hangar_session")! });
    expect(me.body).toMatchObject({ email: "boss@example.com", role: "owner" });
  });

  it("trusted proxy without a secret: the wizard makes one by default; saved empty it is accepted, and Settings and the preflight warn", async () => {
    const t = await makeTestApp();
    const jar = await withSetupSession(t);
    await page(t, "POST", "/setup/mode", { jar, form: { mode: "trusted_proxy" } });
    const made = (text: string) => /name="shared_secret"[^>]*value="([^"]*)"|value="([^"]*)"[^>]*name="shared_secret"/.exec(text);
    const first = made((await page(t, "GET", "/setup?step=proxy", { jar })).text);
    const second = made((await page(t, "GET", "/setup?step=proxy", { jar })).text);
    const firstSecret = first?.[1] ?? first?.[2];
    expect(firstSecret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(second?.[1] ?? second?.[2]).not.toBe(firstSecret);

    // Cleared by the owner: the spec makes both optional, so it is accepted.
    const saved = await page(t, "POST", "/setup/proxy", {
      jar,
      form: { header_preset: "x-hangar-user-email", trusted_proxy_cidrs: "", shared_secret: "" },
    });
    expect(saved.status, saved.text).toBe(303);
    const claimed = await page(t, "POST", "/setup/proxy/claim", { jar, headers: { "x-hangar-user-email": "boss@example.com" } });
    expect(claimed.location).toBe("/setup?step=complete");
    expect((await page(t, "POST", "/setup/complete", { jar })).location).toBe("/builds");
    const session = jar.cookies.get("__Host-hangar_session")!;

    const preflight = await t.call("GET", "/v1/settings/external-access/preflight", { token: session });
    expect(preflight.status).toBe(200);
    const flagged = preflight.body.checks.find((c: { id: string }) => c.id === "trusted_proxy_secret");
    expect(flagged).toMatchObject({ ok: false, required: false, failure_code: "trusted_proxy_shared_secret_missing" });
    // Not required: the other checks alone decide readiness.
    const network = await t.call("PUT", "/v1/settings/external-access/network", {
      token: session,
      body: { public_url: "https://ci.example.com", allowed_origins: ["https://ci.example.com"], artifact_delivery_url: null },
    });
    expect(network.status, network.text).toBe(200);
    const after = await t.call("GET", "/v1/settings/external-access/preflight", { token: session });
    expect(after.body.ready, after.text).toBe(true);

    const settings = await page(t, "GET", "/settings", { jar });
    expect(settings.status).toBe(200);
    expect(settings.text).toContain('id="trusted-proxy-warning"');
    expect(settings.text).toMatch(/<li class="warn" data-check="trusted_proxy_secret">/);
  });
});
