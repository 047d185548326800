import type { Context, Next } from "hono";
import { createMiddleware } from "hono/factory";
import type { AppDeps, AppEnv } from "../deps.ts";
import { readNetworkSettings } from "../domain/settings/network-settings.ts";
import { isOriginlessTesterPost, isTesterLinkPost } from "../http/middleware/cors.ts";

// Random bytes for nonces, drawn from the CSPRNG 4 KiB at a time: one getRandomValues call per 256 responses
// instead of one per response (it was ~8 % of an API request's CPU, docs/benchmarks.md). Each nonce takes 16 bytes never
// used before, so nonces stay unpredictable and distinct.
const NONCE_BYTES = 16;
const noncePool = new Uint8Array(4096);
let noncePoolUsed = noncePool.length;

/** A fresh nonce per response: 16 random bytes, base64. */
function newNonce(): string {
  if (noncePoolUsed + NONCE_BYTES > noncePool.length) {
    crypto.getRandomValues(noncePool);
    noncePoolUsed = 0;
  }
  let s = "";
  for (let i = noncePoolUsed; i < noncePoolUsed + NONCE_BYTES; i++) s += String.fromCharCode(noncePool[i]!);
  noncePoolUsed += NONCE_BYTES;
  return btoa(s);
}

/**
 * The Content-Security-Policy of every HTML answer (docs/api.md §10). Scripts only from our own origin
 * (/assets/*.js) or an inline <script nonce>; never 'unsafe-inline', so an injected <script> or on*="" handler
 * does not run even if some escaping were missed. Styles likewise (no style="" attributes in our markup).
 * img-src allows https: for IdP avatars; frame-ancestors 'none' stops clickjacking; form-action 'self' keeps form
 * posts on this origin.
 */
export function contentSecurityPolicy(nonce: string, formActions: readonly string[] = []): string {
  return [
    "default-src 'self'",
    `script-src 'self' 'nonce-${nonce}'`,
    `style-src 'self' 'nonce-${nonce}'`,
    "img-src 'self' data: https:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
    // Forms post only back to Hangar: an injected <form> cannot send what a user types elsewhere.
    ["form-action 'self'", ...formActions].join(" "),
  ].join("; ");
}

/**
 * Sets `cspNonce` for the page being rendered and, on every HTML answer, the security headers of §10.
 * Installer pages (/install/...) carry a token in their URL: no-referrer there (also set by requestContext).
 */
export function htmlSecurityHeaders() {
  return createMiddleware<AppEnv>(async (c, next) => {
    // The JSON API renders no page, so it needs no nonce (one fewer per API request); should a /v1/ route ever
    // answer HTML, it still gets every header below, with a nonce no script of it carries.
    let nonce: string | undefined;
    if (!c.req.path.startsWith("/v1/")) {
      nonce = newNonce();
      c.set("cspNonce", nonce);
    }
    await next();
    const headers = c.res.headers;
    const type = headers.get("content-type") ?? "";
    if (!type.toLowerCase().startsWith("text/html")) return;
    const set = answerHeaderSetter(c);
    set("Content-Security-Policy", contentSecurityPolicy(nonce ?? newNonce(), c.get("cspFormActions") ?? []));
    set("X-Content-Type-Options", "nosniff");
    set("X-Frame-Options", "DENY");
    // A handler may ask for no-referrer (a page whose URL holds a token, e.g. /login/local/{code}).
    if (c.req.path.startsWith("/install/") || c.req.path.startsWith("/apps/")) set("Referrer-Policy", "no-referrer");
    else if (!headers.has("referrer-policy")) set("Referrer-Policy", "same-origin");
    // Pages show per-user data; no shared cache may keep them.
    if (!headers.has("cache-control")) set("Cache-Control", "no-store");
  });
}

/**
 * Sets headers on the finished answer itself when its headers can change (an answer the handler built with `c`),
 * else through `c.header`. `c.header` on a finished answer rebuilds it around its body as a stream, which
 * @hono/node-server then writes chunk by chunk instead of in one write: about a third of a cached tester page's
 * time (docs/benchmarks.md "Tester page").
 */
function answerHeaderSetter(c: Context<AppEnv>): (name: string, value: string) => void {
  return (name, value) => {
    try {
      c.res.headers.set(name, value);
    } catch {
      // Immutable headers (an answer from fetch() or Response.redirect()): Hono copies the answer.
      c.header(name, value);
    }
  };
}

const UNSAFE_METHODS = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/** The origin this request was addressed to, as the browser writes it in `Origin`. */
function requestOrigin(url: string, host: string | undefined): string {
  const parsed = new URL(url);
  return host ? `${parsed.protocol}//${host.toLowerCase()}` : parsed.origin;
}

/**
 * Every state change of the UI is a same-origin POST (docs/api.md §10): a missing or foreign `Origin` is 403.
 * The own origin is the one the request was addressed to, or the External Access public URL's (behind a
 * TLS-terminating proxy the daemon sees http:// while the browser says https://). `/v1/` is left alone: it
 * takes Bearer tokens only, never the cookie, so a cross-site request there carries no credential.
 */
export function sameOriginPosts(deps: AppDeps) {
  // Reads (and the API) pass on synchronously: no async frame per request.
  return createMiddleware<AppEnv>((c, next) => {
    if (!UNSAFE_METHODS.has(c.req.method) || c.req.path.startsWith("/v1/")) return next();
    return checkFormOrigin(c, next);
  });

  async function checkFormOrigin(c: Context<AppEnv>, next: Next): Promise<Response | void> {
    const origin = c.req.header("origin");
    if (origin === "null" && isTesterLinkPost(c.req.method, c.req.path)) return next();
    if (origin === undefined && isOriginlessTesterPost(c.req.method, c.req.path)) return next();
    if (origin !== undefined && origin !== "null") {
      if (origin === requestOrigin(c.req.url, c.req.header("host"))) return next();
      const publicUrl = (await readNetworkSettings(deps)).public_url;
      if (publicUrl && origin === new URL(publicUrl).origin) return next();
    }
    return c.text("This form was not sent from a Hangar page (the Origin header is missing or foreign).", 403, {
      "Cache-Control": "no-store",
    });
  }
}
