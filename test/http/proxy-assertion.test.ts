// Signed identity assertions from a trusted proxy (docs/api.md §21), through app.request() with a real key set served
// over HTTP on 127.0.0.1 (test/helpers/jwks-issuer.ts) and the real outbound guard.
import { base64url, type CryptoKey, exportSPKI, importJWK, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { completeLocalSetup, startSetup, userWithRole } from "../helpers/factories.ts";
import { type JwksIssuer, startJwksIssuer } from "../helpers/jwks-issuer.ts";

const LOGIN = "/v1/auth/trusted-proxy/login";
const SETTINGS = "/v1/settings/trusted-proxy";
const HEADER = "cf-access-jwt-assertion";
const AUDIENCE = "hangar-audience-tag";
const OWNER = "owner@example.com";

let issuer: JwksIssuer;
beforeAll(async () => {
  issuer = await startJwksIssuer();
});
afterAll(() => issuer?.close());

function assertion() {
  return { header: "Cf-Access-Jwt-Assertion", jwks_url: issuer.jwksUrl, issuer: issuer.issuer, audience: AUDIENCE };
}

/** Setup in remote mode behind the proxy with an assertion; the owner claims through a signed assertion. */
async function readyWithAssertion(t: TestApp): Promise<void> {
  const session = await startSetup(t);
  const prefs = await t.call("POST", "/v1/setup/preferences", {
    token: session,
    body: { runtime_mode: "remote", remote_auth_mode: "trusted_proxy" },
  });
  expect(prefs.status).toBe(200);
  const configured = await t.call("POST", "/v1/setup/trusted-proxy/configure", { token: session, body: { assertion: assertion() } });
  expect(configured.status, configured.text).toBe(200);
  expect(configured.body.assertion).toEqual({ ...assertion(), header: HEADER, email_claim: "email" });
  const token = await issuer.sign(OWNER, { nowS: t.clock.now(), audience: AUDIENCE });
  const claimed = await t.call("POST", "/v1/setup/owner/claim-trusted-proxy", { token: session, headers: { [HEADER]: token } });
  expect(claimed.status, claimed.text).toBe(200);
  expect((await t.call("POST", "/v1/setup/complete", { token: session })).status).toBe(200);
}

async function login(t: TestApp, headers: Record<string, string>) {
  return t.call("POST", LOGIN, { headers: { "x-forwarded-for": "198.51.100.7", ...headers } });
}

function unsigned(header: Record<string, unknown>, payload: Record<string, unknown>): string {
  const part = (o: Record<string, unknown>) => base64url.encode(JSON.stringify(o));
  return `${part(header)}.${part(payload)}.`;
}

describe("sign-in with a signed assertion", () => {
  it("signs in with the assertion's email claim and ignores the plain identity header", async () => {
    const t = await makeTestApp();
    await readyWithAssertion(t);
    const token = await issuer.sign(OWNER, { nowS: t.clock.now(), audience: AUDIENCE });
    const res = await login(t, { [HEADER]: token, "x-hangar-user-email": "someone-else@example.com" });
    expect(res.status, res.text).toBe(200);
    expect(res.body.user).toMatchObject({ email: OWNER, role: "owner" });

    // The plain header alone no longer signs anyone in.
    const plain = await login(t, { "x-hangar-user-email": OWNER });
    expect([plain.status, plain.body.code]).toEqual([401, "trusted_proxy_assertion_missing"]);
  });

  it("refuses a wrong aud, a wrong iss, an expired token, alg none, HS256 with the public key and a bad email claim", async () => {
    const t = await makeTestApp();
    await readyWithAssertion(t);
    const now = t.clock.now();
    const key = issuer.keys()[0]!;
    const spki = await exportSPKI((await importJWK(key.publicJwk, "RS256", { extractable: true })) as CryptoKey);
    const claims = { email: OWNER, iss: issuer.issuer, aud: AUDIENCE, iat: now, exp: now + 300 };
    const refused: Record<string, string> = {
      "wrong aud": await issuer.sign(OWNER, { nowS: now, audience: "another-application" }),
      "wrong iss": await issuer.sign(OWNER, { nowS: now, audience: AUDIENCE, issuer: "https://evil.example.com" }),
      expired: await issuer.sign(OWNER, { nowS: now - 3600, audience: AUDIENCE, expiresInS: 300 }),
      "alg none": unsigned({ alg: "none", kid: key.kid, typ: "JWT" }, claims),
      // The classic confusion: the public key (which anyone can read at jwks_url) used as an HMAC secret.
      "HS256 with the public key": await new SignJWT(claims).setProtectedHeader({ alg: "HS256", kid: key.kid }).sign(new TextEncoder().encode(spki)),
      "not an email": await issuer.sign("not-an-email", { nowS: now, audience: AUDIENCE }),
      "not a JWT": "garbage",
      "signed by a key the issuer does not serve": await issuer.sign(OWNER, {
        nowS: now,
        audience: AUDIENCE,
        key: { ...(await issuer.newKey()), kid: key.kid },
      }),
    };
    for (const [why, token] of Object.entries(refused)) {
      const res = await login(t, { [HEADER]: token });
      expect([res.status, res.body.code], why).toEqual([401, "trusted_proxy_assertion_invalid"]);
      expect(res.text, why).not.toContain(token);
    }
    const missing = await login(t, {});
    expect([missing.status, missing.body.code]).toEqual([401, "trusted_proxy_assertion_missing"]);
    // The right token still works after all that.
    expect((await login(t, { [HEADER]: await issuer.sign(OWNER, { nowS: now, audience: AUDIENCE }) })).status).toBe(200);
  });

  it("caches the key set, refetches on an unknown kid after a rotation, and at most once per 30 s", async () => {
    const t = await makeTestApp();
    const before = issuer.fetches();
    await readyWithAssertion(t);
    const sign = (key?: Awaited<ReturnType<JwksIssuer["rotate"]>>) => issuer.sign(OWNER, { nowS: t.clock.now(), audience: AUDIENCE, key });
    expect((await login(t, { [HEADER]: await sign() })).status).toBe(200);
    expect((await login(t, { [HEADER]: await sign() })).status).toBe(200);
    // The claim fetched the key set once; the sign-ins used the cache.
    expect(issuer.fetches() - before).toBe(1);

    t.clock.advance(31);
    const rotated = await issuer.rotate();
    const afterRotation = await login(t, { [HEADER]: await sign(rotated) });
    expect(afterRotation.status, afterRotation.text).toBe(200);
    expect(issuer.fetches() - before).toBe(2);

    // Another unknown kid within 30 s: no fetch, refused.
    const stranger = await issuer.newKey();
    const early = await login(t, { [HEADER]: await sign(stranger) });
    expect([early.status, early.body.code]).toEqual([401, "trusted_proxy_assertion_invalid"]);
    t.clock.advance(20);
    expect((await login(t, { [HEADER]: await sign(stranger) })).status).toBe(401);
    expect(issuer.fetches() - before).toBe(2);

    // 30 s after the last fetch the issuer is asked again, and now serves the key.
    t.clock.advance(11);
    issuer.serve([rotated, stranger]);
    expect((await login(t, { [HEADER]: await sign(stranger) })).status).toBe(200);
    expect(issuer.fetches() - before).toBe(3);
    // Known kids never refetch.
    expect((await login(t, { [HEADER]: await sign(rotated) })).status).toBe(200);
    expect(issuer.fetches() - before).toBe(3);
  });
});

describe("PUT and GET /v1/settings/trusted-proxy", () => {
  it("lets an instance set up on one Mac open to the team through a signed-assertion proxy", async () => {
    const t = await makeTestApp();
    const { ownerToken } = await completeLocalSetup(t, OWNER);
    const before = await t.call("GET", SETTINGS, { token: ownerToken });
    expect(before.body).toMatchObject({ configured: false, in_use: false, assertion: null, configured_at: null });

    const put = await t.call("PUT", SETTINGS, {
      token: ownerToken,
      body: { user_email_header: "Tailscale-User-Login", assertion: { ...assertion(), email_claim: "upn" } },
    });
    expect(put.status, put.text).toBe(200);
    expect(put.body).toEqual({
      configured: true,
      in_use: true,
      user_email_header: "tailscale-user-login",
      trusted_proxy_cidrs: [],
      has_shared_secret: false,
      has_gateway_access_ticket: false,
      assertion: { ...assertion(), header: HEADER, email_claim: "upn" },
      configured_at: t.clock.now(),
    });
    expect((await t.call("GET", SETTINGS, { token: ownerToken })).body).toEqual(put.body);

    const network = await t.call("PUT", "/v1/settings/external-access/network", {
      token: ownerToken,
      body: { public_url: "https://ci.example.com", allowed_origins: ["https://ci.example.com"] },
    });
    expect(network.status).toBe(200);
    const remote = await t.call("PUT", "/v1/settings/preferences", { token: ownerToken, body: { runtime_mode: "remote" } });
    expect(remote.status, remote.text).toBe(200);
    const token = await issuer.sign("ignored@example.com", { nowS: t.clock.now(), audience: AUDIENCE, claims: { upn: OWNER } });
    const res = await login(t, { [HEADER]: token });
    expect(res.status, res.text).toBe(200);
    expect(res.body.user.email).toBe(OWNER);
  });

  it("is the owner's: an admin gets 403 external_access_owner_required; a developer cannot read it", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t, OWNER);
    const admin = await userWithRole(t, "admin");
    const put = await t.call("PUT", SETTINGS, { token: admin.token, body: { assertion: assertion() } });
    expect([put.status, put.body.code]).toEqual([403, "external_access_owner_required"]);
    expect((await t.call("GET", SETTINGS, { token: admin.token })).status).toBe(200);
    const developer = await userWithRole(t, "developer");
    const read = await t.call("GET", SETTINGS, { token: developer.token });
    expect([read.status, read.body.code]).toEqual([403, "insufficient_role"]);
  });

  it("answers 400 invalid_input for bad input and 400 destination_not_allowed for a key set at an internal address", async () => {
    const t = await makeTestApp();
    const { ownerToken } = await completeLocalSetup(t, OWNER);
    const bad: Record<string, unknown>[] = [
      { assertion: { ...assertion(), audience: undefined } },
      { assertion: { ...assertion(), issuer: "" } },
      { assertion: { ...assertion(), header: "Authorization" } },
      { assertion: { ...assertion(), header: "not a header" } },
      { assertion: { ...assertion(), email_claim: "e mail" } },
      { assertion: { ...assertion(), jwks_url: "not a url" } },
      { assertion: { ...assertion(), jwks_url: "ftp://keys.example.com/certs" } },
      { assertion: { ...assertion(), jwks_url: "https://user:pass@keys.example.com/certs" } },
      { assertion: "yes" },
      { trusted_proxy_cidrs: ["not-a-cidr"] },
    ];
    for (const body of bad) {
      const res = await t.call("PUT", SETTINGS, { token: ownerToken, body });
      expect([res.status, res.body.code], JSON.stringify(body)).toEqual([400, "invalid_input"]);
    }
    for (const url of ["https://10.0.0.8/certs", "https://169.254.169.254/latest/keys", "https://192.168.1.1/certs", "https://[fd00::1]/certs"]) {
      const res = await t.call("PUT", SETTINGS, { token: ownerToken, body: { assertion: { ...assertion(), jwks_url: url } } });
      expect([res.status, res.body.code], url).toEqual([400, "destination_not_allowed"]);
    }
    // Plain http only for an allowed destination; refused for a public name.
    const http = await t.call("PUT", SETTINGS, {
      token: ownerToken,
      body: { assertion: { ...assertion(), jwks_url: "http://keys.example.com/certs" } },
    });
    expect(http.status).toBe(400);
    expect((await t.call("GET", SETTINGS, { token: ownerToken })).body.configured).toBe(false);
  });

  it("refuses a loopback key set when HANGAR_OUTBOUND_ALLOW does not list it", async () => {
    const t = await makeTestApp({ config: { HANGAR_OUTBOUND_ALLOW: "" } });
    const { ownerToken } = await completeLocalSetup(t, OWNER);
    const res = await t.call("PUT", SETTINGS, { token: ownerToken, body: { assertion: assertion() } });
    expect([res.status, res.body.code]).toEqual([400, "destination_not_allowed"]);
  });
});
