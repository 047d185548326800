import { createMiddleware } from "hono/factory";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { loadInstance } from "../../domain/setup/instance.ts";

/** `/v1/auth/*` exists only once the instance is ready (docs/spec.md): 409 setup_incomplete before. */
export function requireReady(deps: AppDeps) {
  return createMiddleware<AppEnv>(async (_c, next) => {
    const inst = await loadInstance(deps);
    if (inst.state !== "ready") throw new ApiError("setup_incomplete", "setup is not complete yet");
    await next();
  });
}

/**
 * The guard for every `/v1/auth/*` path of every area, mounted once in createApp before the routes. Local
 * login decides for itself: in remote mode before ready it answers the spec's 403 mode_restricted row instead.
 */
export function authPathsRequireReady(deps: AppDeps) {
  const ready = requireReady(deps);
  return createMiddleware<AppEnv>(async (c, next) => (c.req.path === "/v1/auth/local/login" ? next() : ready(c, next)));
}
