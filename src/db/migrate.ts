import { sql } from "drizzle-orm";
import { migrate } from "drizzle-orm/libsql/migrator";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Db } from "./types.ts";

/** drizzle/ at the project root, found upward from this module: src/db/ when run from source, dist/ when bundled. */
function findMigrationsFolder(): string {
  for (const relative of ["../../drizzle", "../drizzle"]) {
    const candidate = fileURLToPath(new URL(relative, import.meta.url));
    if (existsSync(`${candidate}/meta/_journal.json`)) return candidate;
  }
  throw new Error("the drizzle/ migrations folder is missing");
}

export const MIGRATIONS_FOLDER = findMigrationsFolder();

/**
 * True when drizzle's migrator would apply nothing: it applies every journal entry whose `when` is later than
 * the `created_at` of the newest row in `__drizzle_migrations`, so a newest row at or past the journal's last
 * `when` means none. Reading one small JSON file and one row instead of every migration file (read and
 * SHA-256-hashed by the migrator on each call) is most of a start's migration check (docs/benchmarks.md). Anything
 * unexpected (no table yet, an unreadable journal) answers false and the migrator runs as before.
 */
async function alreadyMigrated(db: Db, folder: string): Promise<boolean> {
  try {
    const journal = JSON.parse(readFileSync(`${folder}/meta/_journal.json`, "utf8")) as { entries: Array<{ when: number }> };
    const latest = Math.max(...journal.entries.map((e) => e.when));
    if (!Number.isFinite(latest)) return false;
    // drizzle's own question, on drizzle's own table (created_at is the applied migration's `when`).
    const rows = await db.values<[unknown]>(sql`SELECT created_at FROM __drizzle_migrations ORDER BY created_at DESC LIMIT 1`);
    const newest = rows[0]?.[0];
    return newest !== undefined && newest !== null && Number(newest) >= latest;
  } catch {
    return false;
  }
}

/**
 * Applies the committed drizzle/ migrations (`folder` only differs in tests). Two daemons starting together on
 * one database may race on the same migration; the loser's batch fails as a whole (nothing half-applied), so it
 * simply tries again.
 */
export async function migrateDb(db: Db, folder = MIGRATIONS_FOLDER): Promise<void> {
  if (await alreadyMigrated(db, folder)) return;
  for (let attempt = 1; ; attempt++) {
    try {
      await migrate(db, { migrationsFolder: folder });
      return;
    } catch (err) {
      if (attempt >= 5) throw err;
      await new Promise((r) => setTimeout(r, 100 * attempt));
    }
  }
}
