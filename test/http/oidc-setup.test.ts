import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { instanceSettings, oidcPendingRequests, users } from "../../src/db/schema/index.ts";
import type { SecretBox } from "../../src/domain/common/crypto.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { startSetup } from "../helpers/factories.ts";
import {
  configureOidcInSetup,
  startOidcProvider,
  startTokenForge,
  TEST_CLIENT_ID,
  TEST_CLIENT_SECRET,
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

/** A test app whose ManualClock starts at the wall clock, as the provider's tokens do. */
async function freshApp(deps?: Parameters<typeof makeTestApp>[0]): Promise<TestApp> {
  const t = await makeTestApp(deps);
  t.clock.set(wallClockSeconds());
  return t;
}

function configure(t: TestApp, token: string, body: unknown) {
  return t.call("POST", "/v1/setup/oidc/configure", { token, body });
}

async function startOwner(t: TestApp, token: string) {
  const res = await t.call("POST", "/v1/setup/owner/start-oidc", { token, body: { redirect_uri: TEST_REDIRECT_URI } });
  expect(res.status).toBe(200);
  return res.body as { authorization_url: string; state: string };
}

describe("POST /v1/setup/oidc/configure", () => {
  it("discovers the issuer, stores the secret sealed, and moves to idp_configured", async () => {
    const t = await freshApp();
    const token = await startSetup(t);
    const res = await configure(t, token, { issuer_url: idp.issuer, client_id: TEST_CLIENT_ID, client_secret: TEST_CLIENT_SECRET });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ state: "idp_configured", discovered_issuer: idp.issuer, session_expires_at: expect.any(Number) });
    const status = await t.call("GET", "/v1/public/setup-status");
    expect(status.body.state).toBe("idp_configured");
    const stored = await t.deps.db.select().from(instanceSettings).where(eq(instanceSettings.key, "oidc")).get();
    const text = JSON.stringify(stored?.value);
    expect(text).not.toContain(TEST_CLIENT_SECRET);
    const sealed = (stored?.value as { client_secret_sealed: string }).client_secret_sealed;
    expect(await t.deps.secrets.open(sealed)).toBe(TEST_CLIENT_SECRET);
    // Repeating it in idp_configured is allowed (the operator fixes a typo).
    const again = await configure(t, token, { issuer_url: `${idp.issuer}/`, client_id: TEST_CLIENT_ID });
    expect(again.status).toBe(200);
    expect(again.body.discovered_issuer).toBe(idp.issuer);
  });

  it("answers the setup session errors", async () => {
    const t = await freshApp();
    const token = await startSetup(t);
    const body = { issuer_url: idp.issuer, client_id: TEST_CLIENT_ID };
    expect((await t.call("POST", "/v1/setup/oidc/configure", { body })).body.code).toBe("missing_auth");
    const invalid = await configure(t, "not-a-session", body);
    expect([invalid.status, invalid.body.code]).toEqual([401, "invalid_session"]);
    t.clock.advance(31 * 60);
    const expired = await configure(t, token, body);
    expect([expired.status, expired.body.code]).toEqual([401, "session_expired"]);
  });

  it("answers 400 invalid_input for a bad body or a plain-http issuer that is not loopback", async () => {
    const t = await freshApp();
    const token = await startSetup(t);
    for (const body of [
      { client_id: TEST_CLIENT_ID },
      { issuer_url: idp.issuer },
      { issuer_url: idp.issuer, client_id: "" },
      { issuer_url: "not a url", client_id: TEST_CLIENT_ID },
      { issuer_url: "http://idp.example.com", client_id: TEST_CLIENT_ID },
      { issuer_url: "http://10.0.0.5:8080", client_id: TEST_CLIENT_ID },
      { issuer_url: "ftp://idp.example.com", client_id: TEST_CLIENT_ID },
      { issuer_url: `${idp.issuer}?x=1`, client_id: TEST_CLIENT_ID },
    ]) {
      const res = await configure(t, token, body);
      expect([res.status, res.body.code], JSON.stringify(body)).toEqual([400, "invalid_input"]);
    }
    expect((await t.call("GET", "/v1/public/setup-status")).body.state).toBe("bootstrap_pending");
  });

  it("answers 400 oidc_discovery_failed for 404, garbage, a wrong issuer, an oversized or incomplete document, or no server", async () => {
    const t = await freshApp();
    const token = await startSetup(t);
    const cases: Array<[string, TokenForge["discoveryOverride"]]> = [
      ["404", (res) => res.writeHead(404).end("not here")],
      ["garbage", (res) => res.writeHead(200, { "content-type": "application/json" }).end("<html>hello</html>")],
      ["array", (res) => res.writeHead(200, { "content-type": "application/json" }).end("[1,2]")],
      [
        "wrong issuer",
        (res) =>
          res.writeHead(200, { "content-type": "application/json" }).end(
            JSON.stringify({
              issuer: "https://evil.example.com",
              authorization_endpoint: "https://evil.example.com/a",
              token_endpoint: "https://evil.example.com/t",
              jwks_uri: "https://evil.example.com/j",
            }),
          ),
      ],
      [
        "no jwks_uri",
        (res) =>
          res
            .writeHead(200, { "content-type": "application/json" })
            .end(JSON.stringify({ issuer: forge.issuer, authorization_endpoint: `${forge.issuer}/a`, token_endpoint: `${forge.issuer}/t` })),
      ],
      [
        "http endpoint off loopback",
        (res) =>
          res.writeHead(200, { "content-type": "application/json" }).end(
            JSON.stringify({
              issuer: forge.issuer,
              authorization_endpoint: "http://idp.example.com/a",
              token_endpoint: `${forge.issuer}/t`,
              jwks_uri: `${forge.issuer}/j`,
            }),
          ),
      ],
      [
        "oversized",
        (res) =>
          res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ issuer: forge.issuer, padding: "x".repeat(600 * 1024) })),
      ],
      [
        "oversized, chunked",
        (res) => {
          res.writeHead(200, { "content-type": "application/json" });
          for (let i = 0; i < 40; i++) res.write("x".repeat(16 * 1024));
          res.end();
        },
      ],
      ["redirect", (res) => res.writeHead(302, { location: `${idp.issuer}/.well-known/openid-configuration` }).end()],
    ];
    try {
      for (const [name, override] of cases) {
        forge.discoveryOverride = override;
        const res = await configure(t, token, { issuer_url: forge.issuer, client_id: TEST_CLIENT_ID });
        expect([res.status, res.body.code], name).toEqual([400, "oidc_discovery_failed"]);
      }
    } finally {
      forge.discoveryOverride = null;
    }
    const closed = await startTokenForge();
    const closedIssuer = closed.issuer;
    await closed.close();
    const unreachable = await configure(t, token, { issuer_url: closedIssuer, client_id: TEST_CLIENT_ID });
    expect([unreachable.status, unreachable.body.code]).toEqual([400, "oidc_discovery_failed"]);
    expect((await t.call("GET", "/v1/public/setup-status")).body.state).toBe("bootstrap_pending");
  });

  it("gives up on a discovery URL that does not answer within 5 seconds", async () => {
    const t = await freshApp();
    const token = await startSetup(t);
    forge.discoveryOverride = (res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write("{"); // and never more
    };
    try {
      const started = performance.now();
      const res = await configure(t, token, { issuer_url: forge.issuer, client_id: TEST_CLIENT_ID });
      const elapsed = performance.now() - started;
      expect([res.status, res.body.code]).toEqual([400, "oidc_discovery_failed"]);
      expect(res.body.message).toContain("5 s");
      expect(elapsed).toBeGreaterThanOrEqual(4_900);
      expect(elapsed).toBeLessThan(8_000);
    } finally {
      forge.discoveryOverride = null;
    }
  });

  it("answers 500 encryption_error when the secret cannot be sealed", async () => {
    const broken: SecretBox = {
      seal: async () => {
        throw new Error("no key");
      },
      open: async () => {
        throw new Error("no key");
      },
    };
    const t = await freshApp({ deps: { secrets: broken } });
    const token = await startSetup(t);
    const res = await configure(t, token, { issuer_url: idp.issuer, client_id: TEST_CLIENT_ID, client_secret: TEST_CLIENT_SECRET });
    expect([res.status, res.body.code]).toEqual([500, "encryption_error"]);
    expect(res.text).not.toContain(TEST_CLIENT_SECRET);
  });

  it("answers 409 invalid_state once the owner exists and 409 already_configured after completion", async () => {
    const t = await freshApp();
    const token = await configureOidcInSetup(t, idp.issuer);
    const { authorization_url } = await startOwner(t, token);
    const { code, state } = await idp.authorize(authorization_url, "owner-sub");
    expect((await t.call("POST", "/v1/setup/owner/verify-oidc", { token, body: { code, state } })).status).toBe(200);
    const body = { issuer_url: idp.issuer, client_id: TEST_CLIENT_ID };
    const late = await configure(t, token, body);
    expect([late.status, late.body.code]).toEqual([409, "invalid_state"]);
    expect((await t.call("POST", "/v1/setup/complete", { token })).status).toBe(200);
    const done = await configure(t, token, body);
    expect([done.status, done.body.code]).toEqual([409, "already_configured"]);
  });
});

describe("POST /v1/setup/owner/start-oidc", () => {
  it("answers an authorization URL with PKCE S256, a state and a nonce, and stores only hashes and sealed values", async () => {
    const t = await freshApp();
    const token = await configureOidcInSetup(t, idp.issuer);
    const res = await startOwner(t, token);
    const url = new URL(res.authorization_url);
    expect(url.origin + url.pathname).toBe(`${idp.issuer}/auth`);
    expect(Object.fromEntries(url.searchParams)).toMatchObject({
      response_type: "code",
      client_id: TEST_CLIENT_ID,
      redirect_uri: TEST_REDIRECT_URI,
      state: res.state,
      code_challenge_method: "S256",
      scope: "openid email profile",
    });
    expect(url.searchParams.get("code_challenge")).toMatch(/^[\w-]{43}$/);
    expect(url.searchParams.get("nonce")).toMatch(/^[\w-]{43}$/);
    const rows = await t.deps.db.select().from(oidcPendingRequests);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ purpose: "setup_owner", redirectUri: TEST_REDIRECT_URI, expiresAt: t.clock.now() + 600 });
    expect(rows[0]!.stateHash).not.toBe(res.state);
    expect(JSON.stringify(rows)).not.toContain(res.state);
    expect(rows[0]!.codeVerifierSealed.startsWith("v1.")).toBe(true);
  });

  it("answers 400 invalid_redirect_uri for a malformed redirect URI and 400 invalid_input without one", async () => {
    const t = await freshApp();
    const token = await configureOidcInSetup(t, idp.issuer);
    for (const redirect_uri of ["not a url", "/relative/callback", "ftp://host/cb", "https://host/cb#frag", "javascript:alert(1)"]) {
      const res = await t.call("POST", "/v1/setup/owner/start-oidc", { token, body: { redirect_uri } });
      expect([res.status, res.body.code], redirect_uri).toEqual([400, "invalid_redirect_uri"]);
    }
    const missing = await t.call("POST", "/v1/setup/owner/start-oidc", { token, body: {} });
    expect([missing.status, missing.body.code]).toEqual([400, "invalid_input"]);
  });

  it("answers 409 invalid_state outside idp_configured and 409 already_configured after completion", async () => {
    const t = await freshApp();
    const token = await startSetup(t);
    const early = await t.call("POST", "/v1/setup/owner/start-oidc", { token, body: { redirect_uri: TEST_REDIRECT_URI } });
    expect([early.status, early.body.code]).toEqual([409, "invalid_state"]);
    const created = await t.call("POST", "/v1/setup/local-owner/create", { token, body: { email: "owner@example.com" } });
    expect(created.status).toBe(200);
    const late = await t.call("POST", "/v1/setup/owner/start-oidc", { token, body: { redirect_uri: TEST_REDIRECT_URI } });
    expect([late.status, late.body.code]).toEqual([409, "invalid_state"]);
    await t.call("POST", "/v1/setup/complete", { token });
    const done = await t.call("POST", "/v1/setup/owner/start-oidc", { token, body: { redirect_uri: TEST_REDIRECT_URI } });
    expect([done.status, done.body.code]).toEqual([409, "already_configured"]);
  });

  it("answers 429 too_many_pending once 1000 requests are pending (shared with sign-in starts)", async () => {
    const t = await freshApp();
    const token = await configureOidcInSetup(t, forge.issuer);
    const now = t.clock.now();
    const seeded = Array.from({ length: 999 }, (_, i) => ({
      stateHash: `seed-${i}`,
      purpose: i % 2 ? ("login" as const) : ("setup_owner" as const),
      codeVerifierSealed: "v1.x",
      nonce: "n",
      redirectUri: TEST_REDIRECT_URI,
      createdAt: now,
      expiresAt: now + 600,
    }));
    for (let i = 0; i < seeded.length; i += 100) await t.deps.db.insert(oidcPendingRequests).values(seeded.slice(i, i + 100));
    const thousandth = await t.call("POST", "/v1/setup/owner/start-oidc", { token, body: { redirect_uri: TEST_REDIRECT_URI } });
    expect(thousandth.status).toBe(200);
    const over = await t.call("POST", "/v1/setup/owner/start-oidc", { token, body: { redirect_uri: TEST_REDIRECT_URI } });
    expect([over.status, over.body.code]).toEqual([429, "too_many_pending"]);
  });

  it("answers 502 oidc_discovery_error when the provider's discovery fails", async () => {
    const t = await freshApp();
    const token = await configureOidcInSetup(t, forge.issuer);
    forge.discoveryOverride = (res) => res.writeHead(500).end("down");
    try {
      const res = await t.call("POST", "/v1/setup/owner/start-oidc", { token, body: { redirect_uri: TEST_REDIRECT_URI } });
      expect([res.status, res.body.code]).toEqual([502, "oidc_discovery_error"]);
    } finally {
      forge.discoveryOverride = null;
    }
    expect(await t.deps.db.select().from(oidcPendingRequests)).toHaveLength(0);
  });
});

describe("POST /v1/setup/owner/verify-oidc", () => {
  it("creates the owner with the provider's email, subject and name, and moves to owner_created", async () => {
    const t = await freshApp();
    const token = await configureOidcInSetup(t, idp.issuer);
    const { authorization_url } = await startOwner(t, token);
    const { code, state } = await idp.authorize(authorization_url, "owner-sub");
    const res = await t.call("POST", "/v1/setup/owner/verify-oidc", { token, body: { code, state } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      state: "owner_created",
      owner_email: "owner@example.com",
      oidc_subject: "owner-sub",
      session_expires_at: expect.any(Number),
    });
    const owner = await t.deps.db.select().from(users).where(eq(users.email, "owner@example.com")).get();
    expect(owner).toMatchObject({ role: "owner", status: "active", oidcSubject: "owner-sub", displayName: "Olive Owner" });
    expect(await t.deps.db.select().from(oidcPendingRequests)).toHaveLength(0);
    // One use each: the same state again is unknown.
    const replay = await t.call("POST", "/v1/setup/owner/verify-oidc", { token, body: { code, state } });
    expect([replay.status, replay.body.code]).toEqual([409, "invalid_state"]);
  });

  it("answers 400 invalid_state for an unknown state, and for a replayed one", async () => {
    const t = await freshApp();
    const token = await configureOidcInSetup(t, idp.issuer);
    const unknown = await t.call("POST", "/v1/setup/owner/verify-oidc", { token, body: { code: "x", state: "never-issued" } });
    expect([unknown.status, unknown.body.code]).toEqual([400, "invalid_state"]);
    const { authorization_url, state } = await startOwner(t, token);
    // The first use fails at the provider (bad code), which still spends the state.
    const first = await t.call("POST", "/v1/setup/owner/verify-oidc", { token, body: { code: "bogus", state } });
    expect([first.status, first.body.code]).toEqual([502, "token_exchange_error"]);
    const { code } = await idp.authorize(authorization_url, "owner-sub");
    const replay = await t.call("POST", "/v1/setup/owner/verify-oidc", { token, body: { code, state } });
    expect([replay.status, replay.body.code]).toEqual([400, "invalid_state"]);
    expect((await t.call("GET", "/v1/public/setup-status")).body.state).toBe("idp_configured");
  });

  it("answers 400 auth_expired for a request older than 10 minutes (injected clock)", async () => {
    const t = await freshApp();
    const token = await configureOidcInSetup(t, idp.issuer);
    const { authorization_url } = await startOwner(t, token);
    const { code, state } = await idp.authorize(authorization_url, "owner-sub");
    t.clock.advance(601);
    const res = await t.call("POST", "/v1/setup/owner/verify-oidc", { token, body: { code, state } });
    expect([res.status, res.body.code]).toEqual([400, "auth_expired"]);
    // Just inside the window still works.
    t.clock.set(wallClockSeconds());
    const second = await startOwner(t, token);
    const again = await idp.authorize(second.authorization_url, "owner-sub");
    t.clock.advance(599);
    const ok = await t.call("POST", "/v1/setup/owner/verify-oidc", { token, body: again });
    expect(ok.status).toBe(200);
  });

  it("answers 409 already_configured after completion", async () => {
    const t = await freshApp();
    const token = await startSetup(t);
    await t.call("POST", "/v1/setup/local-owner/create", { token, body: { email: "owner@example.com" } });
    await t.call("POST", "/v1/setup/complete", { token });
    const res = await t.call("POST", "/v1/setup/owner/verify-oidc", { token, body: { code: "c", state: "s" } });
    expect([res.status, res.body.code]).toEqual([409, "already_configured"]);
  });

  it("answers 502 token_exchange_error when the provider refuses the code or the client", async () => {
    const t = await freshApp();
    const token = await configureOidcInSetup(t, idp.issuer, { clientSecret: "wrong-secret" });
    const { authorization_url } = await startOwner(t, token);
    const { code, state } = await idp.authorize(authorization_url, "owner-sub");
    const res = await t.call("POST", "/v1/setup/owner/verify-oidc", { token, body: { code, state } });
    expect([res.status, res.body.code]).toEqual([502, "token_exchange_error"]);
    expect(res.body.message).toContain("invalid_client");
    expect(res.text).not.toContain("wrong-secret");
  });

  it("answers 502 missing_email for an account without an email claim", async () => {
    const t = await freshApp();
    const token = await configureOidcInSetup(t, idp.issuer);
    const { authorization_url } = await startOwner(t, token);
    const { code, state } = await idp.authorize(authorization_url, "no-email");
    const res = await t.call("POST", "/v1/setup/owner/verify-oidc", { token, body: { code, state } });
    expect([res.status, res.body.code]).toEqual([502, "missing_email"]);
    expect((await t.call("GET", "/v1/public/setup-status")).body.state).toBe("idp_configured");
  });

  it("answers 502 missing_id_token and id_token_verification_error from a provider that misbehaves", async () => {
    const t = await freshApp();
    const token = await configureOidcInSetup(t, forge.issuer);
    const first = await startOwner(t, token);
    forge.respondWith(() => ({ body: { access_token: "at", token_type: "Bearer" } }));
    const missing = await t.call("POST", "/v1/setup/owner/verify-oidc", { token, body: { code: "c", state: first.state } });
    expect([missing.status, missing.body.code]).toEqual([502, "missing_id_token"]);

    const second = await startOwner(t, token);
    const nonce = new URL(second.authorization_url).searchParams.get("nonce");
    const now = t.clock.now();
    const forged = await forge.sign(
      { iss: forge.issuer, aud: TEST_CLIENT_ID, sub: "owner-sub", email: "owner@example.com", nonce, iat: now, exp: now + 300 },
      { key: "other" },
    );
    forge.respondWith(() => ({ body: { access_token: "at", token_type: "Bearer", id_token: forged } }));
    const bad = await t.call("POST", "/v1/setup/owner/verify-oidc", { token, body: { code: "c", state: second.state } });
    expect([bad.status, bad.body.code]).toEqual([502, "id_token_verification_error"]);
    expect((await t.call("GET", "/v1/public/setup-status")).body.state).toBe("idp_configured");
  });

  it("answers 502 oidc_discovery_error when discovery fails at verification", async () => {
    const t = await freshApp();
    const token = await configureOidcInSetup(t, forge.issuer);
    const { state } = await startOwner(t, token);
    forge.discoveryOverride = (res) => res.writeHead(404).end();
    try {
      const res = await t.call("POST", "/v1/setup/owner/verify-oidc", { token, body: { code: "c", state } });
      expect([res.status, res.body.code]).toEqual([502, "oidc_discovery_error"]);
    } finally {
      forge.discoveryOverride = null;
    }
  });

  it("answers 500 decryption_error when the stored client secret cannot be opened", async () => {
    const t = await freshApp();
    const token = await configureOidcInSetup(t, idp.issuer);
    const { authorization_url } = await startOwner(t, token);
    const { code, state } = await idp.authorize(authorization_url, "owner-sub");
    // As after master.key was replaced: sealed with some other key.
    const stored = await t.deps.db.select().from(instanceSettings).where(eq(instanceSettings.key, "oidc")).get();
    const value = { ...(stored!.value as Record<string, unknown>), client_secret_sealed: "v1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" };
    await t.deps.db.update(instanceSettings).set({ value }).where(eq(instanceSettings.key, "oidc"));
    const res = await t.call("POST", "/v1/setup/owner/verify-oidc", { token, body: { code, state } });
    expect([res.status, res.body.code]).toEqual([500, "decryption_error"]);
  });

  it("answers 500 store_error when the pending-request table cannot be read", async () => {
    const t = await freshApp();
    const token = await configureOidcInSetup(t, idp.issuer);
    await t.deps.db.run(sql`drop table oidc_pending_requests`);
    const res = await t.call("POST", "/v1/setup/owner/verify-oidc", { token, body: { code: "c", state: "s" } });
    expect([res.status, res.body.code]).toEqual([500, "store_error"]);
    expect(res.text).not.toContain("oidc_pending_requests");
    const start = await t.call("POST", "/v1/setup/owner/start-oidc", { token, body: { redirect_uri: TEST_REDIRECT_URI } });
    expect([start.status, start.body.code]).toEqual([500, "store_error"]);
  });
});
