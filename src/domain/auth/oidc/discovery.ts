// OIDC sign-in (docs/spec.md Auth, docs/api.md §3). Discovery: the provider's openid-configuration document, checked field by field.

import type { AppDeps } from "../../../deps.ts";
import { ApiError } from "../../../errors.ts";
import { DestinationNotAllowedError, findDestinationNotAllowed } from "../../common/outbound.ts";
import { type Deps, type DiscoveryDocument, DiscoveryFailure } from "./types.ts";
import { isAllowedProviderUrl, sameIssuer, fetchJson, failureReason } from "./provider-fetch.ts";

/** `{issuer}/.well-known/openid-configuration`, checked field by field; throws DiscoveryFailure with a reason. */
export async function discover(deps: Pick<AppDeps, "fetch" | "config">, issuerUrl: string): Promise<DiscoveryDocument> {
  const url = `${issuerUrl.replace(/\/+$/, "")}/.well-known/openid-configuration`;
  let doc: unknown;
  try {
    doc = await fetchJson(deps, url);
  } catch (err) {
    const refused = findDestinationNotAllowed(err);
    if (refused) throw refused;
    throw new DiscoveryFailure(`the discovery document at ${url} cannot be read: ${failureReason(err)}`);
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) throw new DiscoveryFailure("the discovery document is not a JSON object");
  const d = doc as Record<string, unknown>;
  if (typeof d.issuer !== "string" || !sameIssuer(d.issuer, issuerUrl)) {
    // The provider's value is not repeated: error messages never echo fetched content (docs/api.md §3).
    throw new DiscoveryFailure(`the discovery document's issuer is not the configured issuer ${issuerUrl}`);
  }
  const endpoint = (name: string, required: boolean): string | undefined => {
    const value = d[name];
    if (value === undefined && !required) return undefined;
    if (typeof value !== "string") throw new DiscoveryFailure(`the discovery document has no ${name}`);
    let parsed: URL;
    try {
      parsed = new URL(value);
    } catch {
      throw new DiscoveryFailure(`the discovery document's ${name} is not a URL`);
    }
    if (!isAllowedProviderUrl(parsed, deps.config.outboundAllow)) throw new DiscoveryFailure(`the discovery document's ${name} must use https`);
    return value;
  };
  const algs = d.id_token_signing_alg_values_supported;
  return {
    issuer: d.issuer,
    authorization_endpoint: endpoint("authorization_endpoint", true)!,
    token_endpoint: endpoint("token_endpoint", true)!,
    jwks_uri: endpoint("jwks_uri", true)!,
    userinfo_endpoint: endpoint("userinfo_endpoint", false),
    id_token_signing_alg_values_supported: Array.isArray(algs) ? algs.filter((a): a is string => typeof a === "string") : undefined,
  };
}

/** Discovery while signing in: a failure is the provider's (502). */
export async function discoverForFlow(deps: Deps, issuerUrl: string): Promise<DiscoveryDocument> {
  try {
    return await discover(deps, issuerUrl);
  } catch (err) {
    if (err instanceof DiscoveryFailure) throw new ApiError("oidc_discovery_error", err.message);
    if (err instanceof DestinationNotAllowedError) throw new ApiError("oidc_discovery_error", err.message);
    throw err;
  }
}
