// The counts a build JSON carries over its parsed test cases: apart from the parser so the build code needs no more.
export interface TestsSummary {
  total: number;
  passed: number;
  failed: number;
  skipped: number;
  errored: number;
  duration_ms: number;
}

/** What the build JSON carries: null while the build has no report. */
export function toTestsSummary(value: unknown): TestsSummary | null {
  return (value as TestsSummary | null) ?? null;
}
