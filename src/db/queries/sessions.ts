import { getTableColumns } from "drizzle-orm";
import { clientOf, decodeColumns, oneRow } from "../fixed-sql.ts";
import { users } from "../schema/index.ts";
import type { Db } from "../types.ts";

type UserRow = typeof users.$inferSelect;

/**
 * The session lookup every authenticated request runs, as fixed SQL read in one call (docs/benchmarks.md: drizzle's
 * prepared query still mapped its result through the select's field tree, and the driver read the row through an
 * iterator). The user's columns come from the table definition, so a column added to `users` is read here too,
 * and each value goes through its column's own decoding, as drizzle would.
 */
const userColumns = Object.entries(getTableColumns(users));
export const SESSION_LOOKUP_SQL = `SELECT s.id, s.expires_at, ${userColumns.map(([, column]) => `u."${column.name}"`).join(", ")}
  FROM user_sessions s JOIN users u ON u.id = s.user_id WHERE s.token_hash = ?`;

export async function lookupSessionByTokenHash(
  db: Db,
  tokenHash: string,
): Promise<{ sessionId: string; expiresAt: number; user: UserRow } | undefined> {
  // token_hash is unique (user_sessions_token_hash_unique): at most one row.
  const row = (await clientOf(db).execute(oneRow(SESSION_LOOKUP_SQL, [tokenHash]))).rows[0];
  if (!row) return undefined;
  return { sessionId: row[0] as string, expiresAt: Number(row[1]), user: decodeColumns<UserRow>(row, userColumns, 2) };
}
