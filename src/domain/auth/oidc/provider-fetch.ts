// OIDC sign-in (docs/spec.md Auth, docs/api.md §3). Provider URLs and bounded fetches: what a provider URL may be, and GETs with a timeout and a size cap.

import type { AppDeps } from "../../../deps.ts";
import { ApiError } from "../../../errors.ts";
import { checkUrlWithoutDns, type OutboundAllowList } from "../../common/outbound.ts";
import { readStreamCapped } from "../../common/streams.ts";
import { DISCOVERY_TIMEOUT_MS, MAX_DISCOVERY_BYTES } from "./types.ts";

/**
 * https, or plain http to an address HANGAR_OUTBOUND_ALLOW lists (a development provider; docs/api.md §3). This
 * sync form knows literals and localhost; the configured issuer's name is also resolved (prepareSettings).
 */
export function isAllowedProviderUrl(url: URL, allow: OutboundAllowList): boolean {
  if (url.username || url.password) return false;
  if (url.protocol === "https:") return true;
  if (url.protocol !== "http:") return false;
  try {
    return checkUrlWithoutDns(url, allow).listed;
  } catch {
    return false;
  }
}

/** The configured issuer URL, or 400 invalid_input saying why it is refused. */
export function checkIssuerUrl(raw: string): string {
  const issuer = raw.trim();
  const refuse = (message: string) => new ApiError("invalid_input", message, [{ path: "issuer_url", message }]);
  let url: URL;
  try {
    url = new URL(issuer);
  } catch {
    throw refuse("issuer_url must be an absolute URL");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw refuse("issuer_url must be an https URL");
  if (url.username || url.password) throw refuse("issuer_url must not carry credentials");
  if (url.search || url.hash) throw refuse("issuer_url must not have a query or fragment");
  return issuer;
}

/** Issuers compare as strings (OIDC Discovery §4.3), forgiving only a trailing slash typed by the operator. */
export function sameIssuer(a: string, b: string): boolean {
  return a.replace(/\/+$/, "") === b.replace(/\/+$/, "");
}

/** Reads a body up to `maxBytes`; a larger one is cut off rather than buffered. */
export async function readCapped(res: Response, maxBytes: number): Promise<string> {
  try {
    return new TextDecoder().decode(
      await readStreamCapped(res.body, res.headers.get("content-length"), maxBytes, () => new Error(`answer larger than ${maxBytes} bytes`)),
    );
  } catch (err) {
    // Refused before reading: release the connection (a body being read was cancelled already).
    await res.body?.cancel().catch(() => undefined);
    throw err;
  }
}

/** GET through deps.fetch with a timeout that covers the body too, no redirects, and a size cap. */
export async function fetchJson(deps: Pick<AppDeps, "fetch">, url: string, headers: Record<string, string> = {}): Promise<unknown> {
  const res = await deps.fetch(url, {
    method: "GET",
    headers: { accept: "application/json", ...headers },
    // Not followed: "manual" makes a 3xx one more status that is not 200 ("error" is refused on Workers).
    redirect: "manual",
    signal: AbortSignal.timeout(DISCOVERY_TIMEOUT_MS),
  });
  if (res.status !== 200) {
    await res.body?.cancel();
    throw new Error(`HTTP ${res.status}`);
  }
  const text = await readCapped(res, MAX_DISCOVERY_BYTES);
  try {
    return JSON.parse(text);
  } catch {
    throw new Error("the answer is not JSON");
  }
}

export function failureReason(err: unknown): string {
  if (err instanceof Error && err.name === "TimeoutError") return `no answer within ${DISCOVERY_TIMEOUT_MS / 1000} s`;
  return err instanceof Error ? err.message : "request failed";
}
