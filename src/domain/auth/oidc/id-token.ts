// OIDC sign-in (docs/spec.md Auth, docs/api.md §3). The ID token's check (jose plus explicit nonce, issuer and audience checks) and the identity it names.

import type { FetchImplementation, JWTPayload, JWTVerifyGetKey } from "jose";
import { ApiError } from "../../../errors.ts";
import { constantTimeEqual } from "../../common/crypto.ts";
import {
  type Deps,
  DISCOVERY_TIMEOUT_MS,
  MAX_DISCOVERY_BYTES,
  PENDING_TTL_S,
  CLOCK_SKEW_S,
  ASYMMETRIC_ALGS,
  HMAC_ALGS,
  type DiscoveryDocument,
  type OidcIdentity,
} from "./types.ts";
import { readCapped, fetchJson } from "./provider-fetch.ts";

/** The algorithms accepted for this provider: its declared ones within our allowlist; HMAC only if declared. */
export function allowedAlgorithms(doc: DiscoveryDocument, hasSecret: boolean): string[] {
  const declared = doc.id_token_signing_alg_values_supported;
  const asymmetric = declared ? ASYMMETRIC_ALGS.filter((a) => declared.includes(a)) : ASYMMETRIC_ALGS;
  const hmac = declared && hasSecret ? HMAC_ALGS.filter((a) => declared.includes(a)) : [];
  return [...asymmetric, ...hmac];
}

/**
 * Signature from the issuer's JWKS (or the client secret for a provider that declares HMAC), `iss`, `aud`
 * (and `azp` when several audiences), `exp`/`iat` with a small skew, and the nonce compared explicitly.
 */
export async function verifyIdToken(
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
export function verificationReason(err: unknown): string {
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

export const EMAIL = /^[^\s@]+@[^\s@]+$/;

export function claimString(claims: Record<string, unknown>, name: string, max: number): string | null {
  const value = claims[name];
  return typeof value === "string" && value.trim() !== "" && value.length <= max ? value.trim() : null;
}

/**
 * The email, name and picture of the signed-in account. Providers that follow OIDC Core §5.4 strictly put scope
 * claims only in userinfo; those are read from there, for the same subject only.
 */
export async function identityFrom(
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

export function stripEmpty(payload: JWTPayload): Record<string, unknown> {
  return Object.fromEntries(Object.entries(payload).filter(([, v]) => v !== undefined && v !== null && v !== ""));
}
