import { and, eq, gte, sql } from "drizzle-orm";
import { buildLogChunks } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { getBuild } from "../builds/builds.ts";
import { assertLogKept, countNewlines, readLog, storedLogSize } from "./logs.ts";

/**
 * Reading a build log the way the build page shows it (docs/api.md §10): the tail first, earlier windows on demand,
 * each aligned to a line start, with the number of lines before the window so that line numbers (#L120) are
 * absolute without the browser downloading the whole log.
 */
export interface LogWindow {
  bytes: Uint8Array;
  /** Stored-log byte offset of the first byte of `bytes`: a line start unless `midLine`. */
  start: number;
  /** The window starts inside a line longer than the window (its first line is a piece of that line). */
  midLine: boolean;
  /** Offset just past `bytes`. */
  next: number;
  /** Lines (newlines) in the stored log before `start`. */
  linesBefore: number;
  /** The build is final and `bytes` reaches the end of its log. */
  complete: boolean;
}

const NEWLINE = 0x0a;

/**
 * Newlines in the stored log before byte `offset`: the sum of the whole chunks' stored counts (a chunk stored
 * before the count existed is scanned inside the database: `replace` works on the bytes of the text), plus the
 * one chunk that straddles `offset`, counted here.
 */
export async function countLinesBefore(deps: Pick<AppDeps, "db">, buildId: string, offset: number): Promise<number> {
  if (offset <= 0) return 0;
  const whole = await deps.db
    .select({
      n: sql<number>`COALESCE(SUM(COALESCE(${buildLogChunks.newlines}, length(${buildLogChunks.content}) - length(CAST(replace(CAST(${buildLogChunks.content} AS TEXT), char(10), '') AS BLOB)))), 0)`,
    })
    .from(buildLogChunks)
    .where(
      and(
        eq(buildLogChunks.buildId, buildId),
        gte(buildLogChunks.startOffset, 0),
        sql`${buildLogChunks.startOffset} + length(${buildLogChunks.content}) <= ${offset}`,
      ),
    )
    .get();
  const straddling = await deps.db
    .select({ start: buildLogChunks.startOffset, content: buildLogChunks.content })
    .from(buildLogChunks)
    .where(
      and(
        eq(buildLogChunks.buildId, buildId),
        sql`${buildLogChunks.startOffset} < ${offset}`,
        sql`${buildLogChunks.startOffset} + length(${buildLogChunks.content}) > ${offset}`,
        gte(buildLogChunks.startOffset, 0),
      ),
    )
    .get();
  const partial = straddling ? countNewlines(new Uint8Array(straddling.content), offset - straddling.start) : 0;
  return Number(whole?.n ?? 0) + partial;
}

/** Bytes from `from` up to (not including) `until`, reading page by page. */
async function readRange(deps: Pick<AppDeps, "db">, buildId: string, from: number, until: number) {
  const parts: Uint8Array[] = [];
  let at = from;
  let complete = false;
  while (at < until || until === Infinity) {
    const page = await readLog(deps, buildId, at, until === Infinity ? undefined : until - at);
    if (page.bytes.length === 0) {
      complete = page.complete;
      break;
    }
    const take = until === Infinity ? page.bytes : page.bytes.subarray(0, Math.max(0, until - at));
    parts.push(take);
    at += take.length;
    if (until === Infinity) {
      complete = page.complete;
      break;
    }
  }
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return { bytes: out, complete };
}

/**
 * The window of the stored log in [`from`, `until`), aligned to its first line start. One byte before `from` is read
 * too, to know whether `from` itself starts a line. A window lying inside one line longer than itself (no newline,
 * or only the one that ends it) is not aligned, which would leave it empty and the reader asking for the same
 * window again and again: it starts where it is, mid-line (`midLine`), so every window moves the reader on.
 */
async function lineWindow(deps: Pick<AppDeps, "db">, buildId: string, from: number, until: number) {
  const lead = from > 0 ? 1 : 0;
  const { bytes: read, complete } = await readRange(deps, buildId, from - lead, until);
  const startsLine = lead === 0 || read[0] === NEWLINE;
  const bytes = read.subarray(lead);
  let cut = 0;
  if (!startsLine) {
    const nl = bytes.indexOf(NEWLINE);
    cut = nl < 0 || nl === bytes.length - 1 ? 0 : nl + 1;
  }
  const start = from + cut;
  return {
    bytes: bytes.subarray(cut),
    start,
    next: from + bytes.length,
    linesBefore: await countLinesBefore(deps, buildId, start),
    midLine: !startsLine && cut === 0 && bytes.length > 0,
    complete,
  };
}

/** The last `maxBytes` (or fewer) of the log, starting at a line start (or mid-line inside a longer line). */
export async function readLogTail(deps: Pick<AppDeps, "db">, buildId: string, maxBytes: number): Promise<LogWindow> {
  assertLogKept(await getBuild(deps, buildId));
  const size = await storedLogSize(deps, buildId);
  return lineWindow(deps, buildId, Math.max(0, size - maxBytes), Infinity);
}

/** Up to `maxBytes` ending at `before`, starting at a line start (or mid-line inside a longer line). */
export async function readLogBefore(deps: Pick<AppDeps, "db">, buildId: string, before: number, maxBytes: number): Promise<LogWindow> {
  assertLogKept(await getBuild(deps, buildId));
  return { ...(await lineWindow(deps, buildId, Math.max(0, before - maxBytes), before)), complete: false };
}

/**
 * Where to cut live text so that no UTF-8 character is split between two events: the length of the longest
 * prefix that ends on a character boundary (the whole when `final`, nothing more will come).
 */
export function utf8Boundary(bytes: Uint8Array, final: boolean): number {
  if (final) return bytes.length;
  let i = bytes.length;
  // Step back over at most 3 continuation bytes to the lead byte of the last character.
  let back = 0;
  while (i > 0 && back < 4 && ((bytes[i - 1] ?? 0) & 0xc0) === 0x80) {
    i--;
    back++;
  }
  if (i === 0) return bytes.length;
  const lead = bytes[i - 1] ?? 0;
  const need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  // The last character is whole when its lead byte and all its continuation bytes are here.
  return need === back + 1 ? bytes.length : i - 1;
}
