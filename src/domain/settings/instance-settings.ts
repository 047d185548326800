import { rowByKey } from "../../db/fixed-sql.ts";
import { instanceSettings } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";

// The instance's settings documents, one JSON value per key (network, trusted proxy, OIDC, artifact storage,
// SMTP, retention, local login): the store every settings area reads and writes.

type DbDeps = Pick<AppDeps, "db" | "clock">;

// Read on most requests of the UI and of setup, sign-in and settings (fixed SQL: see rowByKey).
const settingByKey = rowByKey(instanceSettings, instanceSettings.key);

/** Reads one settings document (network, trusted proxy, OIDC, artifact storage). */
export async function readSetting<T>(deps: Pick<AppDeps, "db">, key: string): Promise<{ value: T; updatedAt: number } | null> {
  const row = await settingByKey(deps.db, key);
  return row ? { value: row.value as T, updatedAt: row.updatedAt } : null;
}

/** The upsert statement for one settings document, so callers can put it in a batch with related writes. */
export function writeSettingStatement(deps: DbDeps, key: string, value: unknown) {
  const now = deps.clock.now();
  return deps.db
    .insert(instanceSettings)
    .values({ key, value, updatedAt: now })
    .onConflictDoUpdate({ target: instanceSettings.key, set: { value, updatedAt: now } });
}

export async function writeSetting(deps: DbDeps, key: string, value: unknown): Promise<number> {
  await writeSettingStatement(deps, key, value);
  return deps.clock.now();
}
