import { failedTestsSentence, firstFailingTests, toTestsSummary } from "../tests/test-reports.ts";
import { and, asc, desc, eq, gt, inArray, isNull, lt, ne, or, sql } from "drizzle-orm";
import type { NotificationEvent } from "../../db/schema/constants.ts";
import {
  artifacts,
  buildEvents,
  builds,
  channels,
  notifications,
  outbox,
  outboxAttempts,
  pipelines,
  projects,
  testers,
  webhooks,
} from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { describeError } from "../../errors.ts";
import { outboxHasWorkAt } from "../../db/queries/outbox.ts";
import { toBuildJson, type BuildRow } from "../builds/builds.ts";
import { apiBaseFor, commitStatusRequest, repoPathFromUrl, type OutboundRequest } from "./commit-status.ts";
import {
  discordMessage,
  signingNoticeMessage,
  slackMessage,
  standardWebhookHeaders,
  teamsMessage,
  webhookMessage,
  type BuildMessageContext,
  type SigningNoticeContext,
} from "./messages.ts";
import { readNetworkSettings } from "../settings/network-settings.ts";
import { findDestinationNotAllowed } from "../common/outbound.ts";
import { openSourceCredentials } from "../projects/projects.ts";
import { matchesAnyRefGlob } from "../common/ref-glob.ts";
import { artifactPlatform } from "../artifacts/app-metadata.ts";
import { MailSendError, mailOutboxRow, prepareMail, readSmtpServer, smtpConfigured, type MailMessage } from "./mail.ts";

export type OutboxRow = typeof outbox.$inferSelect;
type NotificationRow = typeof notifications.$inferSelect;
type OutboxDeps = Pick<AppDeps, "db" | "clock" | "config" | "secrets" | "fetch" | "log" | "sendMail">;

/** How long one claimed delivery is ours: well past the 10 s send timeout, so a live sender never loses it. */
export const OUTBOX_LEASE_MS = 30_000;
export const OUTBOX_MAX_ATTEMPTS = 8;
export const OUTBOX_SEND_TIMEOUT_MS = 10_000;
const REPORTED_STATUSES = new Set(["queued", "running", "succeeded", "failed", "canceled", "timed_out", "expired"]);

/**
 * Backoff before attempt `attempts + 1` (docs/api.md §12): base × 2^(attempts − 1), ±20 % jitter so that many
 * deliveries failing together do not retry in lockstep.
 */
export function retryDelayMs(baseMs: number, attempts: number, random: () => number = Math.random): number {
  const exact = baseMs * 2 ** Math.max(0, attempts - 1);
  return Math.round(exact * (0.8 + 0.4 * random()));
}

// Wall time in milliseconds: backoff and leases are real durations (tests retry in tens of milliseconds),
// unlike the epoch-second timestamps the rest of the state keeps from deps.clock.
function nowMs(): number {
  return Date.now();
}

/** The notification event a build event means for a target's `on` list, or null when it wants none. */
function notificationEventFor(buildEvent: string, fixed: boolean, on: readonly string[]): NotificationEvent | null {
  if (buildEvent === "running") return on.includes("started") ? "started" : null;
  if (buildEvent === "succeeded") {
    if (fixed && on.includes("fixed")) return "fixed";
    return on.includes("succeeded") ? "succeeded" : null;
  }
  if (["failed", "canceled", "timed_out", "expired"].includes(buildEvent) && on.includes(buildEvent)) return buildEvent as NotificationEvent;
  return null;
}

/** `fixed` (docs/api.md §12): the previous final build of the same pipeline and branch did not succeed. */
async function isFixed(deps: Pick<AppDeps, "db">, build: BuildRow): Promise<boolean> {
  const previous = await deps.db
    .select({ status: builds.status })
    .from(builds)
    .where(
      and(
        eq(builds.pipelineId, build.pipelineId),
        eq(builds.branch, build.branch),
        ne(builds.id, build.id),
        inArray(builds.status, ["succeeded", "failed", "canceled", "timed_out", "expired"]),
        sql`${builds.finishedAt} <= ${build.finishedAt ?? build.updatedAt}`,
      ),
    )
    .orderBy(sql`${builds.finishedAt} DESC`, sql`${builds}.rowid DESC`)
    .limit(1)
    .get();
  return previous !== undefined && previous.status !== "succeeded";
}

/**
 * Turns outbox events (one per reported build state, written by the database triggers with the change) into
 * deliveries: one per commit-status webhook of the project and one per notification that wants the event.
 * Idempotent: the unique (event, target) index and the `expanded` flag let several daemons run it at once.
 */
export async function expandBuildEvents(deps: Pick<AppDeps, "db" | "clock">, limit = 200): Promise<number> {
  // Most events have nobody to tell (no notification, no commit-status webhook): one statement closes them all,
  // so a burst of builds does not leave thousands of events for the per-event loop below. That loop ran
  // synchronously on the embedded database, holding the event loop for ~60 ms a pass: long-poll pickups
  // waited behind it (docs/benchmarks.md).
  const closed = await deps.db.run(sql`UPDATE ${buildEvents} SET expanded = 1 WHERE ${buildEvents.seq} IN (
    SELECT e.seq FROM ${buildEvents} e WHERE e.expanded = 0 AND NOT EXISTS (
      SELECT 1 FROM ${builds} b WHERE b.id = e.build_id AND e.event IN (${sql.join(
        [...REPORTED_STATUSES].map((s) => sql`${s}`),
        sql`, `,
      )}) AND (
        EXISTS (SELECT 1 FROM ${notifications} n WHERE n.project_id = b.project_id AND n.disabled_at IS NULL)
        OR EXISTS (SELECT 1 FROM ${webhooks} w JOIN ${projects} p ON p.id = w.project_id
          WHERE w.project_id = b.project_id AND w.report_status = 1 AND w.disabled_at IS NULL AND p.source_credentials_sealed IS NOT NULL)
        OR (e.event = 'succeeded' AND EXISTS (SELECT 1 FROM ${channels} c JOIN ${testers} t ON t.channel_id = c.id
          WHERE c.pipeline_id = b.pipeline_id AND t.mail_opt_out_at IS NULL))))
    ORDER BY e.seq LIMIT ${EXPAND_CLOSE_LIMIT})`);
  const events = await deps.db.select().from(buildEvents).where(eq(buildEvents.expanded, 0)).orderBy(asc(buildEvents.seq)).limit(limit);
  let sliceStart = performance.now();
  for (const event of events) {
    // The embedded database answers synchronously: give waiting requests their turn every few milliseconds.
    if (performance.now() - sliceStart > EXPAND_SLICE_MS) {
      await yieldToEventLoop();
      sliceStart = performance.now();
    }
    const markDone = deps.db.update(buildEvents).set({ expanded: 1 }).where(eq(buildEvents.seq, event.seq));
    const build = await deps.db.select().from(builds).where(eq(builds.id, event.buildId)).get();
    const project = build ? await deps.db.select().from(projects).where(eq(projects.id, build.projectId)).get() : undefined;
    if (!build || !project || !REPORTED_STATUSES.has(event.event)) {
      await markDone;
      continue;
    }
    const now = deps.clock.now();
    const rows: Array<typeof outbox.$inferInsert> = [];
    const row = (targetKind: OutboxRow["targetKind"], targetId: string, messageEvent: string) =>
      rows.push({
        eventSeq: event.seq,
        buildId: build.id,
        targetKind,
        targetId,
        event: messageEvent,
        messageId: `msg_${crypto.randomUUID().replace(/-/g, "")}`,
        status: "pending",
        attempts: 0,
        nextAttemptAtMs: nowMs(),
        createdAt: now,
        updatedAt: now,
      });
    if (project.sourceCredentialsSealed !== null) {
      const hooks = await deps.db
        .select({ id: webhooks.id })
        .from(webhooks)
        .where(and(eq(webhooks.projectId, project.id), eq(webhooks.reportStatus, true), isNull(webhooks.disabledAt)));
      for (const hook of hooks) row("commit_status", hook.id, event.event);
    }
    const targets = await deps.db
      .select()
      .from(notifications)
      .where(and(eq(notifications.projectId, project.id), isNull(notifications.disabledAt)));
    const fixed = event.event === "succeeded" && targets.length > 0 ? await isFixed(deps, build) : false;
    for (const target of targets) {
      const branches = target.branches as string[] | null;
      if (branches && !matchesAnyRefGlob(branches, build.branch)) continue;
      const messageEvent = notificationEventFor(event.event, fixed, target.on as string[]);
      if (messageEvent) row("notification", target.id, messageEvent);
    }
    if (event.event === "succeeded") {
      for (const testerId of await releaseMailRecipients(deps, build)) {
        rows.push(mailOutboxRow(deps, { event: "release", targetId: testerId, payload: null, buildId: build.id, eventSeq: event.seq }));
      }
    }
    if (rows.length === 0) await markDone;
    else await deps.db.batch([deps.db.insert(outbox).values(rows).onConflictDoNothing(), markDone]);
  }
  return closed.rowsAffected + events.length;
}

/**
 * The testers who get a mail about this succeeded build (docs/api.md §18): with SMTP set, those of each channel the
 * build is a release of (the channel's pipeline, a matching branch, an installable artifact of its platforms)
 * who did not turn release mails off.
 */
async function releaseMailRecipients(deps: Pick<AppDeps, "db">, build: BuildRow): Promise<string[]> {
  const candidates = await deps.db.select().from(channels).where(eq(channels.pipelineId, build.pipelineId));
  const onBranch = candidates.filter((ch) => !ch.branches || matchesAnyRefGlob(ch.branches, build.branch));
  if (onBranch.length === 0 || !(await smtpConfigured(deps))) return [];
  const files = await deps.db
    .select({ filename: artifacts.filename })
    .from(artifacts)
    .where(and(eq(artifacts.buildId, build.id), eq(artifacts.status, "available")));
  const platforms = new Set(files.map((f) => artifactPlatform(f.filename)).filter((p) => p !== null));
  const released = onBranch.filter((ch) => (ch.platforms ?? ["ios", "android"]).some((p) => platforms.has(p as "ios" | "android")));
  if (released.length === 0) return [];
  const rows = await deps.db
    .select({ id: testers.id })
    .from(testers)
    .where(
      and(
        inArray(
          testers.channelId,
          released.map((ch) => ch.id),
        ),
        isNull(testers.mailOptOutAt),
      ),
    );
  return rows.map((r) => r.id);
}

/** Events with nobody to tell closed by one statement; a bound keeps that statement short on a huge backlog. */
const EXPAND_CLOSE_LIMIT = 2000;
/** Longest run of per-event work before other requests get the event loop. */
const EXPAND_SLICE_MS = 4;
const yieldToEventLoop = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

/**
 * Leases due deliveries to `owner` in one conditional UPDATE: a row leased by a live sender is never taken by
 * another (the lease outlives the send timeout), and a delivery waits while an earlier one to the same target
 * for the same build is in flight, so a build's reports leave in order.
 */
export async function claimDeliveries(deps: Pick<AppDeps, "db" | "clock">, owner: string, limit: number): Promise<OutboxRow[]> {
  const now = nowMs();
  const free = or(isNull(outbox.leaseUntilMs), lt(outbox.leaseUntilMs, now));
  return deps.db
    .update(outbox)
    .set({ leaseOwner: owner, leaseUntilMs: now + OUTBOX_LEASE_MS })
    .where(
      and(
        eq(outbox.status, "pending"),
        free,
        sql`${outbox.seq} IN (SELECT o.seq FROM outbox o WHERE o.status = 'pending' AND o.next_attempt_at_ms <= ${now}
          AND (o.lease_until_ms IS NULL OR o.lease_until_ms < ${now})
          AND NOT EXISTS (SELECT 1 FROM outbox e WHERE e.build_id = o.build_id AND e.target_kind = o.target_kind
            AND e.target_id = o.target_id AND e.seq < o.seq AND e.status = 'pending' AND e.lease_until_ms >= ${now})
          ORDER BY o.seq LIMIT ${limit})`,
      ),
    )
    .returning();
}

interface SendResult {
  statusCode: number | null;
  error: string | null;
}

/** One POST: 10 s timeout, redirects refused (a 3xx is an error, never followed), the answer's body discarded. */
export async function postOutbound(deps: Pick<AppDeps, "fetch">, request: OutboundRequest): Promise<SendResult> {
  try {
    const res = await deps.fetch(request.url, {
      method: "POST",
      headers: request.headers,
      body: request.body,
      redirect: "manual",
      signal: AbortSignal.timeout(OUTBOX_SEND_TIMEOUT_MS),
    });
    await res.body?.cancel().catch(() => undefined);
    if (res.status >= 200 && res.status < 300) return { statusCode: res.status, error: null };
    if (res.status >= 300 && res.status < 400) return { statusCode: res.status, error: "redirect_refused" };
    return { statusCode: res.status, error: `http_${res.status}` };
  } catch (err) {
    if (findDestinationNotAllowed(err)) return { statusCode: null, error: "destination_not_allowed" };
    if (err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError")) return { statusCode: null, error: "timeout" };
    return { statusCode: null, error: `network_error: ${describeError(err).slice(0, 200)}` };
  }
}

async function targetBase(deps: Pick<AppDeps, "db">, fallback: string): Promise<string> {
  const network = await readNetworkSettings(deps);
  return (network.public_url ?? fallback).replace(/\/+$/, "");
}

async function messageContext(deps: Pick<AppDeps, "db">, build: BuildRow, event: NotificationEvent, base: string): Promise<BuildMessageContext> {
  const project = await deps.db.select({ id: projects.id, name: projects.name }).from(projects).where(eq(projects.id, build.projectId)).get();
  const pipeline = await deps.db.select({ id: pipelines.id, name: pipelines.name }).from(pipelines).where(eq(pipelines.id, build.pipelineId)).get();
  return {
    event,
    project: project ?? { id: build.projectId, name: "(deleted project)" },
    pipeline: pipeline ?? { id: build.pipelineId, name: "(deleted pipeline)" },
    build: toBuildJson(build),
    url: `${base}/builds/${build.id}`,
    tests: await failedTestsLine(deps, build),
  };
}

/** How many tests failed and the first three names, for messages and commit statuses; null when none failed. */
async function failedTestsLine(deps: Pick<AppDeps, "db">, build: BuildRow): Promise<string | null> {
  const summary = toTestsSummary(build.testsSummary);
  if (!summary || summary.failed + summary.errored === 0) return null;
  return failedTestsSentence(summary, await firstFailingTests(deps, build.id, 3));
}

/** The request a notification target gets for one message, signed for the `webhook` kind. */
export async function notificationRequest(
  deps: Pick<AppDeps, "secrets" | "clock">,
  target: NotificationRow,
  context: BuildMessageContext,
  messageId: string,
): Promise<OutboundRequest> {
  const url = await deps.secrets.open(target.urlSealed);
  const json = { "content-type": "application/json", "user-agent": "hangar" };
  switch (target.kind) {
    case "slack":
      return { url, headers: json, body: JSON.stringify(slackMessage(context)) };
    case "discord":
      return { url, headers: json, body: JSON.stringify(discordMessage(context)) };
    case "teams":
      return { url, headers: json, body: JSON.stringify(teamsMessage(context)) };
    case "webhook": {
      const timestamp = deps.clock.now();
      const body = JSON.stringify(webhookMessage(context, timestamp));
      const secret = target.secretSealed ? await deps.secrets.open(target.secretSealed) : "";
      return { url, headers: { ...json, ...(await standardWebhookHeaders(secret, messageId, timestamp, body)) }, body };
    }
  }
}

type Prepared = { request: OutboundRequest } | { mail: MailMessage } | { skip: OutboxRow["status"]; error: string };

/** A message about no build (a signing health notice): its data was written with the row. */
async function prepareNotice(deps: OutboxDeps, row: OutboxRow): Promise<Prepared> {
  const target = await deps.db.select().from(notifications).where(eq(notifications.id, row.targetId)).get();
  if (!target || target.disabledAt !== null) return { skip: "disabled", error: target ? "target disabled" : "target deleted" };
  const data = row.payload as Omit<SigningNoticeContext, "type" | "url">;
  const notice: SigningNoticeContext = {
    type: row.event === "signing.expired" ? "signing.expired" : "signing.expiring",
    project: data.project,
    item: data.item,
    url: `${await targetBase(deps, target.baseUrl)}/projects/${data.project.id}`,
  };
  const url = await deps.secrets.open(target.urlSealed);
  const timestamp = deps.clock.now();
  const body = JSON.stringify(signingNoticeMessage(target.kind, notice, timestamp));
  const headers: Record<string, string> = { "content-type": "application/json", "user-agent": "hangar" };
  if (target.kind === "webhook") {
    const secret = target.secretSealed ? await deps.secrets.open(target.secretSealed) : "";
    Object.assign(headers, await standardWebhookHeaders(secret, row.messageId, timestamp, body));
  }
  return { request: { url, headers, body } };
}

async function prepare(deps: OutboxDeps, row: OutboxRow): Promise<Prepared> {
  if (row.targetKind === "mail") return prepareMail(deps, row);
  if (row.buildId === null && row.payload !== null && row.targetKind === "notification") return prepareNotice(deps, row);
  const build = row.buildId ? await deps.db.select().from(builds).where(eq(builds.id, row.buildId)).get() : undefined;
  if (!build) return { skip: "failed", error: "build deleted" };
  if (row.targetKind === "notification") {
    const target = await deps.db.select().from(notifications).where(eq(notifications.id, row.targetId)).get();
    if (!target || target.disabledAt !== null) return { skip: "disabled", error: target ? "target disabled" : "target deleted" };
    const context = await messageContext(deps, build, row.event as NotificationEvent, await targetBase(deps, target.baseUrl));
    return { request: await notificationRequest(deps, target, context, row.messageId) };
  }
  const hook = await deps.db.select().from(webhooks).where(eq(webhooks.id, row.targetId)).get();
  if (!hook || hook.disabledAt !== null || !hook.reportStatus) return { skip: "disabled", error: hook ? "target disabled" : "target deleted" };
  // A newer state of this build for this forge exists: sending this one now could land after it.
  const newer = await deps.db
    .select({ seq: outbox.seq })
    .from(outbox)
    .where(and(eq(outbox.buildId, build.id), eq(outbox.targetKind, "commit_status"), eq(outbox.targetId, hook.id), gt(outbox.seq, row.seq)))
    .limit(1)
    .get();
  if (newer) return { skip: "superseded", error: "a newer state of the build supersedes it" };
  const project = await deps.db.select().from(projects).where(eq(projects.id, build.projectId)).get();
  const credentials = project ? await openSourceCredentials(deps, project) : null;
  if (!project || !credentials) return { skip: "failed", error: "the project has no source credentials" };
  const apiBase = apiBaseFor(hook.provider, hook.apiUrl, hook.learnedApiBase);
  const repo = hook.learnedRepo ?? repoPathFromUrl(project.repoUrl);
  if (!apiBase || !repo) return { skip: "failed", error: "the forge API or repository is unknown: set api_url or let a delivery arrive" };
  const pipeline = await deps.db.select({ name: pipelines.name }).from(pipelines).where(eq(pipelines.id, build.pipelineId)).get();
  return {
    request: commitStatusRequest({
      provider: hook.provider,
      apiBase,
      repo,
      sha: build.commitSha,
      buildStatus: row.event,
      buildNumber: build.buildNumber,
      pipelineName: pipeline?.name ?? "pipeline",
      targetUrl: `${await targetBase(deps, hook.baseUrl)}/builds/${build.id}`,
      credentials,
      tests: await failedTestsLine(deps, build),
    }),
  };
}

/** Disables a target that answered 410 Gone, and every delivery still waiting for it. */
function disableTarget(deps: Pick<AppDeps, "db" | "clock">, row: Pick<OutboxRow, "targetKind" | "targetId">) {
  const now = deps.clock.now();
  return [
    row.targetKind === "notification"
      ? deps.db.update(notifications).set({ disabledAt: now, updatedAt: now }).where(eq(notifications.id, row.targetId))
      : deps.db.update(webhooks).set({ disabledAt: now, updatedAt: now }).where(eq(webhooks.id, row.targetId)),
    deps.db
      .update(outbox)
      .set({ status: "disabled", lastError: "target disabled after 410 Gone", leaseOwner: null, leaseUntilMs: null, updatedAt: now })
      .where(and(eq(outbox.targetKind, row.targetKind), eq(outbox.targetId, row.targetId), eq(outbox.status, "pending"))),
  ] as const;
}

/** One mail through the SMTP settings' server; the reply code stands where an HTTP delivery keeps its status. */
async function sendOneMail(deps: OutboxDeps, mail: MailMessage): Promise<SendResult> {
  const server = await readSmtpServer(deps);
  if (!server) return { statusCode: null, error: "smtp_not_configured" };
  if (!deps.sendMail) return { statusCode: null, error: "mail_unsupported" };
  try {
    const { code } = await deps.sendMail(server, mail);
    return { statusCode: code, error: null };
  } catch (err) {
    if (findDestinationNotAllowed(err)) return { statusCode: null, error: "destination_not_allowed" };
    if (err instanceof MailSendError) return { statusCode: err.code, error: `smtp_error: ${err.message.slice(0, 200)}` };
    return { statusCode: null, error: `network_error: ${describeError(err).slice(0, 200)}` };
  }
}

/** Sends one leased delivery and records the attempt; every write is guarded by our lease. */
export async function deliverOne(deps: OutboxDeps, row: OutboxRow, owner: string): Promise<void> {
  const ours = and(eq(outbox.seq, row.seq), eq(outbox.leaseOwner, owner), eq(outbox.status, "pending"));
  const now = deps.clock.now();
  let prepared: Prepared;
  try {
    prepared = await prepare(deps, row);
  } catch (err) {
    prepared = { skip: "failed", error: `cannot build the message: ${describeError(err).slice(0, 200)}` };
  }
  if ("skip" in prepared) {
    await deps.db
      .update(outbox)
      .set({
        status: prepared.skip,
        lastError: prepared.error,
        leaseOwner: null,
        leaseUntilMs: null,
        updatedAt: now,
        ...(row.targetKind === "mail" ? { payload: null } : {}),
      })
      .where(ours);
    return;
  }
  const attempt = row.attempts + 1;
  const result = "mail" in prepared ? await sendOneMail(deps, prepared.mail) : await postOutbound(deps, prepared.request);
  const record = deps.db.insert(outboxAttempts).values({
    id: crypto.randomUUID(),
    outboxSeq: row.seq,
    targetKind: row.targetKind,
    targetId: row.targetId,
    attempt,
    statusCode: result.statusCode,
    error: result.error,
    createdAt: deps.clock.now(),
  });
  const done = { leaseOwner: null, leaseUntilMs: null, attempts: attempt, updatedAt: deps.clock.now() };
  // A mail's payload may hold a tester's link (sealed): it is kept only while the mail may still be sent.
  const dropPayload = row.targetKind === "mail" ? { payload: null } : {};
  if (result.error === null) {
    await deps.db.batch([
      deps.db
        .update(outbox)
        .set({ ...done, ...dropPayload, status: "delivered", lastError: null })
        .where(ours),
      record,
    ]);
  } else if (result.statusCode === 410 && row.targetKind !== "mail") {
    await deps.db.batch([
      deps.db
        .update(outbox)
        .set({ ...done, status: "disabled", lastError: result.error })
        .where(ours),
      record,
      ...disableTarget(deps, row),
    ]);
  } else {
    // A refused destination is a setting to fix, not a passing fault: retrying it cannot succeed.
    const final =
      attempt >= OUTBOX_MAX_ATTEMPTS ||
      result.error === "destination_not_allowed" ||
      result.error === "smtp_not_configured" ||
      result.error === "mail_unsupported";
    await deps.db.batch([
      deps.db
        .update(outbox)
        .set({
          ...done,
          ...(final ? dropPayload : {}),
          status: final ? "failed" : "pending",
          lastError: result.error,
          nextAttemptAtMs: nowMs() + retryDelayMs(deps.config.outboxRetryBaseMs, attempt),
        })
        .where(ours),
      record,
    ]);
  }
}

/**
 * One pass: expand new events, lease a batch of due deliveries and send them, a few at a time. Returns how
 * many were sent, so a caller can loop at once while there is more.
 */
export async function runOutboxOnce(deps: OutboxDeps, owner: string, options: { limit?: number; concurrency?: number } = {}): Promise<number> {
  if (!(await outboxHasWork(deps))) return 0;
  await expandBuildEvents(deps);
  const claimed = await claimDeliveries(deps, owner, options.limit ?? 100);
  // Reports of one build to one target go in order; different targets and builds go in parallel.
  const lanes = new Map<string, OutboxRow[]>();
  for (const row of claimed.sort((a, b) => a.seq - b.seq)) {
    const key = `${row.buildId}|${row.targetKind}|${row.targetId}`;
    lanes.set(key, [...(lanes.get(key) ?? []), row]);
  }
  const queue = [...lanes.values()];
  const worker = async () => {
    for (let lane = queue.shift(); lane; lane = queue.shift()) {
      for (const row of lane) {
        try {
          await deliverOne(deps, row, owner);
        } catch (err) {
          deps.log({ time: new Date().toISOString(), level: "error", msg: "outbox delivery failed", error: describeError(err) });
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency ?? 16, queue.length) }, worker));
  return claimed.length;
}

/**
 * Whether a pass has anything to do: an event not yet expanded, or a delivery due (leased or not: the claim
 * decides). An idle daemon asks every second, so this is one fixed statement on two indexes (build_events_pending,
 * outbox_due) instead of the pass's three drizzle-built ones: building those cost about a thousand calls into
 * drizzle's query builder a second while nothing happened, enough to get them TurboFan-compiled (docs/benchmarks.md).
 */
async function outboxHasWork(deps: Pick<AppDeps, "db">): Promise<boolean> {
  return outboxHasWorkAt(deps.db, nowMs());
}

/** A test message to one notification target, sent now and recorded like any attempt. */
export async function sendNotificationTest(deps: Pick<AppDeps, "db" | "clock" | "secrets" | "fetch">, target: NotificationRow) {
  const base = await targetBase(deps, target.baseUrl);
  const now = deps.clock.now();
  const context: BuildMessageContext = {
    event: "succeeded",
    project: { id: target.projectId, name: "Hangar test message" },
    pipeline: { id: "test", name: "test" },
    build: {
      id: "test",
      build_number: 0,
      branch: "main",
      commit_sha: "0000000000000000000000000000000000000000",
      trigger_actor: "hangar",
      status: "succeeded",
      test: true,
    },
    url: `${base}/projects/${target.projectId}`,
  };
  const messageId = `msg_${crypto.randomUUID().replace(/-/g, "")}`;
  const result = await postOutbound(deps, await notificationRequest(deps, target, context, messageId));
  const attempt = {
    seq: undefined,
    id: crypto.randomUUID(),
    outboxSeq: null,
    targetKind: "notification" as const,
    targetId: target.id,
    attempt: 1,
    statusCode: result.statusCode,
    error: result.error,
    createdAt: now,
  };
  const [inserted] = await deps.db.insert(outboxAttempts).values(attempt).returning();
  return inserted!;
}

/** Pending deliveries (the `hangar_outbox_pending` gauge and tests). */
export async function countPendingDeliveries(deps: Pick<AppDeps, "db">): Promise<number> {
  const row = await deps.db.select({ n: sql<number>`count(*)` }).from(outbox).where(eq(outbox.status, "pending")).get();
  const events = await deps.db.select({ n: sql<number>`count(*)` }).from(buildEvents).where(eq(buildEvents.expanded, 0)).get();
  return (row?.n ?? 0) + (events?.n ?? 0);
}

/**
 * The latest attempts to one target with what each carried (the build and its event): the project page's
 * "recent deliveries" of a notification or of a webhook's commit statuses. Test sends have no build.
 */
export async function listTargetAttempts(deps: Pick<AppDeps, "db">, targetKind: OutboxRow["targetKind"], targetId: string, limit: number) {
  const rows = await deps.db
    .select({ attempt: outboxAttempts, event: outbox.event, buildId: outbox.buildId, buildNumber: builds.buildNumber })
    .from(outboxAttempts)
    .leftJoin(outbox, eq(outbox.seq, outboxAttempts.outboxSeq))
    .leftJoin(builds, eq(builds.id, outbox.buildId))
    .where(and(eq(outboxAttempts.targetKind, targetKind), eq(outboxAttempts.targetId, targetId)))
    .orderBy(desc(outboxAttempts.seq))
    .limit(limit);
  return rows.map((r) => ({
    id: r.attempt.id,
    attempt: r.attempt.attempt,
    status_code: r.attempt.statusCode,
    error: r.attempt.error,
    created_at: r.attempt.createdAt,
    event: r.event,
    build_id: r.buildId,
    build_number: r.buildNumber,
  }));
}
