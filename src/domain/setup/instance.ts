import { rowByKey } from "../../db/fixed-sql.ts";
import { instance, instanceSettings } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";

export type InstanceRow = typeof instance.$inferSelect;

type DbDeps = Pick<AppDeps, "db" | "clock">;

// Read on most requests of the UI and of setup, sign-in and settings (fixed SQL: see rowByKey).
const instanceById = rowByKey(instance, instance.id);
const settingByKey = rowByKey(instanceSettings, instanceSettings.key);

/** The instance row, created on first use (state `uninitialized`, local mode). */
export async function loadInstance(deps: DbDeps): Promise<InstanceRow> {
  const existing = await instanceById(deps.db, 1);
  if (existing) return existing;
  const now = deps.clock.now();
  await deps.db
    .insert(instance)
    .values({
      id: 1,
      instanceId: crypto.randomUUID(),
      state: "uninitialized",
      runtimeMode: "local",
      remoteAuthMode: "oidc",
      keyStorageMode: "file",
      preferencesUpdatedAt: now,
      createdAt: now,
      updatedAt: now,
    })
    .onConflictDoNothing();
  const created = await instanceById(deps.db, 1);
  if (!created) throw new Error("instance row missing after insert");
  return created;
}

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
