import type { AppDeps } from "../../deps.ts";
import { describeError } from "../../errors.ts";
import { deleteOrphanArtifacts, resumeReportIngestion } from "../artifacts/artifacts.ts";
import { deleteExpiredUrlTokens } from "../auth/url-tokens.ts";
import { deleteExpiredOidcRequests } from "../auth/oidc.ts";
import { deleteExpiredSessions } from "../auth/sessions.ts";
import { sweep } from "../builds/sweeper.ts";
import { signingHealthPassIfDue } from "../signing/health.ts";
import { runSchedules } from "../builds/schedules.ts";
import { indexEndedLogs } from "../logs/log-search.ts";
import { sweepSharedCaches } from "../caches/shared-caches.ts";

/**
 * One pass of every periodic job. Each job is idempotent and made of conditional statements, so two daemons
 * on one database can both run it (docs/api.md §8). Tests call it directly with a ManualClock.
 */
export async function runMaintenance(deps: AppDeps, options: { jobTimeoutMs?: number } = {}): Promise<void> {
  const jobs: Array<(deps: AppDeps) => Promise<unknown>> = [
    sweep,
    deleteExpiredSessions,
    deleteExpiredOidcRequests,
    deleteOrphanArtifacts,
    deleteExpiredUrlTokens,
    signingHealthPassIfDue,
    runSchedules,
    indexEndedLogs,
    resumeReportIngestion,
    sweepSharedCaches,
  ];
  const timeoutMs = options.jobTimeoutMs ?? JOB_TIMEOUT_MS;
  for (const job of jobs) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      // A job stuck on a storage call must not hold the pass: the next pass (and its lease sweep) still runs.
      await Promise.race([
        job(deps),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
    } catch (err) {
      deps.log({ time: new Date().toISOString(), level: "error", msg: "maintenance job failed", job: job.name, error: describeError(err) });
    } finally {
      clearTimeout(timer);
    }
  }
}

const JOB_TIMEOUT_MS = 60_000;
