import { migrate } from "drizzle-orm/libsql/migrator";
import { existsSync } from "node:fs";
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
 * Applies the committed drizzle/ migrations. Two daemons starting together on one database may race on the
 * same migration; the loser's batch fails as a whole (nothing half-applied), so it simply tries again.
 */
export async function migrateDb(db: Db): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await migrate(db, { migrationsFolder: MIGRATIONS_FOLDER });
      return;
    } catch (err) {
      if (attempt >= 5) throw err;
      await new Promise((r) => setTimeout(r, 100 * attempt));
    }
  }
}
