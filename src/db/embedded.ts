/**
 * The embedded database driver (Node only): the `libsql` package's synchronous connection behind the
 * `@libsql/client` `Client` interface, so drizzle's libSQL adapter (and with it the `Db` type every domain
 * function takes) runs on it unchanged.
 *
 * Why not `@libsql/client` for the file: its embedded client prepares every statement afresh and reads the
 * column metadata twice per call, which cost about ten times the statement itself on the hot paths (docs/benchmarks.md).
 * Here each distinct SQL text is prepared once and kept in a bounded LRU cache. Every statement is stepped to
 * its end on every call (`all()` for statements that return rows, `run()` for the others), so no statement is
 * left half-read and no read snapshot stays open between calls; a statement that failed is dropped from the
 * cache rather than reused.
 *
 * Semantics are those of `@libsql/client`'s embedded client: results are `ResultSet`s whose rows can be read by
 * index and by column name (only the names are enumerable), blobs come back as `ArrayBuffer`, errors are
 * `LibsqlError`s (`LibsqlBatchError` inside a batch) wrapping the SQLite error, a batch is one transaction
 * (`BEGIN DEFERRED` by default), and a statement that returns rows reports `rowsAffected` 0. One difference:
 * integers come back as JavaScript numbers without the 2^53 range check (Hangar stores no integer that large).
 *
 * Every connection (the shared one, and the dedicated one an interactive transaction borrows) gets the same
 * settings when it opens: busy timeout, WAL, and the `synchronous` level (see docs/decisions.md).
 */
import { LibsqlBatchError, LibsqlError } from "@libsql/core/api";
import type { Client, InArgs, InStatement, InValue, ResultSet, Row, Transaction, TransactionMode } from "@libsql/core/api";
import Database from "libsql";
import { closeSync, openSync, readSync } from "node:fs";
import { createRequire } from "node:module";
import { endianness } from "node:os";
import { Worker } from "node:worker_threads";
import { isOffLoop, isOneRow, type OffLoopStatement } from "./fixed-sql.ts";

export type SynchronousLevel = "normal" | "full";

export interface EmbeddedOptions {
  /** Busy timeout in ms: a writer in another process is waited for, not failed. */
  timeoutMs: number;
  synchronous: SynchronousLevel;
  /** Distinct SQL texts kept prepared; the least recently used is dropped beyond it. */
  cacheSize?: number;
  /**
   * Checkpoint the WAL from a timer this often (ms) instead of inside commits; 0 or absent leaves it to SQLite.
   * SQLite's automatic checkpoint runs in the commit that crosses 1,000 WAL pages: that commit then also copies
   * the pages and fsyncs twice (10–20 ms here), and since the driver is synchronous the whole event loop waits,
   * so every few seconds one request (a build trigger, the claim a long-polling runner waits on) paid for it.
   * The timed checkpoint runs on a connection of its own in a worker thread (`CheckpointThread`), so the copy
   * and its fsyncs never hold the event loop either, however much was written since the last one.
   */
  checkpointEveryMs?: number;
}

/**
 * With timed checkpoints, SQLite's own stays as a bound only: if the timer could not run, the WAL still stops
 * growing at this many pages (~40 MiB).
 */
const AUTOCHECKPOINT_BOUND_PAGES = 10_000;

/**
 * A WAL holding this many frames or more (SQLite's own default threshold, 1,000 pages) after a write starts a
 * checkpoint at once instead of at the next tick: a bulk write (a 100,000-case test report stores ~50 MB of WAL a
 * second) would otherwise reach the bound above before the tick, and the bound's checkpoint runs inside a commit
 * on this thread (70–95 ms measured).
 */
const KICK_AT_FRAMES = 1000;

/**
 * A checkpoint that copied this many frames or more is followed by one more with writes held back (see
 * `EmbeddedClient.checkpoint`), so that the WAL starts again from its beginning.
 */
const RESTART_AFTER_FRAMES = 1000;

/** Writes are never held back longer than this, whatever the checkpoint thread does. */
const WRITE_HOLD_MAX_MS = 250;

type Connection = InstanceType<typeof Database>;
type Statement = ReturnType<Connection["prepare"]>;

/** The values of one row, kept behind a symbol so only the column names are own enumerable keys. */
const VALUES = Symbol("values");

/**
 * What rows of one statement share: a prototype answering `row[i]` and `row.length`, and the column names to
 * copy onto each row. Building this once per statement (instead of defining every property of every row, as
 * `@libsql/client` does) is most of the saving on reads.
 */
interface RowShape {
  proto: object;
  names: string[];
  indexes: number[];
}

function rowShape(columns: string[]): RowShape {
  const proto: Record<PropertyKey, unknown> = {};
  Object.defineProperty(proto, "length", { value: columns.length });
  for (let i = 0; i < columns.length; i++) {
    Object.defineProperty(proto, i, {
      get(this: { [VALUES]: unknown[] }) {
        return this[VALUES][i];
      },
    });
  }
  const names: string[] = [];
  const indexes: number[] = [];
  const taken = new Set<string>(["length", ...columns.map((_, i) => String(i))]);
  // The first column of a name wins, as in @libsql/client.
  for (let i = 0; i < columns.length; i++) {
    const name = columns[i]!;
    if (taken.has(name)) continue;
    taken.add(name);
    names.push(name);
    indexes.push(i);
  }
  return { proto, names, indexes };
}

function makeRow(shape: RowShape, values: unknown[]): Row {
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v instanceof Uint8Array) values[i] = toArrayBuffer(v);
  }
  const row = Object.create(shape.proto) as Record<PropertyKey, unknown>;
  Object.defineProperty(row, VALUES, { value: values });
  const { names, indexes } = shape;
  for (let k = 0; k < names.length; k++) row[names[k]!] = values[indexes[k]!];
  return row as unknown as Row;
}

function toArrayBuffer(bytes: Uint8Array): ArrayBuffer {
  const { buffer, byteOffset, byteLength } = bytes;
  if (byteOffset === 0 && byteLength === buffer.byteLength && buffer instanceof ArrayBuffer) return buffer;
  return new Uint8Array(bytes).buffer;
}

function valueToSql(value: InValue): unknown {
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new RangeError("Only finite numbers (not Infinity or NaN) can be passed as arguments");
    return value;
  }
  if (typeof value === "boolean") return value ? 1 : 0;
  if (value instanceof ArrayBuffer) return Buffer.from(value);
  if (value instanceof Date) return value.valueOf();
  if (value === undefined) throw new TypeError("undefined cannot be passed as argument to the database");
  return value;
}

function argsToSql(args: InArgs | undefined): unknown[] | Record<string, unknown> {
  if (args === undefined) return [];
  if (Array.isArray(args)) {
    const out = new Array<unknown>(args.length);
    for (let i = 0; i < args.length; i++) out[i] = valueToSql(args[i]!);
    return out;
  }
  const out: Record<string, unknown> = {};
  for (const name in args) {
    const key = name[0] === "@" || name[0] === "$" || name[0] === ":" ? name.substring(1) : name;
    out[key] = valueToSql(args[name]!);
  }
  return out;
}

class Result implements ResultSet {
  constructor(
    public columns: string[],
    public columnTypes: string[],
    public rows: Row[],
    public rowsAffected: number,
    public lastInsertRowid: bigint | undefined,
  ) {}

  toJSON() {
    return {
      columns: this.columns,
      columnTypes: this.columnTypes,
      rows: this.rows.map((row) =>
        Array.prototype.map.call(row, (v) => (typeof v === "bigint" ? `${v}` : v instanceof ArrayBuffer ? Buffer.from(v).toString("base64") : v)),
      ),
      rowsAffected: this.rowsAffected,
      lastInsertRowid: this.lastInsertRowid !== undefined ? `${this.lastInsertRowid}` : null,
    };
  }
}

interface Cached {
  stmt: Statement;
  reader: boolean;
  columns: string[];
  columnTypes: string[];
  shape: RowShape | null;
  lastUsed: number;
}

const SQLITE_CODES: Record<number, string> = {
  1: "SQLITE_ERROR",
  2: "SQLITE_INTERNAL",
  3: "SQLITE_PERM",
  4: "SQLITE_ABORT",
  5: "SQLITE_BUSY",
  6: "SQLITE_LOCKED",
  7: "SQLITE_NOMEM",
  8: "SQLITE_READONLY",
  9: "SQLITE_INTERRUPT",
  10: "SQLITE_IOERR",
  11: "SQLITE_CORRUPT",
  12: "SQLITE_NOTFOUND",
  13: "SQLITE_FULL",
  14: "SQLITE_CANTOPEN",
  15: "SQLITE_PROTOCOL",
  16: "SQLITE_EMPTY",
  17: "SQLITE_SCHEMA",
  18: "SQLITE_TOOBIG",
  19: "SQLITE_CONSTRAINT",
  20: "SQLITE_MISMATCH",
  21: "SQLITE_MISUSE",
  22: "SQLITE_NOLFS",
  23: "SQLITE_AUTH",
  24: "SQLITE_FORMAT",
  25: "SQLITE_RANGE",
  26: "SQLITE_NOTADB",
  27: "SQLITE_NOTICE",
  28: "SQLITE_WARNING",
};

/** The SQLite error as the `LibsqlError` @libsql/client throws (same code, extended code and cause). */
function mapError(e: unknown): unknown {
  if (e instanceof Database.SqliteError) return sqliteError(e.message, e.code, (e as { rawCode?: number }).rawCode, e);
  return e;
}

/** A SQLite error's message and codes (from this thread or the read thread) as @libsql/client's `LibsqlError`. */
function sqliteError(message: string, extendedCode: string | undefined, raw: number | undefined, cause?: Error): LibsqlError {
  const code = raw === undefined ? "SQLITE_UNKNOWN" : (SQLITE_CODES[raw & 0xff] ?? `SQLITE_UNKNOWN_${raw & 0xff}`);
  return new LibsqlError(message, code, extendedCode, raw, cause);
}

/**
 * A `worker_threads` thread running `code` (CommonJS, evaluated in the thread, so it needs no file of its own next
 * to the bundle or the sources) with `workerData.libsql`, the driver's path, beside `data`. Unreferenced: it
 * never keeps the process alive by itself.
 */
function startDbThread(code: string, data: Record<string, unknown>): Worker {
  const libsql = createRequire(import.meta.url).resolve("libsql");
  const worker = new Worker(code, { eval: true, workerData: { ...data, libsql } });
  worker.unref();
  return worker;
}

function inBatch(e: unknown, index: number): unknown {
  if (e instanceof LibsqlBatchError) return e;
  if (e instanceof LibsqlError)
    return new LibsqlBatchError(e.message, index, e.code, e.extendedCode, e.rawCode, e.cause instanceof Error ? e.cause : undefined);
  return e;
}

const BEGIN: Record<TransactionMode, string> = { write: "BEGIN IMMEDIATE", read: "BEGIN TRANSACTION READONLY", deferred: "BEGIN DEFERRED" };

/** Statements that cannot write (a timed checkpoint has nothing new to copy after them). */
const READ_ONLY = /^\s*select\b/i;

/** Statements after which cached statements may describe tables that changed. */
const SCHEMA_CHANGE = /^\s*(?:create|drop|alter)\b/i;

/** SQLite's busy/locked refusal: the statement is left mid-run, to be resumed (see `CachedConnection.stale`). */
function isBusyCode(e: unknown): boolean {
  return e instanceof LibsqlError && (e.code === "SQLITE_BUSY" || e.code === "SQLITE_LOCKED");
}

/** One open connection with its statement cache. */
class CachedConnection {
  readonly conn: Connection;
  private readonly cache = new Map<string, Cached>();
  /**
   * Least-recently-used by a use counter: a hit only stores a number (re-inserting the key into the Map on every
   * hit cost ~1 µs per statement); the scan for the oldest runs only when a new statement would pass the bound.
   */
  private useCounter = 0;
  /**
   * Set when a statement was refused with SQLITE_BUSY/LOCKED. SQLite leaves such a statement active (it could be
   * stepped again), and the libsql package has no way to reset it short of running it again: while it lives, every
   * COMMIT on this connection fails with "cannot commit transaction - SQL statements in progress" (docs/decisions.md). The
   * client replaces a stale connection before its next call.
   */
  stale = false;

  constructor(
    path: string,
    options: EmbeddedOptions,
    private readonly cacheSize: number,
  ) {
    this.conn = new Database(path, { timeout: options.timeoutMs });
    try {
      // WAL is stored in the file (readers run beside the single writer); `synchronous` and the busy timeout
      // are per connection, so every connection sets them when it opens.
      this.conn.exec(`PRAGMA busy_timeout = ${Math.floor(options.timeoutMs)}`);
      if (path !== ":memory:") this.conn.exec("PRAGMA journal_mode = WAL");
      this.conn.exec(`PRAGMA synchronous = ${options.synchronous === "full" ? "FULL" : "NORMAL"}`);
      if (options.checkpointEveryMs) this.conn.exec(`PRAGMA wal_autocheckpoint = ${AUTOCHECKPOINT_BOUND_PAGES}`);
    } catch (e) {
      this.conn.close();
      throw mapError(e);
    }
  }

  private prepared(sql: string): Cached {
    const hit = this.cache.get(sql);
    if (hit) {
      hit.lastUsed = ++this.useCounter;
      return hit;
    }
    const stmt = this.conn.prepare(sql);
    const reader = stmt.reader;
    let columns: string[] = [];
    let columnTypes: string[] = [];
    if (reader) {
      stmt.raw(true);
      const defs = stmt.columns();
      columns = defs.map((d) => d.name);
      columnTypes = defs.map((d) => d.type ?? "");
    }
    const entry: Cached = { stmt, reader, columns, columnTypes, shape: null, lastUsed: ++this.useCounter };
    if (this.cache.size >= this.cacheSize) this.dropLeastRecentlyUsed();
    this.cache.set(sql, entry);
    return entry;
  }

  execute(stmt: InStatement | string, args?: InArgs, oneRow = false): ResultSet {
    const sql = typeof stmt === "string" ? stmt : stmt.sql;
    const values = argsToSql(typeof stmt === "string" ? args : stmt.args);
    let entry: Cached | undefined;
    try {
      entry = this.prepared(sql);
      if (entry.reader) {
        const shape = (entry.shape ??= rowShape(entry.columns));
        if (oneRow) {
          // get() is one native call that reads the first row and resets the statement (nothing stays open);
          // all() goes through the package's iterator: two native calls and a 100-slot buffer per call.
          const first = entry.stmt.get(values) as unknown[] | undefined;
          return new Result(entry.columns, entry.columnTypes, first ? [makeRow(shape, first)] : [], 0, undefined);
        }
        // all() steps the statement to its end: nothing stays open after the call.
        const raw = entry.stmt.all(values) as unknown[][];
        const rows = new Array<Row>(raw.length);
        for (let i = 0; i < raw.length; i++) rows[i] = makeRow(shape, raw[i]!);
        return new Result(entry.columns, entry.columnTypes, rows, 0, undefined);
      }
      const info = entry.stmt.run(values);
      if (SCHEMA_CHANGE.test(sql)) this.cache.clear();
      return new Result([], [], [], info.changes, BigInt(info.lastInsertRowid));
    } catch (e) {
      // A failed statement is not reused: it is re-prepared (and so starts clean) on the next call.
      this.cache.delete(sql);
      const mapped = mapError(e);
      if (isBusyCode(mapped)) this.stale = true;
      throw mapped;
    }
  }

  /** Runs `stmts` between `begin` and COMMIT; anything left open on a failure is rolled back. */
  transactional(begin: string | null, stmts: Array<InStatement | [string, InArgs?]>): ResultSet[] {
    if (begin) this.execute(begin);
    try {
      const results: ResultSet[] = [];
      for (let i = 0; i < stmts.length; i++) {
        const stmt = stmts[i]!;
        try {
          if (!this.conn.inTransaction) throw new LibsqlBatchError("The transaction has been rolled back", i, "TRANSACTION_CLOSED");
          results.push(Array.isArray(stmt) ? this.execute(stmt[0], stmt[1]) : this.execute(stmt));
        } catch (e) {
          throw inBatch(e, i);
        }
      }
      if (begin) this.execute("COMMIT");
      return results;
    } finally {
      if (begin && this.conn.open && this.conn.inTransaction) this.rollbackQuietly();
    }
  }

  private dropLeastRecentlyUsed(): void {
    let oldestKey: string | undefined;
    let oldest = Infinity;
    for (const [key, entry] of this.cache) {
      if (entry.lastUsed < oldest) {
        oldest = entry.lastUsed;
        oldestKey = key;
      }
    }
    if (oldestKey !== undefined) this.cache.delete(oldestKey);
  }

  exec(sql: string): void {
    try {
      this.conn.exec(sql);
    } catch (e) {
      throw mapError(e);
    } finally {
      this.cache.clear();
    }
  }

  get cachedStatements(): number {
    return this.cache.size;
  }

  /** Forgets every prepared statement (after a migration: tables may have changed). */
  forget(): void {
    this.cache.clear();
  }

  rollbackQuietly(): void {
    try {
      this.conn.exec("ROLLBACK");
    } catch {
      // nothing was open any more
    }
  }

  close(): void {
    this.cache.clear();
    if (this.conn.open) this.conn.close();
  }
}

/**
 * The worker thread's code: its own connection to the file, one PASSIVE checkpoint per message, answered with
 * SQLite's `[busy, frames in the WAL, frames copied]`, or `null` when it failed (started by `startDbThread`).
 */
const CHECKPOINT_THREAD_CODE = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.libsql);
const db = new Database(workerData.path, { timeout: 0 });
const passive = db.prepare("PRAGMA wal_checkpoint(PASSIVE)").raw(true);
parentPort.on("message", (message) => {
  if (message === "close") {
    db.close();
    parentPort.close();
    return;
  }
  let result = null;
  try {
    result = passive.get();
  } catch {}
  parentPort.postMessage(result);
});
`;

/** SQLite's answer to a checkpoint: busy (1 when it could not finish), frames in the WAL, frames copied. */
type CheckpointResult = [busy: number, frames: number, copied: number];

/**
 * Timed checkpoints off the event loop (docs/decisions.md "WAL checkpoints"). A PASSIVE checkpoint from another
 * connection copies what no reader still needs while this thread's connection goes on reading and appending to
 * the WAL; SQLite's own checkpoint lock keeps the two from copying at once (the commit's bound then finds it busy
 * and skips). Started on the first checkpoint, so a client that never writes never starts a thread.
 */
class CheckpointThread {
  private readonly worker: Worker;
  private waiting: ((result: CheckpointResult | null) => void) | null = null;
  /** The thread ended (it failed to open the file, or was closed): the client starts another next time. */
  ended = false;

  constructor(path: string) {
    this.worker = startDbThread(CHECKPOINT_THREAD_CODE, { path });
    this.worker.on("message", (result: CheckpointResult | null) => this.settle(result));
    this.worker.on("error", () => this.settle(null));
    this.worker.on("exit", () => {
      this.ended = true;
      this.settle(null);
    });
  }

  private settle(result: CheckpointResult | null): void {
    const waiting = this.waiting;
    this.waiting = null;
    waiting?.(result);
  }

  /** One PASSIVE checkpoint; `null` when it could not run. One at a time. */
  run(): Promise<CheckpointResult | null> {
    if (this.ended) return Promise.resolve(null);
    return new Promise((resolve) => {
      this.waiting = resolve;
      this.worker.postMessage("checkpoint");
    });
  }

  close(): void {
    this.worker.postMessage("close");
  }
}

/**
 * The read thread's code: a query-only connection of its own, one statement per message, answered with the
 * column names and the rows as arrays, or the SQLite error's message and codes.
 */
const READ_THREAD_CODE = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.libsql);
const db = new Database(workerData.path, { timeout: workerData.timeoutMs });
db.exec("PRAGMA busy_timeout = " + Math.floor(workerData.timeoutMs));
db.exec("PRAGMA query_only = 1");
const prepared = new Map();
parentPort.on("message", (message) => {
  if (message === "close") {
    db.close();
    parentPort.close();
    return;
  }
  try {
    let stmt = prepared.get(message.sql);
    if (!stmt) {
      stmt = db.prepare(message.sql);
      stmt.raw(true);
      if (prepared.size >= 32) prepared.clear();
      prepared.set(message.sql, stmt);
    }
    const columns = stmt.columns().map((c) => c.name);
    parentPort.postMessage({ id: message.id, columns, rows: stmt.all(message.args) });
  } catch (e) {
    prepared.delete(message.sql);
    parentPort.postMessage({ id: message.id, error: { message: String(e && e.message), code: e && e.code, rawCode: e && e.rawCode } });
  }
});
`;

interface ReadAnswer {
  id: number;
  columns?: string[];
  rows?: unknown[][];
  error?: { message: string; code?: string; rawCode?: number };
}

/**
 * Reads that may run long, on a query-only connection in a `worker_threads` thread (docs/decisions.md "Slow reads
 * off the event loop"): one at a time, in the order asked. It sees every write this client committed before the
 * read was asked (WAL: a new read sees the last commit). Started on the first such read.
 */
class ReadThread {
  private readonly worker: Worker;
  private readonly waiting = new Map<number, (answer: ReadAnswer) => void>();
  private nextId = 1;
  /** The thread ended (it failed, or was closed): the client starts another next time. */
  ended = false;

  constructor(path: string, timeoutMs: number) {
    this.worker = startDbThread(READ_THREAD_CODE, { path, timeoutMs });
    this.worker.on("message", (answer: ReadAnswer) => {
      const resolve = this.waiting.get(answer.id);
      this.waiting.delete(answer.id);
      resolve?.(answer);
      if (this.waiting.size === 0) this.worker.unref();
    });
    const fail = (message: string) => {
      this.ended = true;
      for (const [id, resolve] of this.waiting) resolve({ id, error: { message } });
      this.waiting.clear();
    };
    this.worker.on("error", (err) => fail(`the read thread failed: ${err.message}`));
    this.worker.on("exit", () => fail("the read thread ended"));
  }

  run(sql: string, args: unknown): Promise<ReadAnswer> {
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      // Referenced while a read is in flight, so a process waiting for its answer does not exit.
      this.worker.ref();
      this.worker.postMessage({ id, sql, args });
    });
  }

  close(): void {
    this.worker.postMessage("close");
  }
}

/** An interactive transaction on a connection of its own, so the shared connection's callers never join it. */
class EmbeddedTransaction implements Transaction {
  private conn: CachedConnection | null;

  constructor(conn: CachedConnection) {
    this.conn = conn;
  }

  private live(): CachedConnection {
    if (!this.conn || !this.conn.conn.open || !this.conn.conn.inTransaction) throw new LibsqlError("The transaction is closed", "TRANSACTION_CLOSED");
    return this.conn;
  }

  async execute(stmt: InStatement | string, args?: InArgs): Promise<ResultSet> {
    return this.live().execute(stmt, args);
  }
  async batch(stmts: Array<InStatement | [string, InArgs?]>): Promise<ResultSet[]> {
    return this.live().transactional(null, stmts);
  }
  async executeMultiple(sql: string): Promise<void> {
    this.live().exec(sql);
  }
  async commit(): Promise<void> {
    try {
      this.live().execute("COMMIT");
    } finally {
      this.close();
    }
  }
  async rollback(): Promise<void> {
    if (this.conn?.conn.open && this.conn.conn.inTransaction) this.conn.rollbackQuietly();
    this.close();
  }
  close(): void {
    const conn = this.conn;
    this.conn = null;
    if (!conn) return;
    if (conn.conn.open && conn.conn.inTransaction) conn.rollbackQuietly();
    conn.close();
  }
  get closed(): boolean {
    return !this.conn || !this.conn.conn.open || !this.conn.conn.inTransaction;
  }
}

/** The embedded file (or `:memory:`) as a `Client`. */
export class EmbeddedClient implements Client {
  closed = false;
  protocol = "file";
  private main: CachedConnection;
  private readonly cacheSize: number;
  private readonly checkpointTimer: ReturnType<typeof setInterval> | undefined;
  /** Set by every call that may have written since the last timed checkpoint. */
  private wroteSinceCheckpoint = false;
  /** Timed checkpoints run so far (tests and diagnostics). */
  checkpoints = 0;
  private checkpointThread: CheckpointThread | null = null;
  private readThread: ReadThread | null = null;
  private checkpointRunning = false;
  /** The `-shm` file, kept open for `walFrames`. */
  private shmFd: number | undefined;
  private readonly shmHeader = Buffer.alloc(4);
  /** Set while a checkpoint that should restart the WAL runs: writes wait for it (see `checkpoint`). */
  private writesHeld: Promise<void> | null = null;

  constructor(
    private readonly path: string,
    private readonly options: EmbeddedOptions,
  ) {
    this.cacheSize = options.cacheSize ?? 256;
    this.main = new CachedConnection(path, options, this.cacheSize);
    if (options.checkpointEveryMs && path !== ":memory:") {
      this.checkpointTimer = setInterval(() => void this.checkpoint(), options.checkpointEveryMs);
      this.checkpointTimer.unref();
    }
  }

  private open(): CachedConnection {
    if (this.closed) throw new LibsqlError("The client is closed", "CLIENT_CLOSED");
    // Calls run synchronously to their end, so no transaction is open here: replacing the connection loses nothing.
    if (this.main.stale) this.reconnect();
    return this.main;
  }

  /**
   * A PASSIVE checkpoint on the checkpoint thread's connection: it copies what no reader still needs and never
   * waits for anyone. Skipped when nothing was written since the last one, or while the last one still runs. A
   * failure (busy: another process checkpoints) is left for the next tick; SQLite's bound above still holds.
   *
   * A WAL only starts again from its beginning when a write begins with every frame copied. Under a steady
   * stream of writes (a test report stored in batches) that never happens: each checkpoint ends while the next
   * write is already adding frames, the WAL grows to SQLite's bound, and the bound's checkpoint runs in a commit
   * here (70–95 ms measured). So after a checkpoint that copied `RESTART_AFTER_FRAMES` or more, writes on this
   * client wait (as promises: the event loop runs on) while one more checkpoint copies the few frames written
   * meanwhile; the first write after it starts the WAL again.
   */
  async checkpoint(): Promise<void> {
    if (this.closed || !this.wroteSinceCheckpoint || this.checkpointRunning) return;
    this.wroteSinceCheckpoint = false;
    this.checkpointRunning = true;
    try {
      if (!this.checkpointThread || this.checkpointThread.ended) this.checkpointThread = new CheckpointThread(this.path);
      const thread = this.checkpointThread;
      let result = await thread.run();
      if (result && result[0] === 0 && result[2] >= RESTART_AFTER_FRAMES && !this.closed) result = await this.holdingWrites(() => thread.run());
      if (result && result[0] === 0) this.checkpoints++;
      else this.wroteSinceCheckpoint = true;
    } finally {
      this.checkpointRunning = false;
    }
  }

  /** Runs `work` while writes on this client wait, for `WRITE_HOLD_MAX_MS` at most. */
  private async holdingWrites<T>(work: () => Promise<T>): Promise<T | null> {
    let release!: () => void;
    this.writesHeld = new Promise<void>((resolve) => {
      release = resolve;
    });
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      return await Promise.race([work(), new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), WRITE_HOLD_MAX_MS)))]);
    } finally {
      clearTimeout(timer);
      this.writesHeld = null;
      release();
    }
  }

  /**
   * After a call that may have written: with timed checkpoints, one starts now when the WAL holds
   * `KICK_AT_FRAMES` or more; otherwise the next tick takes it.
   */
  private wrote(): void {
    this.wroteSinceCheckpoint = true;
    if (this.checkpointTimer && !this.checkpointRunning && this.walFrames() >= KICK_AT_FRAMES) void this.checkpoint();
  }

  /**
   * The frames in the WAL now: `mxFrame` of the WAL-index header at the start of the `-shm` file, in the
   * machine's byte order (docs/decisions.md "WAL checkpoints" names the format). One 4-byte read, no lock: a
   * torn value only moves a checkpoint by one write. 0 when the file cannot be read.
   */
  private walFrames(): number {
    try {
      this.shmFd ??= openSync(`${this.path}-shm`, "r");
      if (readSync(this.shmFd, this.shmHeader, 0, 4, 16) !== 4) return 0;
      return endianness() === "LE" ? this.shmHeader.readUInt32LE(0) : this.shmHeader.readUInt32BE(0);
    } catch {
      return 0;
    }
  }

  /** A statement marked `offLoop` (src/db/fixed-sql.ts), on the read thread. */
  private async readOffLoop(stmt: OffLoopStatement): Promise<ResultSet> {
    if (this.closed) throw new LibsqlError("The client is closed", "CLIENT_CLOSED");
    if (!this.readThread || this.readThread.ended) this.readThread = new ReadThread(this.path, this.options.timeoutMs);
    const answer = await this.readThread.run(stmt.sql, argsToSql(stmt.args));
    if (answer.error) throw sqliteError(answer.error.message, answer.error.code, answer.error.rawCode);
    const columns = answer.columns ?? [];
    const shape = rowShape(columns);
    const rows = (answer.rows ?? []).map((values) => makeRow(shape, values));
    return new Result(
      columns,
      columns.map(() => ""),
      rows,
      0,
      undefined,
    );
  }

  async execute(stmt: InStatement | string, args?: InArgs): Promise<ResultSet> {
    if (typeof stmt !== "string" && isOffLoop(stmt) && this.path !== ":memory:") return this.readOffLoop(stmt);
    const reads = READ_ONLY.test(typeof stmt === "string" ? stmt : stmt.sql);
    if (!reads && this.writesHeld) await this.writesHeld;
    const conn = this.open();
    try {
      if (typeof stmt !== "string" && isOneRow(stmt)) return conn.execute(stmt, undefined, true);
      return conn.execute(stmt, args);
    } finally {
      if (!reads) this.wrote();
    }
  }

  async batch(stmts: Array<InStatement | [string, InArgs?]>, mode: TransactionMode = "deferred"): Promise<ResultSet[]> {
    if (this.writesHeld) await this.writesHeld;
    try {
      return this.open().transactional(BEGIN[mode], stmts);
    } finally {
      this.wrote();
    }
  }

  async migrate(stmts: InStatement[]): Promise<ResultSet[]> {
    const conn = this.open();
    conn.execute("PRAGMA foreign_keys=off");
    try {
      return conn.transactional(BEGIN.deferred, stmts);
    } finally {
      conn.forget();
      conn.execute("PRAGMA foreign_keys=on");
    }
  }

  async transaction(mode: TransactionMode = "write"): Promise<Transaction> {
    this.open();
    if (this.path === ":memory:") throw new LibsqlError("An in-memory database has a single connection; use batch()", "TRANSACTION_ACTIVE");
    const conn = new CachedConnection(this.path, this.options, 16);
    this.wroteSinceCheckpoint = true;
    try {
      conn.execute(BEGIN[mode]);
    } catch (e) {
      conn.close();
      throw e;
    }
    return new EmbeddedTransaction(conn);
  }

  async executeMultiple(sql: string): Promise<void> {
    const conn = this.open();
    try {
      conn.exec(sql);
    } finally {
      if (conn.conn.open && conn.conn.inTransaction) conn.rollbackQuietly();
    }
  }

  async sync(): Promise<never> {
    throw new LibsqlError("sync() is for embedded replicas, which Hangar does not use", "SYNC_NOT_SUPPORTED");
  }

  /** How many statements the shared connection holds prepared (bounded by `cacheSize`). */
  get cachedStatements(): number {
    return this.main.cachedStatements;
  }

  /** Closes the `-shm` file `walFrames` reads: SQLite makes a new one when the last connection reopens. */
  private forgetShm(): void {
    if (this.shmFd !== undefined) closeSync(this.shmFd);
    this.shmFd = undefined;
  }

  reconnect(): void {
    this.forgetShm();
    this.main.close();
    this.main = new CachedConnection(this.path, this.options, this.cacheSize);
    this.closed = false;
  }

  close(): void {
    this.closed = true;
    clearInterval(this.checkpointTimer);
    this.checkpointThread?.close();
    this.checkpointThread = null;
    this.readThread?.close();
    this.readThread = null;
    this.forgetShm();
    this.main.close();
  }
}
