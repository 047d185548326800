import { Hono } from "hono";
import { z } from "zod";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { toBuildJson } from "../../domain/builds/builds.ts";
import { diskUsage } from "../../domain/retention/disk.ts";
import { dryRunRetention, runRetentionNow } from "../../domain/retention/pass.ts";
import { setBuildPinned } from "../../domain/retention/pins.ts";
import {
  readInstancePolicy,
  readProjectPolicy,
  retentionPolicySchema,
  updateInstancePolicy,
  updateProjectPolicy,
} from "../../domain/retention/policy.ts";
import { requireUser, ROLES } from "../middleware/auth.ts";
import { apiDoc } from "../route-docs.ts";
import { jsonBody } from "../validate.ts";
import * as json from "../responses.ts";

// Answer schemas of this file's routes, for the OpenAPI document.
const rule = z.number().int().nullable();
const EffectivePolicyJson = z.object({ artifacts: z.object({ keep_last: rule, max_age_days: rule }), logs: z.object({ max_age_days: rule }) });
const ProjectPolicyJson = z.object({
  artifacts: z.object({ keep_last: rule.optional(), max_age_days: rule.optional() }),
  logs: z.object({ max_age_days: rule.optional() }),
  effective: EffectivePolicyJson,
});
const tally = z.object({ count: z.number().int(), bytes: z.number().int() });
const RetentionRunJson = z.object({
  artifacts: tally,
  logs: tally,
  items: z.array(
    z.object({
      build_id: z.string(),
      artifact_id: z.string().optional(),
      bytes: z.number().int(),
      reason: z.enum(["artifacts.keep_last", "artifacts.max_age_days", "logs.max_age_days"]),
    }),
  ),
});
const DiskJson = z.object({
  data_dir: z.object({ free_bytes: z.number().int(), total_bytes: z.number().int() }).nullable(),
  database_bytes: z.number().int(),
  artifacts_bytes: z.number().int(),
  logs_bytes: z.number().int(),
  projects: z.array(z.object({ project_id: z.string(), artifacts_bytes: z.number().int(), logs_bytes: z.number().int() })),
});

const runSchema = z.object({ dry_run: z.boolean() }).strict();

const policyExample = { artifacts: { keep_last: 20, max_age_days: 90 }, logs: { max_age_days: 30 } };

/** Retention policies, the pass run on demand, pins and the disk page's figures (docs/decisions.md, Retention). */
export function retentionRoutes(deps: AppDeps) {
  const settingsUser = requireUser(deps, { roles: ROLES.managers, code: "insufficient_role" });
  const projectManagers = requireUser(deps, { roles: ROLES.managers });
  const builders = requireUser(deps, { roles: ROLES.builders });
  // This process's name as the holder of a pass it runs on demand (the daemon's daily loop has its own).
  const owner = `api-${crypto.randomUUID()}`;
  return new Hono<AppEnv>()
    .get(
      "/v1/settings/retention",
      apiDoc({ summary: "Read the instance retention policy (null: keep)", responses: { 200: EffectivePolicyJson } }),
      settingsUser,
      async (c) => c.json(await readInstancePolicy(deps)),
    )
    .put(
      "/v1/settings/retention",
      apiDoc({
        summary: "Set the instance retention policy (projects may override it key by key)",
        responses: { 200: EffectivePolicyJson },
        example: { body: policyExample },
      }),
      settingsUser,
      jsonBody(retentionPolicySchema),
      async (c) => c.json(await updateInstancePolicy(deps, c.get("user"), c.req.valid("json"))),
    )
    .post(
      "/v1/settings/retention/run",
      apiDoc({
        summary: "Run a retention pass now, or list what it would delete (dry_run)",
        responses: { 200: RetentionRunJson },
        errors: { 409: ["retention_pass_running"] },
        example: { body: { dry_run: true } },
      }),
      settingsUser,
      jsonBody(runSchema),
      async (c) => c.json(c.req.valid("json").dry_run ? await dryRunRetention(deps) : await runRetentionNow(deps, c.get("user"), owner)),
    )
    .get(
      "/v1/settings/disk",
      apiDoc({ summary: "Free space of the data directory and what Hangar stores, per project", responses: { 200: DiskJson } }),
      settingsUser,
      async (c) => c.json(await diskUsage(deps)),
    )
    .get(
      "/v1/projects/:project_id/retention",
      apiDoc({ summary: "Read a project's retention override and the rules in effect", responses: { 200: ProjectPolicyJson } }),
      projectManagers,
      async (c) => c.json(await readProjectPolicy(deps, c.req.param("project_id"))),
    )
    .put(
      "/v1/projects/:project_id/retention",
      apiDoc({
        summary: "Override the instance retention policy for a project (a missing key inherits, null keeps)",
        responses: { 200: ProjectPolicyJson },
        example: { body: { artifacts: { keep_last: 5 }, logs: {} } },
      }),
      projectManagers,
      jsonBody(retentionPolicySchema),
      async (c) => c.json(await updateProjectPolicy(deps, c.get("user"), c.req.param("project_id"), c.req.valid("json"))),
    )
    .post(
      "/v1/builds/:build_id/pin",
      apiDoc({ summary: "Pin a build: retention never deletes its artifacts or log", responses: { 200: json.BuildJson } }),
      builders,
      async (c) => c.json(toBuildJson(await setBuildPinned(deps, c.get("user"), c.req.param("build_id"), true))),
    )
    .delete("/v1/builds/:build_id/pin", apiDoc({ summary: "Unpin a build", responses: { 200: json.BuildJson } }), builders, async (c) =>
      c.json(toBuildJson(await setBuildPinned(deps, c.get("user"), c.req.param("build_id"), false))),
    );
}
