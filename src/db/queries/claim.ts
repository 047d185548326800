import type { Row } from "@libsql/client";
import { clientOf } from "../fixed-sql.ts";
import type { BuildStatus, BuildTrust } from "../schema/constants.ts";
import type { Db } from "../types.ts";
import { endStepResultsExpression } from "./step-results.ts";

// A runner's claim and status report, the statements of every build's runner traffic (src/domain/builds/scheduler.ts
// holds the rules around them: the job token, the answer's shape, the refusal's reason).

/**
 * The claim as fixed SQL (docs/benchmarks.md): drizzle built this statement afresh on every claim, which cost more than
 * running it. The runner row is read inside it (platforms, trust, max_jobs, draining), so a concurrent PATCH or
 * drain is honoured too, and the trust rules hold under the write lock (docs/runner-isolation.md): a protected
 * runner takes protected and open builds, an open one open and fork builds, and a protected build is not handed
 * to a runner while it holds an open or fork job. A runner at its `max_jobs` matches no row. It returns only what
 * the claimed job needs, with the two names the runner needs beside the build row. Every subquery on the runner is
 * uncorrelated (the trusts it takes are one list, computed once per claim), so a claim costs what it did before the
 * trust match plus one look at the runner's active jobs (docs/benchmarks.md, "Runner trust").
 * Affinity (docs/decisions.md "Runner affinity"): a build queued less than ?5 seconds ago is passed over by every
 * runner but the one holding its warm workspace (the runner that took the pipeline's latest build), while that one
 * could take it now: registered, heartbeating, not draining nor low on disk, of a fitting platform and trust, and
 * under its job cap (1 when it has none). The check lives in the same statement, so the claim stays atomic.
 * Arguments: ?1 runner id, ?2 lease expiry, ?3 now, ?4 the job token's SHA-256, ?5 the affinity window in seconds
 * (0: off), ?6 HANGAR_RUNNER_OFFLINE_AFTER_S.
 */
export const CLAIM_SQL = `UPDATE builds SET status = 'assigned', runner_id = ?1, attempt_count = attempt_count + 1, lease_expires_at = ?2,
  updated_at = ?3, job_token_hash = ?4
WHERE id = (SELECT id FROM builds WHERE status = 'queued' AND platform IN (SELECT value FROM json_each((SELECT capabilities FROM runners
    WHERE id = ?1 AND status != 'draining'), '$.platforms') UNION ALL SELECT 'any')
  AND trust IN (SELECT value FROM json_each(CASE (SELECT trust FROM runners WHERE id = ?1) WHEN 'open' THEN '["open","fork"]'
    ELSE CASE WHEN EXISTS (SELECT 1 FROM builds h WHERE h.runner_id = ?1 AND h.status IN ('assigned', 'running') AND h.trust != 'protected')
      THEN '["open"]' ELSE '["protected","open"]' END END))
  AND NOT (?5 > 0 AND queued_at > ?3 - ?5 AND EXISTS (SELECT 1 FROM runners w WHERE w.id = (SELECT h.runner_id FROM builds h
      WHERE h.pipeline_id = builds.pipeline_id AND h.project_id = builds.project_id AND h.runner_id IS NOT NULL
      ORDER BY h.queued_at DESC, h.rowid DESC LIMIT 1)
    AND w.id != ?1 AND w.status IN ('online', 'busy') AND COALESCE(w.low_disk, 0) = 0 AND w.last_heartbeat_at >= ?3 - ?6
    AND (builds.platform = 'any' OR builds.platform IN (SELECT value FROM json_each(w.capabilities, '$.platforms')))
    AND CASE w.trust WHEN 'open' THEN builds.trust IN ('open', 'fork') ELSE builds.trust IN ('protected', 'open') END
    AND (SELECT count(*) FROM builds a WHERE a.runner_id = w.id AND a.status IN ('assigned', 'running'))
      < COALESCE(json_extract(w.capabilities, '$.max_jobs'), 1)))
  ORDER BY queued_at, rowid LIMIT 1)
  AND status = 'queued' AND EXISTS (SELECT 1 FROM runners WHERE runners.id = ?1 AND runners.status != 'draining'
    AND (json_extract(capabilities, '$.max_jobs') IS NULL OR json_extract(capabilities, '$.max_jobs') > (SELECT count(*) FROM builds h
      WHERE h.runner_id = ?1 AND h.status IN ('assigned', 'running'))))
RETURNING id, project_id, pipeline_id, build_number, config_snapshot, commit_sha, branch, trigger_event, lease_expires_at, queued_at, trust,
  (SELECT repo_url FROM projects WHERE projects.id = builds.project_id) AS repo_url,
  (SELECT name FROM pipelines WHERE pipelines.id = builds.pipeline_id) AS pipeline_name`;

/** The columns CLAIM_SQL returns, as the driver hands them over. */
export interface ClaimRow {
  id: string;
  project_id: string;
  pipeline_id: string;
  build_number: number;
  config_snapshot: string;
  commit_sha: string;
  branch: string;
  trigger_event: string | null;
  lease_expires_at: number | null;
  queued_at: number;
  trust: BuildTrust;
  repo_url: string | null;
  pipeline_name: string | null;
}

/**
 * The runner's heartbeat beside a claim or a report (src/domain/runners/runners.ts `refreshRunnerStatement` with `heartbeat: true`) as fixed SQL: draining sticks, otherwise busy
 * while the runner holds an assigned or running build. Arguments: runner id, now, now, runner id.
 */
export const CLAIM_HEARTBEAT_SQL = `UPDATE runners SET status = CASE WHEN status IN ('draining') THEN status ELSE CASE WHEN EXISTS
  (SELECT 1 FROM builds WHERE builds.runner_id = ? AND builds.status IN ('assigned', 'running')) THEN 'busy' ELSE 'online' END END,
  last_heartbeat_at = ?, updated_at = ? WHERE id = ?`;

/** CLAIM_HEARTBEAT_SQL only when the statement just before it (the claim) changed a row. */
export const CLAIMED_HEARTBEAT_SQL = `${CLAIM_HEARTBEAT_SQL} AND changes() > 0`;

/**
 * The report as fixed SQL. Arguments: ?1 status, ?2 final (0/1), ?3 renewed lease expiry, ?4 now, ?5 exit code or
 * null (kept), ?6 failure reason (set when final), ?7 reported step results as JSON or null, ?8 close the stored
 * steps (0/1: final and not succeeded, nothing reported), ?9 build id, ?10 runner id, ?11 the allowed previous
 * states as a JSON array, ?12 release notes, ?13 commits and ?14 cache reports as JSON (final reports only, else null:
 * kept). A final report keeps the lease as it was.
 */
export const REPORT_SQL = `UPDATE builds SET status = ?1,
  lease_expires_at = CASE WHEN ?2 THEN lease_expires_at ELSE ?3 END,
  started_at = COALESCE(started_at, ?4), updated_at = ?4,
  exit_code = CASE WHEN ?5 IS NULL THEN exit_code ELSE ?5 END,
  finished_at = CASE WHEN ?2 THEN ?4 ELSE finished_at END,
  failure_reason = CASE WHEN ?2 THEN ?6 ELSE failure_reason END,
  step_results = CASE WHEN ?7 IS NOT NULL THEN ?7 WHEN ?8 THEN (${endStepResultsExpression("?4")})
    ELSE step_results END,
  release_notes = COALESCE(?12, release_notes), commits = COALESCE(?13, commits), caches = COALESCE(?14, caches)
WHERE id = ?9 AND runner_id = ?10 AND status IN (SELECT value FROM json_each(?11))
RETURNING id, status, cancel_requested, lease_expires_at`;

export interface ReportRow {
  id: string;
  status: BuildStatus;
  cancel_requested: number;
  lease_expires_at: number | null;
}

/** What a claim binds, in CLAIM_SQL's order. */
export interface ClaimArgs {
  runnerId: string;
  leaseExpiresAt: number;
  now: number;
  jobTokenHash: string;
  /** The affinity window in seconds (0: off). */
  affinityWindowS: number;
  runnerOfflineAfterS: number;
}

/**
 * Claims the oldest build this runner can take, with the runner's heartbeat in the same write batch: always
 * (`heartbeat: true`), or only when a build was claimed (a long-poll retry: `changes()` is the claim's row count,
 * the statement before it on the same connection, so a libSQL server sees one round trip, docs/decisions.md).
 * Undefined when nothing was claimed.
 */
export async function claimBuild(db: Db, args: ClaimArgs, options: { heartbeat: boolean }): Promise<ClaimRow | undefined> {
  const claim = {
    sql: CLAIM_SQL,
    args: [args.runnerId, args.leaseExpiresAt, args.now, args.jobTokenHash, args.affinityWindowS, args.runnerOfflineAfterS],
  };
  const heartbeat = { sql: options.heartbeat ? CLAIM_HEARTBEAT_SQL : CLAIMED_HEARTBEAT_SQL, args: heartbeatArgs(args.runnerId, args.now) };
  const row: Row | undefined = (await clientOf(db).batch([claim, heartbeat], "write"))[0]?.rows[0];
  return row as unknown as ClaimRow | undefined;
}

function heartbeatArgs(runnerId: string, now: number) {
  return [runnerId, now, now, runnerId];
}

/** What a status report binds, in REPORT_SQL's order. */
export interface ReportArgs {
  status: BuildStatus;
  final: boolean;
  leaseExpiresAt: number;
  now: number;
  exitCode: number | null;
  failureReason: string | null;
  /** The reported step results as JSON, or null (kept, or closed when `endStoredSteps`). */
  stepResultsJson: string | null;
  endStoredSteps: boolean;
  buildId: string;
  runnerId: string;
  /** The states the build may be in for this report to apply. */
  allowedFrom: readonly string[];
  releaseNotes: string | null;
  commitsJson: string | null;
  cachesJson: string | null;
}

/**
 * Applies a runner's status report, with the runner's heartbeat in the same batch. Undefined when the guard
 * matched nothing (another runner's build, or a state the report may not follow).
 */
export async function reportBuildStatus(db: Db, args: ReportArgs): Promise<ReportRow | undefined> {
  const report = {
    sql: REPORT_SQL,
    args: [
      args.status,
      args.final ? 1 : 0,
      args.leaseExpiresAt,
      args.now,
      args.exitCode,
      args.failureReason,
      args.stepResultsJson,
      args.endStoredSteps ? 1 : 0,
      args.buildId,
      args.runnerId,
      JSON.stringify(args.allowedFrom),
      args.releaseNotes,
      args.commitsJson,
      args.cachesJson,
    ],
  };
  const heartbeat = { sql: CLAIM_HEARTBEAT_SQL, args: heartbeatArgs(args.runnerId, args.now) };
  const row: Row | undefined = (await clientOf(db).batch([report, heartbeat], "deferred"))[0]?.rows[0];
  return row as unknown as ReportRow | undefined;
}
