/**
 * The Worker's libSQL client: a fresh `@libsql/client/web` client for every statement, batch or transaction.
 *
 * One client shared by the isolate broke under load in workerd (docs/decisions.md): the client queues calls past its
 * concurrency limit (20) and starts a queued call when an earlier one settles, so the HTTP request to the
 * database is made inside ANOTHER request's I/O context. workerd refuses or cancels such I/O; in a burst of 30
 * the queued requests were lost, and every call whose request went away mid-query kept its slot forever, so
 * after ~20 of them every later request waited for good. A web client holds no connection (each call is one
 * HTTP request to the server) and costs a few objects to make, so making one per call shares nothing between
 * requests: no limit, no queue, no state that one request's cancellation can poison for the others.
 *
 * Blobs come back as `Uint8Array`, not as the client's `ArrayBuffer`: drizzle's libSQL session turns an
 * ArrayBuffer into a Node `Buffer`, or where there is none (workerd) into a STRING through TextDecoder, which
 * loses every byte that is not valid UTF-8 (a log chunk cut inside a character). A Uint8Array passes through it
 * untouched to the column's own mapping (`bytes` in src/db/schema/_columns.ts).
 */
import {
  createClient,
  type Client,
  type Config,
  type InArgs,
  type InStatement,
  type ResultSet,
  type Row,
  type Transaction,
  type TransactionMode,
} from "@libsql/client/web";

/** The result with every ArrayBuffer value replaced by a Uint8Array over it (rows rebuilt in the client's shape). */
export function blobsAsBytes(result: ResultSet): ResultSet {
  for (let r = 0; r < result.rows.length; r++) {
    const row = result.rows[r]!;
    if (!Array.prototype.some.call(row, (v: unknown) => v instanceof ArrayBuffer)) continue;
    // The client's rows are frozen objects: values by index (not enumerable) and by column name (enumerable).
    const copy = {} as Row;
    Object.defineProperty(copy, "length", { value: row.length });
    for (let i = 0; i < row.length; i++) {
      const original = row[i];
      const value = original instanceof ArrayBuffer ? new Uint8Array(original) : original;
      Object.defineProperty(copy, i, { value });
      const name = result.columns[i];
      if (name !== undefined && !Object.hasOwn(copy, name))
        Object.defineProperty(copy, name, { value, enumerable: true, configurable: true, writable: true });
    }
    result.rows[r] = copy;
  }
  return result;
}

function transactionWithBytes(tx: Transaction): Transaction {
  return {
    execute: async (stmt: InStatement) => blobsAsBytes(await tx.execute(stmt)),
    batch: async (stmts: Array<InStatement>) => (await tx.batch(stmts)).map(blobsAsBytes),
    executeMultiple: (sql: string) => tx.executeMultiple(sql),
    rollback: () => tx.rollback(),
    commit: () => tx.commit(),
    close: () => tx.close(),
    get closed() {
      return tx.closed;
    },
  };
}

export function createPerCallClient(config: Pick<Config, "url" | "authToken">): Client {
  const fresh = () => createClient({ url: config.url, authToken: config.authToken });
  const client: Client = {
    execute: (async (stmtOrSql: InStatement | string, args?: InArgs) =>
      blobsAsBytes(typeof stmtOrSql === "string" ? await fresh().execute(stmtOrSql, args) : await fresh().execute(stmtOrSql))) as Client["execute"],
    batch: async (stmts: Array<InStatement | [string, InArgs?]>, mode?: TransactionMode) => (await fresh().batch(stmts, mode)).map(blobsAsBytes),
    migrate: async (stmts: Array<InStatement>) => (await fresh().migrate(stmts)).map(blobsAsBytes),
    // The transaction's stream belongs to its own client; it lives as long as the transaction does.
    transaction: (async (mode?: TransactionMode) => transactionWithBytes(await fresh().transaction(mode))) as Client["transaction"],
    executeMultiple: (sql: string) => fresh().executeMultiple(sql),
    sync: () => fresh().sync(),
    // Nothing to close or reconnect: no call outlives its own client.
    close: () => {},
    reconnect: () => {},
    closed: false,
    protocol: "http",
  };
  return client;
}
