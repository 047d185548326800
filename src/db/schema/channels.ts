import { index, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { lifecycleDates } from "./_columns.ts";

/** Tester channels (docs/spec.md §18): the succeeded builds of one pipeline on matching branches, for testers. */
export const channels = sqliteTable(
  "channels",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id").notNull(),
    pipelineId: text("pipeline_id").notNull(),
    name: text("name").notNull(),
    /** Branch globs (ref-glob syntax); null matches every branch. */
    branches: text("branches", { mode: "json" }).$type<string[] | null>(),
    /** `ios` and/or `android`; null means both. */
    platforms: text("platforms", { mode: "json" }).$type<string[] | null>(),
    createdBy: text("created_by"),
    ...lifecycleDates,
  },
  (t) => [index("channels_project_id").on(t.projectId), uniqueIndex("channels_project_name_unique").on(t.projectId, t.name)],
);

/** People without an account who get a channel's builds through a personal link; only the link's hash is kept. */
export const testers = sqliteTable(
  "testers",
  {
    id: text("id").primaryKey(),
    channelId: text("channel_id").notNull(),
    email: text("email").notNull(),
    name: text("name"),
    tokenHash: text("token_hash").notNull(),
    /** Set by the opt-out link of a release mail: no more release mails. */
    mailOptOutAt: integer("mail_opt_out_at"),
    ...lifecycleDates,
  },
  (t) => [uniqueIndex("testers_token_hash_unique").on(t.tokenHash), uniqueIndex("testers_channel_email_unique").on(t.channelId, t.email)],
);

/**
 * One row per install session whose package was downloaded: the session and its download count once together.
 * `tester_id` is set when the session was made from a tester's page.
 */
export const installs = sqliteTable(
  "installs",
  {
    sessionTokenHash: text("session_token_hash").primaryKey(),
    artifactId: text("artifact_id").notNull(),
    testerId: text("tester_id"),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [index("installs_artifact_id").on(t.artifactId), index("installs_tester_id").on(t.testerId)],
);
