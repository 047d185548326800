// The runner's per-entry cache report (docs/api.md §16), sent with a build's final status as `caches`, stored with the
// build and shown on its page. The shape is the wire protocol's (src/protocol/runner.ts); the daemon
// only validates and keeps it (a runner's report is untrusted text: bounded here, escaped where it is shown).
import { cacheReportsSchema, type CacheEntryReport } from "../../protocol/runner.ts";

export { cacheEntryReportSchema, cacheReportsSchema, MAX_CACHE_KEY_LENGTH, MAX_CACHE_REPORTS } from "../../protocol/runner.ts";
export type CacheEntryReportJson = CacheEntryReport;

/** The stored report as the build's JSON gives it: an empty list when the runner reported none. */
export function toCacheReports(stored: unknown): CacheEntryReportJson[] {
  const parsed = cacheReportsSchema.safeParse(stored ?? []);
  return parsed.success ? parsed.data : [];
}
