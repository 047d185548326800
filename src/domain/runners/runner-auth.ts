import { eq, sql } from "drizzle-orm";
import { builds, runners } from "../../db/schema/index.ts";
import { isFinalStatus } from "../builds/build-machine.ts";
import type { Db } from "../../db/types.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { sha256Hex, TOKEN_PREFIXES } from "../common/crypto.ts";

export type RunnerRow = typeof runners.$inferSelect;

function prepareRunnerLookup(db: Db) {
  return db
    .select()
    .from(runners)
    .where(eq(runners.tokenHash, sql.placeholder("tokenHash")))
    .prepare();
}

// Every runner call (claims above all) runs this lookup: built once per database handle, as the session lookup.
const runnerLookups = new WeakMap<Db, ReturnType<typeof prepareRunnerLookup>>();

/**
 * The id of the runner owning a token; the hot path of every runner call (claims above all). Nothing is
 * remembered between calls: a removed runner or a rotated token must fail at once on every daemon sharing the
 * database (docs/api.md §6, no positive cache window), and the lookup is one indexed read of a prepared statement.
 */
export async function authenticateRunnerId(deps: Pick<AppDeps, "db">, token: string): Promise<string> {
  return (await lookupRunner(deps, await sha256Hex(token))).id;
}

/** The runner owning a token, or null (for routes that also take a user session). */
export async function findRunnerByToken(deps: Pick<AppDeps, "db">, token: string): Promise<RunnerRow | null> {
  return lookupRunner(deps, await sha256Hex(token)).catch((err: unknown) => {
    if (err instanceof ApiError && err.code === "invalid_runner_token") return null;
    throw err;
  });
}

/** The runner owning a token hash. Lookup is by SHA-256, so the comparison never touches the plaintext. */
async function lookupRunner(deps: Pick<AppDeps, "db">, tokenHash: string): Promise<RunnerRow> {
  let lookup = runnerLookups.get(deps.db);
  if (!lookup) {
    lookup = prepareRunnerLookup(deps.db);
    runnerLookups.set(deps.db, lookup);
  }
  const runner = await lookup.get({ tokenHash });
  if (!runner) throw new ApiError("invalid_runner_token", "the runner token is not valid");
  return runner;
}

/** True for a token that can only be a job token (its prefix); other tokens are looked up as runner tokens. */
export function isJobToken(token: string): boolean {
  return token.startsWith(TOKEN_PREFIXES.job);
}

function prepareJobLookup(db: Db) {
  return db
    .select({ id: builds.id, runnerId: builds.runnerId, status: builds.status, finishedAt: builds.finishedAt, updatedAt: builds.updatedAt })
    .from(builds)
    .where(eq(builds.jobTokenHash, sql.placeholder("tokenHash")))
    .prepare();
}

const jobLookups = new WeakMap<Db, ReturnType<typeof prepareJobLookup>>();

/**
 * The runner id a job token speaks for on `/v1/runners/{runnerId}/jobs/{jobId}/…` (docs/runner-isolation.md): the
 * token is good for its own job only (another job's or runner's path → 403 runner_mismatch), from the claim until
 * HANGAR_LOG_GRACE_S after the job is final, and never once the build went back to the queue or another claim
 * replaced it (401 invalid_job_token). Looked up afresh on each call, as runner tokens are.
 */
export async function authenticateJobToken(
  deps: Pick<AppDeps, "db" | "clock" | "config">,
  token: string,
  path: { runnerId: string | undefined; jobId: string | undefined },
): Promise<string> {
  let lookup = jobLookups.get(deps.db);
  if (!lookup) {
    lookup = prepareJobLookup(deps.db);
    jobLookups.set(deps.db, lookup);
  }
  const job = await lookup.get({ tokenHash: await sha256Hex(token) });
  const invalid = new ApiError("invalid_job_token", "the job token is not valid");
  if (!job || job.runnerId === null || job.status === "queued") throw invalid;
  if (isFinalStatus(job.status) && deps.clock.now() - (job.finishedAt ?? job.updatedAt) > deps.config.logGraceS) throw invalid;
  if (path.jobId !== job.id || path.runnerId !== job.runnerId) {
    throw new ApiError("runner_mismatch", "this job token belongs to another job");
  }
  return job.runnerId;
}
