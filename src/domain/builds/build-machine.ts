import { FINAL_BUILD_STATUSES, type BuildStatus } from "../../db/schema/constants.ts";
import { ApiError } from "../../errors.ts";
import { REPORTABLE_STATUSES } from "../../protocol/runner.ts";

/**
 * Every build transition as data (STYLE habit 8). Who makes each move:
 * trigger → queued; claim: queued → assigned; runner reports: assigned → running, running → running (progress)
 * and running → a final status; user cancel: any non-final → canceled; sweeper: assigned → queued or failed
 * (lease lapsed), running → failed (runner_lost) or timed_out, queued → expired. `scheduled` is reserved.
 */
export const BUILD_TRANSITIONS: Record<BuildStatus, readonly BuildStatus[]> = {
  queued: ["assigned", "canceled", "expired"],
  scheduled: [],
  assigned: ["running", "queued", "failed", "canceled"],
  running: ["running", "succeeded", "failed", "canceled", "timed_out"],
  succeeded: [],
  failed: [],
  canceled: [],
  timed_out: [],
  expired: [],
};

/** The statuses a runner may report (docs/api.md §6): the wire protocol's list. */
export { REPORTABLE_STATUSES };
export type ReportableStatus = (typeof REPORTABLE_STATUSES)[number];

/** The states from which a runner report of `next` is accepted: assigned → running → a final status. */
export function reportableFrom(next: ReportableStatus): BuildStatus[] {
  return next === "running" ? ["assigned", "running"] : ["running"];
}

export function isFinalStatus(status: BuildStatus): boolean {
  return (FINAL_BUILD_STATUSES as readonly string[]).includes(status);
}

export const ACTIVE_STATUSES = ["assigned", "running"] as const satisfies readonly BuildStatus[];
export const NON_FINAL_STATUSES = ["queued", "scheduled", "assigned", "running"] as const satisfies readonly BuildStatus[];

export function canTransition(from: BuildStatus, to: BuildStatus): boolean {
  return BUILD_TRANSITIONS[from].includes(to);
}

/**
 * The guard in front of a runner report on a build held by that runner: 409 build_canceled when the user
 * canceled it (the runner must stop), 409 invalid_transition for any other refused move.
 */
export function assertRunnerReport(current: BuildStatus, cancelRequested: boolean, next: ReportableStatus): void {
  if (current === "canceled" && cancelRequested) throw new ApiError("build_canceled", "the build was canceled");
  if (!reportableFrom(next).includes(current) || !canTransition(current, next)) {
    throw new ApiError("invalid_transition", `a ${current} build cannot become ${next}`);
  }
}
