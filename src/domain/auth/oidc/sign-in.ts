// OIDC sign-in (docs/spec.md Auth, docs/api.md §3). The callback: one use of the pending request, then the setup owner or a user's session.

import { and, eq } from "drizzle-orm";
import type { OidcPurpose } from "../../../db/schema/constants.ts";
import { oidcPendingRequests } from "../../../db/schema/index.ts";
import { ApiError, describeError } from "../../../errors.ts";
import { sha256Hex } from "../../common/crypto.ts";
import { loadInstance } from "../../setup/instance.ts";
import type { OidcClient } from "../oidc-client.ts";
import { assertSetupOperation, createOwner } from "../../setup/setup.ts";
import { newOwnerValues, signIn } from "../users.ts";
import type { Deps, OidcIdentity } from "./types.ts";
import { discoverForFlow } from "./discovery.ts";
import { assertOidcClientAllowed, storeError, loadConfigured, setupNotConfigured, loginNotConfigured } from "./authorization.ts";
import { openSecret, exchangeCode } from "./token-exchange.ts";
import { verifyIdToken, identityFrom } from "./id-token.ts";

/**
 * Finishes an authorization request: the pending row is deleted as it is read (one use each, across daemons),
 * then the code is exchanged and the ID token checked. Answers the verified identity.
 */
export async function finishAuthorization(
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
