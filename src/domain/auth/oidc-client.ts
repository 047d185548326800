import type { AppDeps } from "../../deps.ts";
import { isTrustedPeer, TRUSTED_PROXY_SETTING, type StoredTrustedProxySettings } from "./trusted-proxy.ts";
import { canonicalAddress, hostBlockOf, isLoopbackAddress } from "../common/addresses.ts";
import { readSetting } from "../settings/instance-settings.ts";

/** Who starts or finishes an OIDC sign-in: whether the request is loopback (docs/api.md §3) and whom its starts count against. */
export interface OidcClient {
  isLoopback: boolean;
  /** The client's address as counted for the per-client cap on pending starts. */
  key: string;
}

/**
 * The client of an OIDC start (docs/api.md §3): the TCP peer; or, when the peer is a proxy we trust (loopback, or in
 * `trusted_proxy_cidrs`), the last address its X-Forwarded-For adds: the one that proxy saw, which no client can
 * forge. Everyone behind one proxy that adds nothing counts as that proxy. Where there is no socket (a Worker),
 * Cloudflare's `CF-Connecting-IP`, which Cloudflare sets itself. IPv6 clients count by their /64.
 */
export async function resolveOidcClient(
  deps: Pick<AppDeps, "db">,
  input: { peerAddress: string | undefined; forwardedFor: string | undefined; isLoopback: boolean; cfConnectingIp?: string | undefined },
): Promise<OidcClient> {
  const peer = canonicalAddress(input.peerAddress) ?? "unknown";
  if (input.peerAddress === undefined) {
    const edge = canonicalAddress(input.cfConnectingIp);
    return { isLoopback: input.isLoopback, key: edge === null ? "unknown" : hostBlockOf(edge) };
  }
  let key = peer;
  if (input.forwardedFor !== undefined) {
    const stored = await readSetting<StoredTrustedProxySettings>(deps, TRUSTED_PROXY_SETTING);
    const cidrs = stored?.value.trusted_proxy_cidrs ?? [];
    const peerIsLoopback = isLoopbackAddress(peer);
    if (peerIsLoopback || (cidrs.length > 0 && isTrustedPeer(peer, cidrs))) {
      const last = input.forwardedFor.split(",").at(-1);
      key = canonicalAddress(last) ?? peer;
    }
  }
  return { isLoopback: input.isLoopback, key: hostBlockOf(key) };
}
