/**
 * The address rules, answered once (docs/api.md §3, §12): is this peer address loopback, does this Host header or
 * host name reach only this machine, is this address in that CIDR, what kind of address is it (public, loopback,
 * private…). The loopback middleware, the network settings, the preferences, the preflight, the trusted-proxy
 * check, OIDC's per-client count and the outbound guard (src/domain/common/outbound.ts, which decides what to do
 * with the answers) all ask here. It imports nothing but ipaddr.js, so the standalone runner can bundle it with the
 * outbound guard (src/cli/runner/clone-guard.ts).
 */
import ipaddr from "ipaddr.js";

export type IpAddress = ipaddr.IPv4 | ipaddr.IPv6;
/** A network address and its prefix length. */
export type IpRange = [IpAddress, number];

// ---------------------------------------------------------------------------------------------------------
// Loopback and this machine
/** 127.0.0.0/8 in dotted decimal, the only form a socket peer address or a Host header takes. */
const IPV4_LOOPBACK = /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;

/** A socket peer address is loopback: 127.0.0.0/8, ::1, or 127.x mapped into IPv6. */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  const a = address.toLowerCase();
  if (a === "::1" || a === "0:0:0:0:0:0:0:1") return true;
  const v4 = a.startsWith("::ffff:") ? a.slice("::ffff:".length) : a;
  return IPV4_LOOPBACK.test(v4);
}

/** `Host` (host[:port]) must name this machine: defeats DNS rebinding and a local reverse proxy forwarding outside traffic. */
export function isLoopbackHost(host: string | undefined): boolean {
  if (!host) return false;
  const h = host.trim().toLowerCase();
  if (h.startsWith("[")) {
    const end = h.indexOf("]");
    if (end < 0) return false;
    const rest = h.slice(end + 1);
    return h.slice(1, end) === "::1" && (rest === "" || /^:\d{1,5}$/.test(rest));
  }
  const [name, port, ...extra] = h.split(":");
  if (extra.length > 0 || (port !== undefined && !/^\d{1,5}$/.test(port))) return false;
  return name === "localhost" || IPV4_LOOPBACK.test(name ?? "");
}

/** Lower case, without IPv6 brackets or a trailing root dot. */
function normalise(hostname: string): string {
  return hostname
    .toLowerCase()
    .replace(/^\[|\]$/g, "")
    .replace(/\.$/, "");
}

/** The names that mean this machine without asking DNS (RFC 6761): localhost and *.localhost. */
export function isLocalhostName(hostname: string): boolean {
  const h = normalise(hostname);
  return h === "localhost" || h.endsWith(".localhost");
}

/** Loopback names and addresses: localhost, *.localhost, 127.0.0.0/8, ::1 and IPv4-mapped 127.x. */
export function isLoopbackHostname(hostname: string): boolean {
  const h = normalise(hostname);
  if (isLocalhostName(h)) return true;
  if (IPV4_LOOPBACK.test(h)) return true;
  if (h === "::1") return true;
  return /^::ffff:(?:127\.|7f[0-9a-f]{2}:)/.test(h);
}

/** The unspecified addresses 0.0.0.0 and ::, which bind every interface and, typed as a host, reach this machine. */
export function isUnspecifiedAddress(hostname: string): boolean {
  const h = normalise(hostname);
  return h === "0.0.0.0" || h === "::";
}

/** Host names that only ever reach the machine they are typed on: loopback or unspecified. */
export function isThisMachineOnlyHostname(hostname: string): boolean {
  return isLoopbackHostname(hostname) || isUnspecifiedAddress(hostname);
}

// ---------------------------------------------------------------------------------------------------------
// CIDRs and ranges

/**
 * A CIDR as typed by an operator, strictly: dotted-quad IPv4 or IPv6, a bare address meaning one host, no
 * zone id, no host bits set ("10.0.0.5/8" is refused rather than guessed at: this list grants sign-in).
 * Answers the range in canonical form, or an error message.
 */
export function parseCidr(text: string): { range: IpRange; canonical: string } | { error: string } {
  const value = text.trim();
  if (value.includes("%")) return { error: "zone ids are not allowed" };
  let candidate = value;
  if (!value.includes("/")) {
    if (ipaddr.IPv4.isValidFourPartDecimal(value)) candidate = `${value}/32`;
    else if (ipaddr.IPv6.isValid(value)) candidate = `${value}/128`;
  }
  let range: IpRange;
  if (ipaddr.IPv4.isValidCIDRFourPartDecimal(candidate)) range = ipaddr.IPv4.parseCIDR(candidate);
  else if (ipaddr.IPv6.isValidCIDR(candidate)) range = ipaddr.IPv6.parseCIDR(candidate);
  else return { error: "not an IPv4 or IPv6 CIDR such as 10.0.0.0/8 or fd00::/8" };
  const [address, bits] = range;
  const network = address.kind() === "ipv4" ? ipaddr.IPv4.networkAddressFromCIDR(candidate) : ipaddr.IPv6.networkAddressFromCIDR(candidate);
  if (network.toNormalizedString() !== address.toNormalizedString()) {
    return { error: `host bits are set; did you mean ${network.toString()}/${bits}?` };
  }
  return { range, canonical: `${address.toString()}/${bits}` };
}

/** An IPv4-mapped IPv6 address (::ffff:10.0.0.1) as the IPv4 address it denotes. */
export function unwrapMapped(address: IpAddress): IpAddress {
  if (address.kind() === "ipv6" && (address as ipaddr.IPv6).isIPv4MappedAddress()) return (address as ipaddr.IPv6).toIPv4Address();
  return address;
}

/** IPv4-mapped IPv6 ranges (::ffff:10.0.0.0/104) as the IPv4 range they denote, to match unwrapped addresses. */
export function comparableRange([address, bits]: IpRange): IpRange {
  if (address.kind() === "ipv6" && (address as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
    return [(address as ipaddr.IPv6).toIPv4Address(), bits - 96];
  }
  return [address, bits];
}

/** Whether an address lies in a range (both as unwrapped / comparable: an IPv4 range never holds an IPv6 address). */
export function isInRange(address: IpAddress, [network, bits]: IpRange): boolean {
  return network.kind() === address.kind() && address.match(network, bits);
}

/** A peer address as the socket reports it, IPv4-mapped IPv6 unwrapped to IPv4; null when unparsable. */
export function parsePeerAddress(peer: string | undefined): IpAddress | null {
  if (!peer) return null;
  try {
    // process() turns ::ffff:10.0.0.1 into 10.0.0.1, so one IPv4 CIDR covers both socket forms.
    return ipaddr.process(peer.trim());
  } catch {
    return null;
  }
}

/** Whether a socket peer address is in one of these CIDRs (entries that do not parse match nothing). */
export function isPeerInCidrs(peer: string | undefined, cidrs: readonly string[]): boolean {
  const address = parsePeerAddress(peer);
  if (!address) return false;
  return cidrs.some((cidr) => {
    const parsed = parseCidr(cidr);
    return !("error" in parsed) && isInRange(address, comparableRange(parsed.range));
  });
}

/** An address in one spelling: IPv4-mapped IPv6 as IPv4, IPv6 compressed, brackets dropped; null when it is not an address. */
export function canonicalAddress(text: string | undefined): string | null {
  if (!text) return null;
  const bare = text.trim().replace(/^\[|\]$/g, "");
  if (!ipaddr.isValid(bare)) return null;
  return unwrapMapped(ipaddr.parse(bare)).toString();
}

/**
 * The block one host holds: an IPv4 address itself, an IPv6 address its /64 (one host usually holds a whole /64, so
 * a budget per single IPv6 address would give it 2^64 budgets; docs/decisions.md "OIDC starts per client").
 */
export function hostBlockOf(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.parse(address);
  if (parsed.kind() !== "ipv6") return address;
  const parts = (parsed as ipaddr.IPv6).parts.slice(0, 4);
  return `${ipaddr.IPv6.parse(`${parts.map((p) => p.toString(16)).join(":")}::`).toString()}/64`;
}

// ---------------------------------------------------------------------------------------------------------
// What kind of address

/**
 * The address as an IP, or null when `host` is a name. Accepts what URL parsers and inet_aton accept:
 * `2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`, `127.0.0.1.`, `[::1]`, `::ffff:7f00:1`. The WHATWG URL parser
 * (the one fetch uses) does the IPv4 number forms, so what we classify is what would be connected to.
 */
export function parseIpLiteral(host: string): IpAddress | null {
  let h = host.trim().toLowerCase();
  if (h.startsWith("[") && h.endsWith("]")) h = h.slice(1, -1);
  if (h.includes("%")) h = h.slice(0, h.indexOf("%")); // a zone id still names a local link
  if (ipaddr.IPv6.isValid(h)) return ipaddr.IPv6.parse(h);
  let normalised: string;
  try {
    normalised = new URL(`http://${h}/`).hostname;
  } catch {
    return null;
  }
  if (ipaddr.IPv4.isValidFourPartDecimal(normalised)) return ipaddr.IPv4.parse(normalised);
  if (normalised.startsWith("[")) {
    const inner = normalised.slice(1, -1);
    if (ipaddr.IPv6.isValid(inner)) return ipaddr.IPv6.parse(inner);
  }
  return null;
}

/**
 * What kind of address this is, in words for an error message ("loopback", "private", "link-local"…); null for a
 * public unicast address, the only kind an ordinary server has.
 */
export function addressCategory(ip: string | IpAddress): string | null {
  const parsed = typeof ip === "string" ? parseIpLiteral(ip) : ip;
  if (!parsed) return "not an IP address";
  const address = unwrapMapped(parsed);
  const range = address.range();
  switch (range) {
    case "unicast":
      return null;
    case "loopback":
      return "loopback";
    case "linkLocal":
      return "link-local";
    case "private":
    case "uniqueLocal":
      return "private";
    case "carrierGradeNat":
      return "shared address space";
    case "unspecified":
      return "unspecified";
    case "multicast":
      return "multicast";
    case "broadcast":
      return "broadcast";
    default:
      // reserved, benchmarking, NAT64/6to4/Teredo tunnels that embed an IPv4 address, documentation ranges…
      // none is an ordinary public server; refused rather than decoded.
      return `reserved (${range})`;
  }
}
