import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

/**
 * Retention passes (docs/decisions.md, Retention). A row is inserted when a real pass is claimed and finished when
 * it is done; the counters grow in the same batches as the deletions, so a pass resumed after a crash reports (and
 * audits) everything it deleted. The lease lets one daemon among several on one database run it.
 */
export const retentionPasses = sqliteTable(
  "retention_passes",
  {
    id: text("id").primaryKey(),
    /** `scheduled` (the daily pass) or `manual` (POST /v1/settings/retention/run). */
    trigger: text("trigger").notNull(),
    actorUserId: text("actor_user_id"),
    actorEmail: text("actor_email"),
    startedAt: integer("started_at").notNull(),
    finishedAt: integer("finished_at"),
    leaseOwner: text("lease_owner").notNull(),
    leaseExpiresAt: integer("lease_expires_at").notNull(),
    artifactsCount: integer("artifacts_count").notNull().default(0),
    artifactsBytes: integer("artifacts_bytes").notNull().default(0),
    logsCount: integer("logs_count").notNull().default(0),
    logsBytes: integer("logs_bytes").notNull().default(0),
  },
  (t) => [index("retention_passes_started_at").on(t.startedAt)],
);

/** A project's override of the instance retention policy (JSON, the API's shape); absent keys inherit. */
export const projectRetentionPolicies = sqliteTable("project_retention_policies", {
  projectId: text("project_id").primaryKey(),
  policy: text("policy", { mode: "json" }).notNull(),
  updatedAt: integer("updated_at").notNull(),
});
