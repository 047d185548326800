// The rule of src/domain/builds/step-results.ts (a build that ends without its runner's last word leaves no step
// running) as SQL text, for drizzle's updates and the fixed statements of src/db/queries/builds.ts alike.

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
