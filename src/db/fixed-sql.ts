import type { Client, InArgs, InStatement, InValue } from "@libsql/client";
import { getTableColumns, getTableName, type Column } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import type { Db } from "./types.ts";

/**
 * The libSQL client under a `Db`, for the few hot statements kept as fixed SQL (docs/benchmarks.md: drizzle builds a query
 * afresh on every call, which on a claim cost more than running it). drizzle's libSQL adapter sets `$client` on
 * every database it makes (the embedded driver, a libSQL server, the Workers web client); the `Db` type leaves it
 * out. Web-standard: nothing here imports a driver.
 */
export function clientOf(db: Db): Client {
  return (db as Db & { $client: Client }).$client;
}

/**
 * A read that returns at most one row, marked so: the embedded driver reads it with the `libsql` package's
 * `get()`, one native call instead of the iterator `all()` uses (the session lookup of every request, docs/benchmarks.md).
 * Other clients (a libSQL server, the Workers client) see a plain statement. Only for SELECTs whose WHERE pins a
 * unique key: a second row would be dropped silently.
 */
export type OneRowStatement = { sql: string; args: InArgs; oneRow: true };

export function oneRow(sql: string, args: InArgs): OneRowStatement {
  return { sql, args, oneRow: true };
}

export function isOneRow(stmt: InStatement): stmt is OneRowStatement {
  return (stmt as Partial<OneRowStatement>).oneRow === true;
}

/**
 * A read that may run long (a log search over gigabytes), marked so: the embedded driver runs it on a read
 * connection in a thread of its own, so the event loop goes on meanwhile (docs/decisions.md "Slow reads off the
 * event loop"). Other clients (a libSQL server, the Workers client) see a plain statement; it is a network call
 * there already. Only for SELECTs.
 */
export type OffLoopStatement = { sql: string; args: InArgs; offLoop: true };

export function offLoop(sql: string, args: InArgs): OffLoopStatement {
  return { sql, args, offLoop: true };
}

export function isOffLoop(stmt: InStatement): stmt is OffLoopStatement {
  return (stmt as Partial<OffLoopStatement>).offLoop === true;
}

/**
 * Decodes the values of `columns` (a table's `getTableColumns` entries, in the order they were selected) starting
 * at `offset` of a result row, each through its column as drizzle's `select()` would (`null` stays `null`).
 */
export function decodeColumns<T>(row: ArrayLike<unknown>, columns: ReadonlyArray<readonly [string, Column]>, offset = 0): T {
  const out: Record<string, unknown> = {};
  for (let i = 0; i < columns.length; i++) {
    const [key, column] = columns[i]!;
    const value = row[i + offset];
    out[key] = value === null ? null : column.mapFromDriverValue(value);
  }
  return out as T;
}

/**
 * `db.select().from(table).where(eq(key, value)).get()` as fixed SQL, for rows read on many requests (the instance
 * row, settings documents): drizzle built the statement afresh on each call, a few hundred calls into its query
 * builder for a table of twenty columns (docs/benchmarks.md). The columns come from the table definition, so one added to
 * the table is read too. `key` must be the primary key or unique (it is read as `oneRow`).
 */
export function rowByKey<T extends SQLiteTable>(table: T, key: Column): (db: Db, value: InValue) => Promise<T["$inferSelect"] | undefined> {
  const columns = Object.entries(getTableColumns(table));
  const text = `SELECT ${columns.map(([, column]) => `"${column.name}"`).join(", ")} FROM "${getTableName(table)}" WHERE "${key.name}" = ?`;
  return async (db, value) => {
    const row = (await clientOf(db).execute(oneRow(text, [value]))).rows[0];
    return row ? decodeColumns<T["$inferSelect"]>(row, columns) : undefined;
  };
}
