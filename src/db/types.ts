import type { LibSQLDatabase } from "drizzle-orm/libsql";
import type * as schema from "./schema/index.ts";

/**
 * The database handle every domain function takes. Type-only here, so the core never imports a driver:
 * the Node shell opens an embedded file or a libSQL server, the Workers entry the web client.
 *
 * Rule for all code: no interactive `db.transaction()`. Multi-statement writes go through `db.batch()`
 * (atomic, and synchronous on the embedded driver) or a single conditional statement, so concurrent requests
 * and other daemons on the same file never wait on a transaction held across an `await`.
 */
export type Db = LibSQLDatabase<typeof schema>;
