import { Hono } from "hono";
import { z } from "zod";
import type { AppDeps, AppEnv } from "../../deps.ts";
import {
  cancelBuild,
  getBuildWithQueue,
  listBuilds,
  listBuildsSchema,
  rerunBuild,
  toBuildJson,
  toCreatedBuildJson,
  triggerBuild,
  triggerBuildSchema,
} from "../../domain/builds/builds.ts";
import { readLog } from "../../domain/logs/logs.ts";
import { requireUser, ROLES } from "../middleware/auth.ts";
import { jsonBody, queryParams } from "../validate.ts";

const logQuerySchema = z.object({ offset: z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(0) });

/** Trigger, list, read and cancel builds, and read their logs (SPEC Builds; CONTRACT §3 roles). */
export function buildsRoutes(deps: AppDeps) {
  const readers = requireUser(deps, { roles: ROLES.everyone });
  const builders = requireUser(deps, { roles: ROLES.builders });
  return new Hono<AppEnv>()
    .post("/v1/projects/:project_id/builds", builders, jsonBody(triggerBuildSchema), async (c) =>
      c.json(toCreatedBuildJson(await triggerBuild(deps, c.get("user"), c.req.param("project_id"), c.req.valid("json")))),
    )
    .get("/v1/builds", readers, queryParams(listBuildsSchema), async (c) => {
      const query = c.req.valid("query");
      const page = await listBuilds(deps, query);
      if (page.nextCursor) {
        // The body stays the spec's plain array; the next page travels in headers.
        c.header("X-Next-Cursor", page.nextCursor);
        const next = new URL(c.req.url);
        next.searchParams.set("cursor", page.nextCursor);
        c.header("Link", `<${next.pathname}${next.search}>; rel="next"`);
      }
      return c.json(page.builds.map(toBuildJson));
    })
    .get("/v1/builds/:build_id", readers, async (c) => c.json(await getBuildWithQueue(deps, c.req.param("build_id"))))
    .post("/v1/builds/:build_id/rerun", builders, async (c) =>
      c.json(toCreatedBuildJson(await rerunBuild(deps, c.get("user"), c.req.param("build_id")))),
    )
    .post("/v1/builds/:build_id/cancel", builders, async (c) =>
      c.json(toBuildJson(await cancelBuild(deps, c.get("user"), c.req.param("build_id")))),
    )
    .get("/v1/builds/:build_id/logs", readers, queryParams(logQuerySchema), async (c) => {
      const log = await readLog(deps, c.req.param("build_id"), c.req.valid("query").offset);
      c.header("Content-Type", "text/plain; charset=utf-8");
      c.header("X-Log-Next-Offset", String(log.nextOffset));
      c.header("X-Log-Complete", log.complete ? "true" : "false");
      // A fresh ArrayBuffer-backed copy: Hono types body data as ArrayBuffer views.
      return c.body(new Uint8Array(log.bytes).buffer as ArrayBuffer);
    });
}
