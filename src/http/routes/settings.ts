import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";

// Placeholder: filled in by its own issue.
export function settingsRoutes(_deps: AppDeps) {
  return new Hono<AppEnv>();
}
