/**
 * Host-name rules shared by the domain. The Host header check in src/http/middleware/loopback.ts parses
 * host:port and stays separate.
 */

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
  if (/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h)) return true;
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
