import { bodyLimit } from "hono/body-limit";
import { createMiddleware } from "hono/factory";
import type { AppEnv, Logger } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import type { MetricsRegistry } from "../../domain/common/metrics.ts";
import { observeRequest } from "./metrics.ts";

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
    path.startsWith("/install/") ||
    path.startsWith("/apps/") ||
    path.startsWith("/v1/artifacts/download/") ||
    path.startsWith("/v1/artifacts/local-upload/") ||
    path.startsWith("/login/local/")
  );
}

/**
 * `new Date().toISOString()` for the current millisecond, rebuilt from a cached minute prefix: the request log
 * writes one per line, and formatting a Date each time was a measurable part of a cheap request (docs/benchmarks.md).
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
 * Request id, one JSON log line per request, and the response headers every answer carries (docs/api.md §2).
 * The headers are set before the handler runs, so the answer the handler builds through `c` is made with them
 * (setting a header on a finished answer makes Hono copy it). A handler that returns a Response of its own, or
 * changed one of these headers, gets them set on the finished answer.
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
 * JSON bodies are capped (413 payload_too_large) with Hono's bodyLimit: a declared Content-Length over the cap is
 * refused before a byte is read, a chunked body is read up to the cap. Artifact uploads and webhook deliveries (up
 * to 25 MiB) read their bodies with their own caps.
 */
export function jsonBodyCap(maxBytes: number) {
  const limit = bodyLimit({
    maxSize: maxBytes,
    onError: () => {
      throw new ApiError("payload_too_large", `request body exceeds ${maxBytes} bytes`);
    },
  });
  return createMiddleware<AppEnv>((c, next) => {
    const method = c.req.method;
    if (method === "GET" || method === "HEAD") return next();
    const path = c.req.path;
    if (path.startsWith("/v1/artifacts/local-upload/") || path.startsWith("/v1/hooks/")) return next();
    // A declared length within the cap needs no reading here (the HTTP parser holds the body to it): the body is
    // left untouched, so one the handler never reads (a request refused before) is simply discarded and the
    // connection carries the next request. bodyLimit would open the body as a stream to ask whether there is one.
    const length = c.req.header("content-length");
    if (length !== undefined && c.req.header("transfer-encoding") === undefined && Number.parseInt(length, 10) <= maxBytes) return next();
    return limit(c, next);
  });
}
