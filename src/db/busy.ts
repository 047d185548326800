/**
 * Busy and locked answers, retried in ONE place (docs/decisions.md, docs/api.md §8): `BusyRetryClient` wraps the database
 * client under drizzle (the embedded file, a libSQL server, the Workers web client), so every statement and
 * batch of every code path gets the same treatment and no caller retries by itself.
 *
 * Why a retry is safe: a busy/locked error means SQLite refused to start, continue or commit the statement or
 * transaction, and the transaction is rolled back (a batch is one transaction: the embedded driver rolls it
 * back, a libSQL server's batch ends with a conditional ROLLBACK step). Nothing of it was committed, so running
 * it again cannot apply a write twice. Any other failure (a network error, a timeout, a constraint) is passed on
 * untouched: its outcome is unknown or final.
 *
 * Why write batches begin IMMEDIATE: a deferred transaction that reads and then writes fails with SQLITE_BUSY at
 * once when another connection committed in between (its snapshot went stale; the busy timeout does not apply),
 * and on sqld 0.24 with libsql-wal such a failure leaves the server's write lock held: every later write hangs
 * (seen in docs/decisions.md; tmp test: 8 writers, one BUSY, then no write for 40 s). Taking the write lock first makes
 * that failure impossible: the server or the busy timeout makes the writer wait its turn instead.
 *
 * Web-standard: no Node module, so the Workers entry wraps its client the same way.
 */
import type { Client, InArgs, InStatement, ResultSet, Transaction, TransactionMode } from "@libsql/client";

export interface BusyRetryPolicy {
  /** Retries after the first try (so `retries + 1` tries at most). */
  retries: number;
  /** The first delay; each retry doubles it up to `capMs`, and a random part (full jitter) spreads the callers. */
  baseMs: number;
  capMs: number;
}

/** About 2 s of retries at most (10, 20, 40, … 1000 ms, each scaled by a random factor in [0.5, 1]). */
export const DEFAULT_BUSY_RETRY: BusyRetryPolicy = { retries: 8, baseMs: 10, capMs: 1000 };

const BUSY_MESSAGE = /\bdatabase (?:table )?is locked\b|\bSQLITE_(?:BUSY|LOCKED)\b/i;

/**
 * Whether `err` (or an error it wraps: drizzle's DrizzleQueryError, a LibsqlBatchError, a server's
 * ResponseError) is SQLite's busy/locked refusal. Errors of this kind leave nothing committed.
 */
export function isBusyError(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    const { code, extendedCode } = e as { code?: unknown; extendedCode?: unknown };
    for (const c of [code, extendedCode]) {
      if (typeof c === "string" && (c.startsWith("SQLITE_BUSY") || c.startsWith("SQLITE_LOCKED"))) return true;
    }
    if (BUSY_MESSAGE.test(e.message)) return true;
  }
  return false;
}

/** A statement that only reads (a batch of these needs no write lock). */
function isRead(stmt: InStatement | [string, InArgs?]): boolean {
  const sql = Array.isArray(stmt) ? stmt[0] : typeof stmt === "string" ? stmt : stmt.sql;
  return /^\s*select\b/i.test(sql) && !/\breturning\b/i.test(sql);
}

/** The delay before retry `attempt` (0-based): exponential, capped, scaled by a random factor in [0.5, 1]. */
export function busyDelayMs(policy: BusyRetryPolicy, attempt: number, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.capMs, policy.baseMs * 2 ** attempt);
  return ceiling * (0.5 + random() / 2);
}

export interface BusyRetryStats {
  /** Retries made after a busy/locked answer. */
  retries: number;
  /** Calls that were still busy after the last retry (the error went on to the caller). */
  exhausted: number;
}

/** The database client with busy/locked answers retried and write batches begun IMMEDIATE (see the module). */
export class BusyRetryClient implements Client {
  readonly stats: BusyRetryStats = { retries: 0, exhausted: 0 };

  constructor(
    readonly inner: Client,
    private readonly policy: BusyRetryPolicy = DEFAULT_BUSY_RETRY,
  ) {}

  get closed(): boolean {
    return this.inner.closed;
  }
  get protocol(): string {
    return this.inner.protocol;
  }

  // The first attempt is chained, not awaited in an async function: every query passes here, and nearly none is
  // ever refused, so the retry loop's async frame is only paid for when one is (docs/benchmarks.md).
  private retrying<T>(run: () => Promise<T>): Promise<T> {
    return run().then(undefined, (err: unknown) => this.retryAfter(run, err));
  }

  private async retryAfter<T>(run: () => Promise<T>, refusal: unknown): Promise<T> {
    let err = refusal;
    for (let attempt = 0; ; attempt++) {
      if (!isBusyError(err)) throw err;
      if (attempt >= this.policy.retries) {
        this.stats.exhausted++;
        throw err;
      }
      this.stats.retries++;
      await new Promise((resolve) => setTimeout(resolve, busyDelayMs(this.policy, attempt)));
      try {
        return await run();
      } catch (next) {
        err = next;
      }
    }
  }

  execute(stmt: InStatement | string, args?: InArgs): Promise<ResultSet> {
    // A single statement runs in its own implicit transaction, which takes the write lock at its start.
    return this.retrying(() => (typeof stmt === "string" ? this.inner.execute(stmt, args) : this.inner.execute(stmt)));
  }

  batch(stmts: Array<InStatement | [string, InArgs?]>, mode?: TransactionMode): Promise<ResultSet[]> {
    // A batch that writes takes the write lock first, whatever mode its caller asked for (drizzle asks none,
    // which both clients read as "deferred"); a batch of reads stays deferred.
    const effective: TransactionMode = mode === "read" ? "read" : stmts.every(isRead) ? (mode ?? "deferred") : "write";
    return this.retrying(() => this.inner.batch(stmts, effective));
  }

  migrate(stmts: InStatement[]): Promise<ResultSet[]> {
    // The migrator's batch begins with DDL (a write), so it holds the write lock from its first statement.
    return this.retrying(() => this.inner.migrate(stmts));
  }

  transaction(mode?: TransactionMode): Promise<Transaction> {
    // Interactive transactions are not used by Hangar (src/db/types.ts); passed through without retries, since a
    // failure inside one cannot be replayed from here.
    return this.inner.transaction(mode);
  }

  executeMultiple(sql: string): Promise<void> {
    return this.inner.executeMultiple(sql);
  }

  sync(): ReturnType<Client["sync"]> {
    return this.inner.sync();
  }

  reconnect(): void {
    this.inner.reconnect();
  }

  close(): void {
    this.inner.close();
  }
}
