import type { ErrorCode } from "../../errors.ts";
import type { AppDeps } from "../../deps.ts";
import { readSetting } from "../settings/instance-settings.ts";
import { OIDC_SETTING } from "../auth/oidc.ts";
import { isThisMachineOnlyHostname } from "../common/addresses.ts";
import { parseBaseUrl, readNetworkSettings } from "../settings/network-settings.ts";
import { isTrustedProxyConfigured, isTrustedProxyUnguarded } from "../auth/trusted-proxy.ts";
import { dataDirSpace, isLowOnSpace, LOW_FREE_SPACE_RATIO } from "../retention/disk.ts";
import { loadInstance } from "./instance.ts";

export { OIDC_SETTING };

/** Settings key under which the OIDC area stores its configuration document. */

export interface PreflightCheck {
  id: string;
  label: string;
  ok: boolean;
  message: string;
  /** The code this check fails with; present whether or not it passed, so a client can map it ahead. */
  failure_code: ErrorCode;
  /** Whether remote mode needs it: a check that is not required only warns. */
  required: boolean;
}

export interface Preflight {
  ready: boolean;
  checks: PreflightCheck[];
}

function check(id: string, label: string, failureCode: ErrorCode, ok: boolean, passed: string, failed: string, required = true): PreflightCheck {
  return { id, label, ok, message: ok ? passed : failed, failure_code: failureCode, required };
}

/**
 * The External Access readiness checks, in docs/api.md §4's order. Enabling remote mode fails with the first
 * failing check's code.
 */
export async function runPreflight(deps: Pick<AppDeps, "db" | "clock" | "config" | "diskSpace">): Promise<Preflight> {
  const inst = await loadInstance(deps);
  const network = await readNetworkSettings(deps);
  const publicUrl = network.public_url ? parseBaseUrl(network.public_url) : null;
  const publicSet = publicUrl !== null && !isThisMachineOnlyHostname(publicUrl.hostname);
  const https = publicUrl?.protocol === "https:";
  const originAllowed = publicUrl !== null && network.allowed_origins.includes(publicUrl.origin);
  // docs/api.md §4: either remote mechanism counts (OIDC is stored under "oidc" by the OIDC area).
  const authConfigured = (await readSetting(deps, OIDC_SETTING)) !== null || (await isTrustedProxyConfigured(deps));
  const delivery = network.artifact_delivery_url ? parseBaseUrl(network.artifact_delivery_url) : null;
  const deliveryOk = network.artifact_delivery_url === null || delivery?.protocol === "https:";

  const checks = [
    check(
      "public_url_set",
      "Public URL set",
      "external_access_public_url_missing",
      publicSet,
      `public URL is ${network.public_url}`,
      "set a public URL that is not a loopback address",
    ),
    check(
      "public_url_https",
      "Public URL uses HTTPS",
      "external_access_https_required",
      https,
      "the public URL uses https",
      "the public URL must use https",
    ),
    check(
      "public_url_origin_allowed",
      "Public origin allowed",
      "external_access_origin_not_allowed",
      originAllowed,
      "allowed_origins contains the public URL's origin",
      "allowed_origins must contain the public URL's origin",
    ),
    check(
      "remote_auth_configured",
      "Remote sign-in configured",
      "external_access_auth_missing",
      authConfigured,
      "OIDC or trusted-proxy sign-in is configured",
      "configure OIDC or trusted-proxy sign-in first",
    ),
    check(
      "artifact_delivery_https",
      "Artifact delivery URL uses HTTPS",
      "artifact_delivery_https_required",
      deliveryOk,
      network.artifact_delivery_url ? "the artifact delivery URL uses https" : "no artifact delivery URL is set; the public URL is used",
      "the artifact delivery URL must use https",
    ),
    // Not required (the spec makes both optional), but without either any local process can claim to be the proxy.
    check(
      "trusted_proxy_secret",
      "Trusted proxy proves itself",
      "trusted_proxy_shared_secret_missing",
      !(inst.remoteAuthMode === "trusted_proxy" && (await isTrustedProxyUnguarded(deps))),
      "the trusted proxy is checked by a shared secret or its network, or is not in use",
      "the trusted proxy has neither a shared secret nor trusted_proxy_cidrs: any process on this machine can sign in as anyone; set a shared secret",
      false,
    ),
  ];
  const space = await dataDirSpace(deps);
  const gib = (n: number) => `${(n / 1024 ** 3).toFixed(1)} GiB`;
  const percent = space && space.total_bytes > 0 ? Math.round((space.free_bytes / space.total_bytes) * 1000) / 10 : null;
  checks.push(
    check(
      "data_dir_free_space",
      "Data directory has free space",
      "data_dir_low_space",
      !isLowOnSpace(space),
      space ? `${gib(space.free_bytes)} free (${percent} %)` : "this host does not report free space",
      `only ${gib(space?.free_bytes ?? 0)} free (${percent} %, under ${LOW_FREE_SPACE_RATIO * 100} %): set a retention policy or free the disk`,
      false,
    ),
  );
  return { ready: checks.every((c) => c.ok || !c.required), checks };
}
