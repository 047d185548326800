import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { bytes, lifecycleDates } from "./_columns.ts";
import { BUILD_STATUSES, BUILD_TRUSTS, TRIGGER_TYPES } from "./constants.ts";

export const builds = sqliteTable(
  "builds",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id").notNull(),
    pipelineId: text("pipeline_id").notNull(),
    buildNumber: integer("build_number").notNull(),
    status: text("status", { enum: BUILD_STATUSES }).notNull(),
    /** Platform copied from the config snapshot so the claim can match it with an index. */
    platform: text("platform").notNull(),
    triggerType: text("trigger_type", { enum: TRIGGER_TYPES }).notNull(),
    triggerActor: text("trigger_actor"),
    triggerEvent: text("trigger_event"),
    triggerRef: text("trigger_ref"),
    /** The build this one reruns (POST /v1/builds/{id}/rerun), else null. */
    rerunOf: text("rerun_of"),
    commitSha: text("commit_sha").notNull(),
    branch: text("branch").notNull(),
    configSnapshot: text("config_snapshot", { mode: "json" }).notNull(),
    timeoutS: integer("timeout_s").notNull(),
    runnerId: text("runner_id"),
    stepResults: text("step_results", { mode: "json" }),
    exitCode: integer("exit_code"),
    failureReason: text("failure_reason"),
    attemptCount: integer("attempt_count").notNull().default(0),
    /** Automatic requeues after a lost runner before this build along its `rerun_of` chain (pipeline `retry.runner_lost`). */
    runnerLostRetries: integer("runner_lost_retries").notNull().default(0),
    leaseExpiresAt: integer("lease_expires_at"),
    cancelRequested: integer("cancel_requested", { mode: "boolean" }).notNull().default(false),
    /** A pull request from a fork (docs/api.md §11): no signing material and no secret variables are released. */
    fromFork: integer("from_fork", { mode: "boolean" }).notNull().default(false),
    /** Decided at queue time: which runners may take the build and whether it may receive credentials. */
    trust: text("trust", { enum: BUILD_TRUSTS }).notNull().default("protected"),
    /** SHA-256 of the job token handed out with the latest claim; the token itself is never stored. */
    jobTokenHash: text("job_token_hash"),
    logBytes: integer("log_bytes").notNull().default(0),
    /** Counts over the build's parsed test cases, or null while it has no test report (recomputed after each report). */
    testsSummary: text("tests_summary", { mode: "json" }),
    /** Kept by every retention pass (POST /v1/builds/{id}/pin): its artifacts and log are never deleted. */
    pinned: integer("pinned", { mode: "boolean" }).notNull().default(false),
    /** When a retention pass deleted the log: it then answers 410 log_expired; step results stay. */
    logExpiredAt: integer("log_expired_at"),
    /** Release notes the runner read from the pipeline's `release_notes` file (at most 64 KiB), else null. */
    releaseNotes: text("release_notes"),
    /** The commits the runner reported with the final status, newest first: `[{sha, subject, author}]`, at most 50. */
    commits: text("commits", { mode: "json" }).$type<Array<{ sha: string; subject: string; author: string }>>(),
    /** The runner's per-entry cache report from the final status (docs/api.md §16), at most 50 entries; null when none. */
    caches: text("caches", { mode: "json" }),
    queuedAt: integer("queued_at").notNull(),
    startedAt: integer("started_at"),
    finishedAt: integer("finished_at"),
    ...lifecycleDates,
  },
  (t) => [
    uniqueIndex("builds_project_number_unique").on(t.projectId, t.buildNumber),
    index("builds_status_queued_at").on(t.status, t.queuedAt),
    index("builds_runner_id").on(t.runnerId),
    index("builds_job_token_hash").on(t.jobTokenHash),
    index("builds_created_at").on(t.createdAt),
    // A channel's releases: the newest succeeded builds of one pipeline.
    index("builds_pipeline_status_created").on(t.pipelineId, t.status, t.createdAt),
    // Affinity (docs/decisions.md "Runner affinity"): the runner that took a pipeline's latest build.
    index("builds_pipeline_queued").on(t.pipelineId, t.queuedAt),
  ],
);

/**
 * The queue's version (one row, id = 1): triggers bump it in the same statement as a build becomes queued (created,
 * requeued after a lapsed lease or a removed runner, rerun), whichever code path or daemon does it. Each daemon
 * polls this one row (every 50–100 ms) while some claim long-polls it, and wakes its waiting claims when it changes (docs/api.md §8:
 * a build queued through another daemon is picked up within 500 ms without every waiting claim polling).
 */
export const queueVersion = sqliteTable("queue_version", {
  id: integer("id").primaryKey(),
  version: integer("version").notNull(),
});

/** Build logs as byte chunks appended at their offset (docs/api.md §6). */
export const buildLogChunks = sqliteTable(
  "build_log_chunks",
  {
    buildId: text("build_id").notNull(),
    startOffset: integer("start_offset").notNull(),
    content: bytes("content").notNull(),
    /** Newlines in `content`, counted at append (stored chunks never change): line numbers of a window of a
     *  long log are a sum, not a scan. NULL on chunks stored before migration 0007 (counted by a scan then). */
    newlines: integer("newlines"),
  },
  (t) => [primaryKey({ columns: [t.buildId, t.startOffset] })],
);
