import { and, count, eq, gt, lte, sql } from "drizzle-orm";
import type { FetchImplementation, JWTPayload, JWTVerifyGetKey } from "jose";
import type { OidcPurpose, SetupState } from "../../db/schema/constants.ts";
import { instance, instanceSettings, oidcPendingRequests } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError, describeError } from "../../errors.ts";
import { auditStatement, recordAudit } from "../common/audit.ts";
import { constantTimeEqual, randomToken, sha256Hex } from "../common/crypto.ts";
import {
  checkDestinationNow,
  checkUrlWithoutDns,
  DestinationNotAllowedError,
  findDestinationNotAllowed,
  type OutboundAllowList,
} from "../common/outbound.ts";
import { loadInstance, readSetting, writeSettingStatement } from "../setup/instance.ts";
import { readNetworkSettings } from "../settings/network-settings.ts";
import type { OidcClient } from "./oidc-client.ts";
import { assertSetupOperation, createOwner, transitionStatement } from "../setup/setup.ts";
import { newOwnerValues, signIn, type UserRow } from "./users.ts";
import { readStreamCapped } from "../common/streams.ts";

/**
 * OIDC sign-in (docs/spec.md Auth, docs/api.md §3): discovery, the authorization request (PKCE S256, state, nonce) and the
 * ID-token check. arctic's generic OAuth2Client builds the authorization URL and stays inside this module (its
 * README marks it deprecated); the code exchange is our own POST through deps.fetch, and
 * jose checks the ID token. Pending requests live in the database so a restart or a second daemon can finish them.
 */

type Deps = Pick<AppDeps, "db" | "clock" | "secrets" | "fetch" | "log" | "config" | "checkDestination">;

/** Key of the OIDC document in instance_settings. */
export const OIDC_SETTING = "oidc";
export const DISCOVERY_TIMEOUT_MS = 5_000;
/** Discovery documents are a few KiB; a provider answering megabytes is broken or hostile. */
export const MAX_DISCOVERY_BYTES = 256 * 1024;
export const TOKEN_EXCHANGE_TIMEOUT_MS = 10_000;
export const PENDING_TTL_S = 10 * 60;
export const MAX_PENDING = 1000;
/** Pending starts per client (docs/api.md §3), so that no one client can exhaust the 1000. */
export const MAX_PENDING_PER_CLIENT = 20;
/** Expired rows stay this long so a late callback hears auth_expired rather than invalid_state. */
export const EXPIRED_PENDING_GRACE_S = 60 * 60;
/** Tolerated clock difference with the provider for exp and iat. */
export const CLOCK_SKEW_S = 60;
const SCOPES = ["openid", "email", "profile"];
/** Asymmetric algorithms only by default: never `none`, and HMAC only when the provider declares it. */
const ASYMMETRIC_ALGS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"];
const HMAC_ALGS = ["HS256", "HS384", "HS512"];

/** The stored document; the client secret is sealed with the key file's box. */
export interface StoredOidcSettings {
  issuer_url: string;
  discovered_issuer: string;
  client_id: string;
  client_secret_sealed: string | null;
  /** Accept ID tokens whose email_verified is absent or false (docs/api.md §3); off unless the owner says so. */
  trust_unverified_email?: boolean;
  configured_at: number;
}

export interface OidcConfigureInput {
  issuer_url: string;
  client_id: string;
  /** Omitted keeps the stored secret when issuer and client are unchanged; null removes it. */
  client_secret?: string | null;
  /** Omitted keeps the stored choice when issuer and client are unchanged, else false. */
  trust_unverified_email?: boolean;
}

interface DiscoveryDocument {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  jwks_uri: string;
  userinfo_endpoint?: string;
  id_token_signing_alg_values_supported?: string[];
}

export interface OidcIdentity {
  email: string;
  /** The ID token's `iss`: with `subject`, the identity a user is bound to at its first OIDC sign-in. */
  issuer: string;
  subject: string;
  name: string | null;
  picture: string | null;
}

class DiscoveryFailure extends Error {}

// ---------------------------------------------------------------------------------------------------------------
// URLs and bounded fetches

/**
 * https, or plain http to an address HANGAR_OUTBOUND_ALLOW lists (a development provider; docs/api.md §3). This
 * sync form knows literals and localhost; the configured issuer's name is also resolved (prepareSettings).
 */
function isAllowedProviderUrl(url: URL, allow: OutboundAllowList): boolean {
  if (url.username || url.password) return false;
  if (url.protocol === "https:") return true;
  if (url.protocol !== "http:") return false;
  try {
    return checkUrlWithoutDns(url, allow).listed;
  } catch {
    return false;
  }
}

/** The configured issuer URL, or 400 invalid_input saying why it is refused. */
export function checkIssuerUrl(raw: string): string {
  const issuer = raw.trim();
  const refuse = (message: string) => new ApiError("invalid_input", message, [{ path: "issuer_url", message }]);
  let url: URL;
  try {
    url = new URL(issuer);
  } catch {
    throw refuse("issuer_url must be an absolute URL");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw refuse("issuer_url must be an https URL");
  if (url.username || url.password) throw refuse("issuer_url must not carry credentials");
  if (url.search || url.hash) throw refuse("issuer_url must not have a query or fragment");
  return issuer;
}

/** Issuers compare as strings (OIDC Discovery §4.3), forgiving only a trailing slash typed by the operator. */
function sameIssuer(a: string, b: string): boolean {
  return a.replace(/\/+$/, "") === b.replace(/\/+$/, "");
}

/** Reads a body up to `maxBytes`; a larger one is cut off rather than buffered. */
async function readCapped(res: Response, maxBytes: number): Promise<string> {
  try {
    return new TextDecoder().decode(
      await readStreamCapped(res.body, res.headers.get("content-length"), maxBytes, () => new Error(`answer larger than ${maxBytes} bytes`)),
    );
  } catch (err) {
    // Refused before reading: release the connection (a body being read was cancelled already).
    await res.body?.cancel().catch(() => undefined);
    throw err;
  }
}

/** GET through deps.fetch with a timeout that covers the body too, no redirects, and a size cap. */
async function fetchJson(deps: Pick<AppDeps, "fetch">, url: string, headers: Record<string, string> = {}): Promise<unknown> {
  const res = await deps.fetch(url, {
    method: "GET",
    headers: { accept: "application/json", ...headers },
    // Not followed: "manual" makes a 3xx one more status that is not 200 ("error" is refused on Workers).
    redirect: "manual",
    signal: AbortSignal.timeout(DISCOVERY_TIMEOUT_MS),
  });
  if (res.status !== 200) {
    await res.body?.cancel();
    throw new Error(`HTTP ${res.status}`);
  }
  const text = await readCapped(res, MAX_DISCOVERY_BYTES);
  try {
    return JSON.parse(text);
  } catch {
    throw new Error("the answer is not JSON");
  }
}

function failureReason(err: unknown): string {
  if (err instanceof Error && err.name === "TimeoutError") return `no answer within ${DISCOVERY_TIMEOUT_MS / 1000} s`;
  return err instanceof Error ? err.message : "request failed";
}

// ---------------------------------------------------------------------------------------------------------------
// Discovery

/** `{issuer}/.well-known/openid-configuration`, checked field by field; throws DiscoveryFailure with a reason. */
async function discover(deps: Pick<AppDeps, "fetch" | "config">, issuerUrl: string): Promise<DiscoveryDocument> {
  const url = `${issuerUrl.replace(/\/+$/, "")}/.well-known/openid-configuration`;
  let doc: unknown;
  try {
    doc = await fetchJson(deps, url);
  } catch (err) {
    const refused = findDestinationNotAllowed(err);
    if (refused) throw refused;
    throw new DiscoveryFailure(`the discovery document at ${url} cannot be read: ${failureReason(err)}`);
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) throw new DiscoveryFailure("the discovery document is not a JSON object");
  const d = doc as Record<string, unknown>;
  if (typeof d.issuer !== "string" || !sameIssuer(d.issuer, issuerUrl)) {
    // The provider's value is not repeated: error messages never echo fetched content (docs/api.md §3).
    throw new DiscoveryFailure(`the discovery document's issuer is not the configured issuer ${issuerUrl}`);
  }
  const endpoint = (name: string, required: boolean): string | undefined => {
    const value = d[name];
    if (value === undefined && !required) return undefined;
    if (typeof value !== "string") throw new DiscoveryFailure(`the discovery document has no ${name}`);
    let parsed: URL;
    try {
      parsed = new URL(value);
    } catch {
      throw new DiscoveryFailure(`the discovery document's ${name} is not a URL`);
    }
    if (!isAllowedProviderUrl(parsed, deps.config.outboundAllow)) throw new DiscoveryFailure(`the discovery document's ${name} must use https`);
    return value;
  };
  const algs = d.id_token_signing_alg_values_supported;
  return {
    issuer: d.issuer,
    authorization_endpoint: endpoint("authorization_endpoint", true)!,
    token_endpoint: endpoint("token_endpoint", true)!,
    jwks_uri: endpoint("jwks_uri", true)!,
    userinfo_endpoint: endpoint("userinfo_endpoint", false),
    id_token_signing_alg_values_supported: Array.isArray(algs) ? algs.filter((a): a is string => typeof a === "string") : undefined,
  };
}

/** Discovery while signing in: a failure is the provider's (502). */
async function discoverForFlow(deps: Deps, issuerUrl: string): Promise<DiscoveryDocument> {
  try {
    return await discover(deps, issuerUrl);
  } catch (err) {
    if (err instanceof DiscoveryFailure) throw new ApiError("oidc_discovery_error", err.message);
    if (err instanceof DestinationNotAllowedError) throw new ApiError("oidc_discovery_error", err.message);
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Configuration (setup and post-setup)

export async function readOidcSettings(deps: Pick<AppDeps, "db">): Promise<StoredOidcSettings | null> {
  const stored = await readSetting<StoredOidcSettings>(deps, OIDC_SETTING);
  return stored?.value ?? null;
}

/** Validates, discovers (400 oidc_discovery_failed) and seals: the document to store. */
async function prepareSettings(deps: Deps, input: OidcConfigureInput): Promise<StoredOidcSettings> {
  const issuerUrl = checkIssuerUrl(input.issuer_url);
  const clientId = input.client_id.trim();
  if (!clientId) throw new ApiError("invalid_input", "client_id must not be empty", [{ path: "client_id", message: "must not be empty" }]);
  // The outbound guard first (docs/api.md §12): a refused place is named, and never fetched.
  // Plain http is a development convenience for allowed destinations only; anything else is an input error.
  const isHttp = new URL(issuerUrl).protocol === "http:";
  const httpRefused = () => {
    const message = "issuer_url must use https (plain http is accepted only for destinations in HANGAR_OUTBOUND_ALLOW)";
    return new ApiError("invalid_input", message, [{ path: "issuer_url", message }]);
  };
  try {
    const { listed } = await checkDestinationNow(deps, issuerUrl);
    if (isHttp && !listed) throw httpRefused();
  } catch (err) {
    if (err instanceof DestinationNotAllowedError)
      throw isHttp ? httpRefused() : new ApiError("destination_not_allowed", `issuer_url: ${err.message}`);
    throw err;
  }
  let doc: DiscoveryDocument;
  try {
    doc = await discover(deps, issuerUrl);
  } catch (err) {
    if (err instanceof DestinationNotAllowedError) throw new ApiError("destination_not_allowed", `issuer_url: ${err.message}`);
    if (err instanceof DiscoveryFailure) throw new ApiError("oidc_discovery_failed", err.message);
    throw err;
  }
  const previous = await readOidcSettings(deps);
  const sameClient = previous !== null && previous.client_id === clientId && sameIssuer(previous.issuer_url, issuerUrl);
  const trustUnverifiedEmail = input.trust_unverified_email ?? (sameClient && previous?.trust_unverified_email === true);
  let sealed: string | null = null;
  if (typeof input.client_secret === "string") {
    try {
      sealed = await deps.secrets.seal(input.client_secret);
    } catch {
      throw new ApiError("encryption_error", "the client secret could not be encrypted");
    }
  } else if (input.client_secret === undefined) {
    // A secret is write-only: re-saving the same provider and client without it keeps the stored one.
    if (sameClient && previous) sealed = previous.client_secret_sealed;
  }
  return {
    issuer_url: issuerUrl,
    discovered_issuer: doc.issuer,
    client_id: clientId,
    client_secret_sealed: sealed,
    trust_unverified_email: trustUnverifiedEmail,
    configured_at: deps.clock.now(),
  };
}

/** POST /v1/setup/oidc/configure: bootstrap_pending or idp_configured → idp_configured. */
export async function configureSetupOidc(deps: Deps, input: OidcConfigureInput) {
  const next = assertSetupOperation(await loadInstance(deps), "configure_oidc");
  const settings = await prepareSettings(deps, input);
  const [moved] = await deps.db.batch([
    transitionStatement(deps, "configure_oidc", next),
    // The document lands only with the state change, so a setup that moved on meanwhile is left alone.
    writeSettingIfStateStatement(deps, settings, "idp_configured"),
  ]);
  if (moved.length === 0) throw new ApiError("invalid_state", "the setup state changed; read setup-status again");
  // Recorded only once the change has landed.
  await recordAudit(deps, {
    action: "setup.oidc_configured",
    targetType: "instance",
    details: { issuer: settings.discovered_issuer, client_id: settings.client_id },
  });
  return { state: "idp_configured" as const, discovered_issuer: settings.discovered_issuer };
}

/** The settings upsert, applied only when the instance is in `state` (the batch's own transition landed). */
function writeSettingIfStateStatement(deps: Deps, settings: StoredOidcSettings, state: SetupState) {
  const now = deps.clock.now();
  return deps.db
    .insert(instanceSettings)
    .select(
      sql`select ${OIDC_SETTING}, ${JSON.stringify(settings)}, ${now}
          where exists (select 1 from ${instance} where ${instance.id} = 1 and ${instance.state} = ${state})`,
    )
    .onConflictDoUpdate({ target: instanceSettings.key, set: { value: settings, updatedAt: now } });
}

/** PUT /v1/settings/external-access/oidc: the owner replaces the configuration once setup is ready. */
export async function configureOidcSettings(deps: Deps, actor: Pick<UserRow, "id" | "email">, input: OidcConfigureInput) {
  const inst = await loadInstance(deps);
  if (inst.state !== "ready") throw new ApiError("invalid_state", "OIDC is configured through setup until setup is complete");
  const settings = await prepareSettings(deps, input);
  await deps.db.batch([
    writeSettingStatement(deps, OIDC_SETTING, settings),
    auditStatement(deps, {
      action: "settings.oidc_configured",
      actor,
      targetType: "instance",
      details: { issuer: settings.discovered_issuer, client_id: settings.client_id },
    }),
  ]);
  return {
    discovered_issuer: settings.discovered_issuer,
    has_client_secret: settings.client_secret_sealed !== null,
    trust_unverified_email: settings.trust_unverified_email === true,
    configured_at: settings.configured_at,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Authorization request

/** A redirect URI must be an absolute http(s) URL without a fragment (RFC 6749 §3.1.2). */
function checkRedirectUri(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ApiError("invalid_redirect_uri", "redirect_uri must be an absolute URL");
  }
  if ((url.protocol !== "https:" && url.protocol !== "http:") || url.hash || raw.length > 2048) {
    throw new ApiError("invalid_redirect_uri", "redirect_uri must be an http(s) URL without a fragment");
  }
  return raw;
}

function tooManyPending(): ApiError {
  return new ApiError("too_many_pending", `more than ${MAX_PENDING} sign-ins are pending; try again in a few minutes`);
}

function tooManyPendingForClient(): ApiError {
  return new ApiError(
    "too_many_pending",
    `${MAX_PENDING_PER_CLIENT} sign-ins from this address are pending already; finish one or try again in a few minutes`,
  );
}

/** In local mode only this machine may use OIDC sign-in: on a 0.0.0.0 bind it would otherwise run over plain HTTP. */
async function assertOidcClientAllowed(deps: Pick<AppDeps, "db" | "clock">, client: OidcClient): Promise<void> {
  const inst = await loadInstance(deps);
  if (inst.runtimeMode === "local" && !client.isLoopback) {
    throw new ApiError("local_login_loopback_required", "in local mode, sign-in is only available from this machine");
  }
}

/** A database failure around pending requests is the spec's 500 store_error; its details go to the log only. */
function storeError(deps: Deps, err: unknown): ApiError {
  deps.log({ time: new Date().toISOString(), level: "error", msg: "oidc pending request store failed", error: describeError(err) });
  return new ApiError("store_error", "the sign-in request could not be stored or read");
}

async function loadConfigured(deps: Deps, missing: () => ApiError): Promise<StoredOidcSettings> {
  const settings = await readOidcSettings(deps);
  if (!settings) throw missing();
  return settings;
}

const setupNotConfigured = () => new ApiError("invalid_state", "OIDC is not configured; call /v1/setup/oidc/configure first");
const loginNotConfigured = () => new ApiError("oidc_not_configured", "OIDC sign-in is not configured on this instance");

/**
 * Starts an authorization request: the state, PKCE verifier and nonce are kept server-side keyed by the state's
 * SHA-256 (the verifier sealed), for 10 minutes. The insert itself checks the limit, so concurrent starts never
 * push the table past 1000 live rows.
 */
async function startAuthorization(deps: Deps, purpose: OidcPurpose, settings: StoredOidcSettings, redirectUri: string, clientKey: string | null) {
  const now = deps.clock.now();
  const live = gt(oidcPendingRequests.expiresAt, now);
  let pending: number;
  let pendingForClient = 0;
  try {
    pending = (await deps.db.select({ n: count() }).from(oidcPendingRequests).where(live).get())?.n ?? 0;
    if (clientKey !== null) {
      pendingForClient =
        (
          await deps.db
            .select({ n: count() })
            .from(oidcPendingRequests)
            .where(and(eq(oidcPendingRequests.client, clientKey), live))
            .get()
        )?.n ?? 0;
    }
  } catch (err) {
    throw storeError(deps, err);
  }
  // Checked before discovery too, so a flood of starts does not turn into a flood of requests to the provider.
  if (pendingForClient >= MAX_PENDING_PER_CLIENT) throw tooManyPendingForClient();
  if (pending >= MAX_PENDING) throw tooManyPending();
  const doc = await discoverForFlow(deps, settings.issuer_url);

  // arctic and jose load on the first sign-in, not at every start (docs/benchmarks.md): most daemons never use OIDC.
  const { CodeChallengeMethod, generateCodeVerifier, generateState, OAuth2Client } = await import("arctic");
  const state = generateState();
  const verifier = generateCodeVerifier();
  const nonce = randomToken();
  const client = new OAuth2Client(settings.client_id, null, redirectUri);
  const url = client.createAuthorizationURLWithPKCE(doc.authorization_endpoint, state, CodeChallengeMethod.S256, verifier, SCOPES);
  url.searchParams.set("nonce", nonce);

  let sealedVerifier: string;
  try {
    sealedVerifier = await deps.secrets.seal(verifier);
  } catch {
    throw new ApiError("encryption_error", "the sign-in request could not be encrypted");
  }
  const stateHash = await sha256Hex(state);
  let inserted: unknown[];
  try {
    inserted = await deps.db
      .insert(oidcPendingRequests)
      .select(
        sql`select ${stateHash}, ${purpose}, ${sealedVerifier}, ${nonce}, ${redirectUri}, ${now}, ${now + PENDING_TTL_S}, ${clientKey}
            where (select count(*) from ${oidcPendingRequests} where ${oidcPendingRequests.expiresAt} > ${now}) < ${MAX_PENDING}
              and (select count(*) from ${oidcPendingRequests}
                   where ${oidcPendingRequests.client} = ${clientKey} and ${oidcPendingRequests.expiresAt} > ${now}) < ${MAX_PENDING_PER_CLIENT}`,
      )
      .returning({ stateHash: oidcPendingRequests.stateHash });
  } catch (err) {
    throw storeError(deps, err);
  }
  // The conditional insert decides under concurrency; the counts above only tell which limit it was.
  if (inserted.length === 0) throw pendingForClient + 1 >= MAX_PENDING_PER_CLIENT ? tooManyPendingForClient() : tooManyPending();
  return { authorization_url: url.href, state };
}

/** POST /v1/setup/owner/start-oidc: idp_configured only. */
export async function startSetupOwnerOidc(deps: Deps, input: { redirect_uri: string }) {
  assertSetupOperation(await loadInstance(deps), "verify_oidc_owner");
  const settings = await loadConfigured(deps, setupNotConfigured);
  // Behind a setup session: only the global limit applies.
  return startAuthorization(deps, "setup_owner", settings, checkRedirectUri(input.redirect_uri), null);
}

/**
 * The "standard callback" used when GET /v1/auth/oidc/start has no redirect_uri: the web UI's callback page on
 * the public URL when External Access has one, else on the origin the request came to.
 */
export async function standardCallbackUri(deps: Pick<AppDeps, "db">, requestOrigin: string): Promise<string> {
  const base = (await readNetworkSettings(deps)).public_url || requestOrigin;
  return `${base.replace(/\/+$/, "")}/auth/oidc/callback`;
}

/** GET /v1/auth/oidc/start (the instance is ready: requireReady ran). Loopback only in local mode; capped per client. */
export async function startOidcSignIn(deps: Deps, input: { redirect_uri?: string; requestOrigin: string; client: OidcClient }) {
  await assertOidcClientAllowed(deps, input.client);
  const settings = await loadConfigured(deps, loginNotConfigured);
  const redirectUri = input.redirect_uri ?? (await standardCallbackUri(deps, input.requestOrigin));
  return startAuthorization(deps, "login", settings, checkRedirectUri(redirectUri), input.client.key);
}

// ---------------------------------------------------------------------------------------------------------------
// Callback: one use of the pending request, code exchange, ID-token check

async function openSecret(deps: Deps, sealed: string, what: string): Promise<string> {
  try {
    return await deps.secrets.open(sealed);
  } catch {
    throw new ApiError("decryption_error", `the stored ${what} cannot be decrypted (was master.key replaced?)`);
  }
}

/**
 * The code and the PKCE verifier, POSTed through deps.fetch (RFC 6749 §4.1.3, client_secret_basic when a secret
 * is stored). A redirect is not followed (it would re-post both elsewhere), the timeout aborts the request
 * itself, and the answer is read with the discovery cap. Every failure is the provider's (502).
 */
async function exchangeCode(
  deps: Pick<AppDeps, "fetch">,
  settings: StoredOidcSettings,
  secret: string | null,
  doc: DiscoveryDocument,
  redirectUri: string,
  code: string,
  verifier: string,
): Promise<Record<string, unknown>> {
  const form = new URLSearchParams({
    grant_type: "authorization_code",
    code,
    redirect_uri: redirectUri,
    client_id: settings.client_id,
    code_verifier: verifier,
  });
  const headers: Record<string, string> = { "content-type": "application/x-www-form-urlencoded", accept: "application/json" };
  // RFC 6749 §2.3.1: both parts form-encoded before base64 (the result is ASCII, so btoa is safe).
  if (secret !== null) headers.authorization = `Basic ${btoa(`${encodeURIComponent(settings.client_id)}:${encodeURIComponent(secret)}`)}`;
  const refuse = (detail: string) => new ApiError("token_exchange_error", `the provider refused the authorization code${detail}`);
  let status: number;
  let data: unknown;
  try {
    const res = await deps.fetch(doc.token_endpoint, {
      method: "POST",
      headers,
      body: form.toString(),
      // "manual", not "error" (which Workers refuses): a 3xx is then just another status that is not 200.
      redirect: "manual",
      signal: AbortSignal.timeout(TOKEN_EXCHANGE_TIMEOUT_MS),
    });
    status = res.status;
    // 400 and 401 carry the OAuth error code (RFC 6749 §5.2); anything else but 200 is not read.
    if (status !== 200 && status !== 400 && status !== 401) {
      await res.body?.cancel();
      throw refuse(` (HTTP ${status})`);
    }
    data = JSON.parse(await readCapped(res, MAX_DISCOVERY_BYTES));
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw refuse(err instanceof Error && err.name === "TimeoutError" ? ` (no answer within ${TOKEN_EXCHANGE_TIMEOUT_MS / 1000} s)` : "");
  }
  if (typeof data !== "object" || data === null || Array.isArray(data)) throw refuse("");
  const answer = data as Record<string, unknown>;
  if (status !== 200) {
    // Only a well-formed error code is echoed (RFC 6749 §5.2 codes are short ASCII words).
    const oauthError = typeof answer.error === "string" && /^[\w.-]{1,64}$/.test(answer.error) ? `: ${answer.error}` : "";
    throw refuse(oauthError);
  }
  return answer;
}

/** The algorithms accepted for this provider: its declared ones within our allowlist; HMAC only if declared. */
function allowedAlgorithms(doc: DiscoveryDocument, hasSecret: boolean): string[] {
  const declared = doc.id_token_signing_alg_values_supported;
  const asymmetric = declared ? ASYMMETRIC_ALGS.filter((a) => declared.includes(a)) : ASYMMETRIC_ALGS;
  const hmac = declared && hasSecret ? HMAC_ALGS.filter((a) => declared.includes(a)) : [];
  return [...asymmetric, ...hmac];
}

/**
 * Signature from the issuer's JWKS (or the client secret for a provider that declares HMAC), `iss`, `aud`
 * (and `azp` when several audiences), `exp`/`iat` with a small skew, and the nonce compared explicitly.
 */
async function verifyIdToken(
  deps: Deps,
  input: { idToken: string; doc: DiscoveryDocument; clientId: string; secret: string | null; nonce: string },
): Promise<JWTPayload> {
  const { doc, clientId, secret } = input;
  const { createRemoteJWKSet, customFetch, jwtVerify } = await import("jose");
  const jwks = createRemoteJWKSet(new URL(doc.jwks_uri), {
    timeoutDuration: DISCOVERY_TIMEOUT_MS,
    // Through deps.fetch and with the same size cap as discovery.
    [customFetch]: (async (url, init) => {
      const res = await deps.fetch(url, init);
      if (res.status !== 200) return res;
      return new Response(await readCapped(res, MAX_DISCOVERY_BYTES), { status: 200, headers: { "content-type": "application/json" } });
    }) satisfies FetchImplementation,
  });
  const hmacKey = secret === null ? null : new TextEncoder().encode(secret);
  const getKey: JWTVerifyGetKey = (header, token) => {
    if (header.alg?.startsWith("HS")) {
      if (!hmacKey) throw new Error("HMAC-signed token without a client secret");
      return hmacKey;
    }
    return jwks(header, token);
  };
  const algorithms = allowedAlgorithms(doc, secret !== null);
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(input.idToken, getKey, {
      issuer: doc.issuer,
      audience: clientId,
      algorithms,
      currentDate: new Date(deps.clock.now() * 1000),
      clockTolerance: CLOCK_SKEW_S,
      // An ID token older than a pending request's lifetime cannot be the answer to it.
      maxTokenAge: PENDING_TTL_S,
      requiredClaims: ["sub", "exp", "iat"],
    }));
  } catch (err) {
    throw new ApiError("id_token_verification_error", `the ID token failed verification: ${verificationReason(err)}`);
  }
  if (Array.isArray(payload.aud) && payload.aud.length > 1 && payload.azp !== clientId) {
    throw new ApiError("id_token_verification_error", "the ID token has several audiences and no azp naming this client");
  }
  if (payload.azp !== undefined && payload.azp !== clientId) {
    throw new ApiError("id_token_verification_error", "the ID token's azp names another client");
  }
  // jose does not know our nonce: compare it here, in constant time.
  if (typeof payload.nonce !== "string" || !constantTimeEqual(payload.nonce, input.nonce)) {
    throw new ApiError("id_token_verification_error", "the ID token's nonce does not match the sign-in request");
  }
  return payload;
}

/**
 * Why jose refused a token, in our words: its messages can carry content from the provider (a JWKS answer, a
 * header), and error messages never echo that (docs/api.md §3). The claim name is jose's own, from our checks.
 */
function verificationReason(err: unknown): string {
  const e = err as { code?: unknown; claim?: unknown; name?: unknown };
  switch (e?.code) {
    case "ERR_JWT_EXPIRED":
      return "the token has expired";
    case "ERR_JWT_CLAIM_VALIDATION_FAILED":
      return typeof e.claim === "string" && /^[a-z_]{1,20}$/.test(e.claim) ? `its "${e.claim}" claim is not valid` : "a claim is not valid";
    case "ERR_JWS_SIGNATURE_VERIFICATION_FAILED":
      return "the signature does not match";
    case "ERR_JOSE_ALG_NOT_ALLOWED":
      return "it is signed with an algorithm that is not allowed";
    case "ERR_JWKS_NO_MATCHING_KEY":
    case "ERR_JWKS_MULTIPLE_MATCHING_KEYS":
      return "no single key of the provider's key set matches it";
    case "ERR_JWKS_TIMEOUT":
      return `the provider's key set did not answer within ${DISCOVERY_TIMEOUT_MS / 1000} s`;
    case "ERR_JWKS_INVALID":
      return "the provider's key set is not valid";
    case "ERR_JWS_INVALID":
    case "ERR_JWT_INVALID":
      return "it is not a well-formed signed JWT";
    default:
      return "it could not be verified";
  }
}

const EMAIL = /^[^\s@]+@[^\s@]+$/;

function claimString(claims: Record<string, unknown>, name: string, max: number): string | null {
  const value = claims[name];
  return typeof value === "string" && value.trim() !== "" && value.length <= max ? value.trim() : null;
}

/**
 * The email, name and picture of the signed-in account. Providers that follow OIDC Core §5.4 strictly put scope
 * claims only in userinfo; those are read from there, for the same subject only.
 */
async function identityFrom(
  deps: Deps,
  payload: JWTPayload,
  doc: DiscoveryDocument,
  accessToken: unknown,
  trustUnverifiedEmail: boolean,
): Promise<OidcIdentity> {
  let claims: Record<string, unknown> = payload;
  if (claimString(claims, "email", 320) === null && doc.userinfo_endpoint && typeof accessToken === "string") {
    try {
      const info = await fetchJson(deps, doc.userinfo_endpoint, { authorization: `Bearer ${accessToken}` });
      if (typeof info === "object" && info !== null && (info as Record<string, unknown>).sub === payload.sub) {
        claims = { ...(info as Record<string, unknown>), ...stripEmpty(payload) };
      }
    } catch {
      // Treated as no email below.
    }
  }
  const email = claimString(claims, "email", 320);
  if (!email || !EMAIL.test(email)) throw new ApiError("missing_email", "the provider did not return an email address for this account");
  // Users are found by email: an address the provider does not vouch for must not match one (docs/api.md §3).
  // Absent counts as unverified, unless the owner trusts this provider's addresses.
  const verified = claims.email_verified === true || claims.email_verified === "true";
  if (!verified && !trustUnverifiedEmail) {
    throw new ApiError(
      "missing_email",
      "the provider does not say this account's email address is verified (set trust_unverified_email to accept it)",
    );
  }
  const picture = claimString(claims, "picture", 2048);
  return {
    email,
    issuer: String(payload.iss),
    subject: String(payload.sub),
    name: claimString(claims, "name", 200),
    picture: picture && /^https?:\/\//i.test(picture) ? picture : null,
  };
}

function stripEmpty(payload: JWTPayload): Record<string, unknown> {
  return Object.fromEntries(Object.entries(payload).filter(([, v]) => v !== undefined && v !== null && v !== ""));
}

/**
 * Finishes an authorization request: the pending row is deleted as it is read (one use each, across daemons),
 * then the code is exchanged and the ID token checked. Answers the verified identity.
 */
async function finishAuthorization(
  deps: Deps,
  purpose: OidcPurpose,
  input: { code: string; state: string },
  missing: () => ApiError,
): Promise<OidcIdentity> {
  const stateHash = await sha256Hex(input.state);
  let row: typeof oidcPendingRequests.$inferSelect | undefined;
  try {
    row = await deps.db
      .delete(oidcPendingRequests)
      .where(and(eq(oidcPendingRequests.stateHash, stateHash), eq(oidcPendingRequests.purpose, purpose)))
      .returning()
      .get();
  } catch (err) {
    throw storeError(deps, err);
  }
  if (!row) throw ApiError.withSecondStatus("invalid_state", "unknown or already used sign-in state; start the sign-in again");
  if (row.expiresAt <= deps.clock.now()) throw new ApiError("auth_expired", "the sign-in request is older than 10 minutes; start again");

  const settings = await loadConfigured(deps, missing);
  const secret = settings.client_secret_sealed === null ? null : await openSecret(deps, settings.client_secret_sealed, "client secret");
  const verifier = await openSecret(deps, row.codeVerifierSealed, "PKCE verifier");
  const doc = await discoverForFlow(deps, settings.issuer_url);
  const tokens = await exchangeCode(deps, settings, secret, doc, row.redirectUri, input.code, verifier);
  if (typeof tokens.id_token !== "string" || tokens.id_token === "") {
    throw new ApiError("missing_id_token", "the provider answered without an ID token");
  }
  const payload = await verifyIdToken(deps, { idToken: tokens.id_token, doc, clientId: settings.client_id, secret, nonce: row.nonce });
  return identityFrom(deps, payload, doc, tokens.access_token, settings.trust_unverified_email === true);
}

/** POST /v1/setup/owner/verify-oidc: idp_configured → owner_created, the owner with email and OIDC subject. */
export async function verifySetupOwnerOidc(deps: Deps, input: { code: string; state: string }) {
  const next = assertSetupOperation(await loadInstance(deps), "verify_oidc_owner");
  const identity = await finishAuthorization(deps, "setup_owner", input, setupNotConfigured);
  const owner = newOwnerValues(deps, identity.email, {
    oidcSubject: identity.subject,
    oidcIssuer: identity.issuer,
    ...(identity.name ? { displayName: identity.name } : {}),
  });
  const created = await createOwner(deps, "verify_oidc_owner", next, owner);
  return { state: created.state, owner_email: created.owner_email, oidc_subject: identity.subject };
}

/**
 * POST /v1/auth/oidc/callback: an invited or active user signs in (the first sign-in activates an invited one and
 * binds the user to the token's (iss, sub)). Loopback only in local mode.
 */
export async function completeOidcSignIn(deps: Deps, input: { code: string; state: string; client: OidcClient }) {
  await assertOidcClientAllowed(deps, input.client);
  const identity = await finishAuthorization(deps, "login", input, loginNotConfigured);
  try {
    return await signIn(deps, {
      email: identity.email,
      method: "oidc",
      oidcSubject: identity.subject,
      oidcIssuer: identity.issuer,
      displayName: identity.name,
      avatarUrl: identity.picture,
    });
  } catch (err) {
    if (err instanceof ApiError) throw err;
    deps.log({ time: new Date().toISOString(), level: "error", msg: "oidc session creation failed", error: describeError(err) });
    throw new ApiError("session_error", "the session could not be created");
  }
}

/** Maintenance: expired pending requests, kept for an hour so a late callback still hears auth_expired. */
export async function deleteExpiredOidcRequests(deps: Pick<AppDeps, "db" | "clock">): Promise<void> {
  await deps.db.delete(oidcPendingRequests).where(lte(oidcPendingRequests.expiresAt, deps.clock.now() - EXPIRED_PENDING_GRACE_S));
}
