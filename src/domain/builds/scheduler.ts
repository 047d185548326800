import type { Row } from "@libsql/client";
import { and, eq } from "drizzle-orm";
import { z } from "zod";
import { clientOf } from "../../db/fixed-sql.ts";
import { queueVersion } from "../../db/queries/queue-version.ts";
import { builds, runners } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { ACTIVE_STATUSES, assertRunnerReport, isFinalStatus, reportableFrom } from "./build-machine.ts";
import type { BuildRow } from "./builds.ts";
import { endStepResults, endStepResultsExpression } from "./step-results.ts";
import { getProject, openAndroidSigning, openSourceCredentials, type PipelineConfig } from "../projects/projects.ts";
import { iosSigningForRunner } from "../signing/signing.ts";
import { recordAudit } from "../common/audit.ts";
import { assertCredentialsReleasable } from "../projects/credential-release.ts";
import { openSecrets } from "../projects/project-secrets.ts";
import { prefixedToken, sha256Hex, TOKEN_PREFIXES } from "../common/crypto.ts";
import type { BuildTrust } from "../../db/schema/constants.ts";
import { statusReportSchema, type ClaimedJob as ProtocolClaimedJob } from "../../protocol/runner.ts";

type SchedDeps = Pick<AppDeps, "db" | "clock" | "config" | "metrics">;

/**
 * How often a waiting claim tries the database by itself. With the daemon's queue-version loop (JobSignal
 * `readVersion`), builds queued anywhere wake it within ~100 ms, so its own tries are only a fallback for what
 * queues nothing (a runner's platforms widened, a drain lifted, a failed version read): every 2–3 s. Without the
 * loop (an embedder's JobSignal without it), every 250–450 ms as before (docs/api.md §8).
 */
const FALLBACK_MIN_MS = 2000;
const FALLBACK_JITTER_MS = 1000;
const POLL_MIN_MS = 250;
const POLL_JITTER_MS = 200;
export const MAX_CLAIM_WAIT_S = 30;

export const claimQuerySchema = z.object({ wait: z.coerce.number().int().min(0).max(MAX_CLAIM_WAIT_S).default(0) });

/** The status report's validator: the wire protocol's schema (src/protocol/runner.ts), in full zod for the OpenAPI document. */
export const jobStatusSchema = z.object(statusReportSchema.shape);

/** The claimed job (docs/spec.md "Claimed job"): the wire protocol's, with the pipeline as the daemon validated it. */
export type ClaimedJob = Omit<ProtocolClaimedJob, "config_snapshot" | "trust"> & { config_snapshot: PipelineConfig; trust: BuildTrust };

/**
 * The claim itself: ONE conditional UPDATE picks the oldest queued build this runner can run and assigns it.
 * SQLite runs a statement under the database's single write lock, and the outer `status = 'queued'` re-check
 * means a build another writer took first is never taken again, so no build is claimed twice, even by two
 * daemon processes on one file. A draining runner matches nothing. The runner's heartbeat goes in the same batch.
 */
export async function claimOnce(deps: SchedDeps, runnerId: string, options: { heartbeat?: boolean } = {}): Promise<ClaimedJob | null> {
  const now = deps.clock.now();
  // The job token is made before the claim so that its hash lands in the same statement: a claimed build never
  // exists without the token its runner was handed. Only the hash is stored.
  const jobToken = prefixedToken(TOKEN_PREFIXES.job);
  const claim = {
    sql: CLAIM_SQL,
    args: [runnerId, now + deps.config.jobLeaseS, now, await sha256Hex(jobToken), affinityWindowS(deps.config), deps.config.runnerOfflineAfterS],
  };
  const refresh = { sql: CLAIM_HEARTBEAT_SQL, args: [runnerId, now, now, runnerId] };
  const client = clientOf(deps.db);
  let row: Row | undefined;
  if (options.heartbeat === false) {
    // A long-poll retry: the runner row is touched only when a job came (`changes()` is the claim's row count, the
    // statement before it on the same connection), in the same round trip: on a libSQL server a second request
    // would add its whole latency to the cross-daemon pickup (docs/decisions.md).
    row = (await client.batch([claim, { sql: CLAIMED_HEARTBEAT_SQL, args: refresh.args }], "write"))[0]?.rows[0];
  } else {
    row = (await client.batch([claim, refresh], "write"))[0]?.rows[0];
  }
  if (!row) return null;
  const b = row as unknown as ClaimRow;
  deps.metrics?.buildPickup.observe(Math.max(0, now - Number(b.queued_at)));
  return {
    build_id: String(b.id),
    project_id: String(b.project_id),
    pipeline_id: String(b.pipeline_id),
    pipeline_name: b.pipeline_name ?? "",
    build_number: Number(b.build_number),
    config_snapshot: JSON.parse(String(b.config_snapshot)) as PipelineConfig,
    commit_sha: String(b.commit_sha),
    branch: String(b.branch),
    repo_url: b.repo_url ?? "",
    trigger_event: b.trigger_event ?? null,
    lease_expires_at: b.lease_expires_at === null ? 0 : Number(b.lease_expires_at),
    job_token: jobToken,
    trust: b.trust,
    outbound_allow: [...deps.config.outboundAllow.cidrs],
  };
}

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

/** HANGAR_AFFINITY_WAIT_MS in whole seconds, as queue times are kept: a build is held 2–3 s for the default 3000. */
function affinityWindowS(config: Pick<AppDeps["config"], "affinityWaitMs">): number {
  return Math.ceil(config.affinityWaitMs / 1000);
}

/** The columns CLAIM_SQL returns, as the driver hands them over. */
interface ClaimRow {
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
 * `refreshRunnerStatement(deps, runnerId, { heartbeat: true })` as fixed SQL: draining sticks, otherwise busy
 * while the runner holds an assigned or running build. Arguments: runner id, now, now, runner id.
 */
const CLAIM_HEARTBEAT_SQL = `UPDATE runners SET status = CASE WHEN status IN ('draining') THEN status ELSE CASE WHEN EXISTS
  (SELECT 1 FROM builds WHERE builds.runner_id = ? AND builds.status IN ('assigned', 'running')) THEN 'busy' ELSE 'online' END END,
  last_heartbeat_at = ?, updated_at = ? WHERE id = ?`;

/** CLAIM_HEARTBEAT_SQL only when the statement just before it (the claim) changed a row. */
const CLAIMED_HEARTBEAT_SQL = `${CLAIM_HEARTBEAT_SQL} AND changes() > 0`;

/**
 * POST .../claim?wait=N: claim now, else wait for this process's job signal (instant) or the next database
 * poll (builds queued by another daemon) and retry, until N seconds pass. Null means 204.
 * `abort` ends the wait when the client goes away, so no job is assigned to a runner that stopped listening.
 */
export async function claimJob(
  deps: SchedDeps & Pick<AppDeps, "jobSignal">,
  runnerId: string,
  waitS: number,
  abort?: AbortSignal,
): Promise<ClaimedJob | null> {
  // Wall time, not deps.clock: the wait is a real duration even under a test's ManualClock.
  const deadline = Date.now() + waitS * 1000;
  const signal = deps.jobSignal;
  const [pollMin, pollJitter] = signal.pollsDatabase ? [FALLBACK_MIN_MS, FALLBACK_JITTER_MS] : [POLL_MIN_MS, POLL_JITTER_MS];
  for (let attempt = 0; ; attempt++) {
    if (abort?.aborted) return null;
    // Read before the try: a wake-up that comes while it runs makes the wait below return at once.
    const seen = signal.generation;
    // The first try records the heartbeat (a claim counts as one); retries during the wait do not rewrite it.
    const claimed = await claimOnce(deps, runnerId, { heartbeat: attempt === 0 });
    if (claimed) return claimed;
    const left = deadline - Date.now();
    if (left <= 0) return null;
    // A draining runner takes no new work, so there is nothing to wait for.
    if (attempt === 0 && (await isDraining(deps, runnerId))) return null;
    await signal.wait(Math.min(left, pollMin + Math.random() * pollJitter), abort, seen);
  }
}

/** The queue version (`queue_version`, bumped by triggers as builds become queued), read by each daemon's JobSignal loop. */
export async function readQueueVersion(db: SchedDeps["db"]): Promise<number> {
  return queueVersion(db);
}

async function isDraining(deps: Pick<AppDeps, "db">, runnerId: string): Promise<boolean> {
  const row = await deps.db.select({ status: runners.status }).from(runners).where(eq(runners.id, runnerId)).get();
  return row?.status === "draining";
}

/** The build `jobId` if this runner holds it (or held it last); 404 not_found otherwise (docs/api.md §6). */
export async function getRunnerJob(deps: Pick<AppDeps, "db">, runnerId: string, jobId: string): Promise<BuildRow> {
  const row = await deps.db
    .select()
    .from(builds)
    .where(and(eq(builds.id, jobId), eq(builds.runnerId, runnerId)))
    .get();
  if (!row) throw new ApiError("not_found", "no such job on this runner");
  return row;
}

export function toJobJson(b: Pick<BuildRow, "id" | "status" | "cancelRequested" | "leaseExpiresAt">) {
  return { build_id: b.id, status: b.status, cancel_requested: b.cancelRequested, lease_expires_at: b.leaseExpiresAt };
}

/** What a runner's status report answers (docs/spec.md "Job": the fields the runner acts on). */
export interface JobState {
  id: string;
  status: BuildRow["status"];
  cancelRequested: boolean;
  leaseExpiresAt: number | null;
}

/**
 * A runner's status report: one conditional UPDATE guarded by the allowed previous states (assigned → running
 * → final), which also renews the lease, and the runner's heartbeat in the same batch. When it matches nothing,
 * the build is read to name the reason. Fixed SQL (docs/benchmarks.md), like the claim: the report is a third of every
 * build's runner traffic, and drizzle built its statement afresh on each call.
 */
export async function reportJobStatus(deps: SchedDeps, runnerId: string, jobId: string, input: z.infer<typeof jobStatusSchema>): Promise<JobState> {
  const { status } = input;
  let exitCode = input.exit_code;
  if (status === "succeeded") {
    exitCode ??= 0;
    if (exitCode !== 0) throw new ApiError("invalid_input", "a succeeded build needs exit code 0");
  } else if (status === "failed") {
    exitCode ??= 1;
    if (exitCode === 0) throw new ApiError("invalid_input", "a failed build needs a non-zero exit code");
  }
  const now = deps.clock.now();
  const final = isFinalStatus(status);
  // A build that ends other than succeeded leaves no step running (docs/decisions.md), whatever the runner reported:
  // reported steps are closed here, stored ones by REPORT_SQL's own CASE.
  const endsSteps = final && status !== "succeeded";
  const reported = input.step_results === undefined ? null : endsSteps ? endStepResults(input.step_results, now) : input.step_results;
  const failureReason =
    status === "failed" ? "nonzero_exit" : status === "timed_out" ? "timeout" : status === "canceled" ? "canceled_by_runner" : null;
  const report = {
    sql: REPORT_SQL,
    args: [
      status,
      final ? 1 : 0,
      now + deps.config.jobLeaseS,
      now,
      exitCode ?? null,
      failureReason,
      reported === null ? null : JSON.stringify(reported),
      endsSteps ? 1 : 0,
      jobId,
      runnerId,
      JSON.stringify(reportableFrom(status)),
      final ? (input.release_notes ?? null) : null,
      final && input.commits ? JSON.stringify(input.commits) : null,
      final && input.caches ? JSON.stringify(input.caches) : null,
    ],
  };
  const refresh = { sql: CLAIM_HEARTBEAT_SQL, args: [runnerId, now, now, runnerId] };
  const row = (await clientOf(deps.db).batch([report, refresh], "deferred"))[0]?.rows[0] as unknown as ReportRow | undefined;
  if (row) {
    return {
      id: String(row.id),
      status: row.status,
      cancelRequested: Number(row.cancel_requested) === 1,
      leaseExpiresAt: row.lease_expires_at === null ? null : Number(row.lease_expires_at),
    };
  }
  const current = await getRunnerJob(deps, runnerId, jobId);
  assertRunnerReport(current.status, current.cancelRequested, status);
  // The guard passed on a fresh read: the state moved under us between the two statements; report the refusal.
  throw new ApiError("invalid_transition", `a ${current.status} build cannot become ${status}`);
}

/**
 * The report as fixed SQL. Arguments: ?1 status, ?2 final (0/1), ?3 renewed lease expiry, ?4 now, ?5 exit code or
 * null (kept), ?6 failure reason (set when final), ?7 reported step results as JSON or null, ?8 close the stored
 * steps (0/1: final and not succeeded, nothing reported), ?9 build id, ?10 runner id, ?11 the allowed previous
 * states as a JSON array, ?12 release notes, ?13 commits and ?14 cache reports as JSON (final reports only, else null:
 * kept). A final
 * report keeps the lease as it was.
 */
const REPORT_SQL = `UPDATE builds SET status = ?1,
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

interface ReportRow {
  id: string;
  status: BuildRow["status"];
  cancel_requested: number;
  lease_expires_at: number | null;
}

/** Credentials are handed out only for a job this runner holds right now (409 job_not_active otherwise). */
async function activeJobProject(deps: Pick<AppDeps, "db">, runnerId: string, jobId: string) {
  const build = await getRunnerJob(deps, runnerId, jobId);
  if (!(ACTIVE_STATUSES as readonly string[]).includes(build.status)) {
    throw new ApiError("job_not_active", "the job is not assigned or running");
  }
  const [project, runner] = await Promise.all([
    getProject(deps, build.projectId),
    deps.db.select({ trust: runners.trust }).from(runners).where(eq(runners.id, runnerId)).get(),
  ]);
  // Read at each hand-out, not at claim: a runner demoted while it holds the job gets nothing more.
  return { build, project, runnerTrust: runner?.trust ?? "open" };
}

type CredentialKind = "checkout" | "android_signing" | "ios_signing" | "secrets";

/**
 * Every hand-out is an audit event (docs/api.md §6): the runner as actor, the build as target, the kind, never the
 * secret. Written before the answer leaves, so no credential is handed out unrecorded.
 */
async function recordHandOut(deps: Pick<AppDeps, "db" | "clock">, runnerId: string, build: BuildRow, kind: CredentialKind): Promise<void> {
  await recordAudit(deps, {
    action: "runner.credentials_fetched",
    targetType: "build",
    targetId: build.id,
    details: { actor_type: "runner", actor_runner_id: runnerId, kind, project_id: build.projectId, branch: build.branch },
  });
}

type CredDeps = Pick<AppDeps, "db" | "secrets" | "clock">;

export async function checkoutAuth(deps: CredDeps, runnerId: string, jobId: string) {
  // Source access is released to every build of the project (docs/api.md §5), protected branch or not.
  const { build, project } = await activeJobProject(deps, runnerId, jobId);
  const creds = await openSourceCredentials(deps, project);
  if (!creds) throw new ApiError("no_credentials", "the project has no source credentials");
  await recordHandOut(deps, runnerId, build, "checkout");
  return { username: creds.username, password: creds.password, expires_at: build.leaseExpiresAt };
}

export async function androidSigning(deps: CredDeps, runnerId: string, jobId: string) {
  const { build, project, runnerTrust } = await activeJobProject(deps, runnerId, jobId);
  assertCredentialsReleasable(build, project, runnerTrust);
  const signing = await openAndroidSigning(deps, project);
  if (!signing) throw new ApiError("no_credentials", "the project has no Android signing credentials");
  await recordHandOut(deps, runnerId, build, "android_signing");
  return signing;
}

export async function iosSigning(deps: CredDeps, runnerId: string, jobId: string) {
  const { build, project, runnerTrust } = await activeJobProject(deps, runnerId, jobId);
  assertCredentialsReleasable(build, project, runnerTrust);
  // Every profile with its UUID and bundle id pattern; the first one also in the old single field.
  const signing = await iosSigningForRunner(deps, project);
  if (!signing) throw new ApiError("no_credentials", "the project has no iOS signing credentials");
  await recordHandOut(deps, runnerId, build, "ios_signing");
  return signing;
}

/** The project's secret variables for a job, `{}` when it has none; same rules as the signing calls. */
export async function jobSecrets(deps: CredDeps, runnerId: string, jobId: string): Promise<Record<string, string>> {
  const { build, project, runnerTrust } = await activeJobProject(deps, runnerId, jobId);
  assertCredentialsReleasable(build, project, runnerTrust);
  const secrets = await openSecrets(deps, project.id);
  await recordHandOut(deps, runnerId, build, "secrets");
  return secrets;
}
