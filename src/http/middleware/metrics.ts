import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { matchedRoutes } from "hono/route";
import type { AppEnv } from "../../deps.ts";
import type { MetricsRegistry } from "../../domain/common/metrics.ts";

/**
 * The route pattern that answered (`/v1/builds/:build_id`), never the raw path: ids and URL tokens would make
 * one series per build and put tokens into the metrics. Requests no route matched share one label.
 */
function routeLabel(c: Context<AppEnv>): string {
  const route = matchedRoutes(c)[c.req.routeIndex];
  // Middleware is registered with method ALL; a request that ended there matched no route.
  return route && route.method !== "ALL" ? route.path : "unmatched";
}

/** Counts every answer and times it for GET /metrics (CONTRACT §13). */
export function requestMetrics(registry: MetricsRegistry) {
  return createMiddleware<AppEnv>(async (c, next) => {
    const started = performance.now();
    try {
      await next();
    } finally {
      const method = c.req.method;
      const route = routeLabel(c);
      registry.httpRequests.inc({ method, route, status: String(c.res.status) });
      registry.httpDuration.observe((performance.now() - started) / 1000, { method, route });
    }
  });
}
