import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { lifecycleDates } from "./_columns.ts";
import { BUILD_TRUSTS, CACHE_ENTRY_STATUSES } from "./constants.ts";

/**
 * Shared cache entries (docs/api.md §16, docs/decisions.md "Shared caches"): archives runners store in the instance's
 * S3/R2 bucket through presigned URLs. An entry belongs to one project and one trust (the trust of the build that
 * wrote it); a build reads and writes only its own project's entries of its own trust.
 */
export const cacheEntries = sqliteTable(
  "cache_entries",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id").notNull(),
    /** The trust of the build that wrote it: only builds of the same trust find it. */
    trust: text("trust", { enum: BUILD_TRUSTS }).notNull(),
    key: text("key").notNull(),
    /** `pending` until a HEAD found the object with the declared size, then `ready`; `deleting` while its object goes. */
    status: text("status", { enum: CACHE_ENTRY_STATUSES }).notNull(),
    sizeBytes: integer("size_bytes").notNull(),
    sha256: text("sha256").notNull(),
    /** Where the archive lives (a StorageLocation, frozen at creation like an artifact's). */
    storageLocation: text("storage_location", { mode: "json" }).notNull(),
    buildId: text("build_id").notNull(),
    uploadExpiresAt: integer("upload_expires_at").notNull(),
    /** When it was saved or last handed out: the per-project cap drops the least recently used first. */
    lastUsedAt: integer("last_used_at").notNull(),
    ...lifecycleDates,
  },
  (t) => [
    index("cache_entries_scope_key").on(t.projectId, t.trust, t.status, t.key),
    index("cache_entries_status_expiry").on(t.status, t.uploadExpiresAt),
  ],
);
