import type { Context, Next } from "hono";
import { createMiddleware } from "hono/factory";
import type { AppEnv, Logger } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import type { MetricsRegistry } from "../../domain/common/metrics.ts";
import { observeRequest } from "./metrics.ts";
import { readStreamCapped } from "../../domain/common/streams.ts";

/** A URL path segment that is one of our tokens: 32 bytes base64url (43 chars, with or without a bearer prefix such as hgu_) or 64 hex. */
const TOKEN_SEGMENT = /^(?:(?:hg[usrw]_)?[A-Za-z0-9_-]{43}|[0-9a-fA-F]{64})$/;

const TOKEN_RUN = /[A-Za-z0-9_-]{43}/;

/** Whether a path may carry a token: every token segment has 43+ characters of the token alphabet. */
export function mayCarryToken(path: string): boolean {
  return TOKEN_RUN.test(path);
}

/** The path as it may be logged: token segments replaced, query string dropped (it may hold a ticket). */
export function redactPath(path: string): string {
  if (!mayCarryToken(path)) return path;
  return path
    .split("/")
    .map((segment) => (TOKEN_SEGMENT.test(segment) ? ":token" : segment))
    .join("/");
}

/** Paths whose URL carries a token: never leak it through a Referer header. */
function carriesToken(path: string): boolean {
  return (
    path.startsWith("/install/") || path.startsWith("/v1/artifacts/download/") || path.startsWith("/v1/artifacts/local-upload/") ||
    path.startsWith("/login/local/")
  );
}

/**
 * `new Date().toISOString()` for the current millisecond, rebuilt from a cached minute prefix: the request log
 * writes one per line, and formatting a Date each time was a measurable part of a cheap request (issue 16).
 */
let minuteStart = -1;
let minutePrefix = "";
export function isoNow(now = Date.now()): string {
  let offset = now - minuteStart;
  if (offset < 0 || offset >= 60_000) {
    minuteStart = now - (now % 60_000);
    minutePrefix = new Date(minuteStart).toISOString().slice(0, 17);
    offset = now - minuteStart;
  }
  const seconds = Math.floor(offset / 1000);
  const millis = offset % 1000;
  return `${minutePrefix}${seconds < 10 ? "0" : ""}${seconds}.${millis < 10 ? "00" : millis < 100 ? "0" : ""}${millis}Z`;
}

/**
 * Request id, one JSON log line per request, and the response headers every answer carries (CONTRACT §2).
 * The headers are set before the handler runs, so the response the handler builds through `c` carries them
 * from the start: setting a header on a finished response makes Hono rebuild it (and @hono/node-server then
 * writes it as a stream), which cost as much as the rest of a cheap request. A handler that returns a Response
 * of its own, or changed one of these headers, gets them set on the finished response as before.
 */
export function requestContext(log: Logger, enabled: boolean, metrics?: MetricsRegistry) {
  return createMiddleware<AppEnv>(async (c, next) => {
    const started = performance.now();
    const requestId = c.req.header("x-request-id")?.match(/^[\w.-]{1,64}$/)?.[0] ?? crypto.randomUUID();
    c.set("requestId", requestId);
    const path = c.req.path;
    const noStore = path.startsWith("/v1/");
    const noReferrer = carriesToken(path);
    c.header("x-request-id", requestId);
    if (noStore) c.header("Cache-Control", "no-store");
    if (noReferrer) c.header("Referrer-Policy", "no-referrer");
    try {
      await next();
    } finally {
      const headers = c.res.headers;
      if (headers.get("x-request-id") !== requestId) c.header("x-request-id", requestId);
      if (noStore && headers.get("cache-control") !== "no-store") c.header("Cache-Control", "no-store");
      if (noReferrer && headers.get("referrer-policy") !== "no-referrer") c.header("Referrer-Policy", "no-referrer");
      if (metrics) observeRequest(metrics, c, started);
      if (enabled) {
        log({
          time: isoNow(),
          level: "info",
          request_id: requestId,
          method: c.req.method,
          path: redactPath(path),
          status: c.res.status,
          duration_ms: Math.round((performance.now() - started) * 100) / 100,
        });
      }
    }
  });
}

/**
 * JSON bodies are capped (413 payload_too_large); upload and log routes have their own limits. A declared
 * Content-Length over the cap is refused before a byte is read; a chunked body is read up to the cap and handed
 * on as bytes (Hono's bodyLimit does the same, but builds its Request from the old one, which only works with the
 * platform's Request class, not with the daemon's lighter one).
 */
export function jsonBodyCap(maxBytes: number) {
  const tooLarge = () => new ApiError(413, "payload_too_large", `request body exceeds ${maxBytes} bytes`);
  const readChunked = async (c: Context<AppEnv>, next: Next) => {
    const raw = c.req.raw;
    const bytes = await readStreamCapped(raw.body, null, maxBytes, tooLarge);
    c.req.raw = new Request(raw.url, { method: raw.method, headers: raw.headers, body: bytes, signal: raw.signal });
    return next();
  };
  // Not async: it only chooses what runs next (no async frame per request).
  return createMiddleware<AppEnv>((c, next) => {
    // A GET or HEAD request has no body.
    const method = c.req.method;
    if (method === "GET" || method === "HEAD") return next();
    if (c.req.path.startsWith("/v1/artifacts/local-upload/")) return next();
    // Webhook deliveries may be up to 25 MiB; their route reads the body with its own cap.
    if (c.req.path.startsWith("/v1/hooks/")) return next();
    const headers = c.req.raw.headers;
    const length = headers.get("content-length");
    if (length !== null && !headers.has("transfer-encoding")) {
      if (Number.parseInt(length, 10) > maxBytes) throw tooLarge();
      return next();
    }
    if (!c.req.raw.body) return next();
    return readChunked(c, next);
  });
}
