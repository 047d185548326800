import { createMiddleware } from "hono/factory";
import type { AppDeps, AppEnv } from "../../deps.ts";

// Placeholder: CORS from allowed_origins comes with the External Access issue.
export function corsFromSettings(_deps: AppDeps) {
  return createMiddleware<AppEnv>(async (_c, next) => {
    await next();
  });
}
