// OIDC sign-in (docs/spec.md Auth, docs/api.md §3). The OIDC configuration: validated, discovered and sealed at setup and after it.

import { eq, sql } from "drizzle-orm";
import type { SetupState } from "../../../db/schema/constants.ts";
import { instance, instanceSettings } from "../../../db/schema/index.ts";
import type { AppDeps } from "../../../deps.ts";
import { ApiError } from "../../../errors.ts";
import { auditStatement, recordAudit } from "../../common/audit.ts";
import { checkDestinationNow, DestinationNotAllowedError } from "../../common/outbound.ts";
import { loadInstance } from "../../setup/instance.ts";
import { readSetting, writeSettingStatement } from "../../settings/instance-settings.ts";
import { assertSetupOperation, transitionStatement } from "../../setup/setup.ts";
import type { UserRow } from "../users.ts";
import { type Deps, OIDC_SETTING, type StoredOidcSettings, type OidcConfigureInput, type DiscoveryDocument, DiscoveryFailure } from "./types.ts";
import { checkIssuerUrl, sameIssuer } from "./provider-fetch.ts";
import { discover } from "./discovery.ts";

export async function readOidcSettings(deps: Pick<AppDeps, "db">): Promise<StoredOidcSettings | null> {
  const stored = await readSetting<StoredOidcSettings>(deps, OIDC_SETTING);
  return stored?.value ?? null;
}

/** Validates, discovers (400 oidc_discovery_failed) and seals: the document to store. */
export async function prepareSettings(deps: Deps, input: OidcConfigureInput): Promise<StoredOidcSettings> {
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
export function writeSettingIfStateStatement(deps: Deps, settings: StoredOidcSettings, state: SetupState) {
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
    // The provider saved last is the remote sign-in (the trusted proxy's settings do the same, docs/decisions.md).
    deps.db.update(instance).set({ remoteAuthMode: "oidc", updatedAt: settings.configured_at }).where(eq(instance.id, 1)),
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
