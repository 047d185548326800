import { createHash } from "node:crypto";
import type { JWTPayload } from "jose";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { completeLocalSetup } from "../helpers/factories.ts";
import { startTokenForge, TEST_CLIENT_ID, TEST_CLIENT_SECRET, TEST_REDIRECT_URI, type TokenForge } from "../helpers/oidc-provider.ts";

/**
 * The ID-token checks, with tokens a correct provider never issues. The forge is only the provider: discovery,
 * JWKS download, code exchange and verification (jose) are Hangar's real code.
 */

let forge: TokenForge;
let t: TestApp;
const fetched: string[] = [];

beforeAll(async () => {
  forge = await startTokenForge();
  // Every outbound request goes through deps.fetch, the code exchange included.
  const recordingFetch: typeof fetch = (input, init) => {
    fetched.push(String(input instanceof Request ? input.url : input));
    return globalThis.fetch(input, init);
  };
  t = await makeTestApp({ deps: { fetch: recordingFetch } });
  const { ownerToken } = await completeLocalSetup(t, "owner@example.com");
  const put = await t.call("PUT", "/v1/settings/external-access/oidc", {
    token: ownerToken,
    body: { issuer_url: forge.issuer, client_id: TEST_CLIENT_ID, client_secret: TEST_CLIENT_SECRET },
  });
  expect(put.status).toBe(200);
});
afterAll(async () => {
  await forge.close();
});
beforeEach(() => {
  forge.discovery = {};
  forge.requests.length = 0;
  fetched.length = 0;
});

/** Starts a sign-in, makes the forge answer the exchange with `idToken(nonce)`, and calls back. */
async function signInWith(idToken: (nonce: string, now: number) => Promise<string | undefined>) {
  const start = await t.call("GET", `/v1/auth/oidc/start?redirect_uri=${encodeURIComponent(TEST_REDIRECT_URI)}`);
  expect(start.status).toBe(200);
  const url = new URL(start.body.authorization_url);
  const token = await idToken(url.searchParams.get("nonce")!, t.clock.now());
  forge.respondWith(() => ({ body: { access_token: "at", token_type: "Bearer", ...(token === undefined ? {} : { id_token: token }) } }));
  const res = await t.call("POST", "/v1/auth/oidc/callback", { body: { code: "forge-code", state: start.body.state } });
  return { res, url };
}

function claims(nonce: string, now: number, extra: JWTPayload = {}): JWTPayload {
  return {
    iss: forge.issuer,
    aud: TEST_CLIENT_ID,
    sub: "owner-sub",
    email: "owner@example.com",
    email_verified: true,
    nonce,
    iat: now,
    exp: now + 300,
    ...extra,
  };
}

function unsigned(payload: JWTPayload): string {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
  return `${part({ alg: "none", typ: "JWT" })}.${part(payload)}.`;
}

async function expectRefused(idToken: (nonce: string, now: number) => Promise<string | undefined>, code = "id_token_verification_error") {
  const { res } = await signInWith(idToken);
  expect([res.status, res.body.code]).toEqual([502, code]);
}

describe("ID token verification", () => {
  it("accepts a correct token, sends PKCE S256 and the client secret, and fetches discovery and JWKS through deps.fetch", async () => {
    const { res, url } = await signInWith((nonce, now) => forge.sign(claims(nonce, now)));
    expect(res.status).toBe(200);
    expect(res.body.user).toMatchObject({ email: "owner@example.com", oidc_subject: "owner-sub" });
    const exchange = forge.requests[0]!;
    expect(exchange.code).toBe("forge-code");
    expect(exchange.redirectUri).toBe(TEST_REDIRECT_URI);
    const challenge = createHash("sha256").update(exchange.codeVerifier!).digest("base64url");
    expect(url.searchParams.get("code_challenge")).toBe(challenge);
    expect(exchange.authorization).toBe(`Basic ${Buffer.from(`${TEST_CLIENT_ID}:${TEST_CLIENT_SECRET}`).toString("base64")}`);
    expect(fetched).toContain(`${forge.issuer}/.well-known/openid-configuration`);
    expect(fetched).toContain(`${forge.issuer}/jwks`);
  });

  it("refuses a token signed by a key the issuer does not publish", async () => {
    await expectRefused((nonce, now) => forge.sign(claims(nonce, now), { key: "other" }));
    await expectRefused((nonce, now) => forge.sign(claims(nonce, now), { key: "other", kid: "unknown-kid" }));
  });

  it("refuses a token for another audience, or for several without azp naming this client", async () => {
    await expectRefused((nonce, now) => forge.sign(claims(nonce, now, { aud: "someone-else" })));
    await expectRefused((nonce, now) => forge.sign(claims(nonce, now, { aud: [TEST_CLIENT_ID, "someone-else"] })));
    await expectRefused((nonce, now) => forge.sign(claims(nonce, now, { azp: "someone-else" })));
    const { res } = await signInWith((nonce, now) => forge.sign(claims(nonce, now, { aud: [TEST_CLIENT_ID, "api"], azp: TEST_CLIENT_ID })));
    expect(res.status).toBe(200);
  });

  it("refuses a token from another issuer", async () => {
    await expectRefused((nonce, now) => forge.sign(claims(nonce, now, { iss: "https://evil.example.com" })));
  });

  it("checks exp and iat against the injected clock with a 60-second skew", async () => {
    await expectRefused((nonce, now) => forge.sign(claims(nonce, now, { iat: now - 400, exp: now - 61 })));
    await expectRefused((nonce, now) => forge.sign(claims(nonce, now, { iat: now + 120, exp: now + 600 })));
    await expectRefused((nonce, now) => forge.sign(claims(nonce, now, { iat: now - 3600, exp: now + 600 })));
    await expectRefused((nonce, now) => forge.sign(claims(nonce, now, { iat: undefined })));
    const { res } = await signInWith((nonce, now) => forge.sign(claims(nonce, now, { iat: now - 300, exp: now - 30 })));
    expect(res.status).toBe(200);
  });

  it("compares the nonce with the one of this sign-in request", async () => {
    await expectRefused((_nonce, now) => forge.sign(claims("another-nonce", now)));
    await expectRefused((nonce, now) => forge.sign(claims(nonce, now, { nonce: undefined })));
  });

  it("never accepts alg none", async () => {
    forge.discovery = { id_token_signing_alg_values_supported: ["RS256", "none"] };
    await expectRefused(async (nonce, now) => unsigned(claims(nonce, now)));
  });

  it("accepts HMAC with the client secret only when the provider declares it", async () => {
    const hs = (nonce: string, now: number) => forge.sign(claims(nonce, now), { alg: "HS256", secret: TEST_CLIENT_SECRET });
    await expectRefused(hs);
    forge.discovery = { id_token_signing_alg_values_supported: ["RS256", "HS256"] };
    const { res } = await signInWith(hs);
    expect(res.status).toBe(200);
    await expectRefused((nonce, now) => forge.sign(claims(nonce, now), { alg: "HS256", secret: "a-different-secret-of-enough-length-1234" }));
  });

  it("honours the provider's declared algorithms", async () => {
    forge.discovery = { id_token_signing_alg_values_supported: ["ES256"] };
    await expectRefused((nonce, now) => forge.sign(claims(nonce, now)));
  });

  it("answers 502 missing_id_token when the token answer has none", async () => {
    await expectRefused(async () => undefined, "missing_id_token");
  });

  it("answers 502 token_exchange_error when the token endpoint fails", async () => {
    const start = await t.call("GET", `/v1/auth/oidc/start?redirect_uri=${encodeURIComponent(TEST_REDIRECT_URI)}`);
    forge.respondWith(() => ({ status: 500, body: { oops: true } }));
    const res = await t.call("POST", "/v1/auth/oidc/callback", { body: { code: "c", state: start.body.state } });
    expect([res.status, res.body.code]).toEqual([502, "token_exchange_error"]);
  });

  it("answers 502 missing_email for an unverified or malformed email", async () => {
    await expectRefused((nonce, now) => forge.sign(claims(nonce, now, { email_verified: false })), "missing_email");
    await expectRefused((nonce, now) => forge.sign(claims(nonce, now, { email: "not-an-email" })), "missing_email");
    await expectRefused((nonce, now) => forge.sign(claims(nonce, now, { email: undefined })), "missing_email");
  });
});
