// Log search (docs/log-search.md): every stored log line in an FTS5 table of the same database, kept as logs
// arrive (appendLog has the lines a chunk completes indexed shortly after it has answered) and when a build ends (the maintenance pass indexes the
// held-back tail and the last unterminated line), searched with FTS5's query syntax.
import { sql } from "drizzle-orm";
import { z } from "zod";
import { clientOf, offLoop } from "../../db/fixed-sql.ts";
import type { Db } from "../../db/types.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { FINAL_BUILD_STATUSES } from "../../db/schema/constants.ts";
import { getBuild } from "../builds/builds.ts";
import { isFinalStatus } from "../builds/build-machine.ts";
import { concatBytes } from "../common/bytes.ts";
import { readLog } from "./log-read.ts";

/** A build's rows are rowids [seq × 2^27, (seq + 1) × 2^27): a 64 MiB log has fewer lines than 2^27. */
const LINE_SPACE = 134_217_728;
/** Indexed text of one line; longer lines (minified output, base64) are cut. */
const MAX_LINE_CHARS = 2000;
/** Bytes of log one indexing call reads; the rest waits for the next call. */
const INDEX_BUDGET_BYTES = 16 * 1024 * 1024;
/**
 * Bytes of log read and inserted per transaction, with an event-loop turn between two: the embedded driver runs
 * statements synchronously, so indexing a 16 MiB log in 4 MiB pages without a turn held the loop for the whole
 * call (seconds); a 64 KiB page costs about 14 ms of CPU, 63 ms at most (docs/benchmarks.md, "Test reports and
 * log search").
 */
const INDEX_PAGE_BYTES = 64 * 1024;
/** Lines per INSERT statement (one JSON array each). */
const INSERT_ROWS = 5000;

/** An event-loop turn between two transactions of indexing, so requests and timers run in between. */
function yieldToEventLoop(): Promise<void> {
  // setImmediate runs after pending I/O without setTimeout's 1 ms floor; Workers have only setTimeout.
  if (typeof setImmediate === "function") return new Promise((resolve) => setImmediate(resolve));
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/** Private-use characters around highlighted terms: they never reach a page unescaped (src/web/pages/builds.tsx). */
export const MARK_OPEN = "\uE000";
export const MARK_CLOSE = "\uE001";

// eslint-disable-next-line no-control-regex -- ANSI escape sequences are exactly what is removed
const ANSI = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]/g;

/**
 * A log line as it is indexed and shown in results: ANSI colours removed (`\x1b[31merror` would otherwise be the
 * token `31merror`), a `\r`-rewritten progress line reduced to what the terminal finally showed, cut to 2,000
 * characters.
 */
export function searchableLine(raw: string): string {
  let line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
  const cr = line.lastIndexOf("\r");
  if (cr >= 0) line = line.slice(cr + 1);
  if (line.includes("\x1b")) line = line.replace(ANSI, "");
  return line.length > MAX_LINE_CHARS ? line.slice(0, MAX_LINE_CHARS) : line;
}

interface SearchState {
  seq: number;
  indexed_bytes: number;
  next_line: number;
  complete: number;
}

async function stateOf(db: Db, buildId: string): Promise<SearchState> {
  await db.run(sql`INSERT INTO log_search_builds (build_id) VALUES (${buildId}) ON CONFLICT (build_id) DO NOTHING`);
  const row = await db.get<SearchState>(sql`SELECT seq, indexed_bytes, next_line, complete FROM log_search_builds WHERE build_id = ${buildId}`);
  if (!row) throw new Error("log search state vanished");
  return { seq: Number(row.seq), indexed_bytes: Number(row.indexed_bytes), next_line: Number(row.next_line), complete: Number(row.complete) };
}

/**
 * At least INDEX_PAGE_BYTES of stored log from `offset` when there are that many (readLog charges a whole chunk
 * even when `offset` falls inside it, so one call may answer only a chunk's end), or up to what is stored.
 * `full`: the page stopped at the size, not at the end of the stored log.
 */
async function readIndexPage(
  deps: Pick<AppDeps, "db">,
  buildId: string,
  offset: number,
): Promise<{ bytes: Uint8Array; complete: boolean; full: boolean }> {
  const parts: Uint8Array[] = [];
  let size = 0;
  for (let at = offset; ; ) {
    const page = await readLog(deps, buildId, at, INDEX_PAGE_BYTES - size);
    parts.push(page.bytes);
    size += page.bytes.length;
    at = page.nextOffset;
    if (page.complete || page.bytes.length === 0 || size >= INDEX_PAGE_BYTES) {
      return { bytes: concatBytes(parts), complete: page.complete, full: !page.complete && size >= INDEX_PAGE_BYTES };
    }
  }
}

/**
 * Indexes the complete lines of a build's stored log past what is indexed, and, once the build is final, its
 * last unterminated line too (marked complete once the log can no longer grow). Rows are keyed by line, so two
 * daemons indexing the same lines write the same rows: no lock is needed, and a line indexed while unterminated
 * is replaced when it is completed.
 */
export async function indexBuildLog(deps: Pick<AppDeps, "db" | "clock" | "config">, buildId: string): Promise<{ lines: number; bytes: number }> {
  const state = await stateOf(deps.db, buildId);
  if (state.complete) return { lines: 0, bytes: 0 };
  const build = await getBuild(deps, buildId);
  const final = isFinalStatus(build.status);
  const closed = final && deps.clock.now() - (build.finishedAt ?? build.updatedAt) > deps.config.logGraceS;
  let offset = state.indexed_bytes;
  let lineNumber = state.next_line;
  let indexedLines = 0;
  let readBytes = 0;
  const decoder = new TextDecoder();
  for (;;) {
    // From the byte before `offset`: whether the last page stopped inside a line longer than a page.
    const from = offset > 0 ? offset - 1 : 0;
    const page = await readIndexPage(deps, buildId, from);
    const midLine = offset > 0 && page.bytes[0] !== 0x0a;
    const bytes = page.bytes.subarray(offset - from);
    readBytes += bytes.length;
    const lastNewline = bytes.lastIndexOf(0x0a);
    const whole = lastNewline >= 0 ? bytes.subarray(0, lastNewline + 1) : new Uint8Array(0);
    const tail = bytes.subarray(whole.length);
    const atEnd = page.complete;
    // A line longer than a page (minified output, base64): its first page is indexed as the line and the rest of
    // it is read past; the fragment that ends it keeps the line's number but not its row.
    const longLine = !atEnd && lastNewline < 0 && page.full;
    const lines = whole.length > 0 ? decoder.decode(whole).split("\n").slice(0, -1) : [];
    const rows: Array<[number, string]> = [];
    lines.forEach((raw, i) => {
      const line = searchableLine(raw);
      if (line.trim() !== "" && !(i === 0 && midLine)) rows.push([state.seq * LINE_SPACE + lineNumber + i, line]);
    });
    if (longLine && !midLine) {
      const line = searchableLine(decoder.decode(bytes));
      if (line.trim() !== "") rows.push([state.seq * LINE_SPACE + lineNumber, line]);
    }
    // The unterminated last line of an ended log: indexed now, replaced if a late chunk completes it.
    if (atEnd && tail.length > 0 && !(lines.length === 0 && midLine)) {
      const line = searchableLine(decoder.decode(tail));
      if (line.trim() !== "") rows.push([state.seq * LINE_SPACE + lineNumber + lines.length, line]);
    }
    // Lines go in as JSON arrays unpacked by SQLite (json_each): one bound parameter per few thousand lines.
    const statements = [];
    for (let i = 0; i < rows.length; i += INSERT_ROWS) {
      const chunk = JSON.stringify(rows.slice(i, i + INSERT_ROWS));
      statements.push(
        deps.db.run(sql`INSERT OR REPLACE INTO log_search (rowid, line)
          SELECT value ->> 0, value ->> 1 FROM json_each(${chunk}) ORDER BY key`),
      );
    }
    const consumed = longLine ? bytes.length : whole.length;
    const nextOffset = offset + consumed;
    const nextLine = lineNumber + lines.length;
    const done = atEnd && closed;
    statements.push(
      deps.db.run(sql`UPDATE log_search_builds SET indexed_bytes = ${nextOffset}, next_line = ${nextLine}, complete = ${done ? 1 : 0}
        WHERE build_id = ${buildId} AND indexed_bytes <= ${nextOffset} AND complete = 0`),
    );
    await deps.db.batch(statements as [(typeof statements)[number], ...typeof statements]);
    indexedLines += rows.length;
    offset = nextOffset;
    lineNumber = nextLine;
    // Another page only while this one held whole lines and the budget lasts; a partial line waits for more.
    if (atEnd || consumed === 0 || readBytes >= INDEX_BUDGET_BYTES) break;
    await yieldToEventLoop();
  }
  return { lines: indexedLines, bytes: readBytes };
}

/**
 * Indexing of what appendLog stored, shortly after the append is answered: the runner waits for that answer
 * before its final report, and indexing was about half of it; run at once after the answer, it only made the
 * final report wait instead (docs/benchmarks.md, the runner's overhead). So a build's new lines are indexed
 * `INDEX_DELAY_MS` after the first append that stored them, by one run for every chunk that arrived meanwhile,
 * in order and never twice at once (one chain per build and database in this process). A search first starts
 * every run still waiting and waits for them, so it finds every line this process has been sent. Should a run
 * never happen (the process ends; a Workers isolate may stop work left after its answer), the maintenance pass
 * indexes the build once it has ended.
 */
const INDEX_DELAY_MS = 200;

/** How long a search waits at most for this process's indexing. */
const SEARCH_WAITS_FOR_INDEXING_MS = 2000;

interface IndexRun {
  /** Set while the run waits for its delay. */
  timer?: ReturnType<typeof setTimeout>;
  /** Starts the run now (the delay is skipped). */
  start: () => void;
  done: Promise<void>;
}

const indexRuns = new WeakMap<Db, Map<string, IndexRun>>();

/** Has the build's new lines indexed soon; `index` never rejects (appendLog's own, which logs a failure). */
export function indexLogSoon(db: Db, buildId: string, index: () => Promise<void>): void {
  let runs = indexRuns.get(db);
  if (!runs) indexRuns.set(db, (runs = new Map()));
  const previous = runs.get(buildId);
  // A run still waiting reads the index state when it starts: it takes these lines too.
  if (previous?.timer !== undefined) return;
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const run: IndexRun = {
    start: () => {
      clearTimeout(run.timer);
      run.timer = undefined;
      release();
    },
    done: Promise.all([previous?.done, released]).then(index),
  };
  run.timer = setTimeout(run.start, INDEX_DELAY_MS);
  // Node: a waiting run does not keep a stopping process alive (the maintenance pass catches up).
  (run.timer as { unref?: () => void }).unref?.();
  runs.set(buildId, run);
  void run.done.then(() => {
    if (runs.get(buildId) === run) runs.delete(buildId);
  });
}

/** Starts this process's waiting index runs and waits for them, so a search finds the lines it has been sent. */
async function indexingSettled(db: Db): Promise<void> {
  const runs = indexRuns.get(db);
  if (!runs || runs.size === 0) return;
  for (const run of runs.values()) run.start();
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([
    Promise.all([...runs.values()].map((run) => run.done)),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, SEARCH_WAITS_FOR_INDEXING_MS);
    }),
  ]);
  clearTimeout(timer);
}

/**
 * The maintenance pass: ended builds whose log is not wholly indexed (the tail held back until the end, the last
 * unterminated line, or lines a crash kept appendLog from indexing), a few per pass.
 */
export async function indexEndedLogs(deps: Pick<AppDeps, "db" | "clock" | "config">, limit = 20): Promise<number> {
  const finals = sql.join(
    FINAL_BUILD_STATUSES.map((s) => sql`${s}`),
    sql`, `,
  );
  const rows = await deps.db.all<{ id: string }>(sql`SELECT b.id FROM builds b LEFT JOIN log_search_builds s ON s.build_id = b.id
    WHERE b.log_bytes > 0 AND b.status IN (${finals}) AND coalesce(s.complete, 0) = 0 ORDER BY b.finished_at LIMIT ${limit}`);
  for (const { id } of rows) {
    await indexBuildLog(deps, id);
    await yieldToEventLoop();
  }
  return rows.length;
}

/**
 * Removes the search entries of these builds' logs (retention deletes a log: its lines must not be found any
 * more). The build stays marked complete, so nothing re-indexes a deleted log.
 */
export async function dropLogSearchEntries(db: Db, buildIds: string[]): Promise<void> {
  for (const buildId of buildIds) {
    const [first, ...rest] = dropLogSearchEntriesStatements(db, [buildId]);
    if (first) await db.batch([first, ...rest]);
  }
}

/**
 * The statements that drop the search entries of these builds' logs and mark them complete (never indexed again),
 * for a caller that deletes the logs in the same batch (the retention pass), so no entry outlives its log.
 */
export function dropLogSearchEntriesStatements(db: Db, buildIds: string[]) {
  return buildIds.flatMap((buildId) => [
    db.run(sql`DELETE FROM log_search WHERE rowid >= (SELECT seq FROM log_search_builds WHERE build_id = ${buildId}) * ${LINE_SPACE}
      AND rowid < ((SELECT seq FROM log_search_builds WHERE build_id = ${buildId}) + 1) * ${LINE_SPACE}`),
    db.run(sql`INSERT INTO log_search_builds (build_id, complete) VALUES (${buildId}, 1) ON CONFLICT (build_id) DO UPDATE SET complete = 1`),
  ]);
}

export const searchLogsSchema = z.object({
  q: z.string().trim().min(1).max(500),
  project_id: z.string().max(100).optional(),
  pipeline_id: z.string().max(100).optional(),
  branch: z.string().max(1000).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(50),
});

const OPERATORS = new Set(["AND", "OR", "NOT"]);

/**
 * The query as FTS5 reads it, with one kindness: a bare word holding characters FTS5 gives a meaning to
 * (`foo-bar`, `Main.swift:42`, `@rpath`) is searched as the phrase it spells instead of failing; a trailing `*`
 * stays a prefix. Quoted phrases, parentheses, AND/OR/NOT and NEAR(...) pass through unchanged, so what is wrong
 * in them (an unterminated quote, a dangling AND) stays an error for the caller.
 */
export function toFtsQuery(q: string): string {
  const out: string[] = [];
  let i = 0;
  while (i < q.length) {
    const ch = q[i]!;
    if (/\s/.test(ch) || ch === "(" || ch === ")") {
      out.push(ch);
      i++;
    } else if (ch === '"') {
      const end = q.indexOf('"', i + 1);
      // Unterminated: passed on as written, for FTS5 to refuse.
      const stop = end < 0 ? q.length : end + 1;
      out.push(q.slice(i, stop));
      i = stop;
    } else {
      let j = i;
      while (j < q.length && !/[\s()"]/.test(q[j]!)) j++;
      const word = q.slice(i, j);
      i = j;
      const prefix = word.endsWith("*") && word.length > 1;
      const body = prefix ? word.slice(0, -1) : word;
      if (OPERATORS.has(word) || word === "NEAR" || /^[\p{L}\p{N}_]+$/u.test(body)) out.push(word);
      else out.push(`"${body.replace(/"/g, '""')}"${prefix ? "*" : ""}`);
    }
  }
  return out.join("");
}

export interface LogMatch {
  build_id: string;
  build_number: number;
  project_id: string;
  line_number: number;
  line: string;
}

/** SQLite's answers to a malformed MATCH: the caller's query is wrong, not the daemon. */
function isQueryError(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = (e as { cause?: unknown }).cause) {
    if (/fts5|unterminated string|unknown special query|no such column|malformed MATCH/i.test(e.message)) return true;
  }
  return false;
}

/**
 * GET /v1/search: matching lines, newest builds first (a build's search number is taken when its first line is
 * indexed, so the order is that of the builds' logs starting), lines of one build in order. `marked` holds the
 * line with each matched term between MARK_OPEN and MARK_CLOSE, for the page's highlighting.
 */
export async function searchLogs(
  deps: Pick<AppDeps, "db">,
  query: z.infer<typeof searchLogsSchema>,
): Promise<{ matches: Array<LogMatch & { marked: string }> }> {
  await indexingSettled(deps.db);
  const filters = ["log_search MATCH ?"];
  const filterArgs: string[] = [toFtsQuery(query.q)];
  for (const [column, value] of [
    ["b.project_id", query.project_id],
    ["b.pipeline_id", query.pipeline_id],
    ["b.branch", query.branch],
  ] as const) {
    if (!value) continue;
    filters.push(`${column} = ?`);
    filterArgs.push(value);
  }
  let rows: Array<{ rowid: number; build_id: string; line: string; marked: string; build_number: number; project_id: string }>;
  try {
    // CROSS JOIN keeps the FTS table outermost, walked in descending rowid order: the newest matches come first
    // and the walk stops at the limit instead of sorting every match. The rowid names the build (through its
    // search number) and the line: the index stores only the line text. Off the event loop on the embedded
    // driver: a broad query over gigabytes of logs runs for hundreds of milliseconds (docs/benchmarks.md).
    const result = await clientOf(deps.db).execute(
      offLoop(
        `SELECT s.rowid AS rowid, l.build_id, s.line, highlight(log_search, 0, ?, ?) AS marked, b.build_number, b.project_id
          FROM log_search s CROSS JOIN log_search_builds l ON l.seq = s.rowid / ${LINE_SPACE}
          CROSS JOIN builds b ON b.id = l.build_id
          WHERE ${filters.join(" AND ")}
          ORDER BY s.rowid DESC LIMIT ?`,
        [MARK_OPEN, MARK_CLOSE, ...filterArgs, query.limit],
      ),
    );
    rows = result.rows as unknown as typeof rows;
  } catch (err) {
    if (isQueryError(err)) throw new ApiError("invalid_input", "the search query is not valid: check its quotes, parentheses and AND/OR/NOT");
    throw err;
  }
  const matches = rows
    .map((r) => ({
      seq: Math.floor(Number(r.rowid) / LINE_SPACE),
      build_id: r.build_id,
      build_number: Number(r.build_number),
      project_id: r.project_id,
      line_number: Number(r.rowid) % LINE_SPACE,
      line: r.line,
      marked: r.marked,
    }))
    .sort((a, b) => b.seq - a.seq || a.line_number - b.line_number)
    .map(({ seq: _seq, ...m }) => m);
  return { matches };
}
