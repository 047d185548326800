import type { Client } from "@libsql/client";
import * as driverCore from "drizzle-orm/libsql/driver-core";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { BusyRetryClient, DEFAULT_BUSY_RETRY, type BusyRetryPolicy } from "./busy.ts";
import { EmbeddedClient, type SynchronousLevel } from "./embedded.ts";
import * as schema from "./schema/index.ts";
import type { Db } from "./types.ts";

export interface OpenedDb {
  db: Db;
  client: Client;
  close(): void;
}

export interface OpenDbOptions {
  /**
   * `synchronous` for the embedded file: NORMAL by default (with WAL, a commit is durable against a process crash
   * but the last commits may be lost on power loss; docs/decisions.md), FULL to fsync every commit.
   */
  synchronous?: SynchronousLevel;
  /** The embedded file's busy timeout (ms): how long a writer waits for another process's write lock. */
  busyTimeoutMs?: number;
  /** Retries of a busy/locked answer after that (src/db/busy.ts). */
  busyRetry?: BusyRetryPolicy;
  /**
   * The embedded file's WAL checkpointed from a timer this often (ms), not inside a commit (src/db/embedded.ts).
   * The daemon sets it; one-shot commands leave checkpoints to SQLite.
   */
  checkpointEveryMs?: number;
  /**
   * `libsql-client` opens a `file:` URL through plain `@libsql/client` instead of the embedded driver (WAL, busy
   * timeout, `synchronous`; no checkpoint timer): only to measure what the embedded driver gains (docs/decisions.md "The embedded driver").
   */
  fileDriver?: "embedded" | "libsql-client";
}

/**
 * drizzle's libSQL adapter without its `createClient` shortcut (its `drizzle()` imports all of `@libsql/client`
 * to offer it, which the embedded file does not need). `construct` is exported by the module, not declared.
 */
const construct = (driverCore as unknown as { construct: (client: Client, config: { schema: typeof schema }) => Db }).construct;

/** The busy timeout in ms, so writers from another daemon process wait instead of failing. */
const BUSY_TIMEOUT_MS = 10_000;

/**
 * Opens the embedded file (our statement-caching driver over the `libsql` package: WAL, busy timeout,
 * `synchronous` on every connection) or a libSQL server (`libsql://`, `http(s)://`, `ws(s)://`) through
 * `@libsql/client`, loaded only then. Either way behind `BusyRetryClient`: busy/locked answers are retried with
 * backoff and write batches take the write lock first (src/db/busy.ts). A server URL must be the primary's, never
 * a read replica's (docs/api.md §8: a request reads what it has just written). Node only.
 */
export async function openDb(url: string, authToken?: string, options: OpenDbOptions = {}): Promise<OpenedDb> {
  let client: Client;
  if (url.startsWith("file:") && options.fileDriver === "libsql-client") {
    const { createClient } = await import("@libsql/client");
    client = createClient({ url, timeout: options.busyTimeoutMs ?? BUSY_TIMEOUT_MS });
    // `synchronous` holds per connection: this sets it on the connection every call but an interactive
    // transaction borrows (the client opens another for those, at SQLite's FULL).
    await client.execute("PRAGMA journal_mode = WAL");
    await client.execute(`PRAGMA synchronous = ${options.synchronous ?? "normal"}`);
  } else if (url.startsWith("file:")) {
    let path = url.slice("file:".length).replace(/^\/\/(?=\/)/, "");
    // file:///abs and file://localhost/abs name the same absolute path; the query string is not part of it.
    path = path.replace(/^\/\/localhost(?=\/)/, "").replace(/\?.*$/, "");
    if (path && path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
    client = new EmbeddedClient(path || ":memory:", {
      timeoutMs: options.busyTimeoutMs ?? BUSY_TIMEOUT_MS,
      synchronous: options.synchronous ?? "normal",
      checkpointEveryMs: options.checkpointEveryMs,
    });
  } else {
    const { createClient } = await import("@libsql/client");
    client = createClient({ url, authToken });
  }
  client = new BusyRetryClient(client, options.busyRetry ?? DEFAULT_BUSY_RETRY);
  const db: Db = construct(client, { schema });
  return { db, client, close: () => client.close() };
}
