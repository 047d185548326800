// OIDC sign-in (docs/spec.md Auth, docs/api.md §3). The authorization request: PKCE S256, state and nonce, kept as pending rows (hashes and sealed values).

import { and, count, eq, gt, lte, sql } from "drizzle-orm";
import type { OidcPurpose } from "../../../db/schema/constants.ts";
import { oidcPendingRequests } from "../../../db/schema/index.ts";
import type { AppDeps } from "../../../deps.ts";
import { ApiError, describeError } from "../../../errors.ts";
import { randomToken, sha256Hex } from "../../common/crypto.ts";
import { loadInstance } from "../../setup/instance.ts";
import { readNetworkSettings } from "../../settings/network-settings.ts";
import type { OidcClient } from "../oidc-client.ts";
import { assertSetupOperation } from "../../setup/setup.ts";
import { type Deps, PENDING_TTL_S, MAX_PENDING, MAX_PENDING_PER_CLIENT, EXPIRED_PENDING_GRACE_S, SCOPES, type StoredOidcSettings } from "./types.ts";
import { discoverForFlow } from "./discovery.ts";
import { readOidcSettings } from "./settings.ts";

/** A redirect URI must be an absolute http(s) URL without a fragment (RFC 6749 §3.1.2). */
export function checkRedirectUri(raw: string): string {
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

export function tooManyPending(): ApiError {
  return new ApiError("too_many_pending", `more than ${MAX_PENDING} sign-ins are pending; try again in a few minutes`);
}

export function tooManyPendingForClient(): ApiError {
  return new ApiError(
    "too_many_pending",
    `${MAX_PENDING_PER_CLIENT} sign-ins from this address are pending already; finish one or try again in a few minutes`,
  );
}

/** In local mode only this machine may use OIDC sign-in: on a 0.0.0.0 bind it would otherwise run over plain HTTP. */
export async function assertOidcClientAllowed(deps: Pick<AppDeps, "db" | "clock">, client: OidcClient): Promise<void> {
  const inst = await loadInstance(deps);
  if (inst.runtimeMode === "local" && !client.isLoopback) {
    throw new ApiError("local_login_loopback_required", "in local mode, sign-in is only available from this machine");
  }
}

/** A database failure around pending requests is the spec's 500 store_error; its details go to the log only. */
export function storeError(deps: Deps, err: unknown): ApiError {
  deps.log({ time: new Date().toISOString(), level: "error", msg: "oidc pending request store failed", error: describeError(err) });
  return new ApiError("store_error", "the sign-in request could not be stored or read");
}

export async function loadConfigured(deps: Deps, missing: () => ApiError): Promise<StoredOidcSettings> {
  const settings = await readOidcSettings(deps);
  if (!settings) throw missing();
  return settings;
}

export const setupNotConfigured = () => new ApiError("invalid_state", "OIDC is not configured; call /v1/setup/oidc/configure first");
export const loginNotConfigured = () => new ApiError("oidc_not_configured", "OIDC sign-in is not configured on this instance");

/**
 * Starts an authorization request: the state, PKCE verifier and nonce are kept server-side keyed by the state's
 * SHA-256 (the verifier sealed), for 10 minutes. The insert itself checks the limit, so concurrent starts never
 * push the table past 1000 live rows.
 */
export async function startAuthorization(
  deps: Deps,
  purpose: OidcPurpose,
  settings: StoredOidcSettings,
  redirectUri: string,
  clientKey: string | null,
) {
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

/** Maintenance: expired pending requests, kept for an hour so a late callback still hears auth_expired. */
export async function deleteExpiredOidcRequests(deps: Pick<AppDeps, "db" | "clock">): Promise<void> {
  await deps.db.delete(oidcPendingRequests).where(lte(oidcPendingRequests.expiresAt, deps.clock.now() - EXPIRED_PENDING_GRACE_S));
}
