import {
  addressCategory,
  comparableRange,
  type IpAddress,
  type IpRange,
  isInRange,
  isLocalhostName,
  parseCidr,
  parseIpLiteral,
  unwrapMapped,
} from "./addresses.ts";

/**
 * The outbound guard's rules (docs/api.md §12), web-standard so the Workers core uses them too. Every request the
 * daemon makes to a place an operator or a user typed (OIDC, S3, git, commit statuses, notifications) must not
 * reach this machine or its private networks unless HANGAR_OUTBOUND_ALLOW says so: otherwise anyone who can
 * save a URL can read internal services through the daemon (SSRF). The Node runtime checks each resolved
 * address at connect time (src/runtime/outbound.ts); this module decides with the address rules of
 * src/domain/common/addresses.ts (what kind of address, in which range).
 */

type Address = IpAddress;
type Range = IpRange;

/** A parsed HANGAR_OUTBOUND_ALLOW: the CIDRs whose addresses the guard lets through. */
export interface OutboundAllowList {
  readonly ranges: readonly Range[];
  /** As configured, for messages. */
  readonly cidrs: readonly string[];
}

export const EMPTY_ALLOW_LIST: OutboundAllowList = { ranges: [], cidrs: [] };

/** Parses the comma-separated CIDR list; throws an Error naming the bad entry. */
export function parseOutboundAllow(value: string | undefined): OutboundAllowList {
  const ranges: Range[] = [];
  const cidrs: string[] = [];
  for (const entry of (value ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    const parsed = parseCidr(entry);
    if ("error" in parsed) throw new Error(`HANGAR_OUTBOUND_ALLOW entry '${entry}': ${parsed.error}`);
    ranges.push(comparableRange(parsed.range));
    cidrs.push(parsed.canonical);
  }
  return { ranges, cidrs };
}

/** Whether an address is inside HANGAR_OUTBOUND_ALLOW. */
export function isInAllowList(ip: string | Address, allow: OutboundAllowList): boolean {
  const parsed = typeof ip === "string" ? parseIpLiteral(ip) : ip;
  if (!parsed) return false;
  const address = unwrapMapped(parsed);
  return allow.ranges.some((range) => isInRange(address, range));
}

/** The outcome of checking one address: allowed (public, or listed) or refused with the reason. */
export type AddressVerdict = { ok: true; listed: boolean } | { ok: false; reason: string };

export function checkAddress(ip: string | Address, allow: OutboundAllowList): AddressVerdict {
  const parsed = typeof ip === "string" ? parseIpLiteral(ip) : ip;
  if (!parsed) return { ok: false, reason: "not an IP address" };
  if (isInAllowList(parsed, allow)) return { ok: true, listed: true };
  const reason = addressCategory(parsed);
  return reason === null ? { ok: true, listed: false } : { ok: false, reason };
}

/**
 * A destination the guard refused. `destination` is what was asked for (host, and the address it resolved to
 * when that differs); the message says how to allow it. Carries no fetched content.
 */
export class DestinationNotAllowedError extends Error {
  readonly destination: string;
  readonly address: string | null;
  readonly reason: string;
  constructor(destination: string, address: string | null, reason: string) {
    const where = address && address !== destination ? `${destination} (${address})` : destination;
    const hint =
      address && parseIpLiteral(address)
        ? `add ${cidrFor(address)} to HANGAR_OUTBOUND_ALLOW to allow it`
        : "add its address range to HANGAR_OUTBOUND_ALLOW to allow it";
    super(`outbound requests to ${where} are not allowed: the address is ${reason}; ${hint}`);
    this.name = "DestinationNotAllowedError";
    this.destination = destination;
    this.address = address;
    this.reason = reason;
  }
}

/** Whether a thrown value is (or wraps, as fetch's TypeError does) a refusal of the guard. */
export function findDestinationNotAllowed(err: unknown): DestinationNotAllowedError | null {
  for (let e: unknown = err, depth = 0; e && depth < 5; depth++) {
    if (e instanceof DestinationNotAllowedError) return e;
    e = (e as { cause?: unknown }).cause;
  }
  return null;
}

function cidrFor(ip: string): string {
  const parsed = parseIpLiteral(ip);
  if (!parsed) return ip;
  const address = unwrapMapped(parsed);
  return address.kind() === "ipv4" ? `${address.toString()}/32` : `${address.toString()}/128`;
}

/**
 * What can be decided about a URL without DNS: the scheme must be http(s); an IP literal (any spelling) or a
 * localhost name is checked here. Answers `{literal: true, listed}` for a literal that passes, `{literal: false}`
 * for a name the runtime still has to resolve and check at connect time. Throws DestinationNotAllowedError.
 */
export function checkUrlWithoutDns(url: string | URL, allow: OutboundAllowList): { literal: boolean; listed: boolean } {
  let parsed: URL;
  try {
    parsed = typeof url === "string" ? new URL(url) : url;
  } catch {
    throw new DestinationNotAllowedError(String(url), null, "not an absolute URL");
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new DestinationNotAllowedError(parsed.protocol, null, "not an http(s) destination");
  }
  const host = parsed.hostname;
  if (isLocalhostName(host)) {
    // Loopback by definition, whatever a resolver says; usable only when a loopback address is allowed.
    if (!isInAllowList("127.0.0.1", allow) && !isInAllowList("::1", allow)) throw new DestinationNotAllowedError(host, "127.0.0.1", "loopback");
    return { literal: true, listed: true };
  }
  const literal = parseIpLiteral(host);
  if (!literal) return { literal: false, listed: false };
  const verdict = checkAddress(literal, allow);
  if (!verdict.ok) throw new DestinationNotAllowedError(host, unwrapMapped(literal).toString(), verdict.reason);
  return { literal: true, listed: verdict.listed };
}

/**
 * Filters a name's resolved addresses to those the guard lets through; the caller connects to those only, so a
 * mixed answer (a public address beside 127.0.0.1) cannot smuggle a refused one in. None left → refused, named
 * by the first refused address. `listed` is true when every usable address is in HANGAR_OUTBOUND_ALLOW.
 */
export function checkResolved(host: string, addresses: readonly string[], allow: OutboundAllowList): { usable: string[]; listed: boolean } {
  const usable: string[] = [];
  let listed = true;
  let firstRefusal: { address: string; reason: string } | null = null;
  for (const address of addresses) {
    const verdict = checkAddress(address, allow);
    if (!verdict.ok) {
      firstRefusal ??= { address, reason: verdict.reason };
      continue;
    }
    usable.push(address);
    if (!verdict.listed) listed = false;
  }
  if (usable.length === 0) {
    throw new DestinationNotAllowedError(host, firstRefusal?.address ?? null, firstRefusal?.reason ?? "not resolvable");
  }
  return { usable, listed };
}

/** Limits of one guarded request: no redirects always; a deadline and a cap on the answer's bytes. */
export interface OutboundLimits {
  /** Whole-request deadline (headers and body); null for none (a caller streaming a large object sets its own). */
  timeoutMs: number | null;
  /** Largest answer body read; null for none. */
  maxResponseBytes: number | null;
}

export const DEFAULT_OUTBOUND_LIMITS: OutboundLimits = { timeoutMs: 10_000, maxResponseBytes: 8 * 1024 * 1024 };

/**
 * Wraps a fetch with the parts of the guard that need no socket: scheme and literal check, redirects never
 * followed, a deadline and a size cap. The Node runtime adds the connect-time address check underneath
 * (its `base` fetch resolves and checks every address); on Workers this is the whole guard, since there is
 * no DNS to consult and the platform itself does not reach a private network.
 */
export function createGuardedFetch(base: typeof fetch, allow: OutboundAllowList, limits: OutboundLimits = DEFAULT_OUTBOUND_LIMITS): typeof fetch {
  const guarded = async (input: Request | string | URL, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    checkUrlWithoutDns(request.url, allow);
    const signals: AbortSignal[] = [request.signal];
    if (limits.timeoutMs !== null) signals.push(AbortSignal.timeout(limits.timeoutMs));
    const signal = signals.length === 1 ? signals[0]! : AbortSignal.any(signals);
    let res: Response;
    try {
      // "manual", not "error" (which Workers refuses): a 3xx is answered as it is and never followed.
      res = await base(new Request(request, { redirect: "manual", signal }));
    } catch (err) {
      const refused = findDestinationNotAllowed(err);
      throw refused ?? err;
    }
    if (limits.maxResponseBytes === null || !res.body) return res;
    const length = res.headers.get("content-length");
    const declared = length === null ? null : Number(length);
    if (declared !== null && declared > limits.maxResponseBytes) {
      await res.body.cancel().catch(() => undefined);
      throw new Error(`the answer is larger than ${limits.maxResponseBytes} bytes`);
    }
    // A declared length within the cap is enforced by the HTTP client itself (a longer body is a protocol error).
    if (declared !== null && Number.isInteger(declared) && !res.headers.has("content-encoding")) return res;
    return new Response(res.body.pipeThrough(byteCap(limits.maxResponseBytes)), {
      status: res.status,
      statusText: res.statusText,
      headers: res.headers,
    });
  };
  return guarded as typeof fetch;
}

/** A stream that errors once more than `max` bytes went through (the reader then sees a failure, not a cut). */
function byteCap(max: number): TransformStream<Uint8Array, Uint8Array> {
  let seen = 0;
  return new TransformStream({
    transform(chunk, controller) {
      seen += chunk.byteLength;
      if (seen > max) controller.error(new Error(`the answer is larger than ${max} bytes`));
      else controller.enqueue(chunk);
    },
  });
}

/**
 * Checks a URL an operator or user is saving (an OIDC issuer, an S3 endpoint, a notification target) through
 * the host's resolver when it has one, else by its literal: throws DestinationNotAllowedError.
 */
export async function checkDestinationNow(
  deps: { checkDestination?: (url: string) => Promise<{ listed: boolean }>; config: { outboundAllow: OutboundAllowList } },
  url: string,
): Promise<{ listed: boolean }> {
  if (deps.checkDestination) return deps.checkDestination(url);
  const { literal, listed } = checkUrlWithoutDns(url, deps.config.outboundAllow);
  return { listed: literal && listed };
}
