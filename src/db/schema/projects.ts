import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { lifecycleDates } from "./_columns.ts";

export const projects = sqliteTable("projects", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  repoUrl: text("repo_url").notNull(),
  defaultBranch: text("default_branch").notNull(),
  /** Sealed JSON documents (SecretBox); answers carry only has_* flags. */
  sourceCredentialsSealed: text("source_credentials_sealed"),
  androidSigningSealed: text("android_signing_sealed"),
  iosSigningSealed: text("ios_signing_sealed"),
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
