import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { lifecycleDates } from "./_columns.ts";
import { PIPELINE_SOURCES } from "./constants.ts";

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
   * Branch globs whose builds get signing material and secret variables (docs/api.md §5); null means the default,
   * `["**"]` (every branch).
   */
  protectedBranches: text("protected_branches", { mode: "json" }).$type<string[]>(),
  /**
   * The pipeline file read at each build's commit (docs/pipelines.md); null keeps pipelines stored in Hangar only.
   * Projects made before the file existed keep null; new ones default to `.hangar.yml` (set by createProject).
   */
  configPath: text("config_path"),
  /** When the pipeline file's schedules were last read from the default branch (re-read hourly and at each push to it). */
  schedulesReadAt: integer("schedules_read_at"),
  /** Tag globs, the same for tag builds (a tag never matches a branch rule); null means `["**"]`. */
  protectedTags: text("protected_tags", { mode: "json" }).$type<string[]>(),
  /** Last build number handed out; incremented by the same statement that inserts the build. */
  lastBuildNumber: integer("last_build_number").notNull().default(0),
  createdBy: text("created_by"),
  ...lifecycleDates,
  /** Set on DELETE: the row stays so that finished builds still name their project (docs/api.md §5). */
  deletedAt: integer("deleted_at"),
});

export const pipelines = sqliteTable(
  "pipelines",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id),
    name: text("name").notNull(),
    config: text("config", { mode: "json" }).notNull(),
    /** `stored` (made through the API or the UI) or `repository` (made from the project's pipeline file). */
    source: text("source", { enum: PIPELINE_SOURCES }).notNull().default("stored"),
    /** The commit whose pipeline file last named this pipeline (what the UI shows as its source), else null. */
    fileCommit: text("file_commit"),
    /** That file's definition of the pipeline, parsed (rendered read-only in the UI), else null. */
    fileConfig: text("file_config", { mode: "json" }),
    ...lifecycleDates,
    /** Set on DELETE, as for projects. */
    deletedAt: integer("deleted_at"),
  },
  (t) => [index("pipelines_project_id").on(t.projectId)],
);

/**
 * Schedules of a project (docs/pipelines.md): the ones of the pipeline file on the default branch (re-read at each
 * push to it and hourly) and those of stored configs, replaced whole at each read. `next_due_at` is the next run.
 */
export const pipelineSchedules = sqliteTable(
  "pipeline_schedules",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id").notNull(),
    pipelineId: text("pipeline_id").notNull(),
    /** `file` (from the pipeline file on the default branch) or `stored` (a stored config's `schedules`). */
    origin: text("origin").notNull(),
    cron: text("cron").notNull(),
    timezone: text("timezone").notNull(),
    branch: text("branch"),
    ...lifecycleDates,
  },
  (t) => [index("pipeline_schedules_project").on(t.projectId)],
);

/**
 * One row per schedule run that was made: the primary key makes every daemon sharing the database make a run
 * once (the INSERT that loses the race changes nothing and queues nothing).
 */
export const scheduleRuns = sqliteTable(
  "schedule_runs",
  {
    projectId: text("project_id").notNull(),
    pipelineId: text("pipeline_id").notNull(),
    /** cron, time zone and branch of the schedule: the same schedule read again keeps its runs. */
    scheduleKey: text("schedule_key").notNull(),
    dueAt: integer("due_at").notNull(),
    buildId: text("build_id"),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.pipelineId, t.scheduleKey, t.dueAt] })],
);

/** Public badge tokens (docs/pipelines.md): only the SHA-256 of the token is kept; DELETE removes the row. */
export const pipelineBadges = sqliteTable("pipeline_badges", {
  pipelineId: text("pipeline_id").primaryKey(),
  projectId: text("project_id").notNull(),
  tokenHash: text("token_hash").notNull().unique(),
  createdAt: integer("created_at").notNull(),
});

/** Secret variables of a project (docs/api.md §5): each value sealed with the instance's SecretBox, never answered. */
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
