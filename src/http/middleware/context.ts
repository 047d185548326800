import { bodyLimit } from "hono/body-limit";
import { createMiddleware } from "hono/factory";
import type { AppEnv, Logger } from "../../deps.ts";
import { ApiError } from "../../errors.ts";

/** A URL path segment that is one of our tokens: 32 bytes base64url (43 chars) or 64 hex characters. */
const TOKEN_SEGMENT = /^(?:[A-Za-z0-9_-]{43}|[0-9a-fA-F]{64})$/;

/** The path as it may be logged: token segments replaced, query string dropped (it may hold a ticket). */
export function redactPath(path: string): string {
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

/** Request id, one JSON log line per request, and the response headers every answer carries (CONTRACT §2). */
export function requestContext(log: Logger, enabled: boolean) {
  return createMiddleware<AppEnv>(async (c, next) => {
    const started = performance.now();
    const requestId = c.req.header("x-request-id")?.match(/^[\w.-]{1,64}$/)?.[0] ?? crypto.randomUUID();
    c.set("requestId", requestId);
    try {
      await next();
    } finally {
      const path = c.req.path;
      c.header("x-request-id", requestId);
      if (path.startsWith("/v1/")) c.header("Cache-Control", "no-store");
      if (carriesToken(path)) c.header("Referrer-Policy", "no-referrer");
      if (enabled) {
        log({
          time: new Date().toISOString(),
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

/** JSON bodies are capped (413 payload_too_large); upload and log routes have their own limits. */
export function jsonBodyCap(maxBytes: number) {
  const limit = bodyLimit({
    maxSize: maxBytes,
    onError: () => {
      throw new ApiError(413, "payload_too_large", `request body exceeds ${maxBytes} bytes`);
    },
  });
  return createMiddleware<AppEnv>(async (c, next) => {
    if (c.req.path.startsWith("/v1/artifacts/local-upload/")) return next();
    // Webhook deliveries may be up to 25 MiB; their route reads the body with its own cap.
    if (c.req.path.startsWith("/v1/hooks/")) return next();
    return limit(c, next);
  });
}
