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
    /**
     * The opt-out link's token (docs/decisions.md "Tester mail"): its hash finds the tester, the sealed copy goes
     * into each release mail. Null for testers added before mail existed: made on their first release mail.
     */
    optOutTokenHash: text("opt_out_token_hash"),
    optOutTokenSealed: text("opt_out_token_sealed"),
    /** The base the tester's link was made on, for the opt-out links of release mails; null before mail existed. */
    linkBase: text("link_base"),
    ...lifecycleDates,
  },
  (t) => [
    uniqueIndex("testers_token_hash_unique").on(t.tokenHash),
    uniqueIndex("testers_channel_email_unique").on(t.channelId, t.email),
    uniqueIndex("testers_opt_out_token_hash_unique").on(t.optOutTokenHash),
  ],
);

/**
 * iOS devices registered through the Profile Service enrolment (docs/api.md §18): one row per project and UDID, the
 * latest tester who enrolled it. The device's answer is stored as read, never trusted for more than a name.
 */
export const devices = sqliteTable(
  "devices",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id").notNull(),
    udid: text("udid").notNull(),
    product: text("product"),
    version: text("version"),
    serial: text("serial"),
    testerId: text("tester_id"),
    ...lifecycleDates,
  },
  (t) => [uniqueIndex("devices_project_udid_unique").on(t.projectId, t.udid), index("devices_tester_id").on(t.testerId)],
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

/**
 * Version counters of what tester pages show (docs/decisions.md "Tester page cache"): `pipeline:{id}` counts the
 * changes to that pipeline's releases (its succeeded builds and their files), `devices:{project_id}` the changes to
 * a project's registered devices. Bumped by triggers in the same statement as the change, whichever code path or
 * daemon makes it; a daemon reads them on every tester page GET to tell whether its rendered copy is current.
 */
export const testerPageVersions = sqliteTable("tester_page_versions", {
  scope: text("scope").primaryKey(),
  version: integer("version").notNull(),
});
