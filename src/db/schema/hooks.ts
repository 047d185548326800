import { index, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { lifecycleDates } from "./_columns.ts";
import { DELIVERY_OUTCOMES, FORGE_PROVIDERS, NOTIFICATION_KINDS, OUTBOX_STATUSES, OUTBOX_TARGET_KINDS } from "./constants.ts";

/** Inbound webhooks of a project (docs/api.md §11). The secret is sealed: it is shown once, at creation. */
export const webhooks = sqliteTable(
  "webhooks",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id").notNull(),
    provider: text("provider", { enum: FORGE_PROVIDERS }).notNull(),
    apiUrl: text("api_url"),
    reportStatus: integer("report_status", { mode: "boolean" }).notNull(),
    secretSealed: text("secret_sealed").notNull(),
    /** The public base the hook URL was built on; target_url of commit statuses when no public URL is set. */
    baseUrl: text("base_url").notNull(),
    /** What the last verified delivery said about the repository: where its API is and what it is called there. */
    learnedApiBase: text("learned_api_base"),
    learnedRepo: text("learned_repo"),
    /** Set when the forge answered 410 to a commit status: no more reports until the webhook is recreated. */
    disabledAt: integer("disabled_at"),
    createdBy: text("created_by"),
    ...lifecycleDates,
  },
  (t) => [index("webhooks_project_id").on(t.projectId)],
);

/**
 * Every delivery a webhook received. `dedup_key` is the provider's delivery id for verified deliveries and null
 * for refused ones, so a forged delivery never blocks the real one and redeliveries hit the unique index.
 */
export const webhookDeliveries = sqliteTable(
  "webhook_deliveries",
  {
    seq: integer("seq").primaryKey({ autoIncrement: true }),
    webhookId: text("webhook_id").notNull(),
    deliveryId: text("delivery_id"),
    dedupKey: text("dedup_key"),
    event: text("event").notNull(),
    outcome: text("outcome", { enum: DELIVERY_OUTCOMES }).notNull(),
    reason: text("reason"),
    buildIds: text("build_ids", { mode: "json" }).notNull(),
    receivedAt: integer("received_at").notNull(),
  },
  // dedup_key: the payload's hash of an accepted delivery (a delivery id before), null otherwise; delivery ids are
  // looked up through their own index.
  (t) => [
    uniqueIndex("webhook_deliveries_dedup").on(t.webhookId, t.dedupKey),
    index("webhook_deliveries_webhook").on(t.webhookId, t.seq),
    index("webhook_deliveries_delivery").on(t.webhookId, t.deliveryId),
  ],
);

/** Notification targets of a project (docs/api.md §12). URL and signing secret are sealed. */
export const notifications = sqliteTable(
  "notifications",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id").notNull(),
    kind: text("kind", { enum: NOTIFICATION_KINDS }).notNull(),
    urlSealed: text("url_sealed").notNull(),
    on: text("on", { mode: "json" }).notNull(),
    branches: text("branches", { mode: "json" }),
    secretSealed: text("secret_sealed"),
    baseUrl: text("base_url").notNull(),
    /** Set when the receiver answered 410 Gone. */
    disabledAt: integer("disabled_at"),
    createdBy: text("created_by"),
    ...lifecycleDates,
  },
  (t) => [index("notifications_project_id").on(t.projectId)],
);

/**
 * The outbox proper: one row per reported build state, written by SQLite triggers on `builds` (see the
 * outbox_triggers migration) in the same transaction as the status change, whatever code made it.
 * `expanded` turns to 1 once the row's deliveries (one per commit-status target and notification) exist.
 */
export const buildEvents = sqliteTable(
  "build_events",
  {
    seq: integer("seq").primaryKey({ autoIncrement: true }),
    buildId: text("build_id").notNull(),
    event: text("event").notNull(),
    expanded: integer("expanded").notNull().default(0),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [uniqueIndex("build_events_build_event").on(t.buildId, t.event), index("build_events_pending").on(t.expanded, t.seq)],
);

/** One message to one target, retried until delivered (at least once), given up, superseded or disabled. */
export const outbox = sqliteTable(
  "outbox",
  {
    seq: integer("seq").primaryKey({ autoIncrement: true }),
    eventSeq: integer("event_seq"),
    buildId: text("build_id"),
    targetKind: text("target_kind", { enum: OUTBOX_TARGET_KINDS }).notNull(),
    targetId: text("target_id").notNull(),
    /** The message's event: a build status for commit statuses, a notification event (`fixed`, `started`, ...). */
    event: text("event").notNull(),
    /** The Standard Webhooks `webhook-id`: the same on every retry of this message. */
    messageId: text("message_id").notNull(),
    status: text("status", { enum: OUTBOX_STATUSES }).notNull(),
    attempts: integer("attempts").notNull().default(0),
    /** Epoch milliseconds: backoff steps are shorter than a second in tests. */
    nextAttemptAtMs: integer("next_attempt_at_ms").notNull(),
    leaseOwner: text("lease_owner"),
    leaseUntilMs: integer("lease_until_ms"),
    lastError: text("last_error"),
    /** The message's own data when it is about no build (signing health: `{project, item}`); null for builds. */
    payload: text("payload", { mode: "json" }),
    ...lifecycleDates,
  },
  (t) => [
    uniqueIndex("outbox_event_target").on(t.eventSeq, t.targetKind, t.targetId),
    index("outbox_due").on(t.status, t.nextAttemptAtMs),
    index("outbox_build_target").on(t.buildId, t.targetKind, t.targetId),
  ],
);

/** Every delivery attempt, for the deliveries listings. */
export const outboxAttempts = sqliteTable(
  "outbox_attempts",
  {
    seq: integer("seq").primaryKey({ autoIncrement: true }),
    id: text("id").notNull(),
    outboxSeq: integer("outbox_seq"),
    targetKind: text("target_kind", { enum: OUTBOX_TARGET_KINDS }).notNull(),
    targetId: text("target_id").notNull(),
    attempt: integer("attempt").notNull(),
    statusCode: integer("status_code"),
    error: text("error"),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [index("outbox_attempts_target").on(t.targetKind, t.targetId, t.seq)],
);
