import { and, desc, eq, gte, lt, sql } from "drizzle-orm";
import { buildLogChunks, builds, runners } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { getProject, type PipelineConfig, type ProjectRow } from "../projects/projects.ts";
import { buildCreationStatements, getBuild } from "./builds.ts";
import { endStepResultsSql } from "./step-results.ts";

/**
 * A running build whose lease lapsed: its runner was lost mid-build (docs/api.md §6, §21). One batch fails it with
 * `runner_lost`, ends its log with a line that says so, and, when its pipeline sets `retry: {runner_lost: N}` and fewer
 * than N automatic retries precede it along its `rerun_of` chain, queues it again: same pipeline, commit, branch,
 * config and trigger (`trigger_type` unchanged), `rerun_of` naming it. Every statement re-checks the state it moves
 * from, so two sweeps (or two daemons) racing fail it, log it and retry it once. Answers whether it was this call.
 */
export async function failLostBuild(deps: Pick<AppDeps, "db" | "clock" | "config">, buildId: string, now: number): Promise<boolean> {
  const build = await getBuild(deps, buildId);
  if (build.status !== "running" || build.leaseExpiresAt === null || build.leaseExpiresAt >= now) return false;
  const allowed = (build.configSnapshot as PipelineConfig | null)?.retry?.runner_lost ?? 0;
  const project = build.runnerLostRetries < allowed ? await liveProject(deps, build.projectId) : null;
  const runner = build.runnerId ? await deps.db.select({ name: runners.name }).from(runners).where(eq(runners.id, build.runnerId)).get() : undefined;

  const who = runner?.name ? `runner "${runner.name}"` : "its runner";
  const lapsedAt = new Date(build.leaseExpiresAt * 1000).toISOString().replace(".000Z", "Z");
  let text = `hangar: ${who} stopped answering (no heartbeat; its lease lapsed at ${lapsedAt}): the build failed with runner_lost.\n`;
  if (project) text += `hangar: queued again automatically (retry.runner_lost: retry ${build.runnerLostRetries + 1} of ${allowed}).\n`;
  else if (allowed > 0) text += `hangar: not queued again: retry.runner_lost allows ${allowed} automatic retries and they are used.\n`;
  // The line starts on a line of its own even when the runner's last chunk ended mid-line.
  if (!(await logEndsWithNewline(deps, buildId))) text = `\n${text}`;
  const line = new TextEncoder().encode(text);

  const fail = deps.db
    .update(builds)
    .set({ status: "failed", failureReason: "runner_lost", finishedAt: now, updatedAt: now, stepResults: endStepResultsSql(now) })
    .where(and(eq(builds.id, buildId), eq(builds.status, "running"), lt(builds.leaseExpiresAt, now)))
    .returning({ id: builds.id });
  const log = deps.db.run(sql`INSERT INTO build_log_chunks (build_id, start_offset, content, newlines)
    SELECT ${buildId}, COALESCE((SELECT MAX(start_offset + length(content)) FROM build_log_chunks WHERE build_id = ${buildId} AND start_offset >= 0), 0),
      ${line}, ${text.split("\n").length - 1}
    WHERE changes() = 1`);
  if (!project) {
    const [failed] = await deps.db.batch([fail, log]);
    return failed.length === 1;
  }
  const retryId = crypto.randomUUID();
  // Only after this build failed as lost just now, and only once: no automatic retry of it exists yet.
  const guard = sql`EXISTS (SELECT 1 FROM builds AS lost WHERE lost.id = ${buildId} AND lost.status = 'failed'
      AND lost.failure_reason = 'runner_lost' AND lost.finished_at = ${now})
    AND NOT EXISTS (SELECT 1 FROM builds AS retried WHERE retried.rerun_of = ${buildId} AND retried.runner_lost_retries > 0)`;
  const retry = buildCreationStatements(
    deps,
    {
      project,
      pipeline: { id: build.pipelineId, projectId: build.projectId },
      config: build.configSnapshot as PipelineConfig,
      triggerType: build.triggerType,
      triggerActor: build.triggerActor,
      triggerEvent: build.triggerEvent,
      triggerRef: build.triggerRef,
      rerunOf: build.id,
      fromFork: build.fromFork,
      commitSha: build.commitSha,
      branch: build.branch,
      failure: null,
      logPreamble: null,
      runnerLostRetries: build.runnerLostRetries + 1,
    },
    retryId,
    now,
    guard,
  );
  const [failed] = await deps.db.batch([fail, log, ...retry]);
  return failed.length === 1;
}

/** The build's project while it exists (a deleted project's build is not queued again). */
async function liveProject(deps: Pick<AppDeps, "db">, projectId: string): Promise<ProjectRow | null> {
  try {
    return await getProject(deps, projectId);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return null;
    throw err;
  }
}

async function logEndsWithNewline(deps: Pick<AppDeps, "db">, buildId: string): Promise<boolean> {
  const last = await deps.db
    .select({ tail: sql<Uint8Array | ArrayBuffer | null>`substr(${buildLogChunks.content}, -1)` })
    .from(buildLogChunks)
    .where(and(eq(buildLogChunks.buildId, buildId), gte(buildLogChunks.startOffset, 0)))
    .orderBy(desc(buildLogChunks.startOffset))
    .limit(1)
    .get();
  if (!last?.tail) return true;
  return new Uint8Array(last.tail as ArrayBuffer)[0] === 0x0a;
}
