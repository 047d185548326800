import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { constantTimeEqual } from "../../domain/common/crypto.ts";
import { loadInstance } from "../../domain/setup/instance.ts";
import { renderMetrics, type MetricsRegistry } from "../../domain/common/metrics.ts";
import { ApiError } from "../../errors.ts";

/**
 * GET /metrics (docs/api.md §13). With HANGAR_METRICS_TOKEN set, that Bearer token is required from anyone. Without
 * one, only a loopback client of a local-mode instance may scrape; everyone else gets the same 404 as an unknown
 * route, so the endpoint's existence is not advertised.
 */
export function metricsRoutes(deps: AppDeps, registry: MetricsRegistry) {
  return new Hono<AppEnv>().get("/metrics", async (c) => {
    const token = deps.config.metricsToken;
    if (token) {
      const header = c.req.header("authorization");
      if (!header) throw new ApiError("missing_auth", "GET /metrics needs the Bearer token set in HANGAR_METRICS_TOKEN");
      const given = header.match(/^Bearer\s+(\S+)$/i)?.[1] ?? "";
      if (!constantTimeEqual(given, token)) throw new ApiError("invalid_token", "the metrics token is wrong");
    } else {
      const inst = await loadInstance(deps);
      if (!c.get("isLoopback") || inst.runtimeMode !== "local") {
        return c.json({ code: "not_found", message: "no such route" }, 404);
      }
    }
    const body = await renderMetrics(deps, registry);
    return c.body(body, 200, { "Content-Type": "text/plain; version=0.0.4; charset=utf-8", "Cache-Control": "no-store" });
  });
}
