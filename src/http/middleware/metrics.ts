import type { Context } from "hono";
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

/**
 * Counts an answer and times it for GET /metrics (docs/api.md §13). Called by the request context's middleware when
 * a request ends, however it ended (one middleware frame per request fewer than a middleware of its own).
 */
export function observeRequest(registry: MetricsRegistry, c: Context<AppEnv>, startedMs: number): void {
  const method = c.req.method;
  const route = routeLabel(c);
  registry.httpRequests.inc({ method, route, status: String(c.res.status) });
  registry.httpDuration.observe((performance.now() - startedMs) / 1000, { method, route });
}
