import { index, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { lifecycleDates } from "./_columns.ts";

export const PUBLISH_TARGETS = ["testflight", "google_play"] as const;
export const PUBLISH_STATES = ["pending", "uploading", "processing", "done", "failed"] as const;

/**
 * One upload of one build to one store (docs/publishing.md). Rows are made by a trigger in the same statement
 * that makes a protected build succeed (publish_triggers migration) or by a manual publish, and worked through
 * like outbox deliveries: leased, retried with backoff, resumed after a crash from `progress`.
 */
export const publishes = sqliteTable(
  "publishes",
  {
    id: text("id").primaryKey(),
    buildId: text("build_id").notNull(),
    projectId: text("project_id").notNull(),
    to: text("to", { enum: PUBLISH_TARGETS }).notNull(),
    /** The pipeline's publish entry, frozen with the build. */
    config: text("config", { mode: "json" }).notNull(),
    state: text("state", { enum: PUBLISH_STATES }).notNull(),
    detail: text("detail"),
    attempts: integer("attempts").notNull().default(0),
    nextAttemptAtMs: integer("next_attempt_at_ms").notNull(),
    leaseOwner: text("lease_owner"),
    leaseUntilMs: integer("lease_until_ms"),
    /** Store-side ids reached so far (upload id, build id), so a resumed attempt continues instead of re-uploading. */
    progress: text("progress", { mode: "json" }),
    /** When processing began to be polled (epoch ms): the 60-minute limit counts from here. */
    processingSinceMs: integer("processing_since_ms"),
    ...lifecycleDates,
  },
  (t) => [uniqueIndex("publishes_build_to").on(t.buildId, t.to), index("publishes_due").on(t.state, t.nextAttemptAtMs)],
);
