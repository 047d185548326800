import { createLocalJWKSet, type JSONWebKeySet, type JWTPayload, type JWTVerifyGetKey, jwtVerify } from "jose";
import { z } from "zod";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { checkDestinationNow, DestinationNotAllowedError, findDestinationNotAllowed } from "../common/outbound.ts";
import { readStreamCapped } from "../common/streams.ts";

// Signed identity assertions from a trusted proxy (docs/api.md §21): Cloudflare Access, Google IAP, Pomerium and
// the like sign the identity they forward as a JWT. The key set is read from the configured URL through the
// outbound guard (docs/api.md §12) and cached per daemon process.

/** The assertion settings as stored in the trusted-proxy document (header name lower-cased). */
export interface ProxyAssertionSettings {
  header: string;
  jwks_url: string;
  issuer: string;
  audience: string;
  email_claim: string;
}

/** Only signatures a public key can check: `none` and every HMAC algorithm are refused (a public key is no secret). */
export const ASSERTION_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"];

/** The key set is fetched again on an unknown `kid`, but at most once per this many seconds (docs/api.md §21). */
export const UNKNOWN_KID_REFETCH_S = 30;
/** A cached key set older than this is fetched again on use (a failed refresh keeps the old keys). */
export const KEY_SET_MAX_AGE_S = 600;
/** Clock skew forgiven on `exp`, `nbf` and `iat`. */
const CLOCK_SKEW_S = 60;
const KEY_SET_TIMEOUT_MS = 5_000;
const MAX_KEY_SET_BYTES = 256 * 1024;
/** Longer than any proxy's assertion (Cloudflare's are ~1 KiB): a bigger header is refused unparsed. */
const MAX_ASSERTION_CHARS = 16 * 1024;

// ---------------------------------------------------------------------------------------------------------
// Input rules

const VISIBLE_ASCII = /^[\x21-\x7e]+$/;

/** A claim name: letters, digits and the punctuation of namespaced claims (`https://example.com/email`). */
const CLAIM_NAME = /^[A-Za-z0-9_.:/-]{1,200}$/;

/** The `assertion` object of trusted-proxy configure but its header name, which the trusted proxy's header rules check. */
export const assertionFieldsSchema = z.object({
  jwks_url: z.string().trim().min(1).max(2048),
  issuer: z.string().trim().min(1).max(2048).regex(VISIBLE_ASCII, "must be visible ASCII without spaces"),
  audience: z.string().trim().min(1).max(2048).regex(VISIBLE_ASCII, "must be visible ASCII without spaces"),
  email_claim: z.string().trim().regex(CLAIM_NAME, "must be a claim name").optional(),
});

export interface AssertionInput {
  header: string;
  jwks_url: string;
  issuer: string;
  audience: string;
  email_claim?: string;
}

/**
 * The settings to store, or 400: `jwks_url` is an absolute https URL (plain http only to a destination
 * HANGAR_OUTBOUND_ALLOW lists, as for OIDC issuers, docs/api.md §3) that the outbound guard lets through now
 * (400 destination_not_allowed otherwise, like every other outbound URL).
 */
export async function prepareAssertionSettings(
  deps: Pick<AppDeps, "checkDestination" | "config">,
  input: AssertionInput,
): Promise<ProxyAssertionSettings> {
  const invalid = (message: string) => new ApiError("invalid_input", message, [{ path: "assertion.jwks_url", message }]);
  let url: URL;
  try {
    url = new URL(input.jwks_url);
  } catch {
    throw invalid("assertion.jwks_url must be an absolute URL");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw invalid("assertion.jwks_url must be an https URL");
  if (url.username || url.password) throw invalid("assertion.jwks_url must not carry credentials");
  if (url.hash) throw invalid("assertion.jwks_url must not have a fragment");
  let listed: boolean;
  try {
    ({ listed } = await checkDestinationNow(deps, url.href));
  } catch (err) {
    if (err instanceof DestinationNotAllowedError) throw new ApiError("destination_not_allowed", `assertion.jwks_url: ${err.message}`);
    throw err;
  }
  if (url.protocol === "http:" && !listed) {
    throw invalid("assertion.jwks_url must use https (plain http is accepted only for destinations in HANGAR_OUTBOUND_ALLOW)");
  }
  return {
    header: input.header,
    jwks_url: url.href,
    issuer: input.issuer,
    audience: input.audience,
    email_claim: input.email_claim ?? "email",
  };
}

// ---------------------------------------------------------------------------------------------------------
// The key set cache

interface CachedKeySet {
  getKey: JWTVerifyGetKey;
  kids: Set<string>;
  fetchedAt: number;
}

interface KeySetSlot {
  current: CachedKeySet | null;
  /** When the key set was last fetched (or a fetch was tried): the unknown-kid refetch waits 30 s after it. */
  lastAttemptAt: number | null;
  /** The fetch under way, shared by concurrent sign-ins. */
  inflight: Promise<CachedKeySet> | null;
}

/** One cache per database (one per app instance), each keyed by key set URL. */
const cachesByDb = new WeakMap<object, Map<string, KeySetSlot>>();

function slotFor(deps: Pick<AppDeps, "db">, url: string): KeySetSlot {
  let cache = cachesByDb.get(deps.db);
  if (!cache) {
    cache = new Map();
    cachesByDb.set(deps.db, cache);
  }
  let slot = cache.get(url);
  if (!slot) {
    slot = { current: null, lastAttemptAt: null, inflight: null };
    cache.set(url, slot);
  }
  return slot;
}

/** Why a key set could not be used; the message never repeats fetched content (docs/api.md §3). */
class KeySetFailure extends Error {}

async function fetchKeySet(deps: Pick<AppDeps, "fetch" | "clock">, url: string): Promise<CachedKeySet> {
  let res: Response;
  try {
    res = await deps.fetch(url, {
      method: "GET",
      headers: { accept: "application/json" },
      redirect: "manual",
      signal: AbortSignal.timeout(KEY_SET_TIMEOUT_MS),
    });
  } catch (err) {
    const refused = findDestinationNotAllowed(err);
    throw new KeySetFailure(refused ? refused.message : "the key set could not be fetched");
  }
  if (res.status !== 200) {
    await res.body?.cancel().catch(() => undefined);
    throw new KeySetFailure(`the key set answered HTTP ${res.status}`);
  }
  let parsed: unknown;
  try {
    const bytes = await readStreamCapped(res.body, res.headers.get("content-length"), MAX_KEY_SET_BYTES, () => new Error("too large"));
    parsed = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    throw new KeySetFailure("the key set is not a JSON document within 256 KiB");
  }
  const keys = (parsed as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys)) throw new KeySetFailure("the key set has no keys array");
  let getKey: JWTVerifyGetKey;
  try {
    getKey = createLocalJWKSet(parsed as JSONWebKeySet);
  } catch {
    throw new KeySetFailure("the key set is not a valid JWK set");
  }
  const kids = new Set(keys.map((k) => (k as { kid?: unknown })?.kid).filter((kid): kid is string => typeof kid === "string"));
  return { getKey, kids, fetchedAt: deps.clock.now() };
}

/** Fetches into the slot; concurrent callers share one request. */
function refresh(deps: Pick<AppDeps, "fetch" | "clock">, slot: KeySetSlot, url: string): Promise<CachedKeySet> {
  if (slot.inflight) return slot.inflight;
  slot.lastAttemptAt = deps.clock.now();
  const run = fetchKeySet(deps, url)
    .then((keySet) => {
      slot.current = keySet;
      return keySet;
    })
    .finally(() => {
      slot.inflight = null;
    });
  slot.inflight = run;
  return run;
}

/** The cached key set, fetched when missing and refreshed when old (the old keys serve while a refresh fails). */
async function keySet(deps: Pick<AppDeps, "fetch" | "clock" | "db">, url: string): Promise<{ slot: KeySetSlot; keys: CachedKeySet }> {
  const slot = slotFor(deps, url);
  const cached = slot.current;
  if (!cached) return { slot, keys: await refresh(deps, slot, url) };
  if (deps.clock.now() - cached.fetchedAt >= KEY_SET_MAX_AGE_S) {
    try {
      return { slot, keys: await refresh(deps, slot, url) };
    } catch {
      return { slot, keys: cached };
    }
  }
  return { slot, keys: cached };
}

// ---------------------------------------------------------------------------------------------------------
// Verifying

const EMAIL = z.email().max(320);

function invalid(reason: string): ApiError {
  return new ApiError("trusted_proxy_assertion_invalid", `the proxy's signed assertion is not valid: ${reason}`);
}

/** jose's refusal in our words: its messages can carry content from the token or the key set. */
function reasonOf(err: unknown): string {
  const e = err as { code?: unknown; claim?: unknown };
  switch (e?.code) {
    case "ERR_JWT_EXPIRED":
      return "it has expired";
    case "ERR_JWT_CLAIM_VALIDATION_FAILED":
      return typeof e.claim === "string" && /^[a-z_]{1,20}$/.test(e.claim)
        ? `its "${e.claim}" claim is not the configured one`
        : "a claim is not valid";
    case "ERR_JWS_SIGNATURE_VERIFICATION_FAILED":
      return "the signature does not match";
    case "ERR_JOSE_ALG_NOT_ALLOWED":
    case "ERR_JOSE_NOT_SUPPORTED":
      return "it is not signed with an asymmetric algorithm";
    case "ERR_JWKS_NO_MATCHING_KEY":
    case "ERR_JWKS_MULTIPLE_MATCHING_KEYS":
      return "no single key of the key set matches it";
    case "ERR_JWS_INVALID":
    case "ERR_JWT_INVALID":
      return "it is not a well-formed signed JWT";
    default:
      return "it could not be verified";
  }
}

/**
 * The email the proxy's signed assertion names (docs/api.md §21): the JWT in the configured header, signed by a
 * key of the key set with an asymmetric algorithm, with the configured `iss` and `aud`, an `exp` not passed.
 * 401 trusted_proxy_assertion_missing without the header, 401 trusted_proxy_assertion_invalid otherwise.
 */
export async function verifiedAssertionEmail(
  deps: Pick<AppDeps, "fetch" | "clock" | "db">,
  settings: ProxyAssertionSettings,
  headers: Headers,
): Promise<string> {
  const token = headers.get(settings.header)?.trim();
  if (!token) throw new ApiError("trusted_proxy_assertion_missing", `the signed assertion header ${settings.header} is missing`);
  if (token.length > MAX_ASSERTION_CHARS) throw invalid("it is too long");

  let cached: { slot: KeySetSlot; keys: CachedKeySet };
  try {
    cached = await keySet(deps, settings.jwks_url);
  } catch (err) {
    throw invalid(err instanceof KeySetFailure ? err.message : "the key set could not be read");
  }
  const { slot } = cached;
  let keys = cached.keys;
  // An unknown kid may mean the issuer rotated its keys: fetch again, at most once per 30 s whatever the callers
  // send (a stream of made-up kids must not make the daemon hammer the issuer).
  const getKey: JWTVerifyGetKey = async (header, token) => {
    const known = header.kid === undefined || keys.kids.has(header.kid);
    const now = deps.clock.now();
    if (!known && (slot.lastAttemptAt === null || now - slot.lastAttemptAt >= UNKNOWN_KID_REFETCH_S)) {
      try {
        keys = await refresh(deps, slot, settings.jwks_url);
      } catch {
        // The old keys stay; the token is refused below for want of its key.
      }
    }
    return keys.getKey(header, token);
  };

  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(token, getKey, {
      issuer: settings.issuer,
      audience: settings.audience,
      algorithms: ASSERTION_ALGORITHMS,
      currentDate: new Date(deps.clock.now() * 1000),
      clockTolerance: CLOCK_SKEW_S,
      requiredClaims: ["exp"],
    }));
  } catch (err) {
    throw invalid(reasonOf(err));
  }
  const claimed = payload[settings.email_claim];
  const email = typeof claimed === "string" ? claimed.trim() : "";
  if (!EMAIL.safeParse(email).success) throw invalid(`its "${settings.email_claim}" claim is not an email address`);
  return email;
}
