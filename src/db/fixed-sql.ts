import type { Client, InArgs, InStatement } from "@libsql/client";
import type { Db } from "./types.ts";

/**
 * The libSQL client under a `Db`, for the few hot statements kept as fixed SQL (issue 16: drizzle builds a query
 * afresh on every call, which on a claim cost more than running it). drizzle's libSQL adapter sets `$client` on
 * every database it makes (the embedded driver, a libSQL server, the Workers web client); the `Db` type leaves it
 * out. Web-standard: nothing here imports a driver.
 */
export function clientOf(db: Db): Client {
  return (db as Db & { $client: Client }).$client;
}

/**
 * A read that returns at most one row, marked so: the embedded driver reads it with the `libsql` package's
 * `get()`, one native call instead of the iterator `all()` uses (the session lookup of every request, issue 16).
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
