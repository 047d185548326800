// Retention policies (docs/decisions.md, Retention): an instance default and per-project overrides.
import { eq } from "drizzle-orm";
import { z } from "zod";
import { projectRetentionPolicies } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { auditStatement } from "../common/audit.ts";
import { readSetting, writeSettingStatement } from "../settings/instance-settings.ts";
import { getProject } from "../projects/projects.ts";
import type { UserRow } from "../auth/users.ts";

export const RETENTION_SETTING = "retention";

/** Whole days up to a century: enough for any real policy, small enough that `days * 86400` stays exact. */
const days = z.number().int().min(0).max(36_500);
const count = z.number().int().min(0).max(1_000_000);

/**
 * The API's policy document. `null` is accepted beside a missing key: on the instance both mean "keep"; on a project
 * a missing key inherits the instance's rule and `null` replaces it with "keep".
 */
export const retentionPolicySchema = z
  .object({
    artifacts: z.object({ keep_last: count.nullable().optional(), max_age_days: days.nullable().optional() }).strict().default({}),
    logs: z.object({ max_age_days: days.nullable().optional() }).strict().default({}),
  })
  .strict();

export type RetentionPolicyInput = z.infer<typeof retentionPolicySchema>;

/** Every rule spelled out: null = no rule (keep). */
export interface EffectivePolicy {
  artifacts: { keep_last: number | null; max_age_days: number | null };
  logs: { max_age_days: number | null };
}

export const NO_RULES: EffectivePolicy = { artifacts: { keep_last: null, max_age_days: null }, logs: { max_age_days: null } };

/** A stored document as written by an older or newer daemon, read defensively. */
function parseStored(value: unknown): RetentionPolicyInput {
  const parsed = retentionPolicySchema.safeParse(value);
  return parsed.success ? parsed.data : { artifacts: {}, logs: {} };
}

function pick<T>(override: T | null | undefined, fallback: T | null): T | null {
  return override === undefined ? fallback : override;
}

/** A project override on top of the instance default, key by key (a present key, null included, wins). */
export function mergePolicy(instance: EffectivePolicy, override: RetentionPolicyInput | null): EffectivePolicy {
  if (!override) return instance;
  return {
    artifacts: {
      keep_last: pick(override.artifacts.keep_last, instance.artifacts.keep_last),
      max_age_days: pick(override.artifacts.max_age_days, instance.artifacts.max_age_days),
    },
    logs: { max_age_days: pick(override.logs.max_age_days, instance.logs.max_age_days) },
  };
}

function spelledOut(p: RetentionPolicyInput): EffectivePolicy {
  return mergePolicy(NO_RULES, p);
}

/** GET /v1/settings/retention: the instance default, every key present (null = keep). */
export async function readInstancePolicy(deps: Pick<AppDeps, "db">): Promise<EffectivePolicy> {
  const stored = await readSetting<unknown>(deps, RETENTION_SETTING);
  return spelledOut(stored ? parseStored(stored.value) : { artifacts: {}, logs: {} });
}

export async function updateInstancePolicy(
  deps: Pick<AppDeps, "db" | "clock">,
  actor: UserRow,
  input: RetentionPolicyInput,
): Promise<EffectivePolicy> {
  const policy = spelledOut(input);
  await deps.db.batch([
    writeSettingStatement(deps, RETENTION_SETTING, policy),
    auditStatement(deps, {
      action: "settings.retention_updated",
      actor,
      targetType: "instance_settings",
      targetId: RETENTION_SETTING,
      details: { ...policy },
    }),
  ]);
  return policy;
}

/** Every project's stored override, by project id. */
export async function readProjectOverrides(deps: Pick<AppDeps, "db">): Promise<Map<string, RetentionPolicyInput>> {
  const rows = await deps.db.select().from(projectRetentionPolicies);
  return new Map(rows.map((r) => [r.projectId, parseStored(r.policy)]));
}

export interface ProjectPolicyAnswer {
  artifacts: { keep_last?: number | null; max_age_days?: number | null };
  logs: { max_age_days?: number | null };
  /** The rules that apply to this project: its override over the instance default. */
  effective: EffectivePolicy;
}

async function projectAnswer(deps: Pick<AppDeps, "db">, override: RetentionPolicyInput | null): Promise<ProjectPolicyAnswer> {
  const own = override ?? { artifacts: {}, logs: {} };
  return { artifacts: own.artifacts, logs: own.logs, effective: mergePolicy(await readInstancePolicy(deps), override) };
}

/** GET /v1/projects/{id}/retention: the override as stored (missing keys inherit) and the effective rules. */
export async function readProjectPolicy(deps: Pick<AppDeps, "db">, projectId: string): Promise<ProjectPolicyAnswer> {
  await getProject(deps, projectId);
  const row = await deps.db.select().from(projectRetentionPolicies).where(eq(projectRetentionPolicies.projectId, projectId)).get();
  return projectAnswer(deps, row ? parseStored(row.policy) : null);
}

/** PUT /v1/projects/{id}/retention: replaces the project's override whole. */
export async function updateProjectPolicy(
  deps: Pick<AppDeps, "db" | "clock">,
  actor: UserRow,
  projectId: string,
  input: RetentionPolicyInput,
): Promise<ProjectPolicyAnswer> {
  await getProject(deps, projectId);
  const now = deps.clock.now();
  await deps.db.batch([
    deps.db
      .insert(projectRetentionPolicies)
      .values({ projectId, policy: input, updatedAt: now })
      .onConflictDoUpdate({ target: projectRetentionPolicies.projectId, set: { policy: input, updatedAt: now } }),
    auditStatement(deps, { action: "project.retention_updated", actor, targetType: "project", targetId: projectId, details: { ...input } }),
  ]);
  return projectAnswer(deps, input);
}
