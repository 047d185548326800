import { and, desc, eq, getTableColumns, inArray, lt, sql, type SQL } from "drizzle-orm";
import { z } from "zod";
import { BUILD_STATUSES, type BuildTrust, type RunnerTrust } from "../../db/schema/constants.ts";
import { builds, projects, runners } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { auditStatementWhen } from "../common/audit.ts";
import { NON_FINAL_STATUSES } from "./build-machine.ts";
import { base64UrlToBytes, bytesToBase64Url } from "../common/crypto.ts";
import { assertRepoAllowed, resolveBranch } from "../projects/git.ts";
import { endStepResultsSql } from "./step-results.ts";
import { branchSchema, getPipeline, getProject, openSourceCredentials, type PipelineConfig, type PipelineRow, type ProjectRow } from "../projects/projects.ts";
import { queuedTrustSql } from "../projects/credential-release.ts";
import { refreshRunnerStatement } from "../runners/runners.ts";
import type { UserRow } from "../auth/users.ts";

export type BuildRow = typeof builds.$inferSelect;

// Built on first use (z.lazy), not at every daemon start: see projects.ts.
export const triggerBuildSchema = z.lazy(() =>
  z.object({
    pipeline_id: z.string().min(1).max(100),
    branch: branchSchema.optional(),
    commit_sha: z
      .string()
      .regex(/^[0-9a-fA-F]{7,40}$/, "must be 7 to 40 hexadecimal characters")
      .transform((s) => s.toLowerCase())
      .optional(),
    trigger_ref: z.string().min(1).max(500).optional(),
  }),
);

export const listBuildsSchema = z.lazy(() =>
  z.object({
    project_id: z.string().min(1).max(100).optional(),
    pipeline_id: z.string().min(1).max(100).optional(),
    branch: z.string().min(1).max(255).optional(),
    status: z.enum(BUILD_STATUSES).optional(),
    limit: z.coerce.number().int().min(1).max(200).default(50),
    cursor: z.string().max(100).optional(),
  }),
);

/** One element of `step_results` (CONTRACT §6). */
export const stepResultSchema = z.object({
  name: z.string().min(1).max(200),
  status: z.enum(["pending", "running", "succeeded", "failed", "skipped"]),
  exit_code: z.number().int().optional(),
  started_at: z.number().int().optional(),
  finished_at: z.number().int().optional(),
});
export type StepResult = z.infer<typeof stepResultSchema>;

/** The full build (GET /v1/builds/{id} and the list). */
export function toBuildJson(b: BuildRow) {
  return {
    id: b.id,
    project_id: b.projectId,
    pipeline_id: b.pipelineId,
    build_number: b.buildNumber,
    status: b.status,
    trigger_type: b.triggerType,
    trigger_actor: b.triggerActor,
    trigger_event: b.triggerEvent,
    trigger_ref: b.triggerRef,
    rerun_of: b.rerunOf,
    commit_sha: b.commitSha,
    branch: b.branch,
    config_snapshot: b.configSnapshot as PipelineConfig,
    trust: b.trust,
    runner_id: b.runnerId,
    step_results: (b.stepResults as StepResult[] | null) ?? [],
    exit_code: b.exitCode,
    failure_reason: b.failureReason,
    attempt_count: b.attemptCount,
    cancel_requested: b.cancelRequested,
    timeout_s: b.timeoutS,
    queued_at: b.queuedAt,
    started_at: b.startedAt,
    finished_at: b.finishedAt,
    created_at: b.createdAt,
    updated_at: b.updatedAt,
  };
}

/** The create response carries only these fields (SPEC, Build). */
export function toCreatedBuildJson(b: BuildRow) {
  return {
    id: b.id,
    project_id: b.projectId,
    pipeline_id: b.pipelineId,
    build_number: b.buildNumber,
    status: b.status,
    trigger_type: b.triggerType,
    branch: b.branch,
    // Only a rerun's answer names its original (the trigger answer keeps the spec's field set).
    ...(b.rerunOf ? { rerun_of: b.rerunOf } : {}),
    queued_at: b.queuedAt,
    created_at: b.createdAt,
    updated_at: b.updatedAt,
  };
}

/**
 * Queues a build. The branch is resolved with git first (outside any write), then the number is taken and the
 * row inserted in one atomic batch: the UPDATE bumps `last_build_number` and the INSERT reads it back from the
 * project row, so concurrent triggers (and other daemons) get consecutive numbers with no gap or repeat.
 */
export async function triggerBuild(
  deps: Pick<AppDeps, "db" | "clock" | "config" | "secrets" | "git" | "jobSignal">,
  actor: UserRow,
  projectId: string,
  input: z.infer<typeof triggerBuildSchema>,
): Promise<BuildRow> {
  const project = await getProject(deps, projectId);
  const pipeline = await getPipeline(deps, projectId, input.pipeline_id);
  const branch = input.branch ?? project.defaultBranch;
  await assertRepoAllowed(deps, project.repoUrl);
  const commitSha =
    input.commit_sha ?? (await resolveBranch(deps, project.repoUrl, branch, (await openSourceCredentials(deps, project)) ?? undefined));
  return insertBuild(deps, actor, project, pipeline, { commitSha, branch, triggerRef: input.trigger_ref ?? null, rerunOf: null, fromFork: false });
}

/**
 * POST /v1/builds/{id}/rerun: a new manual build of the same pipeline, commit and branch, with the pipeline's
 * current config; `rerun_of` names the original. A deleted pipeline cannot be rerun (404).
 */
export async function rerunBuild(
  deps: Pick<AppDeps, "db" | "clock" | "config" | "jobSignal">,
  actor: UserRow,
  buildId: string,
): Promise<BuildRow> {
  const original = await getBuild(deps, buildId);
  // The repository rules may have changed since the original ran (remote mode, local paths).
  const project = await getProject(deps, original.projectId);
  await assertRepoAllowed(deps, project.repoUrl);
  const pipeline = await getPipeline(deps, original.projectId, original.pipelineId);
  return insertBuild(deps, actor, project, pipeline, {
    commitSha: original.commitSha,
    branch: original.branch,
    triggerRef: original.triggerRef,
    rerunOf: original.id,
    // A rerun of a fork's pull request is still the fork's code: it gets no secrets either (CONTRACT §5).
    fromFork: original.fromFork,
  });
}

async function insertBuild(
  deps: Pick<AppDeps, "db" | "clock" | "config" | "jobSignal">,
  actor: UserRow,
  project: ProjectRow,
  pipeline: PipelineRow,
  what: { commitSha: string; branch: string; triggerRef: string | null; rerunOf: string | null; fromFork: boolean },
): Promise<BuildRow> {
  const config = pipeline.config as PipelineConfig;
  const projectId = pipeline.projectId;
  const now = deps.clock.now();
  const id = crypto.randomUUID();
  const timeoutS = config.timeout_s ?? deps.config.buildTimeoutS;
  const values = {
    id,
    projectId,
    pipelineId: pipeline.id,
    status: "queued" as const,
    platform: config.platform,
    triggerType: "manual" as const,
    triggerActor: actor.email,
    configSnapshot: JSON.stringify(config),
    timeoutS,
  };
  // A manual build carries no trigger event: a tag build is one whose trigger_ref names a tag.
  const trust = queuedTrustSql(project, { branch: what.branch, triggerEvent: null, triggerRef: what.triggerRef, fork: what.fromFork });
  // The project and pipeline must still be live when the row goes in: a concurrent delete wins or loses whole.
  const live = sql`deleted_at IS NULL AND EXISTS (SELECT 1 FROM pipelines WHERE pipelines.id = ${pipeline.id} AND pipelines.deleted_at IS NULL)`;
  const [, inserted] = await deps.db.batch([
    deps.db
      .update(projects)
      .set({ lastBuildNumber: sql`${projects.lastBuildNumber} + 1` })
      .where(and(eq(projects.id, projectId), live)),
    deps.db.run(sql`INSERT INTO builds (id, project_id, pipeline_id, build_number, status, platform, trigger_type, trigger_actor,
        trigger_ref, rerun_of, from_fork, trust, commit_sha, branch, config_snapshot, timeout_s, queued_at, created_at, updated_at)
      SELECT ${values.id}, ${values.projectId}, ${values.pipelineId}, last_build_number, ${values.status}, ${values.platform},
        ${values.triggerType}, ${values.triggerActor}, ${what.triggerRef}, ${what.rerunOf}, ${what.fromFork ? 1 : 0}, ${trust}, ${what.commitSha}, ${what.branch},
        ${values.configSnapshot}, ${values.timeoutS}, ${now}, ${now}, ${now}
      FROM projects WHERE id = ${projectId} AND ${live}`),
    auditStatementWhen(
      deps,
      {
        action: what.rerunOf ? "build.rerun" : "build.trigger",
        actor,
        targetType: "build",
        targetId: id,
        details: what.rerunOf ? { project_id: projectId, rerun_of: what.rerunOf } : { project_id: projectId },
      },
      sql`changes() = 1`,
    ),
  ]);
  if (inserted.rowsAffected !== 1) throw new ApiError(404, "not_found", "the project or pipeline was deleted");
  deps.jobSignal.notify();
  return getBuild(deps, id);
}

export async function getBuild(deps: Pick<AppDeps, "db">, id: string): Promise<BuildRow> {
  const row = await deps.db.select().from(builds).where(eq(builds.id, id)).get();
  if (!row) throw new ApiError(404, "not_found", "no such build");
  return row;
}

/**
 * Newest first. The cursor is the opaque base64url of the last row's SQLite rowid: rowids grow with every
 * insert, so `rowid < cursor` pages stably while new builds arrive at the head.
 */
export async function listBuilds(
  deps: Pick<AppDeps, "db">,
  query: z.infer<typeof listBuildsSchema>,
): Promise<{ builds: BuildRow[]; nextCursor: string | null }> {
  const conditions: SQL[] = [];
  if (query.project_id) conditions.push(eq(builds.projectId, query.project_id));
  if (query.pipeline_id) conditions.push(eq(builds.pipelineId, query.pipeline_id));
  if (query.branch) conditions.push(eq(builds.branch, query.branch));
  if (query.status) conditions.push(eq(builds.status, query.status));
  if (query.cursor !== undefined) conditions.push(lt(sql`${builds}.rowid`, decodeCursor(query.cursor)));
  const rows = await deps.db
    .select({ ...getTableColumns(builds), seq: sql<number>`${builds}.rowid` })
    .from(builds)
    .where(and(...conditions))
    .orderBy(desc(sql`${builds}.rowid`))
    .limit(query.limit + 1);
  const page = rows.slice(0, query.limit);
  const last = page[page.length - 1];
  return {
    builds: page.map(({ seq: _seq, ...b }) => b),
    nextCursor: rows.length > query.limit && last ? encodeCursor(last.seq) : null,
  };
}

function encodeCursor(seq: number): string {
  return bytesToBase64Url(new TextEncoder().encode(`b${seq}`));
}

function decodeCursor(cursor: string): number {
  try {
    const text = new TextDecoder().decode(base64UrlToBytes(cursor));
    if (/^b\d{1,15}$/.test(text)) return Number(text.slice(1));
  } catch {
    // fall through to the error below
  }
  throw new ApiError(400, "invalid_input", "the cursor is not valid");
}

/**
 * Cancel (SPEC): any non-final build becomes `canceled` at once; a finished one is returned unchanged (200).
 * `cancel_requested` tells the runner holding it to stop (heartbeat `cancel_job_ids`, job GET, 409 build_canceled).
 */
export async function cancelBuild(deps: Pick<AppDeps, "db" | "clock">, actor: UserRow, buildId: string): Promise<BuildRow> {
  const before = await getBuild(deps, buildId);
  if (!(NON_FINAL_STATUSES as readonly string[]).includes(before.status)) return before;
  const now = deps.clock.now();
  // One batch: the guarded cancel, its audit event only if the cancel landed (changes() counts the statement
  // just before), and the runner's status, so a crash cannot keep one without the others.
  const statements = [
    deps.db
      .update(builds)
      .set({ status: "canceled", cancelRequested: true, failureReason: "canceled_by_user", finishedAt: now, updatedAt: now, stepResults: endStepResultsSql(now) })
      .where(and(eq(builds.id, buildId), inArray(builds.status, [...NON_FINAL_STATUSES])))
      .returning(),
    auditStatementWhen(deps, { action: "build.cancel", actor, targetType: "build", targetId: buildId }, sql`changes() = 1`),
  ] as const;
  const [[canceled]] = before.runnerId
    ? await deps.db.batch([...statements, refreshRunnerStatement(deps, before.runnerId)])
    : await deps.db.batch([...statements]);
  return canceled ?? getBuild(deps, buildId);
}

export const QUEUE_REASONS = ["waiting_for_runner", "no_runner_online", "no_matching_runner", "no_runner_of_trust"] as const;

/** Whether a runner of this trust takes builds of that trust (the claim's rule, docs/runner-isolation.md). */
export function runnerTakesTrust(runner: RunnerTrust, build: BuildTrust): boolean {
  return runner === "open" ? build === "open" || build === "fork" : build === "protected" || build === "open";
}

/**
 * "Why queued" (CONTRACT §13) for a queued build: the registered runners that offer its platform, by status, and
 * its 1-based place among the queued builds those runners could take (oldest first, as the claim orders them).
 */
export async function queueInfo(deps: Pick<AppDeps, "db">, build: BuildRow) {
  const all = await deps.db.select({ status: runners.status, capabilities: runners.capabilities, trust: runners.trust }).from(runners);
  const offered = (r: (typeof all)[number]) => {
    const platforms = (r.capabilities as { platforms?: unknown } | null)?.platforms;
    return Array.isArray(platforms) ? platforms.filter((p): p is string => typeof p === "string") : [];
  };
  const matching = build.platform === "any" ? all : all.filter((r) => offered(r).includes(build.platform));
  const counts = { online: 0, busy: 0, draining: 0, offline: 0 };
  for (const r of matching) counts[r.status] += 1;
  // Runners that offer the platform but not a fitting trust can never take it either (a fork's pull request and
  // only protected runners): that is said apart, and "online" counts only the runners that could take it.
  const fitting = matching.filter((r) => runnerTakesTrust(r.trust, build.trust));
  const reason: (typeof QUEUE_REASONS)[number] =
    matching.length === 0
      ? "no_matching_runner"
      : fitting.length === 0
        ? "no_runner_of_trust"
        : fitting.every((r) => r.status === "offline" || r.status === "draining")
          ? "no_runner_online"
          : "waiting_for_runner";
  let position: number | null = null;
  if (matching.length > 0) {
    const platforms = [...new Set(["any", ...matching.flatMap(offered)])];
    const row = await deps.db
      .select({ n: sql<number>`count(*)` })
      .from(builds)
      .where(
        and(
          eq(builds.status, "queued"),
          inArray(builds.platform, platforms),
          sql`(${builds.queuedAt} < ${build.queuedAt} OR (${builds.queuedAt} = ${build.queuedAt}
            AND ${builds}.rowid <= (SELECT rowid FROM builds AS b2 WHERE b2.id = ${build.id})))`,
        ),
      )
      .get();
    position = Number(row?.n ?? 0);
  }
  return { position, matching_runners: counts, reason };
}

/** GET /v1/builds/{id}: the build, with `queue` while it is queued (else null). */
export async function getBuildWithQueue(deps: Pick<AppDeps, "db">, id: string) {
  const build = await getBuild(deps, id);
  return { ...toBuildJson(build), queue: build.status === "queued" ? await queueInfo(deps, build) : null };
}
