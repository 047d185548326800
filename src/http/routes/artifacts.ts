import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";

// Placeholder: filled in by its own issue.
export function artifactsRoutes(_deps: AppDeps) {
  return new Hono<AppEnv>();
}
