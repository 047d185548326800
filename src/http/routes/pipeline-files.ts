import { z } from "zod";
import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { badgeStatus, badgeSvg, createBadge, revokeBadge } from "../../domain/projects/badges.ts";
import { validatePipelineConfigSchema, validatePipelineContent } from "../../domain/projects/pipeline-validate.ts";
import { schedulesWithNextRun } from "../../domain/builds/schedules.ts";
import { getProject } from "../../domain/projects/projects.ts";
import { publicBase } from "../../domain/events/webhooks.ts";
import { requireUser, ROLES } from "../middleware/auth.ts";
import { jsonBody } from "../validate.ts";
import { apiDoc } from "../route-docs.ts";

const FileIssueJson = z.object({ path: z.string(), message: z.string(), line: z.number().int(), column: z.number().int() });
const ValidateJson = z.object({ ok: z.boolean(), issues: z.array(FileIssueJson), pipelines: z.array(z.string()) });
const ScheduleJson = z.object({
  pipeline_id: z.string(),
  origin: z.enum(["file", "stored"]),
  cron: z.string(),
  timezone: z.string(),
  branch: z.string().nullable(),
  next_run_at: z.number().int().nullable(),
});
const BADGE_FILE = /^([A-Za-z0-9_-]{43})\.svg$/;

/** Pipeline files, schedules and badges (docs/pipelines.md). */
export function pipelineFilesRoutes(deps: AppDeps) {
  const readers = requireUser(deps, { roles: ROLES.everyone });
  const builders = requireUser(deps, { roles: ROLES.builders });
  return new Hono<AppEnv>()
    .post(
      "/v1/projects/:project_id/pipeline-config/validate",
      apiDoc({
        summary: "Check a pipeline file's text (answers 200 with the issues also when it is invalid)",
        responses: { 200: ValidateJson },
        example: { body: { content: "pipelines:\n  build:\n    platform: any\n    steps:\n      - ./gradlew test\n" } },
      }),
      readers,
      jsonBody(validatePipelineConfigSchema),
      async (c) => c.json(await validatePipelineContent(deps, c.req.param("project_id"), c.req.valid("json").content)),
    )
    .get(
      "/v1/projects/:project_id/schedules",
      apiDoc({ summary: "A project's schedules with their next run", responses: { 200: z.array(ScheduleJson) } }),
      readers,
      async (c) => {
        await getProject(deps, c.req.param("project_id"));
        const list = await schedulesWithNextRun(deps, c.req.param("project_id"));
        return c.json(
          list.map((s) => ({
            pipeline_id: s.pipelineId,
            origin: s.origin,
            cron: s.cron,
            timezone: s.timezone,
            branch: s.branch,
            next_run_at: s.nextRunAt,
          })),
        );
      },
    )
    .post(
      "/v1/projects/:project_id/pipelines/:pipeline_id/badge",
      apiDoc({
        summary: "Make (or replace) the pipeline's public badge URL",
        responses: { 200: z.object({ url: z.string() }) },
      }),
      builders,
      async (c) =>
        c.json(
          await createBadge(
            deps,
            c.get("user"),
            c.req.param("project_id"),
            c.req.param("pipeline_id"),
            await publicBase(deps, new URL(c.req.url).origin),
          ),
        ),
    )
    .delete(
      "/v1/projects/:project_id/pipelines/:pipeline_id/badge",
      apiDoc({ summary: "Revoke the pipeline's badge URL", responses: { 204: { noBody: "Revoked" } } }),
      builders,
      async (c) => {
        await revokeBadge(deps, c.get("user"), c.req.param("project_id"), c.req.param("pipeline_id"));
        return c.body(null, 204);
      },
    )
    .get("/badge/:file", async (c) => {
      const token = BADGE_FILE.exec(c.req.param("file"))?.[1];
      if (!token) throw new ApiError("not_found", "no such badge");
      const branch = c.req.query("branch");
      const { status, label } = await badgeStatus(deps, token, branch && branch.length > 0 ? branch.slice(0, 255) : undefined);
      return c.body(badgeSvg(label, status), 200, { "Content-Type": "image/svg+xml; charset=utf-8", "Cache-Control": "no-cache" });
    });
}
