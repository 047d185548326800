/**
 * OIDC sign-in (docs/spec.md Auth, docs/api.md §3): discovery, the authorization request (PKCE S256, state, nonce) and the
 * ID-token check. arctic's generic OAuth2Client builds the authorization URL and stays inside this module (its
 * README marks it deprecated); the code exchange is our own POST through deps.fetch, and
 * jose checks the ID token. Pending requests live in the database so a restart or a second daemon can finish them.
 *
 * This file is the area's public face; the work is in oidc/, one file per job:
 * provider-fetch.ts (provider URLs, bounded GETs) → discovery.ts → settings.ts (the stored configuration) →
 * authorization.ts (pending requests: state, nonce, PKCE) → token-exchange.ts → id-token.ts → sign-in.ts (the callback).
 */

export { startOidcSignIn, startSetupOwnerOidc, standardCallbackUri, deleteExpiredOidcRequests } from "./oidc/authorization.ts";
export { checkIssuerUrl } from "./oidc/provider-fetch.ts";
export { configureOidcSettings, configureSetupOidc, readOidcSettings } from "./oidc/settings.ts";
export { completeOidcSignIn, verifySetupOwnerOidc } from "./oidc/sign-in.ts";
export {
  CLOCK_SKEW_S,
  DISCOVERY_TIMEOUT_MS,
  EXPIRED_PENDING_GRACE_S,
  MAX_DISCOVERY_BYTES,
  MAX_PENDING,
  MAX_PENDING_PER_CLIENT,
  OIDC_SETTING,
  type OidcConfigureInput,
  type OidcIdentity,
  PENDING_TTL_S,
  type StoredOidcSettings,
  TOKEN_EXCHANGE_TIMEOUT_MS,
} from "./oidc/types.ts";
