import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { isLoopbackAddress, isLoopbackHost } from "../../domain/common/addresses.ts";

/** Headers a proxy adds (docs/api.md §3): their presence, with any value, means the socket peer is a proxy, not the user. */
const PROXY_HEADERS = new Set([
  "forwarded",
  "via",
  "x-real-ip",
  "x-client-ip",
  "x-cluster-client-ip",
  "cf-connecting-ip",
  "true-client-ip",
  "fastly-client-ip",
]);
const PROXY_HEADER_PREFIXES = ["x-forwarded-", "x-original-forwarded-"];

/** Whether a header name is a proxy's; `X_Forwarded_For` counts too, since some servers fold `_` into `-`. */
export function isProxyHeader(name: string): boolean {
  // Runs for every header of every loopback request: the regex replace only when there is something to replace.
  let n = name.toLowerCase();
  if (n.includes("_")) n = n.replace(/_/g, "-");
  return PROXY_HEADERS.has(n) || PROXY_HEADER_PREFIXES.some((p) => n.startsWith(p));
}

export function isLoopbackRequest(peerAddress: string | undefined, headers: Headers, urlHost: string): boolean {
  if (!isLoopbackAddress(peerAddress)) return false;
  for (const name of headers.keys()) if (isProxyHeader(name)) return false;
  return isLoopbackHost(headers.get("host") ?? urlHost);
}

/**
 * Sets `isLoopback` (docs/api.md §3). Only the socket is trusted, never a header: the peer address comes
 * from the host through `getPeerAddress`, as Hono's ipRestriction takes getConnInfo.
 */
export function loopbackDetection(getPeerAddress: (c: Context) => string | undefined) {
  // Synchronous work only, so no async frame: next()'s promise is passed on (docs/benchmarks.md).
  return createMiddleware<AppEnv>((c, next) => {
    const headers = c.req.raw.headers;
    // The URL's host only matters without a Host header (HTTP/1.0): parsing the URL on every request cost ~3 µs.
    c.set("isLoopback", isLoopbackRequest(getPeerAddress(c), headers, headers.has("host") ? "" : new URL(c.req.url).host));
    return next();
  });
}

/**
 * Local sign-in's test (docs/decisions.md "Local login: the socket's owner"): a loopback request whose client end
 * belongs to the daemon's own OS user or one named in HANGAR_LOCAL_LOGIN_USERS. Any process on the machine can
 * connect to loopback, a build step run as another user included; without a host that can tell the owner, no one.
 */
export async function isLocalUserRequest(deps: Pick<AppDeps, "isLocalUserSocket">, c: Context<AppEnv>): Promise<boolean> {
  if (!c.get("isLoopback") || !deps.isLocalUserSocket) return false;
  return deps.isLocalUserSocket(c);
}
