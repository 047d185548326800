import { sql, type SQL } from "drizzle-orm";

/**
 * A build that ends without its runner's last word (canceled, timed out, lost, runner removed) must not leave a
 * step `running` forever (docs/decisions.md): the running step becomes `failed` at the moment the build ended, and steps
 * that never started become `skipped`. Done in SQL so the sweeper's bulk UPDATEs end every build's steps in the
 * same statement that ends the build.
 */
export function endStepResultsSql(now: number): SQL {
  return sql.raw(endStepResultsExpression(String(Math.trunc(now))));
}

/**
 * The same rule as SQL text for the fixed statements (docs/benchmarks.md), with `now` given as SQL: a parameter such as `?4`
 * or an integer literal. Always used inside an UPDATE of builds.
 */
export function endStepResultsExpression(now: string): string {
  return `CASE WHEN "builds"."step_results" IS NULL OR json_valid("builds"."step_results") = 0 THEN "builds"."step_results" ELSE (
    SELECT json_group_array(CASE json_extract(value, '$.status')
      WHEN 'running' THEN json_set(value, '$.status', 'failed', '$.finished_at', ${now})
      WHEN 'pending' THEN json_set(value, '$.status', 'skipped')
      ELSE json(value) END)
    FROM (SELECT value FROM json_each("builds"."step_results") ORDER BY key)
  ) END`;
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
