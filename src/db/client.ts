import { createClient, type Client } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import * as schema from "./schema/index.ts";
import type { Db } from "./types.ts";

export interface OpenedDb {
  db: Db;
  client: Client;
  close(): void;
}

/** Opens the embedded file (WAL, busy timeout) or a libSQL server. Node only. */
export async function openDb(url: string, authToken?: string): Promise<OpenedDb> {
  const isFile = url.startsWith("file:");
  if (isFile) {
    const path = url.slice("file:".length).replace(/^\/\/(?=\/)/, "");
    if (path && path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
  }
  // timeout: the busy timeout in ms, so writers from another daemon process wait instead of failing.
  const client = createClient({ url, authToken, timeout: 10_000 });
  if (isFile) {
    // WAL lets readers run beside the single writer; the mode is stored in the file and kept across opens.
    await client.execute("PRAGMA journal_mode = WAL");
  }
  const db = drizzle(client, { schema });
  return { db, client, close: () => client.close() };
}
