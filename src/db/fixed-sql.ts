import type { Client } from "@libsql/client";
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
