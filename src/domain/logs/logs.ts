import { and, eq, sql } from "drizzle-orm";
import { buildLogChunks, builds } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { isFinalStatus } from "../builds/build-machine.ts";
import { getProject, projectLogSecrets, projectLogSecretsFingerprint } from "../projects/projects.ts";
import { getRunnerJob } from "../builds/scheduler.ts";
import { concatBytes } from "../common/bytes.ts";
import { matcherFor, maskChunk } from "./log-mask.ts";
import { indexBuildLog, indexLogSoon } from "./log-search.ts";
import { assertLogKept, PENDING_OFFSET, readLog, storedLogSize } from "./log-read.ts";

export { assertLogKept, readLog, storedLogSize };

/** Newlines in `bytes[0, end)`: stored with each chunk (build_log_chunks.newlines) for the page's line numbers. */
export function countNewlines(bytes: Uint8Array, end = bytes.length): number {
  let n = 0;
  for (let at = bytes.indexOf(0x0a); at >= 0 && at < end; at = bytes.indexOf(0x0a, at + 1)) n++;
  return n;
}

/**
 * Build logs (docs/api.md §6). Two offset spaces:
 * - the runner writes at RAW byte offsets of what it sent (`builds.log_bytes` counts them), so a retried chunk
 *   is recognised and a gap refused;
 * - readers read the STORED log (secrets replaced by `***`) at offsets of the stored bytes.
 *
 * A secret split across two chunks: after masking, the tail of the log that could be the start of a secret
 * (a proper prefix of one) is held back in a pending row (start_offset -1) and joined to the next chunk before
 * masking. Readers see it only once the build is final, then itself masked. So no stored byte ever shows part
 * of a secret that later chunks complete. Secrets shorter than 4 bytes are not masked (they would shred the log).
 * Overlapping occurrences are masked as one run of `***`.
 */
const APPEND_RETRIES = 3;

/** The line that ends a log cut at HANGAR_MAX_LOG_BYTES (docs/api.md §6). */
export function truncationLine(maxBytes: number): string {
  return `hangar: log truncated at ${maxBytes} bytes\n`;
}

/**
 * Appends a chunk the runner sent at raw offset `offset`; answers the raw byte count now received. Masking is
 * one Aho–Corasick pass over the chunk (src/domain/logs/log-mask.ts). Past HANGAR_MAX_LOG_BYTES of stored log the
 * truncation line is written once and later chunks only move the raw offset. A build final for longer than
 * HANGAR_LOG_GRACE_S takes no more chunks (409 invalid_transition): a finished log stays finished.
 */
export async function appendLog(
  deps: Pick<AppDeps, "db" | "secrets" | "clock" | "config"> & Partial<Pick<AppDeps, "log">>,
  runnerId: string,
  jobId: string,
  offset: number,
  chunk: Uint8Array,
): Promise<{ log_bytes: number }> {
  const maxBytes = deps.config.maxLogBytes;
  for (let attempt = 0; attempt < APPEND_RETRIES; attempt++) {
    const build = await getRunnerJob(deps, runnerId, jobId);
    if (build.logExpiredAt !== null) throw new ApiError("invalid_transition", "the build's log was deleted by the retention policy");
    if (isFinalStatus(build.status) && deps.clock.now() - (build.finishedAt ?? build.updatedAt) > deps.config.logGraceS) {
      throw new ApiError("invalid_transition", `the build is ${build.status} and its log is closed`);
    }
    const have = build.logBytes;
    if (offset > have) throw new ApiError("log_offset_mismatch", `expected offset ${have}, got ${offset}`);
    // A retried chunk (wholly stored already) is ignored; an overlapping one contributes only its new bytes.
    if (offset + chunk.length <= have) return { log_bytes: have };
    const fresh = chunk.subarray(have - offset);

    // The UPDATE is the guard: only the writer that finds log_bytes still at `have` moves it, and the following
    // statements run only when it did (changes() = 1), all in one atomic batch.
    const guard = deps.db
      .update(builds)
      .set({ logBytes: have + fresh.length })
      .where(and(eq(builds.id, jobId), eq(builds.logBytes, have)));
    const storedSize = await storedLogSize(deps, jobId);
    if (storedSize > maxBytes) {
      // Truncated already: the bytes are counted (the runner's offsets stay right) and dropped.
      const [moved] = await deps.db.batch([guard]);
      if (moved.rowsAffected === 1) return { log_bytes: have + fresh.length };
      continue;
    }

    const project = await getProject(deps, build.projectId);
    const matcher = await matcherFor(await projectLogSecretsFingerprint(deps, project), () => projectLogSecrets(deps, project));
    const pendingRow = await deps.db
      .select({ content: buildLogChunks.content })
      .from(buildLogChunks)
      .where(and(eq(buildLogChunks.buildId, jobId), eq(buildLogChunks.startOffset, PENDING_OFFSET)))
      .get();
    let { stored, pending } = maskChunk(matcher, concatBytes([pendingRow ? new Uint8Array(pendingRow.content) : new Uint8Array(0), fresh]));
    if (storedSize + stored.length + pending.length > maxBytes) {
      // Cut at the cap (the stored part is masked already, so any cut is safe), then the one truncation line;
      // the held-back tail is dropped with the rest. The line makes the stored size exceed the cap: the marker.
      const room = Math.max(0, maxBytes - storedSize);
      const kept = stored.subarray(0, room);
      const newline = kept.length > 0 && kept[kept.length - 1] !== 0x0a ? "\n" : "";
      stored = concatBytes([kept, new TextEncoder().encode(`${newline}${truncationLine(maxBytes)}`)]);
      pending = new Uint8Array(0);
    }
    const insertStored = deps.db.run(
      sql`INSERT INTO build_log_chunks (build_id, start_offset, content, newlines) SELECT ${jobId}, ${storedSize}, ${toBlob(stored)}, ${countNewlines(stored)} WHERE changes() = 1`,
    );
    const upsertPending = deps.db.run(
      sql`INSERT INTO build_log_chunks (build_id, start_offset, content) SELECT ${jobId}, ${PENDING_OFFSET}, ${toBlob(pending)} WHERE changes() = 1
          ON CONFLICT (build_id, start_offset) DO UPDATE SET content = excluded.content`,
    );
    const results = stored.length > 0 ? await deps.db.batch([guard, insertStored, upsertPending]) : await deps.db.batch([guard, upsertPending]);
    if (results[0].rowsAffected === 1) {
      if (stored.length > 0) indexLogSoon(deps.db, jobId, () => indexNewLines(deps, jobId));
      return { log_bytes: have + fresh.length };
    }
    // Another append of the same job won the race: look again.
  }
  throw new ApiError("log_offset_mismatch", "the log changed concurrently; retry at the current offset");
}

/**
 * Search indexing of the lines this chunk completed (src/domain/logs/log-search.ts). The chunk is stored either
 * way: a failure here leaves the lines to the maintenance pass, which indexes every ended log that is behind.
 */
async function indexNewLines(deps: Pick<AppDeps, "db" | "clock" | "config"> & Partial<Pick<AppDeps, "log">>, buildId: string): Promise<void> {
  try {
    await indexBuildLog(deps, buildId);
  } catch (err) {
    deps.log?.({
      time: new Date().toISOString(),
      level: "error",
      msg: "log search indexing failed",
      build_id: buildId,
      error: err instanceof Error ? err.message : String(err),
    });
  }
}

/** libSQL binds Uint8Array as a blob on every driver; a fresh copy so no subarray view shares a larger buffer. */
function toBlob(bytes: Uint8Array): Uint8Array {
  return bytes.slice();
}
