// The runner's per-entry cache report (docs/api.md §16), sent with a build's final status as `caches`, stored with the
// build and shown on its page. The runner's side of this shape is src/cli/runner/cache-remote-types.ts; the daemon
// only validates and keeps it (a runner's report is untrusted text: bounded here, escaped where it is shown).
import { z } from "zod";

/** Cache keys and restore keys: at most this many characters (GitHub's cache keys have the same bound). */
export const MAX_CACHE_KEY_LENGTH = 512;

/** At most this many entries per build (a pipeline with more `cache` entries reports its first 50). */
export const MAX_CACHE_REPORTS = 50;
/** A day in milliseconds: longer restore or save times are not believable. */
const MAX_MS = 86_400_000;

const reportedKey = z.string().min(1).max(MAX_CACHE_KEY_LENGTH);
const millis = z.number().int().min(0).max(MAX_MS).nullable();

export const cacheEntryReportSchema = z.object({
  key: reportedKey,
  result: z.enum(["exact", "partial", "miss"]),
  restored_key: reportedKey.nullable(),
  source: z.enum(["local", "shared"]).nullable(),
  size_bytes: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).nullable(),
  restore_ms: millis,
  save_ms: millis,
  saved: z.boolean(),
});
export type CacheEntryReportJson = z.infer<typeof cacheEntryReportSchema>;

export const cacheReportsSchema = z.array(cacheEntryReportSchema).max(MAX_CACHE_REPORTS);

/** The stored report as the build's JSON gives it: an empty list when the runner reported none. */
export function toCacheReports(stored: unknown): CacheEntryReportJson[] {
  const parsed = cacheReportsSchema.safeParse(stored ?? []);
  return parsed.success ? parsed.data : [];
}
