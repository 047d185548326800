import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { lifecycleDates } from "./_columns.ts";

export interface SigningCertificateInfo {
  subject: string;
  team_id: string | null;
  serial: string;
  expires_at: number;
}
export interface SigningProfileInfo {
  name: string;
  uuid: string;
  app_id: string;
  team_id: string | null;
  kind: "app_store" | "ad_hoc" | "enterprise" | "development";
  expires_at: number | null;
  device_count: number | null;
}
export interface IosSigningInfo {
  certificate: SigningCertificateInfo;
  profiles: SigningProfileInfo[];
}
export interface AndroidSigningInfo {
  key_alias: string;
  certificate: { subject: string; serial: string; expires_at: number };
}

export interface StoreCredentialsInfo {
  app_store_connect?: { issuer_id: string; key_id: string };
  google_play?: { client_email: string; project_id: string };
}

export const projects = sqliteTable("projects", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  repoUrl: text("repo_url").notNull(),
  defaultBranch: text("default_branch").notNull(),
  /** Sealed JSON documents (SecretBox); answers carry only has_* flags. */
  sourceCredentialsSealed: text("source_credentials_sealed"),
  androidSigningSealed: text("android_signing_sealed"),
  iosSigningSealed: text("ios_signing_sealed"),
  /** Store keys (docs/publishing.md), sealed; only the daemon opens them, never a runner. */
  appStoreConnectSealed: text("app_store_connect_sealed"),
  googlePlaySealed: text("google_play_sealed"),
  /** What the store keys are, without their secrets: the `GET .../stores` answer. */
  storeCredentialsInfo: text("store_credentials_info", { mode: "json" }).$type<StoreCredentialsInfo>(),
  /**
   * What the sealed signing documents hold, described without their secrets (docs/signing.md): certificate
   * subjects, serials, profile names and expiry dates, read on upload. Signing health reads these, never the keys.
   */
  iosSigningInfo: text("ios_signing_info", { mode: "json" }).$type<IosSigningInfo>(),
  androidSigningInfo: text("android_signing_info", { mode: "json" }).$type<AndroidSigningInfo>(),
  /**
   * Branch globs whose builds get signing material and secret variables (CONTRACT §5); null means the default,
   * `["**"]` (every branch).
   */
  protectedBranches: text("protected_branches", { mode: "json" }).$type<string[]>(),
  /** Tag globs, the same for tag builds (a tag never matches a branch rule); null means `["**"]`. */
  protectedTags: text("protected_tags", { mode: "json" }).$type<string[]>(),
  /** Last build number handed out; incremented by the same statement that inserts the build. */
  lastBuildNumber: integer("last_build_number").notNull().default(0),
  createdBy: text("created_by"),
  ...lifecycleDates,
  /** Set on DELETE: the row stays so that finished builds still name their project (CONTRACT §5). */
  deletedAt: integer("deleted_at"),
});

export const pipelines = sqliteTable(
  "pipelines",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id").notNull().references(() => projects.id),
    name: text("name").notNull(),
    config: text("config", { mode: "json" }).notNull(),
    ...lifecycleDates,
    /** Set on DELETE, as for projects. */
    deletedAt: integer("deleted_at"),
  },
  (t) => [index("pipelines_project_id").on(t.projectId)],
);

/** Secret variables of a project (CONTRACT §5): each value sealed with the instance's SecretBox, never answered. */
export const projectSecrets = sqliteTable(
  "project_secrets",
  {
    projectId: text("project_id").notNull(),
    name: text("name").notNull(),
    valueSealed: text("value_sealed").notNull(),
    ...lifecycleDates,
  },
  (t) => [primaryKey({ columns: [t.projectId, t.name] })],
);

/**
 * Signing health notices already sent (docs/signing.md): one row per project and item (`ios_certificate:<serial>`,
 * `ios_profile:<uuid>`, `android_certificate:<serial>`), so an expiring item is announced once a day and an
 * expired one once. The conditional write of this row and the outbox rows share one batch.
 */
export const signingNotices = sqliteTable(
  "signing_notices",
  {
    projectId: text("project_id").notNull(),
    itemKey: text("item_key").notNull(),
    state: text("state", { enum: ["expiring", "expired"] }).notNull(),
    notifiedAt: integer("notified_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.itemKey] })],
);
