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
import { isBuilder, requireUser, ROLES } from "../middleware/auth.ts";
import { jsonBody, queryParams } from "../validate.ts";
import { apiDoc } from "../route-docs.ts";
import * as json from "../responses.ts";

const logQuerySchema = z.object({ offset: z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(0) });

/** Trigger, list, read and cancel builds, and read their logs (docs/spec.md Builds; docs/api.md §3 roles). */
export function buildsRoutes(deps: AppDeps) {
  const readers = requireUser(deps, { roles: ROLES.everyone });
  const builders = requireUser(deps, { roles: ROLES.builders });
  return new Hono<AppEnv>()
    .post(
      "/v1/projects/:project_id/builds",
      apiDoc({
        summary: "Trigger a build of a pipeline",
        responses: { 200: json.CreatedBuildJson },
        errors: {
          422: [
            "branch_not_found",
            "source_unreachable",
            "source_not_allowed",
            "invalid_pipeline_config",
            "pipeline_not_in_config",
            "config_unavailable",
          ],
        },
        example: { body: { pipeline_id: "3f0c9a52-7a7e-4a53-9a43-2b8f0c2d1e10", branch: "main" } },
      }),
      builders,
      jsonBody(triggerBuildSchema),
      async (c) => c.json(toCreatedBuildJson(await triggerBuild(deps, c.get("user"), c.req.param("project_id"), c.req.valid("json")))),
    )
    .get(
      "/v1/builds",
      apiDoc({
        summary: "List builds, newest first (the next page's cursor is in X-Next-Cursor and Link)",
        responses: { 200: z.array(json.BuildJson) },
        example: { query: { status: "queued", limit: "20" } },
      }),
      readers,
      queryParams(listBuildsSchema),
      async (c) => {
        const query = c.req.valid("query");
        const page = await listBuilds(deps, query);
        if (page.nextCursor) {
          // The body stays the spec's plain array; the next page travels in headers.
          c.header("X-Next-Cursor", page.nextCursor);
          const next = new URL(c.req.url);
          next.searchParams.set("cursor", page.nextCursor);
          c.header("Link", `<${next.pathname}${next.search}>; rel="next"`);
        }
        const showEnv = isBuilder(c.get("user").role);
        return c.json(page.builds.map((b) => toBuildJson(b, showEnv)));
      },
    )
    .get(
      "/v1/builds/:build_id",
      apiDoc({ summary: "Read a build (a queued one says why it waits)", responses: { 200: json.BuildWithQueueJson } }),
      readers,
      async (c) => c.json(await getBuildWithQueue(deps, c.req.param("build_id"), isBuilder(c.get("user").role))),
    )
    .post(
      "/v1/builds/:build_id/rerun",
      apiDoc({
        summary: "Queue a new build of the same pipeline and commit (a repository pipeline's file is read again at that commit)",
        responses: { 200: json.CreatedBuildJson },
        errors: { 422: ["source_not_allowed", "invalid_pipeline_config", "pipeline_not_in_config", "config_unavailable"] },
      }),
      builders,
      async (c) => c.json(toCreatedBuildJson(await rerunBuild(deps, c.get("user"), c.req.param("build_id")))),
    )
    .post(
      "/v1/builds/:build_id/cancel",
      apiDoc({ summary: "Cancel a build", responses: { 200: json.BuildJson }, errors: { 409: ["invalid_transition"] } }),
      builders,
      async (c) => c.json(toBuildJson(await cancelBuild(deps, c.get("user"), c.req.param("build_id")))),
    )
    .get(
      "/v1/builds/:build_id/logs",
      apiDoc({
        summary: "Read a build's log from a byte offset (X-Log-Next-Offset, X-Log-Complete)",
        responses: { 200: { contentType: "text/plain", description: "The log bytes from the offset" } },
        example: { query: { offset: "0" } },
      }),
      readers,
      queryParams(logQuerySchema),
      async (c) => {
        const log = await readLog(deps, c.req.param("build_id"), c.req.valid("query").offset);
        c.header("Content-Type", "text/plain; charset=utf-8");
        c.header("X-Log-Next-Offset", String(log.nextOffset));
        c.header("X-Log-Complete", log.complete ? "true" : "false");
        // A fresh ArrayBuffer-backed copy: Hono types body data as ArrayBuffer views.
        return c.body(new Uint8Array(log.bytes).buffer as ArrayBuffer);
      },
    );
}
