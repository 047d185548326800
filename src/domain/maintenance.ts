import type { AppDeps } from "../deps.ts";
import { deleteOrphanArtifacts } from "./artifacts.ts";
import { deleteExpiredUrlTokens } from "./url-tokens.ts";
import { deleteExpiredOidcRequests } from "./oidc.ts";
import { deleteExpiredSessions } from "./sessions.ts";
import { sweep } from "./sweeper.ts";

/**
 * One pass of every periodic job. Each job is idempotent and made of conditional statements, so two daemons
 * on one database can both run it (CONTRACT §8). Tests call it directly with a ManualClock.
 */
export async function runMaintenance(deps: AppDeps): Promise<void> {
  const jobs: Array<(deps: AppDeps) => Promise<unknown>> = [sweep, deleteExpiredSessions, deleteExpiredOidcRequests, deleteOrphanArtifacts, deleteExpiredUrlTokens];
  for (const job of jobs) {
    try {
      await job(deps);
    } catch (err) {
      deps.log({ time: new Date().toISOString(), level: "error", msg: "maintenance job failed", job: job.name, error: String(err) });
    }
  }
}
