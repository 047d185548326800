import { sql } from "drizzle-orm";
import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { setupStatus } from "../../domain/setup/setup.ts";
import { apiDoc } from "../route-docs.ts";
import * as json from "../responses.ts";

export function publicRoutes(deps: AppDeps) {
  return new Hono<AppEnv>()
    .get("/healthz", async (c) => {
      try {
        await deps.db.run(sql`select 1`);
        return c.json({ ok: true });
      } catch {
        return c.json({ ok: false }, 503);
      }
    })
    .get(
      "/v1/public/setup-status",
      apiDoc({ summary: "Whether the instance is set up (public)", responses: { 200: json.SetupStatusJson } }),
      async (c) => c.json(await setupStatus(deps)),
    );
}
