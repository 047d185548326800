/**
 * The Worker's libSQL client: a fresh `@libsql/client/web` client for every statement, batch or transaction.
 *
 * One client shared by the isolate broke under load in workerd (issue 18): the client queues calls past its
 * concurrency limit (20) and starts a queued call when an earlier one settles, so the HTTP request to the
 * database is made inside ANOTHER request's I/O context. workerd refuses or cancels such I/O; in a burst of 30
 * the queued requests were lost, and every call whose request went away mid-query kept its slot forever, so
 * after ~20 of them every later request waited for good. A web client holds no connection (each call is one
 * HTTP request to the server) and costs a few objects to make, so making one per call shares nothing between
 * requests: no limit, no queue, no state that one request's cancellation can poison for the others.
 */
import { createClient, type Client, type Config, type InArgs, type InStatement, type TransactionMode } from "@libsql/client/web";

export function createPerCallClient(config: Pick<Config, "url" | "authToken">): Client {
  const fresh = () => createClient({ url: config.url, authToken: config.authToken });
  const client: Client = {
    execute: ((stmtOrSql: InStatement | string, args?: InArgs) =>
      typeof stmtOrSql === "string" ? fresh().execute(stmtOrSql, args) : fresh().execute(stmtOrSql)) as Client["execute"],
    batch: (stmts: Array<InStatement | [string, InArgs?]>, mode?: TransactionMode) => fresh().batch(stmts, mode),
    migrate: (stmts: Array<InStatement>) => fresh().migrate(stmts),
    // The transaction's stream belongs to its own client; it lives as long as the transaction does.
    transaction: ((mode?: TransactionMode) => fresh().transaction(mode)) as Client["transaction"],
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
