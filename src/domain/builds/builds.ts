import { toTestsSummary } from "../tests/tests-summary.ts";
import { and, desc, eq, getTableColumns, inArray, lt, sql, type SQL } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
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
import {
  branchSchema,
  configForReader,
  getPipeline,
  getProject,
  openSourceCredentials,
  type PipelineConfig,
  type PipelineRow,
  type ProjectRow,
} from "../projects/projects.ts";
import { fileDefinitionFor, manualTriggerError, readPipelineConfig, storedFallbackLog } from "../projects/pipeline-source.ts";
import { queuedTrustSql } from "../projects/credential-release.ts";
import { refreshRunnerStatement } from "../runners/runners.ts";
import type { UserRow } from "../auth/users.ts";
import { toCacheReports } from "../caches/cache-report.ts";

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

/** One element of `step_results` (docs/api.md §6). */
export { stepResultSchema, type StepResult } from "../../protocol/runner.ts";
import type { StepResult } from "../../protocol/runner.ts";

/** The full build (GET /v1/builds/{id} and the list). */
export function toBuildJson(b: BuildRow, showEnv = true) {
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
    config_snapshot: configForReader(b.configSnapshot as PipelineConfig, showEnv),
    trust: b.trust,
    runner_id: b.runnerId,
    step_results: (b.stepResults as StepResult[] | null) ?? [],
    exit_code: b.exitCode,
    failure_reason: b.failureReason,
    attempt_count: b.attemptCount,
    cancel_requested: b.cancelRequested,
    pinned: b.pinned,
    timeout_s: b.timeoutS,
    queued_at: b.queuedAt,
    started_at: b.startedAt,
    finished_at: b.finishedAt,
    tests_summary: toTestsSummary(b.testsSummary),
    caches: toCacheReports(b.caches),
    created_at: b.createdAt,
    updated_at: b.updatedAt,
  };
}

/** The create response carries only these fields (docs/spec.md, Build). */
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
 * Queues a build. The branch is resolved with git first (outside any write), then the pipeline file is read at that
 * commit (docs/pipelines.md), then the number is taken and the row inserted in one atomic batch: the UPDATE bumps
 * `last_build_number` and the INSERT reads it back from the project row, so concurrent triggers (and other daemons)
 * get consecutive numbers with no gap or repeat.
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
  const chosen = await configForManualBuild(deps, project, pipeline, commitSha);
  return insertBuild(deps, actor, project, pipeline, {
    commitSha,
    branch,
    triggerRef: input.trigger_ref ?? null,
    rerunOf: null,
    fromFork: false,
    config: chosen.config,
    logPreamble: chosen.logPreamble,
  });
}

/**
 * POST /v1/builds/{id}/rerun: a new manual build of the same pipeline, commit and branch; `rerun_of` names the
 * original. The pipeline file is read again at the original commit; without one, the stored pipeline's current
 * config applies. A deleted pipeline cannot be rerun (404).
 */
export async function rerunBuild(
  deps: Pick<AppDeps, "db" | "clock" | "config" | "jobSignal" | "git" | "secrets">,
  actor: UserRow,
  buildId: string,
): Promise<BuildRow> {
  const original = await getBuild(deps, buildId);
  const project = await getProject(deps, original.projectId);
  // The repository rules may have changed since the original ran (remote mode, local paths).
  await assertRepoAllowed(deps, project.repoUrl);
  const pipeline = await getPipeline(deps, original.projectId, original.pipelineId);
  const chosen = await configForManualBuild(deps, project, pipeline, original.commitSha);
  return insertBuild(deps, actor, project, pipeline, {
    commitSha: original.commitSha,
    branch: original.branch,
    triggerRef: original.triggerRef,
    rerunOf: original.id,
    // A rerun of a fork's pull request is still the fork's code: it gets no secrets either (docs/api.md §5).
    fromFork: original.fromFork,
    config: chosen.config,
    logPreamble: chosen.logPreamble,
  });
}

/**
 * The config a manual build (trigger or rerun) of `pipeline` at `commitSha` runs with (docs/pipelines.md): the
 * file's definition when the file exists there, else the stored config; a stored pipeline whose repository cannot
 * be reached at all builds with its stored config and says so in its log's first line. Everything else is a 422.
 */
export async function configForManualBuild(
  deps: Pick<AppDeps, "git" | "secrets">,
  project: ProjectRow,
  pipeline: PipelineRow,
  commitSha: string,
): Promise<{ config: PipelineConfig; logPreamble: string | null }> {
  const read = await readPipelineConfig(deps, project, commitSha);
  if (read.kind === "file") {
    const definition = fileDefinitionFor(read.file, pipeline);
    if (!definition) {
      throw new ApiError("pipeline_not_in_config", `${read.configPath} at ${commitSha.slice(0, 12)} has no pipeline named "${pipeline.name}"`);
    }
    return { config: definition.config, logPreamble: null };
  }
  if (read.kind === "stored") {
    if (pipeline.source === "repository") {
      const where =
        read.configPath === null ? "the project reads no pipeline file" : `${read.configPath} does not exist at ${commitSha.slice(0, 12)}`;
      throw new ApiError("pipeline_not_in_config", `${where}, and "${pipeline.name}" is defined only there`);
    }
    return { config: pipeline.config as PipelineConfig, logPreamble: null };
  }
  if (read.kind === "unavailable" && read.unreachable && pipeline.source === "stored") {
    return { config: pipeline.config as PipelineConfig, logPreamble: storedFallbackLog(read) };
  }
  throw manualTriggerError(read);
}

/** What one new build is: everything build creation needs beside the pipeline row. */
export interface BuildPlan {
  /** The project as read at queue time: its credentials and protection decide the build's trust. */
  project: ProjectRow;
  pipeline: Pick<PipelineRow, "id" | "projectId">;
  config: PipelineConfig;
  triggerType: "manual" | "webhook" | "schedule";
  triggerActor: string | null;
  triggerEvent: string | null;
  triggerRef: string | null;
  rerunOf: string | null;
  fromFork: boolean;
  commitSha: string;
  branch: string;
  /** Set for a build that fails at once (an invalid or unreadable pipeline file): it is never queued. */
  failure: { reason: "invalid_config" | "config_unavailable" } | null;
  /** Lines the build's stored log starts with (why it failed, or why the stored config was used). */
  logPreamble: string | null;
  /** Set on an automatic requeue after a lost runner: the count along the chain. Such a build supersedes nothing. */
  runnerLostRetries?: number;
}

/**
 * The statements that create one build, for one atomic batch: the number bump and the insert that reads it back
 * (both under `guard`, so a build that is not made takes no number), its first log lines, and, for a pipeline
 * with `cancel_previous`, the cancel of that pipeline's older unfinished builds of the branch (superseded).
 */
export function buildCreationStatements(
  deps: Pick<AppDeps, "db" | "config">,
  plan: BuildPlan,
  id: string,
  now: number,
  guard: SQL = sql`1`,
): BatchItem<"sqlite">[] {
  const { config, pipeline } = plan;
  const live = sql`deleted_at IS NULL AND EXISTS (SELECT 1 FROM pipelines WHERE pipelines.id = ${pipeline.id} AND pipelines.deleted_at IS NULL) AND ${guard}`;
  const status = plan.failure ? "failed" : "queued";
  const finishedAt = plan.failure ? now : null;
  const trust = queuedTrustSql(plan.project, {
    branch: plan.branch,
    triggerEvent: plan.triggerEvent,
    triggerRef: plan.triggerRef,
    fork: plan.fromFork,
  });
  const statements: BatchItem<"sqlite">[] = [
    deps.db
      .update(projects)
      .set({ lastBuildNumber: sql`${projects.lastBuildNumber} + 1` })
      .where(and(eq(projects.id, pipeline.projectId), live)),
    deps.db.run(sql`INSERT INTO builds (id, project_id, pipeline_id, build_number, status, platform, trigger_type, trigger_actor,
        trigger_event, trigger_ref, rerun_of, from_fork, trust, commit_sha, branch, config_snapshot, timeout_s, failure_reason, finished_at,
        runner_lost_retries, queued_at, created_at, updated_at)
      SELECT ${id}, ${pipeline.projectId}, ${pipeline.id}, last_build_number, ${status}, ${config.platform}, ${plan.triggerType},
        ${plan.triggerActor?.slice(0, 200) ?? null}, ${plan.triggerEvent}, ${plan.triggerRef}, ${plan.rerunOf}, ${plan.fromFork ? 1 : 0}, ${trust},
        ${plan.commitSha}, ${plan.branch}, ${JSON.stringify(config)}, ${config.timeout_s ?? deps.config.buildTimeoutS},
        ${plan.failure?.reason ?? null}, ${finishedAt}, ${plan.runnerLostRetries ?? 0}, ${now}, ${now}, ${now}
      FROM projects WHERE id = ${pipeline.projectId} AND ${live}`),
  ];
  if (plan.logPreamble) {
    const bytes = new TextEncoder().encode(plan.logPreamble);
    statements.push(
      deps.db.run(sql`INSERT INTO build_log_chunks (build_id, start_offset, content, newlines)
        SELECT ${id}, 0, ${bytes}, ${countLines(bytes)} WHERE EXISTS (SELECT 1 FROM builds WHERE id = ${id})`),
    );
  }
  // A requeue after a lost runner replaces that build; it cancels none of the builds queued since.
  if (config.cancel_previous && !plan.failure && !plan.runnerLostRetries) {
    const unfinished = sql.join(
      NON_FINAL_STATUSES.map((st) => sql`${st}`),
      sql`, `,
    );
    statements.push(
      deps.db.run(sql`UPDATE builds SET status = 'canceled', cancel_requested = 1, failure_reason = 'superseded', finished_at = ${now},
          updated_at = ${now}, step_results = ${endStepResultsSql(now)}
        WHERE pipeline_id = ${pipeline.id} AND branch = ${plan.branch} AND status IN (${unfinished}) AND id <> ${id}
          AND EXISTS (SELECT 1 FROM builds WHERE id = ${id})`),
    );
  }
  return statements;
}

function countLines(bytes: Uint8Array): number {
  let n = 0;
  for (const b of bytes) if (b === 0x0a) n++;
  return n;
}

/**
 * After a batch that may have superseded builds: the runners that held them go back to online (as a user's
 * cancel does); the runner learns of the cancel from `cancel_requested` through its heartbeat.
 */
export async function refreshRunnersOf(deps: Pick<AppDeps, "db" | "clock">, runnerIds: string[]): Promise<void> {
  const unique = [...new Set(runnerIds)];
  if (unique.length === 0) return;
  const [first, ...rest] = unique.map((r) => refreshRunnerStatement(deps, r));
  await deps.db.batch([first!, ...rest]);
}

/** Runners holding unfinished builds of the pipeline and branch: the ones a superseding build may free. */
export async function runnersHolding(deps: Pick<AppDeps, "db">, pipelineId: string, branch: string): Promise<string[]> {
  const rows = await deps.db
    .select({ runnerId: builds.runnerId })
    .from(builds)
    .where(and(eq(builds.pipelineId, pipelineId), eq(builds.branch, branch), inArray(builds.status, ["assigned", "running"])));
  return rows.flatMap((r) => (r.runnerId ? [r.runnerId] : []));
}

async function insertBuild(
  deps: Pick<AppDeps, "db" | "clock" | "config" | "jobSignal">,
  actor: UserRow,
  project: ProjectRow,
  pipeline: PipelineRow,
  what: {
    commitSha: string;
    branch: string;
    triggerRef: string | null;
    rerunOf: string | null;
    fromFork: boolean;
    config: PipelineConfig;
    logPreamble: string | null;
  },
): Promise<BuildRow> {
  const projectId = pipeline.projectId;
  const now = deps.clock.now();
  const id = crypto.randomUUID();
  const holding = what.config.cancel_previous ? await runnersHolding(deps, pipeline.id, what.branch) : [];
  const [bump, insert, ...more] = buildCreationStatements(
    deps,
    {
      project,
      pipeline,
      config: what.config,
      triggerType: "manual",
      triggerActor: actor.email,
      triggerEvent: null,
      triggerRef: what.triggerRef,
      rerunOf: what.rerunOf,
      fromFork: what.fromFork,
      commitSha: what.commitSha,
      branch: what.branch,
      failure: null,
      logPreamble: what.logPreamble,
    },
    id,
    now,
  );
  const [, inserted] = await deps.db.batch([
    bump!,
    insert!,
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
    ...more,
  ]);
  if (inserted.rowsAffected !== 1) throw new ApiError("not_found", "the project or pipeline was deleted");
  await refreshRunnersOf(deps, holding);
  deps.jobSignal.notify();
  return getBuild(deps, id);
}

/** Build numbers by build id, for pages that link builds by number (a webhook's deliveries); unknown ids are left out. */
export async function buildNumbersOf(deps: Pick<AppDeps, "db">, ids: string[]): Promise<Map<string, number>> {
  if (ids.length === 0) return new Map();
  const rows = await deps.db.select({ id: builds.id, n: builds.buildNumber }).from(builds).where(inArray(builds.id, ids));
  return new Map(rows.map((b) => [b.id, b.n]));
}

export async function getBuild(deps: Pick<AppDeps, "db">, id: string): Promise<BuildRow> {
  const row = await deps.db.select().from(builds).where(eq(builds.id, id)).get();
  if (!row) throw new ApiError("not_found", "no such build");
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
  throw new ApiError("invalid_input", "the cursor is not valid");
}

/**
 * Cancel (docs/spec.md): any non-final build becomes `canceled` at once; a finished one is returned unchanged (200).
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
      .set({
        status: "canceled",
        cancelRequested: true,
        failureReason: "canceled_by_user",
        finishedAt: now,
        updatedAt: now,
        stepResults: endStepResultsSql(now),
      })
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
 * "Why queued" (docs/api.md §13) for a queued build: the registered runners that offer its platform, by status, and
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
export async function getBuildWithQueue(deps: Pick<AppDeps, "db">, id: string, showEnv = true) {
  const build = await getBuild(deps, id);
  return { ...toBuildJson(build, showEnv), queue: build.status === "queued" ? await queueInfo(deps, build) : null };
}
