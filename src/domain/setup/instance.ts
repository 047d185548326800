import { rowByKey } from "../../db/fixed-sql.ts";
import { instance } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";

export type InstanceRow = typeof instance.$inferSelect;

type DbDeps = Pick<AppDeps, "db" | "clock">;

// Read on most requests of the UI and of setup, sign-in and settings (fixed SQL: see rowByKey).
const instanceById = rowByKey(instance, instance.id);

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
