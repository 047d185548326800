import { and, asc, desc, eq, inArray, isNotNull, sql } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { z } from "zod";
import { FORGE_PROVIDERS, type DeliveryOutcome } from "../../db/schema/constants.ts";
import { builds, webhookDeliveries, webhooks } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { auditStatement } from "../common/audit.ts";
import { prefixedToken, sha256Hex, TOKEN_PREFIXES } from "../common/crypto.ts";
import { FORGE_ADAPTERS, type ForgeRequest, type RepoInfo } from "./forges/index.ts";
import { parseBaseUrl, readNetworkSettings } from "../settings/network-settings.ts";
import { checkDestinationNow, findDestinationNotAllowed } from "../common/outbound.ts";
import { getProject } from "../projects/projects.ts";
import { readPipelineConfig } from "../projects/pipeline-source.ts";
import { plansForAutomaticTrigger } from "../builds/automatic-builds.ts";
import { buildCreationStatements, refreshRunnersOf, runnersHolding, type BuildPlan } from "../builds/builds.ts";
import { refreshSchedulesFromRead } from "../builds/schedules.ts";
import { pipelineWantsBuild, skipReason } from "./triggers.ts";
import type { UserRow } from "../auth/users.ts";

export type WebhookRow = typeof webhooks.$inferSelect;

/** Largest webhook body accepted (docs/api.md §11); GitHub caps its payloads at 25 MB too. */
export const MAX_WEBHOOK_BODY_BYTES = 25 * 1024 * 1024;
/**
 * How long a delivery waits for the pipeline file: the forges give up on an answer after 10 s. A file not read in
 * time counts as unreachable (stored pipelines build with their stored config; see docs/pipelines.md).
 */
export const WEBHOOK_CONFIG_READ_TIMEOUT_MS = 7_000;
/** The same pipeline, event, ref and commit again within this window builds nothing new (docs/api.md §11). */
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

/** A target the outbound guard refuses is refused when it is saved (docs/api.md §12): 400 destination_not_allowed. */
export async function assertDestinationAllowed(deps: Pick<AppDeps, "checkDestination" | "config">, url: string): Promise<void> {
  try {
    await checkDestinationNow(deps, url);
  } catch (err) {
    const refused = findDestinationNotAllowed(err);
    if (refused) throw new ApiError("destination_not_allowed", refused.message);
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
    auditStatement(deps, {
      action: "webhook.create",
      actor,
      targetType: "webhook",
      targetId: row.id,
      details: { project_id: projectId, provider: row.provider },
    }),
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
  const row = await deps.db
    .select()
    .from(webhooks)
    .where(and(eq(webhooks.id, webhookId), eq(webhooks.projectId, projectId)))
    .get();
  if (!row) throw new ApiError("not_found", "no such webhook in this project");
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

/**
 * A delivery seen before: its delivery id, or its payload (same webhook, same body hash: a captured delivery replayed
 * under a new id), was accepted already. Answers the first answer's builds, `duplicate: true`, and records a row.
 */
async function answerDuplicate(
  deps: Pick<AppDeps, "db" | "clock">,
  hook: WebhookRow,
  seen: { deliveryId: string | null; payloadKey: string },
  event: string,
): Promise<HookAnswer | null> {
  const accepted = and(eq(webhookDeliveries.webhookId, hook.id), isNotNull(webhookDeliveries.dedupKey));
  const byId = seen.deliveryId
    ? await deps.db
        .select()
        .from(webhookDeliveries)
        .where(and(accepted, eq(webhookDeliveries.deliveryId, seen.deliveryId)))
        .orderBy(asc(webhookDeliveries.seq))
        .get()
    : undefined;
  const first =
    byId ??
    (await deps.db
      .select()
      .from(webhookDeliveries)
      .where(and(accepted, eq(webhookDeliveries.dedupKey, seen.payloadKey)))
      .get());
  if (!first) return null;
  const ids = first.buildIds as string[];
  const reason = byId ? "delivery id seen before" : "payload seen before under another delivery id";
  await deliveryInsert(deps, { hook, deliveryId: seen.deliveryId, dedupKey: null, event, outcome: "duplicate", reason, buildIds: ids });
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
    throw new ApiError("invalid_input", "the webhook body is not valid JSON");
  }
}

/**
 * The webhook a delivery is addressed to, looked up before its body is read: an unknown id is answered 404 at once
 * and its body never buffered (docs/decisions.md "Webhook deliveries: the id first, the payload once").
 */
export async function findWebhookForDelivery(deps: Pick<AppDeps, "db">, webhookId: string): Promise<WebhookRow> {
  const hook = await deps.db.select().from(webhooks).where(eq(webhooks.id, webhookId)).get();
  if (!hook) throw new ApiError("not_found", "no such webhook");
  return hook;
}

/**
 * POST /v1/hooks/{id} (docs/api.md §11): verify, deduplicate, parse, read the pipeline file at the pushed commit,
 * match pipelines, queue builds. The payload names the commit, so the only git call is the file's read, bounded
 * to keep the answer inside the forges' 10-second limit. The builds and the delivery row land in one batch: a redelivery racing
 * the first copy hits the delivery's unique index and rolls its builds back with it.
 */
export async function receiveWebhook(
  deps: Pick<AppDeps, "db" | "clock" | "config" | "secrets" | "jobSignal" | "git">,
  hook: WebhookRow,
  headers: Headers,
  body: Uint8Array,
): Promise<HookAnswer> {
  const adapter = FORGE_ADAPTERS[hook.provider];
  const event = adapter.event(headers) ?? "";
  const deliveryId = adapter.deliveryId(headers)?.slice(0, 200) || null;
  const secret = await deps.secrets.open(hook.secretSealed);
  if (!(await adapter.verify(secret, body, headers))) {
    await deps.db.batch([
      deliveryInsert(deps, { hook, deliveryId, dedupKey: null, event, outcome: "refused", reason: "missing or wrong signature", buildIds: [] }),
      pruneRefused(deps, hook.id),
    ]);
    throw new ApiError("invalid_signature", `the ${hook.provider} signature of this delivery is missing or wrong`);
  }
  // Accepted deliveries are keyed by their payload's hash (unique per webhook); the delivery id is looked up too.
  const payloadKey = `sha256:${await sha256Hex(body)}`;
  const duplicate = await answerDuplicate(deps, hook, { deliveryId, payloadKey }, event);
  if (duplicate) return duplicate;

  const parsed = adapter.parse(event, parsePayload(body, headers.get("content-type")));
  const learn = parsed.kind !== "ping" && parsed.repo ? learnRepo(deps, hook.id, parsed.repo) : null;
  const record = (outcome: DeliveryOutcome, reason: string | null) =>
    deps.db.batch([
      deliveryInsert(deps, { hook, deliveryId, dedupKey: payloadKey, event, outcome, reason, buildIds: [] }),
      ...(learn ? [learn] : []),
    ]);

  let ignored: string | null = parsed.kind === "ping" ? "ping" : parsed.kind === "ignored" ? parsed.reason : null;
  const plans: Array<{ request: ForgeRequest; plan: BuildPlan; id: string }> = [];
  if (parsed.kind === "requests") {
    const project = await getProject(deps, hook.projectId);
    const reasons: string[] = [];
    for (const request of parsed.requests) {
      const skip = skipReason(request);
      if (skip || request.commitSha === null) {
        reasons.push(skip ?? "no commit");
        continue;
      }
      // The pipeline file at the pushed commit decides which pipelines build and with what (docs/pipelines.md).
      const read = await readPipelineConfig(deps, project, request.commitSha, { timeoutMs: WEBHOOK_CONFIG_READ_TIMEOUT_MS });
      const atDefaultHead = request.event === "push" && request.branch === project.defaultBranch;
      const requestPlans = await plansForAutomaticTrigger(deps, project, read, {
        triggerType: "webhook",
        triggerActor: parsed.actor,
        triggerEvent: request.event,
        triggerRef: request.ref,
        commitSha: request.commitSha,
        branch: request.branch,
        fromFork: request.fork,
        wants: (_name, config) => pipelineWantsBuild(config, project.defaultBranch, request),
        atDefaultHead,
      });
      if (atDefaultHead) await refreshSchedulesFromRead(deps, project, read);
      for (const plan of requestPlans) plans.push({ request, plan, id: crypto.randomUUID() });
    }
    if (plans.length === 0) ignored = reasons[0] ?? "no pipeline's triggers match";
  }
  try {
    if (plans.length === 0) {
      await record("ignored", ignored);
      return { builds: [], ignored: ignored ?? "nothing to build" };
    }
    const now = deps.clock.now();
    const holding = (
      await Promise.all(plans.filter((p) => p.plan.config.cancel_previous).map((p) => runnersHolding(deps, p.plan.pipeline.id, p.plan.branch)))
    ).flat();
    const statements: BatchItem<"sqlite">[] = plans.flatMap((p) =>
      buildCreationStatements(deps, p.plan, p.id, now, freshWebhookBuild(p.plan.pipeline.id, p.request, now)),
    );
    const ids = plans.map((p) => p.id);
    const idsJson = JSON.stringify(ids);
    const first = statements.shift()!;
    await deps.db.batch([
      first,
      ...statements,
      ...(learn ? [learn] : []),
      // The delivery row reads back which builds the batch really queued (the 10-minute rule may skip some).
      deps.db.run(sql`INSERT INTO webhook_deliveries (webhook_id, delivery_id, dedup_key, event, outcome, reason, build_ids, received_at)
        SELECT ${hook.id}, ${deliveryId}, ${payloadKey}, ${event.slice(0, 100)},
          CASE WHEN COUNT(b.id) > 0 THEN 'built' ELSE 'ignored' END,
          CASE WHEN COUNT(b.id) > 0 THEN NULL ELSE 'built within the last 10 minutes' END,
          COALESCE((SELECT json_group_array(value) FROM json_each(${idsJson}) WHERE value IN (SELECT id FROM builds)), '[]'),
          ${now}
        FROM json_each(${idsJson}) j LEFT JOIN builds b ON b.id = j.value`),
    ]);
    const queued = await buildSummaries(deps, ids);
    await refreshRunnersOf(deps, holding);
    if (queued.length > 0) deps.jobSignal.notify();
    return queued.length > 0 ? { builds: queued } : { builds: [], ignored: "built within the last 10 minutes" };
  } catch (err) {
    if (isUniqueViolation(err)) {
      const duplicate = await answerDuplicate(deps, hook, { deliveryId, payloadKey }, event);
      if (duplicate) return duplicate;
    }
    throw err;
  }
}

function learnRepo(deps: Pick<AppDeps, "db" | "clock">, webhookId: string, repo: RepoInfo) {
  return deps.db.update(webhooks).set({ learnedApiBase: repo.apiBase, learnedRepo: repo.repo }).where(eq(webhooks.id, webhookId));
}

/**
 * The 10-minute rule (docs/api.md §11) as the guard of a webhook build's statements: the same pipeline, event, ref and
 * commit built by a webhook within the window makes nothing, and takes no build number either (numbers stay gapless).
 */
function freshWebhookBuild(pipelineId: string, request: ForgeRequest, now: number) {
  return sql`NOT EXISTS (SELECT 1 FROM builds WHERE pipeline_id = ${pipelineId} AND trigger_type = 'webhook'
    AND trigger_event = ${request.event} AND trigger_ref = ${request.ref} AND commit_sha = ${request.commitSha}
    AND created_at > ${now - REBUILD_WINDOW_S})`;
}
