import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordAudit } from "../../src/domain/common/audit.ts";
import { makeTestApp } from "../helpers/app.ts";
import { completeLocalSetup, createUser, sessionFor, userWithRole } from "../helpers/factories.ts";
import { startOidcProvider, TEST_CLIENT_ID, TEST_CLIENT_SECRET, type TestOidcProvider } from "../helpers/oidc-provider.ts";
import { page } from "../helpers/web.ts";

const HOSTILE = `<script>alert("x")</script>\u202Egpj.exe`;

let oidc: TestOidcProvider;
beforeAll(async () => {
  oidc = await startOidcProvider();
});
afterAll(async () => {
  await oidc?.close();
});

async function world() {
  const t = await makeTestApp();
  const { ownerToken, owner } = await completeLocalSetup(t);
  const admin = await userWithRole(t, "admin");
  const developer = await userWithRole(t, "developer");
  const viewer = await userWithRole(t, "qa_viewer");
  return { t, owner, ownerToken, admin, developer, viewer };
}

function navLinks(html: string): string[] {
  const nav = /<nav aria-label="Main">([\s\S]*?)<\/nav>/.exec(html)?.[1] ?? "";
  return [...nav.matchAll(/<a href="([^"]+)"/g)].map((m) => m[1]!);
}

describe("admin pages: status, redirects and the role matrix", () => {
  it("answers each page by role; a signed-out browser goes to /login and comes back", async () => {
    const { t, ownerToken, admin, developer, viewer } = await world();
    for (const path of ["/users", "/runners", "/settings", "/audit"]) {
      expect((await page(t, "GET", path, { session: ownerToken })).status, path).toBe(200);
      expect((await page(t, "GET", path, { session: admin.token })).status, path).toBe(200);
      const dev = await page(t, "GET", path, { session: developer.token });
      expect(dev.status, path).toBe(403);
      expect(dev.text).toContain("Not available for your role");
      expect((await page(t, "GET", path, { session: viewer.token })).status, path).toBe(403);
      const anon = await page(t, "GET", path);
      expect(anon.status).toBe(303);
      expect(anon.location).toBe(`/login?next=${encodeURIComponent(path)}`);
    }
    // POSTs of a role that may not use them: 403, nothing changes.
    const refused = await page(t, "POST", "/users/invite", { session: developer.token, form: { email: "x@example.com", role: "admin" } });
    expect(refused.status).toBe(403);
    expect((await t.call("GET", "/v1/users", { token: ownerToken })).body.some((u: { email: string }) => u.email === "x@example.com")).toBe(false);
  });

  it("shows each role only the nav entries it can open", async () => {
    const { t, ownerToken, admin, developer, viewer } = await world();
    const all = ["/builds", "/projects", "/runners", "/users", "/settings", "/audit"];
    expect(navLinks((await page(t, "GET", "/users", { session: ownerToken })).text)).toEqual(all);
    expect(navLinks((await page(t, "GET", "/users", { session: admin.token })).text)).toEqual(all);
    expect(navLinks((await page(t, "GET", "/users", { session: developer.token })).text)).toEqual(["/builds", "/projects"]);
    expect(navLinks((await page(t, "GET", "/users", { session: viewer.token })).text)).toEqual(["/builds", "/projects"]);
    const html = (await page(t, "GET", "/users", { session: ownerToken })).text;
    expect(html).toContain('aria-current="page"');
    expect(html).toContain("Sign out");
    expect(html).toContain("owner@example.com");
  });
});

describe("/users", () => {
  it("invites, changes a role, disables and enables, with the outcome as a flash message", async () => {
    const { t, ownerToken } = await world();
    const invited = await page(t, "POST", "/users/invite", { session: ownerToken, form: { email: "new@example.com", role: "qa_viewer" } });
    expect(invited.status).toBe(303);
    const flashCookie = invited.setCookies.find((l) => l.startsWith("__Host-hangar_flash="))!;
    const list = await page(t, "GET", "/users", { session: ownerToken, cookies: [flashCookie.split(";")[0]!] });
    expect(list.text).toContain("Invited new@example.com as qa viewer.");
    expect(list.text).toMatch(/data-user="new@example.com"[\s\S]*?badge-wait">invited/);
    const users = (await t.call("GET", "/v1/users", { token: ownerToken })).body as { id: string; email: string; role: string; status: string }[];
    const target = users.find((u) => u.email === "new@example.com")!;

    expect((await page(t, "POST", `/users/${target.id}/role`, { session: ownerToken, form: { role: "developer" } })).status).toBe(303);
    expect((await page(t, "POST", `/users/${target.id}/disable`, { session: ownerToken })).status).toBe(303);
    let now = (await t.call("GET", "/v1/users", { token: ownerToken })).body.find((u: { id: string }) => u.id === target.id);
    expect(now).toMatchObject({ role: "developer", status: "disabled" });
    const disabledRow = await page(t, "GET", "/users", { session: ownerToken });
    expect(disabledRow.text).toContain(`action="/users/${target.id}/enable"`);
    expect((await page(t, "POST", `/users/${target.id}/enable`, { session: ownerToken })).status).toBe(303);
    now = (await t.call("GET", "/v1/users", { token: ownerToken })).body.find((u: { id: string }) => u.id === target.id);
    expect(now.status).toBe("active");
  });

  it("shows invite errors in words: a duplicate (409), an invalid email (400)", async () => {
    const { t, ownerToken } = await world();
    const dup = await page(t, "POST", "/users/invite", { session: ownerToken, form: { email: "owner@example.com", role: "admin" } });
    expect(dup.status).toBe(409);
    expect(dup.text).toContain("Someone with this email is already a user.");
    const bad = await page(t, "POST", "/users/invite", { session: ownerToken, form: { email: "not-an-email", role: "admin" } });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain("Enter a valid email address.");
    expect(bad.text).toContain('value="not-an-email"');
    const badRole = await page(t, "POST", "/users/invite", { session: ownerToken, form: { email: "a@example.com", role: "owner" } });
    expect(badRole.status).toBe(400);
  });

  it("shows no controls on the owner's row or one's own; the transfer section to the owner only", async () => {
    const { t, owner, ownerToken, admin } = await world();
    const asAdmin = await page(t, "GET", "/users", { session: admin.token });
    expect(asAdmin.text).not.toContain(`/users/${owner.id}/role`);
    expect(asAdmin.text).not.toContain(`/users/${owner.id}/disable`);
    expect(asAdmin.text).not.toContain(`/users/${admin.user.id}/disable`);
    expect(asAdmin.text).not.toContain("Transfer ownership");
    const asOwner = await page(t, "GET", "/users", { session: ownerToken });
    expect(asOwner.text).toContain(`/users/${admin.user.id}/disable`);
    expect(asOwner.text).toContain("Transfer ownership");
    // Forged by an admin anyway: the domain refuses, the owner stays.
    const forged = await page(t, "POST", `/users/${owner.id}/disable`, { session: admin.token });
    expect(forged.status).toBe(303);
    const me = await t.call("GET", "/v1/users/me", { token: ownerToken });
    expect(me.body.status).toBe("active");
    expect((await page(t, "POST", "/users/transfer", { session: admin.token, form: { email: admin.user.email } })).status).toBe(403);
  });

  it("transfers ownership: the new owner is set and the old owner's browser is signed out", async () => {
    const { t, ownerToken, admin } = await world();
    const res = await page(t, "POST", "/users/transfer", { session: ownerToken, form: { email: admin.user.email } });
    expect(res.status).toBe(303);
    expect(res.location).toBe("/login");
    expect(res.setCookies.some((l) => l.startsWith("__Host-hangar_session=;"))).toBe(true);
    expect((await t.call("GET", "/v1/users/me", { token: ownerToken })).status).toBe(401);
    const fresh = await sessionFor(t, admin.user);
    expect((await t.call("GET", "/v1/users/me", { token: fresh })).body.role).toBe("owner");
  });

  it("escapes and neutralises outside strings (an IdP display name)", async () => {
    const { t, ownerToken } = await world();
    const u = await createUser(t, { email: "idp@example.com" });
    const { users } = await import("../../src/db/schema/index.ts");
    const { eq } = await import("drizzle-orm");
    await t.deps.db.update(users).set({ displayName: HOSTILE }).where(eq(users.id, u.id));
    const html = (await page(t, "GET", "/users", { session: ownerToken })).text;
    expect(html).not.toContain("<script>alert");
    expect(html).toContain("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;U+202E&gt;gpj.exe");
    expect(html).not.toContain("\u202E");
    expect(html).toContain('class="name suspicious"');
  });
});

describe("/runners", () => {
  it("registers a runner: the token and commands are shown once, never again", async () => {
    const { t, ownerToken } = await world();
    const res = await page(t, "POST", "/runners/register", { session: ownerToken, form: { name: "mac-mini", platforms: ["ios", "macos"] } });
    expect(res.status).toBe(200);
    const token = /id="runner-token" readonly="" value="([^"]+)"/.exec(res.text)?.[1];
    expect(token).toBeDefined();
    expect(res.text).toContain("HANGAR_RUNNER_TOKEN=" + token);
    expect(res.text).toContain("npx hangar runner --url http://localhost");
    expect(res.text).toContain("shown only this once");
    expect(res.headers.get("cache-control")).toBe("no-store");
    const runners = (await t.call("GET", "/v1/runners", { token: ownerToken })).body;
    expect(runners).toHaveLength(1);
    expect(runners[0]).toMatchObject({ name: "mac-mini", capabilities: { platforms: ["ios", "macos"] } });
    // The token works as a runner token.
    const hb = await t.call("POST", `/v1/runners/${runners[0].id}/heartbeat`, { token, body: {} });
    expect(hb.status).toBe(200);
    const list = await page(t, "GET", "/runners", { session: ownerToken });
    expect(list.text).not.toContain(token!);
    expect(list.text).toContain("mac-mini");
    expect(list.text).toMatch(/badge-ok">online/);
  });

  it("rotates a runner's token (new one shown once, old one refused at once) and removes a runner", async () => {
    const { t, ownerToken, admin } = await world();
    const reg = await t.call("POST", "/v1/runners/register", {
      token: ownerToken,
      body: { name: "linux-1", capabilities: { platforms: ["android"] } },
    });
    const list = await page(t, "GET", "/runners", { session: admin.token });
    expect(list.text).toContain(`action="/runners/${reg.body.id}/rotate-token"`);
    expect(list.text).toContain(`action="/runners/${reg.body.id}/remove"`);

    const rotated = await page(t, "POST", `/runners/${reg.body.id}/rotate-token`, { session: admin.token });
    expect(rotated.status).toBe(200);
    const fresh = /id="runner-token" readonly="" value="([^"]+)"/.exec(rotated.text)?.[1];
    expect(fresh).toMatch(/^hgr_/);
    expect(fresh).not.toBe(reg.body.token);
    // The standalone runner's two commands carry the new token (test/e2e/runner-standalone.test.ts runs them).
    expect(rotated.text).toContain('id="runner-download" readonly="" value="curl -fsSLO http://localhost/runner/hangar-runner.mjs"');
    expect(rotated.text).toContain(`printf &#39;%s\\n&#39; ${fresh} &gt; ~/.hangar-runner.token`);
    expect(rotated.text).toContain(`node hangar-runner.mjs --url http://localhost --id ${reg.body.id} --token-file ~/.hangar-runner.token`);
    const old = await t.call("POST", `/v1/runners/${reg.body.id}/heartbeat`, { token: reg.body.token, body: {} });
    expect(old.status).toBe(401);
    expect(old.body.code).toBe("invalid_runner_token");
    expect((await t.call("POST", `/v1/runners/${reg.body.id}/heartbeat`, { token: fresh, body: {} })).status).toBe(200);

    const removed = await page(t, "POST", `/runners/${reg.body.id}/remove`, { session: ownerToken });
    expect(removed.status).toBe(303);
    expect((await t.call("GET", "/v1/runners", { token: ownerToken })).body).toHaveLength(0);
    const gone = await t.call("POST", `/v1/runners/${reg.body.id}/heartbeat`, { token: fresh, body: {} });
    expect(gone.status).toBe(401);
    expect(gone.body.code).toBe("invalid_runner_token");
    // Removing it again: the page answers 404 in words, not a JSON error.
    const again = await page(t, "POST", `/runners/${reg.body.id}/remove`, { session: ownerToken });
    expect(again.status).toBe(404);
    expect(again.headers.get("content-type")).toMatch(/^text\/html/);
  });

  it("escapes a hostile runner name and capability strings", async () => {
    const { t, ownerToken } = await world();
    const reg = await t.call("POST", "/v1/runners/register", {
      token: ownerToken,
      body: { name: `${HOSTILE}"><img src=x onerror=alert(1)>`, capabilities: { platforms: ["ios"] } },
    });
    expect(reg.status).toBe(200);
    const html = (await page(t, "GET", "/runners", { session: ownerToken })).text;
    expect(html).not.toContain("<script>alert");
    expect(html).not.toContain("<img src=x");
    expect(html).toContain("&lt;U+202E&gt;gpj.exe");
    expect(html).toContain("gpj.exe&quot;&gt;&lt;img src=x onerror=alert(1)&gt;");
  });

  it("shows an empty state before the first runner", async () => {
    const { t, admin } = await world();
    expect((await page(t, "GET", "/runners", { session: admin.token })).text).toContain("No runners yet");
  });
});

describe("/settings", () => {
  it("shows the owner every section and an admin only storage and the read-only preflight", async () => {
    const { t, ownerToken, admin } = await world();
    const owner = (await page(t, "GET", "/settings", { session: ownerToken })).text;
    for (const s of ['id="mode"', 'id="network"', 'id="oidc"', 'id="storage"', "Switch External Access on"]) expect(owner).toContain(s);
    const asAdmin = (await page(t, "GET", "/settings", { session: admin.token })).text;
    expect(asAdmin).toContain('id="storage"');
    expect(asAdmin).toContain('id="preflight"');
    for (const s of ['id="network"', 'id="oidc"', "Switch External Access on"]) expect(asAdmin).not.toContain(s);
    expect(asAdmin).toContain("Only the owner can switch External Access.");
    // Forged owner-only posts from an admin: 403, nothing stored.
    expect(
      (
        await page(t, "POST", "/settings/network", {
          session: admin.token,
          form: { public_url: "https://ci.example.com", allowed_origins: "https://ci.example.com" },
        })
      ).status,
    ).toBe(403);
    expect((await page(t, "POST", "/settings/mode", { session: admin.token, form: { runtime_mode: "remote" } })).status).toBe(403);
    expect((await t.call("GET", "/v1/settings/external-access/network", { token: ownerToken })).body.settings.source).toBe("default");
  });

  it("External Access: a failing preflight refuses the switch in words; network and OIDC make it pass; the switch signs everyone out", async () => {
    const { t, ownerToken, admin } = await world();
    const failing = await page(t, "GET", "/settings", { session: ownerToken });
    expect(failing.text).toMatch(/data-check="public_url_set"[\s\S]*?\(failed\)/);
    const refused = await page(t, "POST", "/settings/mode", { session: ownerToken, form: { runtime_mode: "remote" } });
    expect(refused.status).toBe(400);
    expect(refused.text).toContain("Set a public URL first");

    const http = await page(t, "POST", "/settings/network", {
      session: ownerToken,
      form: { public_url: "http://ci.example.com", allowed_origins: "http://ci.example.com" },
    });
    expect(http.status).toBe(400);
    expect(http.text).toContain("The public URL must start with https://.");
    expect(http.text).toContain('value="http://ci.example.com"');
    const origin = await page(t, "POST", "/settings/network", {
      session: ownerToken,
      form: { public_url: "https://ci.example.com", allowed_origins: "https://other.example.com" },
    });
    expect(origin.text).toContain("Allowed origins must include the public URL");
    const fromFar = await page(t, "POST", "/settings/network", {
      session: ownerToken,
      peer: "192.0.2.1",
      form: { public_url: "https://ci.example.com", allowed_origins: "https://ci.example.com" },
    });
    expect(fromFar.status).toBe(403);
    expect(fromFar.text).toContain("only be changed on the machine Hangar runs on");
    const saved = await page(t, "POST", "/settings/network", {
      session: ownerToken,
      form: { public_url: "https://ci.example.com", allowed_origins: "https://ci.example.com" },
    });
    expect(saved.status).toBe(303);

    const noAuth = await page(t, "POST", "/settings/mode", { session: ownerToken, form: { runtime_mode: "remote" } });
    expect(noAuth.text).toContain("Configure sign-in with OIDC");
    const badIssuer = await page(t, "POST", "/settings/oidc", { session: ownerToken, form: { issuer_url: "http://127.0.0.1:1", client_id: "x" } });
    expect(badIssuer.text).toContain("could not read the provider");
    const oidcSaved = await page(t, "POST", "/settings/oidc", {
      session: ownerToken,
      form: { issuer_url: oidc.issuer, client_id: TEST_CLIENT_ID, client_secret: TEST_CLIENT_SECRET },
    });
    expect(oidcSaved.status, oidcSaved.text).toBe(303);
    const passing = await page(t, "GET", "/settings", { session: ownerToken });
    expect(passing.text).not.toContain("(failed)");
    expect(passing.text).toContain("A secret is stored; leave empty to keep it.");

    const switched = await page(t, "POST", "/settings/mode", { session: ownerToken, form: { runtime_mode: "remote" } });
    expect(switched.status).toBe(303);
    expect(switched.location).toBe("/login");
    expect((await t.call("GET", "/v1/users/me", { token: ownerToken })).status).toBe(401);
    expect((await t.call("GET", "/v1/users/me", { token: admin.token })).status).toBe(401);
    expect((await t.call("GET", "/v1/settings/preferences", { token: await sessionFor(t, admin.user) })).body.preferences.runtime_mode).toBe(
      "remote",
    );
  });

  it("artifact storage: errors in words, and a valid local directory saved", async () => {
    const { t, admin } = await world();
    const rel = await page(t, "POST", "/settings/storage", { session: admin.token, form: { provider: "local", base_dir: "relative/dir" } });
    expect(rel.status).toBe(400);
    expect(rel.text).toContain("must be an absolute path the daemon can write to");
    const bucket = await page(t, "POST", "/settings/storage", {
      session: admin.token,
      form: {
        provider: "s3",
        endpoint: "https://s3.example.com",
        region: "us-east-1",
        bucket: "No_Such",
        access_key_id: "AK",
        secret_access_key: "SK",
      },
    });
    expect(bucket.text).toContain("does not follow the S3 naming rules");
    expect(bucket.text).not.toContain('value="SK"');
    const creds = await page(t, "POST", "/settings/storage", {
      session: admin.token,
      form: { provider: "s3", endpoint: "https://s3.example.com", region: "us-east-1", bucket: "builds" },
    });
    expect(creds.text).toContain("Enter both the access key ID and the secret access key.");
    const ok = await page(t, "POST", "/settings/storage", { session: admin.token, form: { provider: "local", base_dir: `${t.dataDir}/elsewhere` } });
    expect(ok.status).toBe(303);
    expect((await t.call("GET", "/v1/settings/artifact-storage", { token: admin.token })).body.local.base_dir).toBe(`${t.dataDir}/elsewhere`);
  });
});

describe("/settings: sign-in on this machine", () => {
  it("lets the owner switch local sign-in to cli_only: /login then hides it and the API refuses it; admins never see it", async () => {
    const { t, ownerToken, admin } = await world();
    const ownerPage = await page(t, "GET", "/settings", { session: ownerToken });
    expect(ownerPage.text).toContain('action="/settings/local-login"');
    expect((await page(t, "GET", "/settings", { session: admin.token })).text).not.toContain('action="/settings/local-login"');
    expect((await page(t, "POST", "/settings/local-login", { session: admin.token, form: { mode: "cli_only" } })).status).toBe(403);
    const bad = await page(t, "POST", "/settings/local-login", { session: ownerToken, form: { mode: "anyone" } });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain("Choose how people may sign in on this machine");

    const saved = await page(t, "POST", "/settings/local-login", { session: ownerToken, form: { mode: "cli_only" } });
    expect(saved.status).toBe(303);
    expect((await t.call("GET", "/v1/settings/local-login", { token: ownerToken })).body).toEqual({ mode: "cli_only" });
    const login = await page(t, "GET", "/login", {});
    expect(login.text).not.toContain('id="local-login"');
    expect(login.text).toContain("Signing in on this machine is switched off");
    const refused = await t.call("POST", "/v1/auth/local/login", { body: {} });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe("local_login_disabled");

    expect((await page(t, "POST", "/settings/local-login", { session: ownerToken, form: { mode: "loopback" } })).status).toBe(303);
    expect((await page(t, "GET", "/login", {})).text).toContain('id="local-login"');
  });
});

describe("/audit", () => {
  it("lists events newest first, escaping their strings", async () => {
    const { t, ownerToken } = await world();
    await recordAudit(t.deps, { action: "test.hostile", actor: { id: "x", email: HOSTILE }, details: { name: HOSTILE } });
    const res = await page(t, "GET", "/audit", { session: ownerToken });
    expect(res.status).toBe(200);
    expect(res.text).toContain("test.hostile");
    expect(res.text).toContain("setup.completed");
    expect(res.text.indexOf("test.hostile")).toBeLessThan(res.text.indexOf("setup.completed"));
    expect(res.text).not.toContain("<script>alert");
    expect(res.text).not.toContain("\u202E");
    const limited = await page(t, "GET", "/audit?limit=9999", { session: ownerToken });
    expect(limited.text).toContain("The latest 50 events");
  });
});
