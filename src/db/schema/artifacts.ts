import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { lifecycleDates } from "./_columns.ts";
import { ARTIFACT_KINDS, ARTIFACT_STATUSES, URL_TOKEN_KINDS } from "./constants.ts";

export const artifacts = sqliteTable(
  "artifacts",
  {
    id: text("id").primaryKey(),
    buildId: text("build_id").notNull(),
    runnerId: text("runner_id").notNull(),
    filename: text("filename").notNull(),
    sizeBytes: integer("size_bytes").notNull(),
    contentType: text("content_type").notNull(),
    sha256: text("sha256"),
    status: text("status", { enum: ARTIFACT_STATUSES }).notNull(),
    /** `junit`: a test report the daemon parses on complete (docs/test-reports.md); `file` otherwise. */
    kind: text("kind", { enum: ARTIFACT_KINDS }).notNull().default("file"),
    /** Where the bytes live, frozen at creation so a provider switch keeps old artifacts readable. */
    storageLocation: text("storage_location", { mode: "json" }).notNull(),
    installMetadata: text("install_metadata", { mode: "json" }),
    /** What the daemon read from the .ipa/.apk on complete (domain/app-metadata.ts AppMetadata), or null. */
    appMetadata: text("app_metadata", { mode: "json" }),
    uploadExpiresAt: integer("upload_expires_at"),
    completedAt: integer("completed_at"),
    /** When a retention pass expired it (docs/decisions.md, Retention); its bytes go after this is set. */
    expiredAt: integer("expired_at"),
    /** When an expired artifact's stored bytes were removed: null on an expired row means the removal is still owed. */
    storageRemovedAt: integer("storage_removed_at"),
    ...lifecycleDates,
  },
  (t) => [index("artifacts_build_id").on(t.buildId), index("artifacts_status_upload_expires").on(t.status, t.uploadExpiresAt)],
);

/** Tokens carried in URL paths (download, upload, install); only SHA-256 hashes are stored. */
export const urlTokens = sqliteTable(
  "url_tokens",
  {
    tokenHash: text("token_hash").primaryKey(),
    kind: text("kind", { enum: URL_TOKEN_KINDS }).notNull(),
    artifactId: text("artifact_id").notNull(),
    expiresAt: integer("expires_at").notNull(),
    usedAt: integer("used_at"),
    /** Install sessions: the gateway ticket to carry through installer URLs (spec install-link rule 4). */
    details: text("details", { mode: "json" }),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [index("url_tokens_artifact_id").on(t.artifactId), index("url_tokens_expires_at").on(t.expiresAt)],
);

/**
 * App icons read from artifacts, as standard PNG (base64, so the column reads the same on every libSQL host).
 * A table of its own so that loading an artifact row never drags its icon along.
 */
export const artifactIcons = sqliteTable("artifact_icons", {
  artifactId: text("artifact_id").primaryKey(),
  pngBase64: text("png_base64").notNull(),
  createdAt: integer("created_at").notNull(),
});
