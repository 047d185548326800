import ipaddr from "ipaddr.js";
import type { AppDeps } from "../../deps.ts";
import { isTrustedPeer, TRUSTED_PROXY_SETTING, type StoredTrustedProxySettings } from "./trusted-proxy.ts";
import { isLoopbackAddress } from "../common/addresses.ts";
import { readSetting } from "../settings/instance-settings.ts";

/** Who starts or finishes an OIDC sign-in: whether the request is loopback (docs/api.md §3) and whom its starts count against. */
export interface OidcClient {
  isLoopback: boolean;
  /** The client's address as counted for the per-client cap on pending starts. */
  key: string;
}

/** An address in one spelling: IPv4-mapped IPv6 as IPv4, IPv6 compressed; null when it is not an address. */
function canonicalAddress(text: string | undefined): string | null {
  if (!text) return null;
  const bare = text.trim().replace(/^\[|\]$/g, "");
  if (!ipaddr.isValid(bare)) return null;
  const parsed = ipaddr.parse(bare);
  if (parsed.kind() === "ipv6" && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) return (parsed as ipaddr.IPv6).toIPv4Address().toString();
  return parsed.toString();
}

/**
 * The key an address counts under: an IPv4 address itself, an IPv6 address its /64 (one host usually holds a whole
 * /64, so counting single addresses would give it 2^64 budgets; docs/decisions.md "OIDC starts per client").
 */
function clientKeyOf(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.parse(address);
  if (parsed.kind() !== "ipv6") return address;
  const parts = (parsed as ipaddr.IPv6).parts.slice(0, 4);
  return `${ipaddr.IPv6.parse(`${parts.map((p) => p.toString(16)).join(":")}::`).toString()}/64`;
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
    return { isLoopback: input.isLoopback, key: edge === null ? "unknown" : clientKeyOf(edge) };
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
  return { isLoopback: input.isLoopback, key: clientKeyOf(key) };
}
