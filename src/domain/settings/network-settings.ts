import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { auditStatement } from "../common/audit.ts";
import { isThisMachineOnlyHostname } from "../common/addresses.ts";
import { loadInstance } from "../setup/instance.ts";
import { readSetting, writeSettingStatement } from "./instance-settings.ts";
import type { UserRow } from "../auth/users.ts";

/** Settings key of the External Access network document in instance_settings. */
export const NETWORK_SETTING = "external_access_network";

interface StoredNetworkSettings {
  public_url: string | null;
  artifact_delivery_url: string | null;
  allowed_origins: string[];
}

export interface NetworkSettings extends StoredNetworkSettings {
  /** `database` once saved; `default` before any PUT (docs/api.md §4). */
  source: "database" | "default";
  updated_at: number | null;
}

/** The effective network settings; the artifacts area reads the public and delivery URLs from here. */
export async function readNetworkSettings(deps: Pick<AppDeps, "db">): Promise<NetworkSettings> {
  const stored = await readSetting<StoredNetworkSettings>(deps, NETWORK_SETTING);
  if (!stored) return { public_url: null, artifact_delivery_url: null, allowed_origins: [], source: "default", updated_at: null };
  return { ...stored.value, source: "database", updated_at: stored.updatedAt };
}

/** An absolute http(s) URL without credentials, query or fragment; null when it is not one. */
export function parseBaseUrl(text: string): URL | null {
  if (!URL.canParse(text)) return null;
  const url = new URL(text);
  if (url.protocol !== "https:" && url.protocol !== "http:") return null;
  if (url.username || url.password || url.search || url.hash || !url.hostname) return null;
  return url;
}

/** A base URL as stored: no trailing slash, so callers can append `/install/...`. */
function canonicalBaseUrl(url: URL): string {
  return url.href.replace(/\/+$/, "");
}

/** An origin as stored: scheme://host[:port], lower-cased, default port dropped (URL does both). */
export function parseOrigin(text: string): string | null {
  const url = parseBaseUrl(text);
  if (!url || (url.pathname !== "/" && url.pathname !== "")) return null;
  // Only a bare origin or one with a trailing slash: a path here is almost certainly a mistake.
  if (!/^https?:\/\/[^/]+\/?$/i.test(text.trim())) return null;
  return url.origin;
}

export interface NetworkSettingsInput {
  public_url: string;
  artifact_delivery_url?: string | null;
  allowed_origins: string[];
}

/**
 * Validates and normalizes a network update (docs/spec.md settings table, in its order): malformed URL or origin →
 * invalid_input, public URL not HTTPS, its origin not allowed, then the delivery URL's three rules.
 */
export function validateNetworkSettings(input: NetworkSettingsInput): StoredNetworkSettings {
  const publicUrl = parseBaseUrl(input.public_url.trim());
  if (!publicUrl)
    throw new ApiError("invalid_input", "public_url must be an absolute http(s) URL without query or fragment", [
      { path: "public_url", message: "invalid URL" },
    ]);
  const origins: string[] = [];
  input.allowed_origins.forEach((text, index) => {
    const origin = parseOrigin(text);
    if (!origin)
      throw new ApiError("invalid_input", `allowed_origins[${index}] is not an origin such as https://ci.example.com`, [
        { path: `allowed_origins.${index}`, message: "invalid origin" },
      ]);
    if (!origins.includes(origin)) origins.push(origin);
  });
  if (publicUrl.protocol !== "https:") throw new ApiError("external_access_https_required", "public_url must use https");
  if (!origins.includes(publicUrl.origin)) {
    throw new ApiError("external_access_origin_not_allowed", `allowed_origins must contain the public URL's origin ${publicUrl.origin}`);
  }
  let delivery: string | null = null;
  const deliveryText = input.artifact_delivery_url?.trim();
  if (deliveryText) {
    const deliveryUrl = parseBaseUrl(deliveryText);
    if (!deliveryUrl) throw new ApiError("artifact_delivery_url_invalid", "artifact_delivery_url must be an absolute URL without query or fragment");
    if (deliveryUrl.protocol !== "https:") throw new ApiError("artifact_delivery_https_required", "artifact_delivery_url must use https");
    // Devices download from it: a loopback address would point each device at itself.
    if (isThisMachineOnlyHostname(deliveryUrl.hostname))
      throw new ApiError("artifact_delivery_public_url_required", "artifact_delivery_url must be reachable from devices, not a loopback address");
    delivery = canonicalBaseUrl(deliveryUrl);
  }
  return { public_url: canonicalBaseUrl(publicUrl), artifact_delivery_url: delivery, allowed_origins: origins };
}

/** In local mode only this machine may change the network settings (docs/spec.md); checked before the body is read. */
export async function assertNetworkChangeAllowed(deps: Pick<AppDeps, "db" | "clock">, isLoopback: boolean): Promise<void> {
  const inst = await loadInstance(deps);
  if (inst.runtimeMode === "local" && !isLoopback) {
    throw new ApiError("external_access_loopback_required", "in local mode the network settings can only be changed from this machine");
  }
}

/**
 * PUT network (owner only, checked by the route). In local mode only a loopback client may change it: the
 * settings that open the instance to the network must not be set from the network before it is opened.
 */
export async function updateNetworkSettings(
  deps: Pick<AppDeps, "db" | "clock">,
  actor: Pick<UserRow, "id" | "email">,
  input: NetworkSettingsInput & { isLoopback: boolean },
): Promise<NetworkSettings> {
  await assertNetworkChangeAllowed(deps, input.isLoopback);
  const doc = validateNetworkSettings(input);
  await deps.db.batch([
    writeSettingStatement(deps, NETWORK_SETTING, doc),
    auditStatement(deps, {
      action: "settings.network_updated",
      actor,
      targetType: "instance_settings",
      targetId: NETWORK_SETTING,
      details: { ...doc },
    }),
  ]);
  return { ...doc, source: "database", updated_at: deps.clock.now() };
}
