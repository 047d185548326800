import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, SignJWT, type JWTPayload } from "jose";
import Provider, { type Configuration } from "oidc-provider";
import type { CallResult, TestApp } from "./app.ts";
import { startSetup } from "./factories.ts";

/**
 * Identity providers for the OIDC tests, all on 127.0.0.1 with a free port:
 * - `startOidcProvider()`: panva's certified `oidc-provider`, in-process, with a confidential and a public client
 *   and a few accounts; `authorize()` walks an authorization URL through its login and consent pages over HTTP,
 *   as a browser would, and answers the code the provider redirects back with.
 * - `startTokenForge()`: a minimal discovery + JWKS + token endpoint whose token answer the test writes, for the
 *   cases a correct provider never produces (a token signed by another key, for another audience, no ID token).
 */

export const TEST_CLIENT_ID = "hangar";
export const TEST_CLIENT_SECRET = "hangar-test-client-secret-0123456789abcdef";
export const TEST_PUBLIC_CLIENT_ID = "hangar-public";
/** Never dereferenced: `authorize()` stops at the provider's redirect and reads the code from it. */
export const TEST_REDIRECT_URI = "https://hangar.example.test/auth/oidc/callback";

export interface TestAccount {
  email?: string;
  email_verified?: boolean;
  name?: string;
  picture?: string;
}

/** Accounts known to the provider; the login name is the subject. `no-email` has no email claim at all. */
export const TEST_ACCOUNTS: Record<string, TestAccount> = {
  "owner-sub": { email: "owner@example.com", email_verified: true, name: "Olive Owner", picture: "https://img.example.test/olive.png" },
  "dev-sub": { email: "dev@example.com", email_verified: true, name: "Dev Eloper", picture: "https://img.example.test/dev.png" },
  "stranger-sub": { email: "stranger@example.com", email_verified: true, name: "Stranger" },
  "no-email": { name: "Nameless" },
  // docs/api.md §3's email_verified rule: one account the provider says is unverified, one it says nothing about.
  "unverified-sub": { email: "unverified@example.com", email_verified: false, name: "Unverified" },
  "unstated-sub": { email: "unstated@example.com", name: "Unstated" },
  // A second account at the provider claiming dev@example.com: subject pinning must refuse it once dev-sub is bound.
  "dev-twin-sub": { email: "dev@example.com", email_verified: true, name: "Dev Twin" },
};

export interface TestOidcProvider {
  issuer: string;
  provider: Provider;
  /** Drives an authorization URL through login (as `accountId`) and consent; answers the redirect's parameters. */
  authorize(authorizationUrl: string, accountId: string): Promise<{ code: string; state: string; location: string }>;
  close(): Promise<void>;
}

export async function startOidcProvider(options: { conformIdTokenClaims?: boolean; redirectUris?: string[] } = {}): Promise<TestOidcProvider> {
  const server = createServer();
  const port = await listen(server);
  const issuer = `http://127.0.0.1:${port}`;
  const { privateKey } = await generateKeyPair("RS256", { extractable: true });
  const signingKey = { ...(await exportJWK(privateKey)), kid: "test-rs256", alg: "RS256", use: "sig" };
  const redirectUris = options.redirectUris ?? [TEST_REDIRECT_URI];
  const configuration: Configuration = {
    clients: [
      {
        client_id: TEST_CLIENT_ID,
        client_secret: TEST_CLIENT_SECRET,
        redirect_uris: redirectUris,
        token_endpoint_auth_method: "client_secret_basic",
      },
      { client_id: TEST_PUBLIC_CLIENT_ID, redirect_uris: redirectUris, token_endpoint_auth_method: "none" },
    ],
    jwks: { keys: [signingKey] },
    cookies: { keys: ["hangar-test-cookie-key"] },
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name", "picture"] },
    // false puts the scope's claims into the ID token as Google, Okta and Keycloak do; true leaves them to userinfo.
    conformIdTokenClaims: options.conformIdTokenClaims ?? false,
    features: { devInteractions: { enabled: true } },
    // Explicit lifetimes keep the provider from printing a notice per artifact kind.
    ttl: { AccessToken: 600, AuthorizationCode: 60, IdToken: 600, Interaction: 600, Session: 3600, Grant: 3600 },
    async findAccount(_ctx, sub) {
      const account = TEST_ACCOUNTS[sub];
      if (!account) return undefined;
      return { accountId: sub, claims: async () => ({ sub, ...account }) };
    },
  };
  const provider = new Provider(issuer, configuration);
  // The provider logs a warning per dev feature; tests do not need them.
  provider.on("server_error", () => {});
  server.on("request", provider.callback());
  return {
    issuer,
    provider,
    authorize: (url, accountId) => driveAuthorization(url, accountId, redirectUris),
    close: () => closeServer(server),
  };
}

/**
 * What a browser does between Hangar's authorization URL and its callback: follow redirects, fill the login form
 * with the account id, submit the consent form, and stop at the redirect to the client's redirect URI.
 */
async function driveAuthorization(authorizationUrl: string, accountId: string, redirectUris: string[]) {
  const jar = new Map<string, string>();
  let next: { url: string; init: RequestInit } = { url: authorizationUrl, init: { method: "GET" } };
  for (let hop = 0; hop < 20; hop++) {
    const headers = new Headers(next.init.headers);
    if (jar.size > 0) headers.set("cookie", [...jar].map(([k, v]) => `${k}=${v}`).join("; "));
    const res = await fetch(next.url, { ...next.init, headers, redirect: "manual" });
    for (const cookie of res.headers.getSetCookie()) {
      const [pair] = cookie.split(";");
      const eq = pair!.indexOf("=");
      jar.set(pair!.slice(0, eq).trim(), pair!.slice(eq + 1).trim());
    }
    const location = res.headers.get("location");
    if (res.status >= 300 && res.status < 400 && location) {
      await res.body?.cancel();
      const target = new URL(location, next.url);
      if (redirectUris.some((uri) => target.href.startsWith(uri))) {
        const error = target.searchParams.get("error");
        if (error) throw new Error(`provider answered ${error}: ${target.searchParams.get("error_description") ?? ""}`);
        return { code: target.searchParams.get("code") ?? "", state: target.searchParams.get("state") ?? "", location: target.href };
      }
      next = { url: target.href, init: { method: "GET" } };
      continue;
    }
    const html = await res.text();
    if (res.status !== 200) throw new Error(`provider answered ${res.status}: ${html.slice(0, 300)}`);
    const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
    const prompt = /name="prompt" value="(\w+)"/.exec(html)?.[1];
    if (!action || !prompt) throw new Error(`no interaction form in the provider's page: ${html.slice(0, 300)}`);
    const form = new URLSearchParams({ prompt });
    if (prompt === "login") {
      form.set("login", accountId);
      form.set("password", "any password");
    }
    next = {
      url: new URL(action.replace(/&amp;/g, "&"), next.url).href,
      init: { method: "POST", body: form.toString(), headers: { "content-type": "application/x-www-form-urlencoded" } },
    };
  }
  throw new Error("too many redirects at the provider");
}

export interface TokenForgeRequest {
  code: string;
  codeVerifier: string | null;
  redirectUri: string | null;
  authorization: string | null;
}

export interface TokenForge {
  issuer: string;
  /** Signs a JWT with the key the forge publishes in its JWKS (or with `key: "other"`, a key it never publishes). */
  sign(payload: JWTPayload, options?: { key?: "published" | "other"; alg?: string; kid?: string; secret?: string }): Promise<string>;
  /** What the token endpoint answers to the next exchanges. */
  respondWith(handler: (req: TokenForgeRequest) => { status?: number; body: unknown }): void;
  /** Overrides parts of the discovery document (e.g. id_token_signing_alg_values_supported). */
  discovery: Record<string, unknown>;
  /** Raw answer of the discovery URL instead of the document (404, garbage, oversized, hanging). */
  discoveryOverride: ((res: ServerResponse) => void) | null;
  requests: TokenForgeRequest[];
  close(): Promise<void>;
}

export async function startTokenForge(): Promise<TokenForge> {
  const server = createServer();
  const port = await listen(server);
  const issuer = `http://127.0.0.1:${port}`;
  const published = await generateKeyPair("RS256", { extractable: true });
  const other = await generateKeyPair("RS256", { extractable: true });
  const publicJwk = { ...(await exportJWK(published.publicKey)), kid: "forge-1", alg: "RS256", use: "sig" };
  let handler: (req: TokenForgeRequest) => { status?: number; body: unknown } = () => ({ status: 400, body: { error: "invalid_grant" } });
  const forge: TokenForge = {
    issuer,
    discovery: {},
    discoveryOverride: null,
    requests: [],
    async sign(payload, o = {}) {
      const alg = o.alg ?? "RS256";
      const key = alg.startsWith("HS") ? new TextEncoder().encode(o.secret ?? "") : o.key === "other" ? other.privateKey : published.privateKey;
      return new SignJWT(payload).setProtectedHeader({ alg, kid: o.kid ?? (alg.startsWith("HS") ? undefined : "forge-1"), typ: "JWT" }).sign(key);
    },
    respondWith(h) {
      handler = h;
    },
    close: () => closeServer(server),
  };
  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      const url = new URL(req.url ?? "/", issuer);
      if (url.pathname === "/.well-known/openid-configuration") {
        if (forge.discoveryOverride) return forge.discoveryOverride(res);
        return sendJson(res, 200, {
          issuer,
          authorization_endpoint: `${issuer}/authorize`,
          token_endpoint: `${issuer}/token`,
          jwks_uri: `${issuer}/jwks`,
          response_types_supported: ["code"],
          subject_types_supported: ["public"],
          id_token_signing_alg_values_supported: ["RS256"],
          ...forge.discovery,
        });
      }
      if (url.pathname === "/jwks") return sendJson(res, 200, { keys: [publicJwk] });
      if (url.pathname === "/token" && req.method === "POST") {
        const form = new URLSearchParams(await readBody(req));
        const request: TokenForgeRequest = {
          code: form.get("code") ?? "",
          codeVerifier: form.get("code_verifier"),
          redirectUri: form.get("redirect_uri"),
          authorization: req.headers.authorization ?? null,
        };
        forge.requests.push(request);
        const answer = handler(request);
        return sendJson(res, answer.status ?? 200, answer.body);
      }
      sendJson(res, 404, { error: "not_found" });
    })();
  });
  return forge;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port));
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Flows through Hangar's API, shared by the OIDC test files

/** Bootstrap token → setup session → OIDC configure. Answers the setup session token. */
export async function configureOidcInSetup(
  t: TestApp,
  issuer: string,
  client: { clientId?: string; clientSecret?: string | null } = {},
): Promise<string> {
  const setupToken = await startSetup(t);
  const secret = client.clientSecret === undefined ? TEST_CLIENT_SECRET : client.clientSecret;
  const body = { issuer_url: issuer, client_id: client.clientId ?? TEST_CLIENT_ID, ...(secret === null ? {} : { client_secret: secret }) };
  const res = await t.call("POST", "/v1/setup/oidc/configure", { token: setupToken, body });
  if (res.status !== 200) throw new Error(`oidc/configure: ${res.status} ${res.text}`);
  return setupToken;
}

/** The whole OIDC setup: configure, owner through the provider (as `accountId`), complete. */
export async function completeOidcSetup(t: TestApp, idp: TestOidcProvider, accountId = "owner-sub"): Promise<void> {
  const setupToken = await configureOidcInSetup(t, idp.issuer);
  const start = await t.call("POST", "/v1/setup/owner/start-oidc", { token: setupToken, body: { redirect_uri: TEST_REDIRECT_URI } });
  if (start.status !== 200) throw new Error(`start-oidc: ${start.status} ${start.text}`);
  const { code, state } = await idp.authorize(start.body.authorization_url, accountId);
  const verified = await t.call("POST", "/v1/setup/owner/verify-oidc", { token: setupToken, body: { code, state } });
  if (verified.status !== 200) throw new Error(`verify-oidc: ${verified.status} ${verified.text}`);
  const done = await t.call("POST", "/v1/setup/complete", { token: setupToken });
  if (done.status !== 200) throw new Error(`complete: ${done.status} ${done.text}`);
}

/** GET /v1/auth/oidc/start, the provider's pages as `accountId`, POST /v1/auth/oidc/callback. */
export async function signInWithOidc(t: TestApp, idp: TestOidcProvider, accountId: string): Promise<CallResult> {
  const start = await t.call("GET", `/v1/auth/oidc/start?redirect_uri=${encodeURIComponent(TEST_REDIRECT_URI)}`);
  if (start.status !== 200) throw new Error(`oidc/start: ${start.status} ${start.text}`);
  const { code, state } = await idp.authorize(start.body.authorization_url, accountId);
  return t.call("POST", "/v1/auth/oidc/callback", { body: { code, state } });
}

/** The wall clock in epoch seconds: a real provider stamps its tokens with it, so the ManualClock must agree. */
export function wallClockSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
