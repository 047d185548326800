// Reading a build's stored log (the API, the page, the search index): apart from appending (logs.ts), so the search
// index can read logs without importing the code that appends to them.
import { and, asc, desc, eq, gte, sql } from "drizzle-orm";
import { buildLogChunks } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { isFinalStatus } from "../builds/build-machine.ts";
import { getBuild } from "../builds/builds.ts";
import { concatBytes } from "../common/bytes.ts";
import { MIN_SECRET_BYTES } from "./log-mask.ts";

/** start_offset of the held-back tail of a log (the start of a possible secret, masked when the build ends). */
export const PENDING_OFFSET = -1;
const READ_PAGE_BYTES = 4 * 1024 * 1024;

/**
 * The stored log from byte `offset`, one page at a time. `complete` is true when the build is final and this page
 * reaches the end: the held-back tail is then included (masked).
 */
export async function readLog(
  deps: Pick<AppDeps, "db">,
  buildId: string,
  offset: number,
  /** Read no more chunks than these bytes need (the page's 1 MiB windows); at least one chunk is read. */
  pageBytes = READ_PAGE_BYTES,
): Promise<{ bytes: Uint8Array; nextOffset: number; complete: boolean }> {
  const build = await getBuild(deps, buildId);
  assertLogKept(build);
  const complete = isFinalStatus(build.status);
  const overlapping = and(
    eq(buildLogChunks.buildId, buildId),
    gte(buildLogChunks.startOffset, 0),
    sql`${buildLogChunks.startOffset} + length(${buildLogChunks.content}) > ${offset}`,
  );
  // A page holds about READ_PAGE_BYTES: sizes first (no content read), then the chunks that fit.
  const sizes = await deps.db
    .select({ start: buildLogChunks.startOffset, length: sql<number>`length(${buildLogChunks.content})` })
    .from(buildLogChunks)
    .where(overlapping)
    .orderBy(asc(buildLogChunks.startOffset));
  let budget = Math.min(pageBytes, READ_PAGE_BYTES);
  let taken = 0;
  while (taken < sizes.length && (taken === 0 || budget > 0)) budget -= Number(sizes[taken++]!.length);
  const more = taken < sizes.length;
  const until = more ? sizes[taken]!.start : Number.MAX_SAFE_INTEGER;
  const rows =
    taken === 0
      ? []
      : await deps.db
          .select({ start: buildLogChunks.startOffset, content: buildLogChunks.content })
          .from(buildLogChunks)
          .where(and(overlapping, sql`${buildLogChunks.startOffset} < ${until}`))
          .orderBy(asc(buildLogChunks.startOffset));
  const parts = rows.map((row) => new Uint8Array(row.content).subarray(Math.max(0, offset - row.start)));
  if (complete && !more) {
    const pending = await deps.db
      .select({ content: buildLogChunks.content })
      .from(buildLogChunks)
      .where(and(eq(buildLogChunks.buildId, buildId), eq(buildLogChunks.startOffset, PENDING_OFFSET)))
      .get();
    if (pending && pending.content.length > 0) {
      // The held-back tail is by construction the start of a secret: show it masked unless it is tiny.
      const tail = pending.content.length >= MIN_SECRET_BYTES - 1 ? new TextEncoder().encode("***") : new Uint8Array(pending.content);
      const tailFrom = offset - (await storedLogSize(deps, buildId));
      if (tailFrom < tail.length) parts.push(tail.subarray(Math.max(0, tailFrom)));
    }
  }
  const bytes = concatBytes(parts);
  return { bytes, nextOffset: offset + bytes.length, complete: complete && !more };
}

/** 410 log_expired once a retention pass deleted the build's log (its build and step results stay). */
export function assertLogKept(build: { logExpiredAt: number | null }): void {
  if (build.logExpiredAt !== null) throw new ApiError("log_expired", "this build's log was deleted by the retention policy");
}

/** Bytes of stored log of a build: where the next chunk starts. */
export async function storedLogSize(deps: Pick<AppDeps, "db">, buildId: string): Promise<number> {
  // Stored chunks follow each other without overlap, so the log ends where the chunk with the highest offset ends:
  // one step down the (build_id, start_offset) index, where MAX() over every chunk made each append of a long
  // log read all of its rows (2,400 chunks for ten minutes of a chatty build).
  const row = await deps.db
    .select({ size: sql<number>`${buildLogChunks.startOffset} + length(${buildLogChunks.content})` })
    .from(buildLogChunks)
    .where(and(eq(buildLogChunks.buildId, buildId), gte(buildLogChunks.startOffset, 0)))
    .orderBy(desc(buildLogChunks.startOffset))
    .limit(1)
    .get();
  return Number(row?.size ?? 0);
}
