import { getTableColumns } from "drizzle-orm";
import { clientOf, decodeColumns, oneRow } from "../fixed-sql.ts";
import { channels } from "../schema/index.ts";
import type { Db } from "../types.ts";

// The one statement of every tester page GET (docs/decisions.md "Tester page cache").

const CHANNEL_COLUMNS = Object.entries(getTableColumns(channels));

/**
 * The tester behind a link's token hash, its channel, the two version counters of what its page shows (the channel's
 * pipeline's releases, the project's registered devices; bumped by triggers, drizzle/ "tester_page_version_triggers")
 * and the External Access network document (the QR code's address): one indexed read, as fixed SQL (drizzle built a
 * statement afresh on every call, docs/benchmarks.md). ?1 the token's SHA-256, ?2 the network settings key.
 */
const TESTER_PAGE_LINK_SQL = `SELECT t.id, t.name, ${CHANNEL_COLUMNS.map(([, column]) => `c."${column.name}"`).join(", ")},
  (SELECT version FROM tester_page_versions WHERE scope = 'pipeline:' || c.pipeline_id),
  (SELECT version FROM tester_page_versions WHERE scope = 'devices:' || c.project_id),
  (SELECT value FROM instance_settings WHERE key = ?2)
FROM testers t JOIN channels c ON c.id = t.channel_id WHERE t.token_hash = ?1`;

export interface TesterPageLinkRow {
  tester: { id: string; name: string | null };
  channel: typeof channels.$inferSelect;
  /** Null until the first change after the counters were added. */
  releasesVersion: number | null;
  devicesVersion: number | null;
  /** The stored network settings document (JSON text), or null when never saved. */
  networkJson: string | null;
}

export async function readTesterPageLink(db: Db, tokenHash: string, networkSettingKey: string): Promise<TesterPageLinkRow | null> {
  const row = (await clientOf(db).execute(oneRow(TESTER_PAGE_LINK_SQL, [tokenHash, networkSettingKey]))).rows[0];
  if (!row) return null;
  const after = 2 + CHANNEL_COLUMNS.length;
  const count = (value: unknown) => (value === null || value === undefined ? null : Number(value));
  return {
    tester: { id: String(row[0]), name: row[1] === null ? null : String(row[1]) },
    channel: decodeColumns<typeof channels.$inferSelect>(row, CHANNEL_COLUMNS, 2),
    releasesVersion: count(row[after]),
    devicesVersion: count(row[after + 1]),
    networkJson: row[after + 2] === null || row[after + 2] === undefined ? null : String(row[after + 2]),
  };
}
