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
  /** Stored-log byte offset of the first byte of `bytes` (a line start). */
  start: number;
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

/** The first line start at or after `index` in `bytes` (0 when `atLogStart`). */
function alignToLine(bytes: Uint8Array, atLogStart: boolean): number {
  if (atLogStart) return 0;
  const nl = bytes.indexOf(NEWLINE);
  // A window holding no newline at all is one very long line: show it from where the window starts.
  return nl < 0 ? 0 : nl + 1;
}

/** The last `maxBytes` (or fewer) of the log, starting at a line start. */
export async function readLogTail(deps: Pick<AppDeps, "db">, buildId: string, maxBytes: number): Promise<LogWindow> {
  assertLogKept(await getBuild(deps, buildId));
  const size = await storedLogSize(deps, buildId);
  const from = Math.max(0, size - maxBytes);
  const { bytes, complete } = await readRange(deps, buildId, from, Infinity);
  const cut = alignToLine(bytes, from === 0);
  const start = from + cut;
  return { bytes: bytes.subarray(cut), start, next: from + bytes.length, linesBefore: await countLinesBefore(deps, buildId, start), complete };
}

/** Up to `maxBytes` ending at `before` (a line start), starting at a line start. */
export async function readLogBefore(deps: Pick<AppDeps, "db">, buildId: string, before: number, maxBytes: number): Promise<LogWindow> {
  assertLogKept(await getBuild(deps, buildId));
  const from = Math.max(0, before - maxBytes);
  const { bytes } = await readRange(deps, buildId, from, before);
  const cut = alignToLine(bytes, from === 0);
  const start = from + cut;
  return { bytes: bytes.subarray(cut), start, next: from + bytes.length, linesBefore: await countLinesBefore(deps, buildId, start), complete: false };
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
