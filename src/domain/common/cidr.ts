// CIDR parsing shared by the trusted-proxy list and the outbound guard. It imports nothing but ipaddr.js, so the
// standalone runner can inline the guard's rules (src/cli/runner/clone-guard.ts) without the daemon's modules.
import ipaddr from "ipaddr.js";

type Address = ipaddr.IPv4 | ipaddr.IPv6;
type Range = [Address, number];

/**
 * A CIDR as typed by an operator, strictly: dotted-quad IPv4 or IPv6, a bare address meaning one host, no
 * zone id, no host bits set ("10.0.0.5/8" is refused rather than guessed at: this list grants sign-in).
 * Answers the range in canonical form, or an error message.
 */
export function parseCidr(text: string): { range: Range; canonical: string } | { error: string } {
  const value = text.trim();
  if (value.includes("%")) return { error: "zone ids are not allowed" };
  let candidate = value;
  if (!value.includes("/")) {
    if (ipaddr.IPv4.isValidFourPartDecimal(value)) candidate = `${value}/32`;
    else if (ipaddr.IPv6.isValid(value)) candidate = `${value}/128`;
  }
  let range: Range;
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
