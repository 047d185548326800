import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { instanceSettings, oidcPendingRequests, users } from "../../src/db/schema/index.ts";
import { runMaintenance } from "../../src/domain/setup/maintenance.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { completeLocalSetup, sessionFor, setInstance } from "../helpers/factories.ts";
import {
  completeOidcSetup,
  signInWithOidc,
  startOidcProvider,
  startTokenForge,
  TEST_CLIENT_ID,
  TEST_CLIENT_SECRET,
  TEST_PUBLIC_CLIENT_ID,
  TEST_REDIRECT_URI,
  wallClockSeconds,
  type TestOidcProvider,
  type TokenForge,
} from "../helpers/oidc-provider.ts";

let idp: TestOidcProvider;
let forge: TokenForge;
beforeAll(async () => {
  [idp, forge] = await Promise.all([startOidcProvider(), startTokenForge()]);
});
afterAll(async () => {
  await Promise.all([idp.close(), forge.close()]);
});

/** A ready instance whose owner (owner@example.com) was created through the provider, plus the owner's session. */
async function readyApp(): Promise<{ t: TestApp; ownerToken: string }> {
  const t = await makeTestApp();
  t.clock.set(wallClockSeconds());
  await completeOidcSetup(t, idp);
  const owner = await t.deps.db.select().from(users).where(eq(users.role, "owner")).get();
  return { t, ownerToken: await sessionFor(t, owner!) };
}

async function invite(t: TestApp, ownerToken: string, email: string, role = "developer") {
  const res = await t.call("POST", "/v1/users/invite", { token: ownerToken, body: { email, role } });
  expect(res.status).toBe(200);
  return res.body as { id: string };
}

async function start(t: TestApp, redirectUri: string | null = TEST_REDIRECT_URI) {
  return t.call("GET", redirectUri === null ? "/v1/auth/oidc/start" : `/v1/auth/oidc/start?redirect_uri=${encodeURIComponent(redirectUri)}`);
}

/** A start from another address (remote mode: local mode answers only this machine). */
async function startFrom(t: TestApp, peer: string) {
  return t.call("GET", `/v1/auth/oidc/start?redirect_uri=${encodeURIComponent(TEST_REDIRECT_URI)}`, { peer });
}

describe("OIDC sign-in before setup is ready", () => {
  it("returns 409 setup_incomplete for start and callback", async () => {
    const t = await makeTestApp();
    const s = await start(t);
    expect([s.status, s.body.code]).toEqual([409, "setup_incomplete"]);
    const cb = await t.call("POST", "/v1/auth/oidc/callback", { body: { code: "c", state: "s" } });
    expect([cb.status, cb.body.code]).toEqual([409, "setup_incomplete"]);
  });

  it("answers 500 oidc_not_configured on a ready instance without OIDC", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    const s = await start(t);
    expect([s.status, s.body.code]).toEqual([500, "oidc_not_configured"]);
  });
});

describe("GET /v1/auth/oidc/start and POST /v1/auth/oidc/callback", () => {
  it("activates an invited user on first sign-in, with name, picture and subject, and a 24-hour session", async () => {
    const { t, ownerToken } = await readyApp();
    const invited = await invite(t, ownerToken, "Dev@Example.com");
    const res = await signInWithOidc(t, idp, "dev-sub");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      session_token: expect.stringMatching(/^hgu_[\w-]{43}$/),
      expires_at: t.clock.now() + 86_400,
      user: {
        user_id: invited.id,
        email: "dev@example.com",
        display_name: "Dev Eloper",
        role: "developer",
        avatar_url: "https://img.example.test/dev.png",
        oidc_subject: "dev-sub",
      },
    });
    const me = await t.call("GET", "/v1/users/me", { token: res.body.session_token });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ email: "dev@example.com", status: "active", display_name: "Dev Eloper" });
    // The session ends after 24 hours.
    t.clock.advance(86_400);
    expect((await t.call("GET", "/v1/users/me", { token: res.body.session_token })).status).toBe(401);
  });

  it("signs the owner in again through the provider", async () => {
    const { t } = await readyApp();
    const res = await signInWithOidc(t, idp, "owner-sub");
    expect(res.status).toBe(200);
    expect(res.body.user).toMatchObject({ email: "owner@example.com", role: "owner", oidc_subject: "owner-sub" });
  });

  it("answers 403 user_not_found for an account with no user and for a disabled user", async () => {
    const { t, ownerToken } = await readyApp();
    const stranger = await signInWithOidc(t, idp, "stranger-sub");
    expect([stranger.status, stranger.body.code]).toEqual([403, "user_not_found"]);
    const dev = await invite(t, ownerToken, "dev@example.com");
    expect((await t.call("DELETE", `/v1/users/${dev.id}`, { token: ownerToken })).status).toBe(200);
    const disabled = await signInWithOidc(t, idp, "dev-sub");
    expect([disabled.status, disabled.body.code]).toEqual([403, "user_not_found"]);
  });

  it("answers 400 invalid_state for an unknown state and for a replayed one", async () => {
    const { t } = await readyApp();
    const unknown = await t.call("POST", "/v1/auth/oidc/callback", { body: { code: "c", state: "never-issued" } });
    expect([unknown.status, unknown.body.code]).toEqual([400, "invalid_state"]);
    const s = await start(t);
    const { code, state } = await idp.authorize(s.body.authorization_url, "owner-sub");
    expect((await t.call("POST", "/v1/auth/oidc/callback", { body: { code, state } })).status).toBe(200);
    const replay = await t.call("POST", "/v1/auth/oidc/callback", { body: { code, state } });
    expect([replay.status, replay.body.code]).toEqual([400, "invalid_state"]);
    const missing = await t.call("POST", "/v1/auth/oidc/callback", { body: { code } });
    expect([missing.status, missing.body.code]).toEqual([400, "invalid_input"]);
  });

  it("answers 400 auth_expired ten minutes after start (injected clock), and the maintenance job removes the row later", async () => {
    const { t } = await readyApp();
    const s = await start(t);
    const { code, state } = await idp.authorize(s.body.authorization_url, "owner-sub");
    const other = await start(t);
    t.clock.advance(600);
    const res = await t.call("POST", "/v1/auth/oidc/callback", { body: { code, state } });
    expect([res.status, res.body.code]).toEqual([400, "auth_expired"]);
    // The other expired row stays for the grace hour, then maintenance deletes it.
    await runMaintenance(t.deps);
    expect(await t.deps.db.select().from(oidcPendingRequests)).toHaveLength(1);
    t.clock.advance(3600);
    await runMaintenance(t.deps);
    expect(await t.deps.db.select().from(oidcPendingRequests)).toHaveLength(0);
    const gone = await t.call("POST", "/v1/auth/oidc/callback", { body: { code: "c", state: other.body.state } });
    expect([gone.status, gone.body.code]).toEqual([400, "invalid_state"]);
  });

  it("defaults redirect_uri to the standard callback: the public URL when set, else the request's origin", async () => {
    const { t } = await readyApp();
    const plain = await start(t, null);
    expect(plain.status).toBe(200);
    expect(new URL(plain.body.authorization_url).searchParams.get("redirect_uri")).toBe("http://localhost/auth/oidc/callback");
    await t.deps.db.insert(instanceSettings).values({
      key: "external_access_network",
      value: { public_url: "https://ci.example.com", artifact_delivery_url: null, allowed_origins: ["https://ci.example.com"] },
      updatedAt: t.clock.now(),
    });
    const configured = await start(t, null);
    expect(new URL(configured.body.authorization_url).searchParams.get("redirect_uri")).toBe("https://ci.example.com/auth/oidc/callback");
    const row = await t.deps.db
      .select()
      .from(oidcPendingRequests)
      .where(eq(oidcPendingRequests.redirectUri, "https://ci.example.com/auth/oidc/callback"))
      .get();
    expect(row?.purpose).toBe("login");
    const bad = await start(t, "no-url");
    expect([bad.status, bad.body.code]).toEqual([400, "invalid_redirect_uri"]);
  });

  it("signs in with a public client (no secret) and with a provider that keeps email in userinfo only", async () => {
    const strict = await startOidcProvider({ conformIdTokenClaims: true });
    try {
      const { t, ownerToken } = await readyApp();
      await invite(t, ownerToken, "dev@example.com");
      const put = await t.call("PUT", "/v1/settings/external-access/oidc", {
        token: ownerToken,
        body: { issuer_url: strict.issuer, client_id: TEST_PUBLIC_CLIENT_ID },
      });
      expect(put.status).toBe(200);
      expect(put.body.has_client_secret).toBe(false);
      const res = await signInWithOidc(t, strict, "dev-sub");
      expect(res.status).toBe(200);
      expect(res.body.user).toMatchObject({
        email: "dev@example.com",
        display_name: "Dev Eloper",
        avatar_url: "https://img.example.test/dev.png",
        oidc_subject: "dev-sub",
      });
      const noEmail = await signInWithOidc(t, strict, "no-email");
      expect([noEmail.status, noEmail.body.code]).toEqual([502, "missing_email"]);
    } finally {
      await strict.close();
    }
  });
});

describe("OIDC callback errors", () => {
  it("answers 502 token_exchange_error when the provider refuses the code", async () => {
    const { t } = await readyApp();
    const s = await start(t);
    const res = await t.call("POST", "/v1/auth/oidc/callback", { body: { code: "not-a-code-the-provider-issued", state: s.body.state } });
    expect([res.status, res.body.code]).toEqual([502, "token_exchange_error"]);
    expect(res.body.message).toContain("invalid_grant");
  });

  it("answers 502 token_exchange_error when the code is redeemed against the wrong redirect URI", async () => {
    const other = "https://other.example.test/cb";
    const idp2 = await startOidcProvider({ redirectUris: [TEST_REDIRECT_URI, other] });
    try {
      const { t, ownerToken } = await readyApp();
      await t.call("PUT", "/v1/settings/external-access/oidc", {
        token: ownerToken,
        body: { issuer_url: idp2.issuer, client_id: TEST_CLIENT_ID, client_secret: TEST_CLIENT_SECRET },
      });
      const first = await start(t, other);
      const second = await start(t, TEST_REDIRECT_URI);
      const { code } = await idp2.authorize(first.body.authorization_url, "owner-sub");
      // A code issued for one request, presented with another request's state (other verifier and redirect).
      const res = await t.call("POST", "/v1/auth/oidc/callback", { body: { code, state: second.body.state } });
      expect([res.status, res.body.code]).toEqual([502, "token_exchange_error"]);
    } finally {
      await idp2.close();
    }
  });

  it("answers 502 missing_email for an account without an email claim", async () => {
    const { t } = await readyApp();
    const res = await signInWithOidc(t, idp, "no-email");
    expect([res.status, res.body.code]).toEqual([502, "missing_email"]);
  });

  it("answers 502 oidc_discovery_error for start and callback when discovery fails", async () => {
    const { t, ownerToken } = await readyApp();
    const put = await t.call("PUT", "/v1/settings/external-access/oidc", {
      token: ownerToken,
      body: { issuer_url: forge.issuer, client_id: TEST_CLIENT_ID },
    });
    expect(put.status).toBe(200);
    const s = await start(t);
    forge.discoveryOverride = (res) => res.writeHead(200, { "content-type": "application/json" }).end("{not json");
    try {
      const startFail = await start(t);
      expect([startFail.status, startFail.body.code]).toEqual([502, "oidc_discovery_error"]);
      const cb = await t.call("POST", "/v1/auth/oidc/callback", { body: { code: "c", state: s.body.state } });
      expect([cb.status, cb.body.code]).toEqual([502, "oidc_discovery_error"]);
    } finally {
      forge.discoveryOverride = null;
    }
  });

  it("answers 500 decryption_error when the stored client secret cannot be opened", async () => {
    const { t } = await readyApp();
    const s = await start(t);
    const { code, state } = await idp.authorize(s.body.authorization_url, "owner-sub");
    const stored = await t.deps.db.select().from(instanceSettings).where(eq(instanceSettings.key, "oidc")).get();
    await t.deps.db
      .update(instanceSettings)
      .set({ value: { ...(stored!.value as Record<string, unknown>), client_secret_sealed: "v1.bm90LXNlYWxlZC13aXRoLXRoaXMta2V5" } })
      .where(eq(instanceSettings.key, "oidc"));
    const res = await t.call("POST", "/v1/auth/oidc/callback", { body: { code, state } });
    expect([res.status, res.body.code]).toEqual([500, "decryption_error"]);
  });

  it("answers 500 session_error when the session cannot be created", async () => {
    const { t } = await readyApp();
    const s = await start(t);
    const { code, state } = await idp.authorize(s.body.authorization_url, "owner-sub");
    await t.deps.db.run(sql`drop table user_sessions`);
    const res = await t.call("POST", "/v1/auth/oidc/callback", { body: { code, state } });
    expect([res.status, res.body.code]).toEqual([500, "session_error"]);
  });

  it("answers 500 store_error when the pending requests cannot be stored or read", async () => {
    const { t } = await readyApp();
    await t.deps.db.run(sql`drop table oidc_pending_requests`);
    const s = await start(t);
    expect([s.status, s.body.code]).toEqual([500, "store_error"]);
    const cb = await t.call("POST", "/v1/auth/oidc/callback", { body: { code: "c", state: "s" } });
    expect([cb.status, cb.body.code]).toEqual([500, "store_error"]);
  });
});

describe("pending request limit", () => {
  it("keeps at most 1000 pending requests: the 1001st start answers 429 too_many_pending, expired ones stop counting", async () => {
    const { t, ownerToken } = await readyApp();
    // The forge's discovery document is the cheapest to serve: 1000 real starts, twenty at a time, each batch from
    // its own address (remote mode: at most 20 pending per client, test/http/oidc-hardening.test.ts).
    await t.call("PUT", "/v1/settings/external-access/oidc", { token: ownerToken, body: { issuer_url: forge.issuer, client_id: TEST_CLIENT_ID } });
    await setInstance(t, { runtimeMode: "remote" });
    for (let i = 0; i < 50; i++) {
      const batch = await Promise.all(Array.from({ length: 20 }, () => startFrom(t, `10.0.${i}.1`)));
      for (const res of batch) expect(res.status).toBe(200);
    }
    const over = await startFrom(t, "10.1.0.1");
    expect([over.status, over.body.code]).toEqual([429, "too_many_pending"]);
    // Expired requests stop counting at once, before maintenance deletes them.
    expect((await t.deps.db.select({ n: sql<number>`count(*)` }).from(oidcPendingRequests).get())?.n).toBe(1000);
    t.clock.advance(600);
    expect((await startFrom(t, "10.1.0.1")).status).toBe(200);
  }, 120_000);

  it("never goes past 1000 under concurrent starts (the limit is checked by the insert itself)", async () => {
    const { t } = await readyApp();
    const now = t.clock.now();
    const rows = Array.from({ length: 990 }, (_, i) => ({
      stateHash: `seed-${i}`,
      purpose: "login" as const,
      codeVerifierSealed: "v1.x",
      nonce: "n",
      redirectUri: TEST_REDIRECT_URI,
      createdAt: now,
      expiresAt: now + 600,
    }));
    for (let i = 0; i < rows.length; i += 100) await t.deps.db.insert(oidcPendingRequests).values(rows.slice(i, i + 100));
    await setInstance(t, { runtimeMode: "remote" });
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => startFrom(t, `10.2.0.${i + 1}`)));
    expect(results.filter((r) => r.status === 200)).toHaveLength(10);
    for (const r of results.filter((r) => r.status !== 200)) expect([r.status, r.body.code]).toEqual([429, "too_many_pending"]);
    expect((await t.deps.db.select({ n: sql<number>`count(*)` }).from(oidcPendingRequests).get())?.n).toBe(1000);
  });
});
