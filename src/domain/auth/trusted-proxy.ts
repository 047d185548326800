import { isLoopbackAddress, isPeerInCidrs, parseCidr } from "../common/addresses.ts";
import { eq, sql } from "drizzle-orm";
import { z } from "zod";
import { instance, instanceSettings } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { auditStatement, recordAudit } from "../common/audit.ts";
import { constantTimeEqual } from "../common/crypto.ts";
import { loadInstance } from "../setup/instance.ts";
import { readSetting, writeSettingStatement } from "../settings/instance-settings.ts";
import { assertSetupOperation, createOwner, transitionStatement } from "../setup/setup.ts";
import {
  assertionFieldsSchema,
  type AssertionInput,
  prepareAssertionSettings,
  type ProxyAssertionSettings,
  verifiedAssertionEmail,
} from "./proxy-assertion.ts";
import { newOwnerValues, normalizeEmail, signIn, type UserRow } from "./users.ts";

/** Settings key of the trusted-proxy document in instance_settings. */
export const TRUSTED_PROXY_SETTING = "trusted_proxy";
/** The header that carries the shared secret (docs/api.md §3). */
export const TRUSTED_PROXY_SECRET_HEADER = "x-hangar-trusted-proxy-secret";
/** The identity header when none is configured (docs/api.md §3; the spec's `x-service-user-email`). */
export const DEFAULT_USER_EMAIL_HEADER = "x-hangar-user-email";
/** The identity header of the named access gateway that install-link rule 4 keys on. */
export const GATEWAY_USER_HEADER = "x-gateway-username";

/** The stored document. Secrets are sealed with the key file's box; header names are stored lower-cased. */
export interface StoredTrustedProxySettings {
  setup_owner_email: string | null;
  user_email_header: string;
  trusted_proxy_cidrs: string[];
  shared_secret_sealed: string | null;
  gateway_access_ticket_sealed: string | null;
  /** A signed assertion the proxy must send (docs/api.md §21); absent in documents written before it existed. */
  assertion?: ProxyAssertionSettings | null;
  configured_at: number;
}

/** What other areas read: the configuration with the gateway ticket opened (the shared secret stays inside). */
export interface TrustedProxySettings {
  setupOwnerEmail: string | null;
  userEmailHeader: string;
  cidrs: string[];
  hasSharedSecret: boolean;
  gatewayAccessTicket: string | null;
  assertion: ProxyAssertionSettings | null;
  configuredAt: number;
}

type SecretDeps = Pick<AppDeps, "db" | "clock" | "secrets">;
/** Configure checks the key set URL with the outbound guard; sign-in fetches the key set. */
type ConfigureDeps = SecretDeps & Pick<AppDeps, "checkDestination" | "config">;
type SignInDeps = SecretDeps & Pick<AppDeps, "fetch">;

// ---------------------------------------------------------------------------------------------------------
// The proxy's address (the address rules themselves are src/domain/common/addresses.ts's)

/**
 * Whether the TCP peer may assert identities. Only the socket address counts: the proxy itself adds the
 * forwarding headers. An empty list trusts loopback peers only (a proxy on this machine; docs/api.md §3).
 */
export function isTrustedPeer(peer: string | undefined, cidrs: readonly string[]): boolean {
  return cidrs.length === 0 ? isLoopbackAddress(peer?.trim()) : isPeerInCidrs(peer, cidrs);
}

// ---------------------------------------------------------------------------------------------------------
// Input rules (used by the route's zod schema, so a failure is 400 invalid_input with issues)

const HEADER_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$/;
/** Headers a client or the transport controls, or our own secret: never an identity header. */
const RESERVED_HEADERS = new Set([
  "host",
  "authorization",
  "cookie",
  "content-type",
  "content-length",
  "transfer-encoding",
  "connection",
  "origin",
  TRUSTED_PROXY_SECRET_HEADER,
]);
const VISIBLE_ASCII = /^[\x21-\x7e]+$/;

export const userEmailHeaderSchema = z
  .string()
  .trim()
  .regex(HEADER_TOKEN, "must be an HTTP header name")
  .transform((name) => name.toLowerCase())
  .refine((name) => !RESERVED_HEADERS.has(name), "this header cannot carry the user's identity");

export const cidrListSchema = z
  .array(z.string().max(64))
  .max(64)
  .superRefine((cidrs, ctx) => {
    cidrs.forEach((cidr, index) => {
      const parsed = parseCidr(cidr);
      if ("error" in parsed) ctx.addIssue({ code: "custom", path: [index], message: `${JSON.stringify(cidr)}: ${parsed.error}` });
    });
  });

/** A value that travels in a header: visible ASCII, long enough not to be guessed. */
export const sharedSecretSchema = z
  .string()
  .min(16, "must be at least 16 characters")
  .max(512)
  .regex(VISIBLE_ASCII, "must be visible ASCII without spaces");

export const gatewayTicketSchema = z.string().min(1).max(4096).regex(VISIBLE_ASCII, "must be visible ASCII without spaces");

/** The `assertion` object: the header rules of the identity header, and the key set, issuer and audience. */
export const assertionSchema = assertionFieldsSchema.extend({ header: userEmailHeaderSchema });

const identityEmailSchema = z.email().max(320);

// ---------------------------------------------------------------------------------------------------------
// Reading and writing the document

async function loadDocument(deps: Pick<AppDeps, "db">): Promise<StoredTrustedProxySettings | null> {
  return (await readSetting<StoredTrustedProxySettings>(deps, TRUSTED_PROXY_SETTING))?.value ?? null;
}

/** The trusted-proxy configuration, or null before configure (artifacts read the gateway ticket from here). */
export async function readTrustedProxySettings(deps: Pick<AppDeps, "db" | "secrets">): Promise<TrustedProxySettings | null> {
  const doc = await loadDocument(deps);
  if (!doc) return null;
  return {
    setupOwnerEmail: doc.setup_owner_email,
    userEmailHeader: doc.user_email_header,
    cidrs: doc.trusted_proxy_cidrs,
    hasSharedSecret: doc.shared_secret_sealed !== null,
    gatewayAccessTicket: doc.gateway_access_ticket_sealed ? await deps.secrets.open(doc.gateway_access_ticket_sealed) : null,
    assertion: doc.assertion ?? null,
    configuredAt: doc.configured_at,
  };
}

export interface ConfigureTrustedProxyInput {
  setup_owner_email?: string | null;
  user_email_header?: string;
  trusted_proxy_cidrs?: string[];
  /** Omitted: keep the stored one; null: remove it. */
  shared_secret?: string | null;
  /** Omitted: keep the stored one; null: remove it. */
  gateway_access_ticket?: string | null;
  /** Omitted or null: no signed assertion (the plain identity header is believed). */
  assertion?: AssertionInput | null;
}

function assertTrustedProxyMode(inst: { runtimeMode: string; remoteAuthMode: string }, what: string): void {
  if (inst.runtimeMode !== "remote" || inst.remoteAuthMode !== "trusted_proxy") {
    throw new ApiError("mode_restricted", `${what} needs runtime_mode=remote with remote_auth_mode=trusted_proxy`);
  }
}

/** The document a configure writes: secrets sealed (or kept when omitted), CIDRs canonical, the key set URL checked. */
async function buildDocument(deps: ConfigureDeps, input: ConfigureTrustedProxyInput): Promise<StoredTrustedProxySettings> {
  const previous = await loadDocument(deps);
  const sealOrKeep = async (value: string | null | undefined, kept: string | null | undefined) =>
    value === undefined ? (kept ?? null) : value === null ? null : deps.secrets.seal(value);
  return {
    setup_owner_email: input.setup_owner_email ? normalizeEmail(input.setup_owner_email) : null,
    user_email_header: input.user_email_header ?? DEFAULT_USER_EMAIL_HEADER,
    trusted_proxy_cidrs: (input.trusted_proxy_cidrs ?? []).map((cidr) => {
      const parsed = parseCidr(cidr);
      return "error" in parsed ? cidr : parsed.canonical;
    }),
    shared_secret_sealed: await sealOrKeep(input.shared_secret, previous?.shared_secret_sealed),
    gateway_access_ticket_sealed: await sealOrKeep(input.gateway_access_ticket, previous?.gateway_access_ticket_sealed),
    assertion: input.assertion ? await prepareAssertionSettings(deps, input.assertion) : null,
    configured_at: deps.clock.now(),
  };
}

/** The configuration as the API shows it: no secret, only whether one is stored. */
function documentJson(doc: StoredTrustedProxySettings) {
  return {
    user_email_header: doc.user_email_header,
    trusted_proxy_cidrs: doc.trusted_proxy_cidrs,
    has_shared_secret: doc.shared_secret_sealed !== null,
    has_gateway_access_ticket: doc.gateway_access_ticket_sealed !== null,
    assertion: doc.assertion ?? null,
  };
}

/**
 * Setup: stores the configuration and moves bootstrap_pending → idp_configured (repeatable there). The
 * document write is conditional on the state change having landed in the same batch, so a configure racing
 * an owner claim never rewrites the settings the owner was claimed under.
 */
export async function configureTrustedProxy(deps: ConfigureDeps, input: ConfigureTrustedProxyInput) {
  const inst = await loadInstance(deps);
  const next = assertSetupOperation(inst, "configure_trusted_proxy");
  assertTrustedProxyMode(inst, "trusted-proxy configuration");
  const doc = await buildDocument(deps, input);
  const now = doc.configured_at;
  const json = JSON.stringify(doc);
  const transitionLanded = sql`exists (select 1 from ${instance} where ${instance.id} = 1 and ${instance.state} = ${next} and ${instance.ownerUserId} is null)`;
  const [moved] = await deps.db.batch([
    transitionStatement(deps, "configure_trusted_proxy", next),
    deps.db
      .insert(instanceSettings)
      .select(sql`select ${TRUSTED_PROXY_SETTING}, ${json}, ${now} where ${transitionLanded}`)
      .onConflictDoUpdate({ target: instanceSettings.key, set: { value: sql`excluded.value`, updatedAt: now } }),
  ]);
  if (moved.length === 0) throw new ApiError("invalid_state", "the owner was already created");
  const shown = documentJson(doc);
  // Recorded only once the change has landed.
  await recordAudit(deps, {
    action: "setup.trusted_proxy_configured",
    targetType: "instance",
    targetId: inst.instanceId,
    details: shown,
  });
  return { state: next, setup_owner_email: doc.setup_owner_email, ...shown, configured_at: now };
}

/** GET /v1/settings/trusted-proxy: the stored configuration (defaults before any), and whether it is the remote sign-in. */
export async function readTrustedProxySettingsJson(deps: Pick<AppDeps, "db" | "clock">) {
  const inst = await loadInstance(deps);
  const doc = await loadDocument(deps);
  const shown = doc
    ? documentJson(doc)
    : {
        user_email_header: DEFAULT_USER_EMAIL_HEADER,
        trusted_proxy_cidrs: [],
        has_shared_secret: false,
        has_gateway_access_ticket: false,
        assertion: null,
      };
  return { configured: doc !== null, in_use: inst.remoteAuthMode === "trusted_proxy", ...shown, configured_at: doc?.configured_at ?? null };
}

/**
 * After setup (PUT /v1/settings/trusted-proxy, owner only; docs/api.md §21): replaces the configuration and makes
 * the trusted proxy the remote sign-in (remote_auth_mode), so an instance set up on one Mac can open to the team
 * through Tailscale or an access gateway. Secrets omitted are kept, as in setup.
 */
export async function updateTrustedProxySettings(deps: ConfigureDeps, actor: Pick<UserRow, "id" | "email">, input: ConfigureTrustedProxyInput) {
  const inst = await loadInstance(deps);
  if (inst.state !== "ready") throw new ApiError("invalid_state", "the trusted proxy is configured through setup until setup is complete");
  const doc = await buildDocument(deps, { ...input, setup_owner_email: null });
  const shown = documentJson(doc);
  await deps.db.batch([
    writeSettingStatement(deps, TRUSTED_PROXY_SETTING, doc),
    deps.db.update(instance).set({ remoteAuthMode: "trusted_proxy", updatedAt: doc.configured_at }).where(eq(instance.id, 1)),
    auditStatement(deps, { action: "settings.trusted_proxy_configured", actor, targetType: "instance", targetId: inst.instanceId, details: shown }),
  ]);
  return readTrustedProxySettingsJson(deps);
}

// ---------------------------------------------------------------------------------------------------------
// Asserting an identity

export interface ProxyRequest {
  /** The TCP peer address from the host; never a header. */
  peer: string | undefined;
  headers: Headers;
}

/**
 * The email a trusted proxy asserts, checked in this order: peer in the allowlist, the shared secret
 * (constant-time), then the identity header. Header lookups are case-insensitive (`Headers.get`).
 */
export async function assertedEmail(deps: SignInDeps, doc: StoredTrustedProxySettings, req: ProxyRequest): Promise<string> {
  if (!isTrustedPeer(req.peer, doc.trusted_proxy_cidrs)) {
    throw new ApiError("trusted_proxy_peer_not_allowed", "this request did not come from a trusted proxy");
  }
  if (doc.shared_secret_sealed !== null) {
    const given = req.headers.get(TRUSTED_PROXY_SECRET_HEADER);
    if (given === null || given === "") throw new ApiError("trusted_proxy_shared_secret_missing", "the proxy's shared secret header is missing");
    const expected = await deps.secrets.open(doc.shared_secret_sealed);
    if (!constantTimeEqual(given, expected)) throw new ApiError("trusted_proxy_shared_secret_invalid", "the proxy's shared secret does not match");
  }
  // With a signed assertion configured, its email claim is the identity and the plain header is ignored (docs/api.md §21).
  if (doc.assertion) return normalizeEmail(await verifiedAssertionEmail(deps, doc.assertion, req.headers));
  const identity = req.headers.get(doc.user_email_header)?.trim();
  if (!identity) throw new ApiError("trusted_proxy_identity_missing", `the identity header ${doc.user_email_header} is missing`);
  if (!identityEmailSchema.safeParse(identity).success) {
    throw new ApiError("trusted_proxy_identity_invalid", "the identity header does not hold a valid email");
  }
  return normalizeEmail(identity);
}

async function requireDocument(deps: Pick<AppDeps, "db">): Promise<StoredTrustedProxySettings> {
  const doc = await loadDocument(deps);
  if (!doc) throw new ApiError("trusted_proxy_not_configured", "the trusted proxy is not configured yet");
  return doc;
}

/** Setup: the proxy-asserted user becomes the owner (idp_configured → owner_created). */
export async function claimTrustedProxyOwner(deps: SignInDeps, req: ProxyRequest) {
  const inst = await loadInstance(deps);
  if (inst.state === "ready") throw new ApiError("already_configured", "setup is complete");
  assertTrustedProxyMode(inst, "claiming the owner through a trusted proxy");
  const doc = await requireDocument(deps);
  const next = assertSetupOperation(inst, "claim_trusted_proxy_owner");
  const email = await assertedEmail(deps, doc, req);
  if (doc.setup_owner_email !== null && doc.setup_owner_email !== email) {
    throw new ApiError("trusted_proxy_owner_email_mismatch", "the asserted identity is not the configured setup owner email");
  }
  const created = await createOwner(deps, "claim_trusted_proxy_owner", next, newOwnerValues(deps, email));
  return { state: created.state, owner_email: created.owner_email };
}

/** Sign-in through the proxy (docs/spec.md trusted-proxy login rules 1–5). */
export async function trustedProxyLogin(deps: SignInDeps, req: ProxyRequest) {
  const inst = await loadInstance(deps);
  assertTrustedProxyMode(inst, "trusted-proxy login");
  const doc = await requireDocument(deps);
  const email = await assertedEmail(deps, doc, req);
  return signIn(deps, { email, method: "trusted_proxy" });
}

/** Whether trusted-proxy sign-in is configured (the preflight's remote_auth_configured). */
export async function isTrustedProxyConfigured(deps: Pick<AppDeps, "db">): Promise<boolean> {
  return (await loadDocument(deps)) !== null;
}

/** A configured trusted proxy with no shared secret, no CIDRs and no assertion: any loopback process can pose as the proxy. */
export async function isTrustedProxyUnguarded(deps: Pick<AppDeps, "db">): Promise<boolean> {
  const doc = await loadDocument(deps);
  // A signed assertion proves the proxy by itself: a local process cannot sign one (docs/api.md §21).
  return doc !== null && !doc.shared_secret_sealed && (doc.trusted_proxy_cidrs ?? []).length === 0 && !doc.assertion;
}
