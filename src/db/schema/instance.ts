import { integer, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { lifecycleDates } from "./_columns.ts";
import { REMOTE_AUTH_MODES, RUNTIME_MODES, SETUP_STATES } from "./constants.ts";

/** The single instance row (id = 1): setup state and preferences. */
export const instance = sqliteTable("instance", {
  id: integer("id").primaryKey(),
  instanceId: text("instance_id").notNull(),
  state: text("state", { enum: SETUP_STATES }).notNull(),
  runtimeMode: text("runtime_mode", { enum: RUNTIME_MODES }).notNull(),
  remoteAuthMode: text("remote_auth_mode", { enum: REMOTE_AUTH_MODES }).notNull(),
  keyStorageMode: text("key_storage_mode").notNull(),
  ownerUserId: text("owner_user_id"),
  preferencesUpdatedAt: integer("preferences_updated_at").notNull(),
  setupCompletedAt: integer("setup_completed_at"),
  ...lifecycleDates,
});

/** The one bootstrap token (id = 1); `setup-token` replaces it. Only the SHA-256 hash is kept. */
export const bootstrapTokens = sqliteTable("bootstrap_tokens", {
  id: integer("id").primaryKey(),
  tokenHash: text("token_hash").notNull(),
  expiresAt: integer("expires_at").notNull(),
  consumedAt: integer("consumed_at"),
  failedAttempts: integer("failed_attempts").notNull(),
  createdAt: integer("created_at").notNull(),
});

/** Instance-wide settings documents (network, trusted proxy, OIDC, artifact storage), one JSON row per key. */
export const instanceSettings = sqliteTable("instance_settings", {
  key: text("key").primaryKey(),
  value: text("value", { mode: "json" }).notNull(),
  updatedAt: integer("updated_at").notNull(),
});
