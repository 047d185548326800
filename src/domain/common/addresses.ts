/**
 * The address rules, answered once (docs/api.md §3): is this peer address loopback, does this Host header or
 * host name reach only this machine. The loopback middleware, the network settings, the preferences and the
 * preflight all ask here. (Which ranges outbound requests may reach is src/domain/common/outbound.ts's.)
 */

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

/** Loopback names and addresses: localhost, *.localhost, 127.0.0.0/8, ::1 and IPv4-mapped 127.x. */
export function isLoopbackHostname(hostname: string): boolean {
  const h = normalise(hostname);
  if (h === "localhost" || h.endsWith(".localhost")) return true;
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
