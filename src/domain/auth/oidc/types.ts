// OIDC sign-in (docs/spec.md Auth, docs/api.md §3). The shared pieces of OIDC sign-in: limits, the stored settings, the discovery document, the identity.

import type { AppDeps } from "../../../deps.ts";

export type Deps = Pick<AppDeps, "db" | "clock" | "secrets" | "fetch" | "log" | "config" | "checkDestination">;

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
export const SCOPES = ["openid", "email", "profile"];
/** Asymmetric algorithms only by default: never `none`, and HMAC only when the provider declares it. */
export const ASYMMETRIC_ALGS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"];
export const HMAC_ALGS = ["HS256", "HS384", "HS512"];

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

export interface DiscoveryDocument {
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

export class DiscoveryFailure extends Error {}
