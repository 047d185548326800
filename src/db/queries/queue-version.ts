import { clientOf } from "../fixed-sql.ts";
import type { Db } from "../types.ts";

export const QUEUE_VERSION_SQL = "SELECT version FROM queue_version WHERE id = 1";

/** The queue version (`queue_version`, bumped by triggers as builds become queued); 0 before the first. */
export async function queueVersion(db: Db): Promise<number> {
  const row = (await clientOf(db).execute(QUEUE_VERSION_SQL)).rows[0];
  return row ? Number(row.version) : 0;
}
