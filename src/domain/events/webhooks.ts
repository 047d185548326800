import { and, desc, eq, inArray, sql } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { z } from "zod";
import { FORGE_PROVIDERS, type DeliveryOutcome } from "../../db/schema/constants.ts";
import { builds, pipelines, projects, webhookDeliveries, webhooks } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { auditStatement } from "../common/audit.ts";
import { prefixedToken, TOKEN_PREFIXES } from "../common/crypto.ts";
import { FORGE_ADAPTERS, type ForgeRequest, type RepoInfo } from "./forges/index.ts";
import { parseBaseUrl, readNetworkSettings } from "../settings/network-settings.ts";
import { checkDestinationNow, findDestinationNotAllowed } from "../common/outbound.ts";
import { getProject, type PipelineConfig, type ProjectRow } from "../projects/projects.ts";
import { queuedTrustSql } from "../projects/credential-release.ts";
import { pipelineWantsBuild, skipReason } from "./triggers.ts";
import type { UserRow } from "../auth/users.ts";

export type WebhookRow = typeof webhooks.$inferSelect;

/** Largest webhook body accepted (CONTRACT §11); GitHub caps its payloads at 25 MB too. */
export const MAX_WEBHOOK_BODY_BYTES = 25 * 1024 * 1024;
/** The same pipeline, event, ref and commit again within this window builds nothing new (CONTRACT §11). */
export const REBUILD_WINDOW_S = 600;
const DELIVERIES_LISTED = 100;
const REFUSED_KEPT = 100;

export const createWebhookSchema = z.object({
  provider: z.enum(FORGE_PROVIDERS),
  api_url: z
    .string()
    .max(2048)
    .refine((u) => parseBaseUrl(u) !== null, "must be an absolute http(s) URL without credentials, query or fragment")
    .optional(),
  report_status: z.boolean().default(true),
});

/** The base every public URL of ours starts with: the External Access public URL, else where the caller reached us. */
export async function publicBase(deps: Pick<AppDeps, "db">, requestOrigin: string): Promise<string> {
  const network = await readNetworkSettings(deps);
  return (network.public_url ?? requestOrigin).replace(/\/+$/, "");
}

function hookUrl(base: string, id: string): string {
  return `${base}/v1/hooks/${id}`;
}

export function toWebhookJson(w: WebhookRow) {
  return {
    id: w.id,
    project_id: w.projectId,
    provider: w.provider,
    url: hookUrl(w.baseUrl, w.id),
    api_url: w.apiUrl,
    report_status: w.reportStatus,
    disabled: w.disabledAt !== null,
    created_at: w.createdAt,
  };
}

/** A target the outbound guard refuses is refused when it is saved (CONTRACT §12): 400 destination_not_allowed. */
export async function assertDestinationAllowed(deps: Pick<AppDeps, "checkDestination" | "config">, url: string): Promise<void> {
  try {
    await checkDestinationNow(deps, url);
  } catch (err) {
    const refused = findDestinationNotAllowed(err);
    if (refused) throw new ApiError(400, "destination_not_allowed", refused.message);
    // A name that does not resolve now may resolve later (a forge being set up): the send will tell.
  }
}

export async function createWebhook(
  deps: Pick<AppDeps, "db" | "clock" | "secrets" | "checkDestination" | "config">,
  actor: UserRow,
  projectId: string,
  input: z.infer<typeof createWebhookSchema>,
  requestOrigin: string,
) {
  await getProject(deps, projectId);
  if (input.api_url) await assertDestinationAllowed(deps, input.api_url);
  const secret = prefixedToken(TOKEN_PREFIXES.webhookSecret);
  const now = deps.clock.now();
  const row: WebhookRow = {
    id: crypto.randomUUID(),
    projectId,
    provider: input.provider,
    apiUrl: input.api_url ? input.api_url.replace(/\/+$/, "") : null,
    reportStatus: input.report_status,
    secretSealed: await deps.secrets.seal(secret),
    baseUrl: await publicBase(deps, requestOrigin),
    learnedApiBase: null,
    learnedRepo: null,
    disabledAt: null,
    createdBy: actor.id,
    createdAt: now,
    updatedAt: now,
  };
  await deps.db.batch([
    deps.db.insert(webhooks).values(row),
    auditStatement(deps, { action: "webhook.create", actor, targetType: "webhook", targetId: row.id, details: { project_id: projectId, provider: row.provider } }),
  ]);
  // The only answer that ever carries the secret.
  const { id, provider, url, report_status, created_at } = toWebhookJson(row);
  return { id, provider, url, secret, report_status, api_url: row.apiUrl, created_at };
}

export async function listWebhooks(deps: Pick<AppDeps, "db">, projectId: string): Promise<WebhookRow[]> {
  await getProject(deps, projectId);
  return deps.db.select().from(webhooks).where(eq(webhooks.projectId, projectId)).orderBy(webhooks.createdAt, webhooks.id);
}

async function getProjectWebhook(deps: Pick<AppDeps, "db">, projectId: string, webhookId: string): Promise<WebhookRow> {
  await getProject(deps, projectId);
  const row = await deps.db.select().from(webhooks).where(and(eq(webhooks.id, webhookId), eq(webhooks.projectId, projectId))).get();
  if (!row) throw new ApiError(404, "not_found", "no such webhook in this project");
  return row;
}

export async function deleteWebhook(deps: Pick<AppDeps, "db" | "clock">, actor: UserRow, projectId: string, webhookId: string): Promise<void> {
  await getProjectWebhook(deps, projectId, webhookId);
  await deps.db.batch([
    deps.db.delete(webhooks).where(eq(webhooks.id, webhookId)),
    deps.db.delete(webhookDeliveries).where(eq(webhookDeliveries.webhookId, webhookId)),
    auditStatement(deps, { action: "webhook.delete", actor, targetType: "webhook", targetId: webhookId, details: { project_id: projectId } }),
  ]);
}

export async function listWebhookDeliveries(deps: Pick<AppDeps, "db">, projectId: string, webhookId: string) {
  await getProjectWebhook(deps, projectId, webhookId);
  const rows = await deps.db
    .select()
    .from(webhookDeliveries)
    .where(eq(webhookDeliveries.webhookId, webhookId))
    .orderBy(desc(webhookDeliveries.seq))
    .limit(DELIVERIES_LISTED);
  return rows.map((d) => ({
    delivery_id: d.deliveryId,
    event: d.event,
    received_at: d.receivedAt,
    outcome: d.outcome,
    reason: d.reason,
    build_ids: d.buildIds as string[],
  }));
}

export interface HookAnswer {
  builds: Array<{ id: string; pipeline_id: string; build_number: number }>;
  ignored?: string;
  duplicate?: true;
}

interface DeliveryRecord {
  hook: WebhookRow;
  deliveryId: string | null;
  dedupKey: string | null;
  event: string;
  outcome: DeliveryOutcome;
  reason: string | null;
  buildIds: string[];
}

function deliveryInsert(deps: Pick<AppDeps, "db" | "clock">, r: DeliveryRecord) {
  return deps.db.insert(webhookDeliveries).values({
    webhookId: r.hook.id,
    deliveryId: r.deliveryId,
    dedupKey: r.dedupKey,
    event: r.event.slice(0, 100),
    outcome: r.outcome,
    reason: r.reason,
    buildIds: r.buildIds,
    receivedAt: deps.clock.now(),
  });
}

/** Refused deliveries come from anyone who knows the URL: only the latest few are kept. */
function pruneRefused(deps: Pick<AppDeps, "db">, webhookId: string) {
  return deps.db.run(sql`DELETE FROM webhook_deliveries WHERE webhook_id = ${webhookId} AND outcome = 'refused' AND seq NOT IN (
    SELECT seq FROM webhook_deliveries WHERE webhook_id = ${webhookId} AND outcome = 'refused' ORDER BY seq DESC LIMIT ${REFUSED_KEPT})`);
}

async function buildSummaries(deps: Pick<AppDeps, "db">, ids: string[]): Promise<HookAnswer["builds"]> {
  if (ids.length === 0) return [];
  const rows = await deps.db
    .select({ id: builds.id, pipeline_id: builds.pipelineId, build_number: builds.buildNumber })
    .from(builds)
    .where(inArray(builds.id, ids));
  const order = new Map(ids.map((id, i) => [id, i]));
  return rows.sort((a, b) => (order.get(a.id) ?? 0) - (order.get(b.id) ?? 0));
}

/** A delivery id seen before: the first answer's builds, `duplicate: true`, and a row saying so. */
async function answerDuplicate(deps: Pick<AppDeps, "db" | "clock">, hook: WebhookRow, deliveryId: string, event: string): Promise<HookAnswer | null> {
  const first = await deps.db
    .select()
    .from(webhookDeliveries)
    .where(and(eq(webhookDeliveries.webhookId, hook.id), eq(webhookDeliveries.dedupKey, deliveryId)))
    .get();
  if (!first) return null;
  const ids = first.buildIds as string[];
  await deliveryInsert(deps, { hook, deliveryId, dedupKey: null, event, outcome: "duplicate", reason: "delivery id seen before", buildIds: ids });
  return { builds: await buildSummaries(deps, ids), duplicate: true };
}

function isUniqueViolation(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    if (/UNIQUE constraint failed/i.test(e.message)) return true;
  }
  return false;
}

function parsePayload(body: Uint8Array, contentType: string | null): unknown {
  const text = new TextDecoder().decode(body);
  try {
    // GitHub and Gitea can also send the JSON as a form field named `payload`.
    if (contentType && /^application\/x-www-form-urlencoded/i.test(contentType)) {
      return JSON.parse(new URLSearchParams(text).get("payload") ?? "");
    }
    return JSON.parse(text);
  } catch {
    throw new ApiError(400, "invalid_input", "the webhook body is not valid JSON");
  }
}

/**
 * POST /v1/hooks/{id} (CONTRACT §11): verify, deduplicate, parse, match pipelines, queue builds. Everything is
 * local database work (the payload names the commit, so no git call is made), which keeps the answer well
 * inside the forges' 10-second limit. The builds and the delivery row land in one batch: a redelivery racing
 * the first copy hits the delivery's unique index and rolls its builds back with it.
 */
export async function receiveWebhook(
  deps: Pick<AppDeps, "db" | "clock" | "config" | "secrets" | "jobSignal">,
  webhookId: string,
  headers: Headers,
  body: Uint8Array,
): Promise<HookAnswer> {
  const hook = await deps.db.select().from(webhooks).where(eq(webhooks.id, webhookId)).get();
  if (!hook) throw new ApiError(404, "not_found", "no such webhook");
  const adapter = FORGE_ADAPTERS[hook.provider];
  const event = adapter.event(headers) ?? "";
  const deliveryId = adapter.deliveryId(headers)?.slice(0, 200) || null;
  const secret = await deps.secrets.open(hook.secretSealed);
  if (!(await adapter.verify(secret, body, headers))) {
    await deps.db.batch([
      deliveryInsert(deps, { hook, deliveryId, dedupKey: null, event, outcome: "refused", reason: "missing or wrong signature", buildIds: [] }),
      pruneRefused(deps, hook.id),
    ]);
    throw new ApiError(401, "invalid_signature", `the ${hook.provider} signature of this delivery is missing or wrong`);
  }
  if (deliveryId) {
    const duplicate = await answerDuplicate(deps, hook, deliveryId, event);
    if (duplicate) return duplicate;
  }

  const parsed = adapter.parse(event, parsePayload(body, headers.get("content-type")));
  const learn = parsed.kind !== "ping" && parsed.repo ? learnRepo(deps, hook.id, parsed.repo) : null;
  const record = (outcome: DeliveryOutcome, reason: string | null) =>
    deps.db.batch([deliveryInsert(deps, { hook, deliveryId, dedupKey: deliveryId, event, outcome, reason, buildIds: [] }), ...(learn ? [learn] : [])]);

  let ignored: string | null = parsed.kind === "ping" ? "ping" : parsed.kind === "ignored" ? parsed.reason : null;
  const plans: Array<{ request: ForgeRequest; pipeline: typeof pipelines.$inferSelect; id: string }> = [];
  let project: ProjectRow | null = null;
  if (parsed.kind === "requests") {
    project = await getProject(deps, hook.projectId);
    const projectPipelines = await deps.db.select().from(pipelines).where(eq(pipelines.projectId, hook.projectId)).orderBy(pipelines.createdAt);
    const reasons: string[] = [];
    for (const request of parsed.requests) {
      const skip = skipReason(request);
      if (skip) {
        reasons.push(skip);
        continue;
      }
      for (const pipeline of projectPipelines) {
        if (pipelineWantsBuild(pipeline.config as PipelineConfig, project.defaultBranch, request)) plans.push({ request, pipeline, id: crypto.randomUUID() });
      }
    }
    if (plans.length === 0) ignored = reasons[0] ?? "no pipeline's triggers match";
  }
  try {
    if (plans.length === 0 || project === null) {
      await record("ignored", ignored);
      return { builds: [], ignored: ignored ?? "nothing to build" };
    }
    const actor = parsed.kind === "requests" ? parsed.actor : null;
    const now = deps.clock.now();
    const owner = project;
    const statements: BatchItem<"sqlite">[] = plans.flatMap((p) => queueWebhookBuild(deps, owner, p.pipeline, p.request, p.id, actor, now));
    const ids = plans.map((p) => p.id);
    const idsJson = JSON.stringify(ids);
    const first = statements.shift()!;
    await deps.db.batch([
      first,
      ...statements,
      ...(learn ? [learn] : []),
      // The delivery row reads back which builds the batch really queued (the 10-minute rule may skip some).
      deps.db.run(sql`INSERT INTO webhook_deliveries (webhook_id, delivery_id, dedup_key, event, outcome, reason, build_ids, received_at)
        SELECT ${hook.id}, ${deliveryId}, ${deliveryId}, ${event.slice(0, 100)},
          CASE WHEN COUNT(b.id) > 0 THEN 'built' ELSE 'ignored' END,
          CASE WHEN COUNT(b.id) > 0 THEN NULL ELSE 'built within the last 10 minutes' END,
          COALESCE((SELECT json_group_array(value) FROM json_each(${idsJson}) WHERE value IN (SELECT id FROM builds)), '[]'),
          ${now}
        FROM json_each(${idsJson}) j LEFT JOIN builds b ON b.id = j.value`),
    ]);
    const queued = await buildSummaries(deps, ids);
    if (queued.length > 0) deps.jobSignal.notify();
    return queued.length > 0 ? { builds: queued } : { builds: [], ignored: "built within the last 10 minutes" };
  } catch (err) {
    if (deliveryId && isUniqueViolation(err)) {
      const duplicate = await answerDuplicate(deps, hook, deliveryId, event);
      if (duplicate) return duplicate;
    }
    throw err;
  }
}

function learnRepo(deps: Pick<AppDeps, "db" | "clock">, webhookId: string, repo: RepoInfo) {
  return deps.db
    .update(webhooks)
    .set({ learnedApiBase: repo.apiBase, learnedRepo: repo.repo })
    .where(eq(webhooks.id, webhookId));
}

/**
 * The two statements that queue one webhook build, both guarded by the 10-minute rule so that a skipped build
 * takes no build number either (numbers stay gapless): the number bump and the insert that reads it back.
 */
function queueWebhookBuild(
  deps: Pick<AppDeps, "db" | "config">,
  project: ProjectRow,
  pipeline: typeof pipelines.$inferSelect,
  request: ForgeRequest,
  id: string,
  actor: string | null,
  now: number,
) {
  const config = pipeline.config as PipelineConfig;
  const projectId = project.id;
  const trust = queuedTrustSql(project, { branch: request.branch, triggerEvent: request.event, triggerRef: request.ref, fork: request.fork });
  const fresh = sql`NOT EXISTS (SELECT 1 FROM builds WHERE pipeline_id = ${pipeline.id} AND trigger_type = 'webhook'
    AND trigger_event = ${request.event} AND trigger_ref = ${request.ref} AND commit_sha = ${request.commitSha}
    AND created_at > ${now - REBUILD_WINDOW_S})`;
  return [
    deps.db
      .update(projects)
      .set({ lastBuildNumber: sql`${projects.lastBuildNumber} + 1` })
      .where(and(eq(projects.id, projectId), fresh)),
    deps.db.run(sql`INSERT INTO builds (id, project_id, pipeline_id, build_number, status, platform, trigger_type, trigger_actor,
        trigger_event, trigger_ref, commit_sha, branch, config_snapshot, timeout_s, from_fork, trust, queued_at, created_at, updated_at)
      SELECT ${id}, ${projectId}, ${pipeline.id}, last_build_number, 'queued', ${config.platform}, 'webhook', ${actor?.slice(0, 200) ?? null},
        ${request.event}, ${request.ref}, ${request.commitSha}, ${request.branch}, ${JSON.stringify(config)},
        ${config.timeout_s ?? deps.config.buildTimeoutS}, ${request.fork ? 1 : 0}, ${trust}, ${now}, ${now}, ${now}
      FROM projects WHERE id = ${projectId} AND ${fresh}`),
  ];
}
