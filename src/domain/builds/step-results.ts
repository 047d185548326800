import { sql, type SQL } from "drizzle-orm";
import { endStepResultsExpression } from "../../db/queries/step-results.ts";

/**
 * A build that ends without its runner's last word (canceled, timed out, lost, runner removed) must not leave a
 * step `running` forever (docs/decisions.md): the running step becomes `failed` at the moment the build ended, and steps
 * that never started become `skipped`. Done in SQL so the sweeper's bulk UPDATEs end every build's steps in the
 * same statement that ends the build.
 */
export function endStepResultsSql(now: number): SQL {
  return sql.raw(endStepResultsExpression(String(Math.trunc(now))));
}

interface StepLike {
  status: string;
  finished_at?: number;
}

/** The same rule for step results a runner reports with a final status. */
export function endStepResults<T extends StepLike>(steps: T[], now: number): T[] {
  return steps.map((s) =>
    s.status === "running" ? { ...s, status: "failed", finished_at: s.finished_at ?? now } : s.status === "pending" ? { ...s, status: "skipped" } : s,
  );
}
