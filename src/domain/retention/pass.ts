// The retention pass (docs/decisions.md, Retention): what the policies select, a dry run listing it, and the real
// run deleting it in bounded batches, claimed in the database so that one daemon among several runs it.
import { and, desc, eq, inArray, isNotNull, isNull, lte, or, sql, type SQL } from "drizzle-orm";
import { dropLogSearchEntriesStatements } from "../logs/log-search.ts";
import { artifacts, builds, channels, retentionPasses } from "../../db/schema/index.ts";
import { channelReleases } from "../channels/channels.ts";
import { FINAL_BUILD_STATUSES } from "../../db/schema/constants.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError, describeError } from "../../errors.ts";
import type { StorageLocation } from "../../storage/types.ts";
import { openStoreAt } from "../artifacts/artifacts.ts";
import { auditStatementWhen } from "../common/audit.ts";
import type { UserRow } from "../auth/users.ts";
import { mergePolicy, readInstancePolicy, readProjectOverrides, type EffectivePolicy } from "./policy.ts";

type Deps = Pick<AppDeps, "db" | "clock" | "config" | "secrets" | "openArtifactStore" | "log">;

export type RetentionReason = "artifacts.keep_last" | "artifacts.max_age_days" | "logs.max_age_days";

export interface RetentionItem {
  build_id: string;
  artifact_id?: string;
  bytes: number;
  reason: RetentionReason;
}

export interface RetentionAnswer {
  artifacts: { count: number; bytes: number };
  logs: { count: number; bytes: number };
  items: RetentionItem[];
}

/** At most this many items are listed in an answer; the counts and bytes cover everything. */
export const MAX_LISTED_ITEMS = 1000;
/** Artifacts or logs deleted per database batch: each batch is short, and the event loop turns between them. */
const BATCH_SIZE = 100;
/** Stored objects removed at once within a batch. */
export const REMOVALS_IN_FLIGHT = 8;
/** A scheduled pass runs when the last pass (of any kind) started longer ago than this. */
export const PASS_INTERVAL_S = 86_400;
const DAY_S = 86_400;

const FINAL_LIST = sql.join(
  FINAL_BUILD_STATUSES.map((s) => sql`${s}`),
  sql`, `,
);

// ---------------------------------------------------------------------------------------------------------
// What the policies select

interface Plan {
  artifacts: RetentionItem[];
  logs: RetentionItem[];
}

/**
 * Builds whose artifacts no pass may delete beyond the pinned and the not-final ones: the latest release of each
 * tester channel, so a tester's link always has something to install (docs/decisions.md, "Retention").
 */
async function protectedReleaseBuildIds(deps: Pick<AppDeps, "db">): Promise<Set<string>> {
  const kept = new Set<string>();
  for (const channel of await deps.db.select().from(channels)) {
    const [latest] = await channelReleases(deps, channel);
    if (latest) kept.add(latest.build_id);
  }
  return kept;
}

/** The cutoff (epoch seconds) of a max-age rule: builds finished at or before it are selected. */
function cutoffOf(maxAgeDays: number | null, now: number): number | null {
  return maxAgeDays === null ? null : now - maxAgeDays * DAY_S;
}

/**
 * Everything the policies select now, oldest build first: the list a dry run answers and a real run deletes.
 * The SQL narrows to rows some project's rule could select (the loosest rule over all projects); each row is then
 * judged by its own project's rules.
 */
async function computePlan(deps: Pick<AppDeps, "db" | "config">, now: number): Promise<Plan> {
  const instance = await readInstancePolicy(deps);
  const overrides = await readProjectOverrides(deps);
  const cache = new Map<string, EffectivePolicy>();
  const policyOf = (projectId: string) => {
    let p = cache.get(projectId);
    if (!p) cache.set(projectId, (p = mergePolicy(instance, overrides.get(projectId) ?? null)));
    return p;
  };
  const all = [instance, ...[...overrides.keys()].map(policyOf)];
  const keepLasts = all.map((p) => p.artifacts.keep_last).filter((n): n is number => n !== null);
  const artifactCutoffs = all.map((p) => cutoffOf(p.artifacts.max_age_days, now)).filter((n): n is number => n !== null);
  // A log still open for late chunks (HANGAR_LOG_GRACE_S after the end) is never taken.
  const logCutoffs = all
    .map((p) => cutoffOf(p.logs.max_age_days, now))
    .filter((n): n is number => n !== null)
    .map((c) => Math.min(c, now - deps.config.logGraceS));

  const plan: Plan = { artifacts: [], logs: [] };
  if (keepLasts.length > 0 || artifactCutoffs.length > 0) {
    const minKeep = keepLasts.length > 0 ? Math.min(...keepLasts) : null;
    const maxCutoff = artifactCutoffs.length > 0 ? Math.max(...artifactCutoffs) : null;
    const loosest = sql.join(
      [minKeep !== null ? sql`h.rank > ${minKeep}` : null, maxCutoff !== null ? sql`h.finished <= ${maxCutoff}` : null].filter(
        (s): s is SQL => s !== null,
      ),
      sql` OR `,
    );
    // keep_last ranks, per pipeline and branch, the final builds that hold available artifacts, pinned ones included.
    // Builds first (the rank needs every build of a group); their artifacts then by the build_id index, in chunks:
    // a join of the ranked set with artifacts made SQLite scan one for each row of the other.
    const held = await deps.db.all<{ build_id: string; project_id: string; finished: number; rank: number }>(sql`
      SELECT h.id AS build_id, h.project_id, h.finished, h.rank FROM (
        SELECT b.id, b.project_id, b.pinned, COALESCE(b.finished_at, b.updated_at) AS finished,
          ROW_NUMBER() OVER (PARTITION BY b.pipeline_id, b.branch ORDER BY COALESCE(b.finished_at, b.updated_at) DESC, b.build_number DESC, b.id DESC) AS rank
        FROM builds b
        WHERE b.status IN (${FINAL_LIST})
          -- "+status": look artifacts up by build_id; the (status, ...) index made this a scan of every available one per build.
          AND EXISTS (SELECT 1 FROM artifacts a WHERE a.build_id = b.id AND +a.status = 'available')
      ) h
      WHERE h.pinned = 0 AND (${loosest})
      ORDER BY h.finished, h.id`);
    const releases = await protectedReleaseBuildIds(deps);
    const selected: Array<{ build_id: string; reason: RetentionReason }> = [];
    for (const r of held) {
      if (releases.has(r.build_id)) continue;
      const p = policyOf(r.project_id).artifacts;
      const cutoff = cutoffOf(p.max_age_days, now);
      const reason: RetentionReason | null =
        p.keep_last !== null && Number(r.rank) > p.keep_last
          ? "artifacts.keep_last"
          : cutoff !== null && Number(r.finished) <= cutoff
            ? "artifacts.max_age_days"
            : null;
      if (reason) selected.push({ build_id: r.build_id, reason });
    }
    for (const group of chunks(selected, 500)) {
      const rows = await deps.db
        .select({ id: artifacts.id, buildId: artifacts.buildId, sizeBytes: artifacts.sizeBytes })
        .from(artifacts)
        .where(
          and(
            inArray(
              artifacts.buildId,
              group.map((g) => g.build_id),
            ),
            eq(artifacts.status, "available"),
          ),
        )
        .orderBy(artifacts.createdAt, artifacts.id);
      const byBuild = new Map<string, typeof rows>();
      for (const row of rows) byBuild.set(row.buildId, [...(byBuild.get(row.buildId) ?? []), row]);
      for (const g of group) {
        for (const row of byBuild.get(g.build_id) ?? [])
          plan.artifacts.push({ build_id: g.build_id, artifact_id: row.id, bytes: Number(row.sizeBytes), reason: g.reason });
      }
      await turn();
    }
  }
  if (logCutoffs.length > 0) {
    const rows = await deps.db.all<{ build_id: string; project_id: string; finished: number; bytes: number }>(sql`
      SELECT b.id AS build_id, b.project_id, COALESCE(b.finished_at, b.updated_at) AS finished,
        (SELECT COALESCE(SUM(length(c.content)), 0) FROM build_log_chunks c WHERE c.build_id = b.id) AS bytes
      FROM builds b
      WHERE b.status IN (${FINAL_LIST}) AND b.pinned = 0 AND b.log_expired_at IS NULL
        AND COALESCE(b.finished_at, b.updated_at) <= ${Math.max(...logCutoffs)}
        AND EXISTS (SELECT 1 FROM build_log_chunks c WHERE c.build_id = b.id)
      ORDER BY finished, b.id`);
    for (const r of rows) {
      const cutoff = cutoffOf(policyOf(r.project_id).logs.max_age_days, now);
      if (cutoff !== null && Number(r.finished) <= Math.min(cutoff, now - deps.config.logGraceS)) {
        plan.logs.push({ build_id: r.build_id, bytes: Number(r.bytes), reason: "logs.max_age_days" });
      }
    }
  }
  return plan;
}

function answerOf(artifactItems: RetentionItem[], logItems: RetentionItem[]): RetentionAnswer {
  const sum = (items: RetentionItem[]) => items.reduce((n, i) => n + i.bytes, 0);
  return {
    artifacts: { count: artifactItems.length, bytes: sum(artifactItems) },
    logs: { count: logItems.length, bytes: sum(logItems) },
    items: [...artifactItems, ...logItems].slice(0, MAX_LISTED_ITEMS),
  };
}

/** POST /v1/settings/retention/run with dry_run: what a real run now would delete; deletes nothing. */
export async function dryRunRetention(deps: Pick<AppDeps, "db" | "clock" | "config">): Promise<RetentionAnswer> {
  const plan = await computePlan(deps, deps.clock.now());
  return answerOf(plan.artifacts, plan.logs);
}

// ---------------------------------------------------------------------------------------------------------
// Claiming a pass

export type PassTrigger = "scheduled" | "manual";

/**
 * Claims a real pass for `owner`: resumes an unfinished pass whose lease lapsed (a daemon died in it), else starts
 * one when none is unfinished and, for a scheduled pass, the last one started over a day ago. Reads first, so an idle
 * daemon checking every few seconds takes no write lock. The insert's own condition makes two daemons claiming
 * together start one pass. Answers the pass id, or null (another daemon holds it, or none is due).
 */
export async function claimPass(
  deps: Pick<AppDeps, "db" | "clock" | "config">,
  owner: string,
  trigger: PassTrigger,
  actor: UserRow | null,
): Promise<string | null> {
  const now = deps.clock.now();
  const leaseUntil = now + deps.config.retentionLeaseS;
  const unfinished = await deps.db.select().from(retentionPasses).where(isNull(retentionPasses.finishedAt)).get();
  if (unfinished) {
    if (unfinished.leaseExpiresAt > now && unfinished.leaseOwner !== owner) return null;
    const resumed = await deps.db
      .update(retentionPasses)
      .set({ leaseOwner: owner, leaseExpiresAt: leaseUntil })
      .where(
        and(
          eq(retentionPasses.id, unfinished.id),
          isNull(retentionPasses.finishedAt),
          or(lte(retentionPasses.leaseExpiresAt, now), eq(retentionPasses.leaseOwner, owner)),
        ),
      )
      .returning({ id: retentionPasses.id })
      .get();
    return resumed?.id ?? null;
  }
  if (trigger === "scheduled") {
    const last = await deps.db
      .select({ startedAt: retentionPasses.startedAt })
      .from(retentionPasses)
      .orderBy(desc(retentionPasses.startedAt))
      .limit(1)
      .get();
    if (last && last.startedAt > now - PASS_INTERVAL_S) return null;
  }
  const id = crypto.randomUUID();
  const due = trigger === "scheduled" ? sql`AND NOT EXISTS (SELECT 1 FROM retention_passes WHERE started_at > ${now - PASS_INTERVAL_S})` : sql``;
  const inserted = await deps.db.run(sql`
    INSERT INTO retention_passes (id, trigger, actor_user_id, actor_email, started_at, lease_owner, lease_expires_at)
    SELECT ${id}, ${trigger}, ${actor?.id ?? null}, ${actor?.email ?? null}, ${now}, ${owner}, ${leaseUntil}
    WHERE NOT EXISTS (SELECT 1 FROM retention_passes WHERE finished_at IS NULL) ${due}`);
  return inserted.rowsAffected === 1 ? id : null;
}

// ---------------------------------------------------------------------------------------------------------
// Running a pass

/** Lets the event loop answer requests between two batches (setTimeout exists on every host, Workers included). */
const turn = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

const idListOfBuilds = (items: RetentionItem[]) => idList([...new Set(items.map((i) => i.build_id))]);

const idList = (ids: string[]) =>
  sql.join(
    ids.map((id) => sql`${id}`),
    sql`, `,
  );

/**
 * Removes the stored bytes of expired artifacts whose removal is still owed: a pass killed between marking a batch
 * and removing its bytes, or a store that refused a delete. Removal is idempotent, so bytes removed just before a
 * crash are simply removed again. Answers how many stayed owed (a store failing).
 */
async function removeOwedBytes(deps: Deps, ids?: string[]): Promise<number> {
  let failed = 0;
  for (;;) {
    const owed = await deps.db
      .select({ id: artifacts.id, storageLocation: artifacts.storageLocation })
      .from(artifacts)
      // Given ids: by primary key ("+status" keeps SQLite off the status index, which would visit every expired one).
      .where(
        and(
          ids ? sql`+${artifacts.status} = 'expired'` : eq(artifacts.status, "expired"),
          isNull(artifacts.storageRemovedAt),
          ids ? inArray(artifacts.id, ids) : undefined,
        ),
      )
      .orderBy(artifacts.id)
      .limit(BATCH_SIZE)
      .offset(failed);
    if (owed.length === 0) return failed;
    const removed: string[] = [];
    // A few removals in flight at once: each waits on the disk (or an S3 round trip), not on this process.
    let next = 0;
    const worker = async () => {
      while (next < owed.length) {
        const row = owed[next++]!;
        const location = row.storageLocation as StorageLocation;
        try {
          await (await openStoreAt(deps, location)).remove(location.key);
          removed.push(row.id);
        } catch (err) {
          failed++;
          deps.log({
            time: new Date().toISOString(),
            level: "warn",
            msg: "retention: the store refused a delete; the next pass retries it",
            artifact_id: row.id,
            error: describeError(err),
          });
        }
      }
    };
    await Promise.all(Array.from({ length: REMOVALS_IN_FLIGHT }, worker));
    if (removed.length > 0) {
      await deps.db
        .update(artifacts)
        .set({ storageRemovedAt: deps.clock.now() })
        .where(and(inArray(artifacts.id, removed), isNotNull(artifacts.expiredAt)));
    }
    if (ids) return failed;
    await turn();
  }
}

/**
 * Runs a claimed pass to its end: owed removals first, then the plan, one batch at a time. Each batch re-checks, in
 * the statement that deletes, that the artifact is still available, the build still unpinned and the lease still
 * ours, and adds what it deleted to the pass's counters in the same transaction. Artifacts are marked `expired`
 * before their bytes go (then `storage_removed_at` is set): a crash in between leaves an expired row whose removal
 * is owed, which the next pass finishes; never an available row without bytes.
 */
export async function executePass(deps: Deps, passId: string, owner: string, shouldStop: () => boolean = () => false): Promise<RetentionAnswer> {
  const start = deps.clock.now();
  await removeOwedBytes(deps);
  const plan = await computePlan(deps, start);
  const deletedArtifacts: RetentionItem[] = [];
  const deletedLogs: RetentionItem[] = [];
  const lease = () => deps.clock.now() + deps.config.retentionLeaseS;
  const held = sql`EXISTS (SELECT 1 FROM retention_passes WHERE id = ${passId} AND lease_owner = ${owner} AND finished_at IS NULL)`;
  let lost = false;

  for (const batch of chunks(plan.artifacts, BATCH_SIZE)) {
    if (shouldStop()) {
      lost = true;
      break;
    }
    const ids = batch.map((i) => i.artifact_id!);
    const now = deps.clock.now();
    // "+status": by primary key, not by the status index (which would visit every available artifact).
    const eligible = sql`id IN (${idList(ids)}) AND +status = 'available' AND build_id IN (SELECT id FROM builds WHERE id IN (${idListOfBuilds(batch)}) AND pinned = 0)`;
    const [counted, marked] = await deps.db.batch([
      deps.db.run(sql`
        UPDATE retention_passes SET
          artifacts_count = artifacts_count + (SELECT count(*) FROM artifacts WHERE ${eligible}),
          artifacts_bytes = artifacts_bytes + (SELECT COALESCE(SUM(size_bytes), 0) FROM artifacts WHERE ${eligible}),
          lease_expires_at = ${lease()}
        WHERE id = ${passId} AND lease_owner = ${owner} AND finished_at IS NULL`),
      deps.db.run(sql`
        UPDATE artifacts SET status = 'expired', expired_at = ${now}, updated_at = ${now}
        WHERE ${eligible} AND ${held} RETURNING id`),
    ]);
    if (counted.rowsAffected === 0) {
      lost = true;
      break;
    }
    const markedIds = new Set(marked.rows.map((r) => String(r.id)));
    deletedArtifacts.push(...batch.filter((i) => markedIds.has(i.artifact_id!)));
    if (markedIds.size > 0) await removeOwedBytes(deps, [...markedIds]);
    await turn();
  }

  for (const batch of lost ? [] : chunks(plan.logs, BATCH_SIZE)) {
    if (shouldStop()) {
      lost = true;
      break;
    }
    const ids = batch.map((i) => i.build_id);
    const now = deps.clock.now();
    const eligible = sql`id IN (${idList(ids)}) AND log_expired_at IS NULL AND pinned = 0`;
    const [counted, , ...rest] = await deps.db.batch([
      deps.db.run(sql`
        UPDATE retention_passes SET
          logs_count = logs_count + (SELECT count(*) FROM builds WHERE ${eligible}),
          logs_bytes = logs_bytes + (SELECT COALESCE(SUM(length(content)), 0) FROM build_log_chunks WHERE build_id IN (SELECT id FROM builds WHERE ${eligible})),
          lease_expires_at = ${lease()}
        WHERE id = ${passId} AND lease_owner = ${owner} AND finished_at IS NULL`),
      deps.db.run(sql`DELETE FROM build_log_chunks WHERE build_id IN (SELECT id FROM builds WHERE ${eligible}) AND ${held}`),
      // The log's search entries go in the same batch as its chunks, so no entry outlives its log.
      ...dropLogSearchEntriesStatements(deps.db, ids),
      // Last: the statements above select by log_expired_at IS NULL, which this one ends.
      deps.db.run(sql`UPDATE builds SET log_expired_at = ${now} WHERE ${eligible} AND ${held} RETURNING id`),
    ]);
    if (counted.rowsAffected === 0) {
      lost = true;
      break;
    }
    const expired = new Set(rest[rest.length - 1]!.rows.map((r) => String(r.id)));
    deletedLogs.push(...batch.filter((i) => expired.has(i.build_id)));
    await turn();
  }

  if (!lost) await finishPass(deps, passId, owner);
  return answerOf(deletedArtifacts, deletedLogs);
}

/** Marks the pass finished and, when it deleted anything (over all its runs), records one audit event with it. */
async function finishPass(deps: Deps, passId: string, owner: string): Promise<void> {
  const pass = await deps.db.select().from(retentionPasses).where(eq(retentionPasses.id, passId)).get();
  if (!pass) return;
  const details = {
    trigger: pass.trigger,
    started_at: pass.startedAt,
    artifacts: { count: pass.artifactsCount, bytes: pass.artifactsBytes },
    logs: { count: pass.logsCount, bytes: pass.logsBytes },
  };
  const actor = pass.actorUserId && pass.actorEmail ? { id: pass.actorUserId, email: pass.actorEmail } : null;
  await deps.db.batch([
    deps.db
      .update(retentionPasses)
      .set({ finishedAt: deps.clock.now() })
      .where(and(eq(retentionPasses.id, passId), eq(retentionPasses.leaseOwner, owner), isNull(retentionPasses.finishedAt))),
    auditStatementWhen(
      deps,
      { action: "retention.pass", actor, targetType: "retention_pass", targetId: passId, details },
      sql`changes() = 1 AND ${pass.artifactsCount + pass.logsCount} > 0`,
    ),
  ]);
}

/** POST /v1/settings/retention/run without dry_run: claims a pass now (409 while another daemon runs one) and runs it. */
export async function runRetentionNow(deps: Deps, actor: UserRow, owner: string): Promise<RetentionAnswer> {
  const passId = await claimPass(deps, owner, "manual", actor);
  if (!passId) throw new ApiError("retention_pass_running", "a retention pass is running; try again when it is done");
  return executePass(deps, passId, owner);
}

/** The daemon's periodic check: runs (or resumes) a pass when one is due. Answers whether one ran. */
export async function runScheduledRetention(deps: Deps, owner: string, shouldStop?: () => boolean): Promise<boolean> {
  const passId = await claimPass(deps, owner, "scheduled", null);
  if (!passId) return false;
  await executePass(deps, passId, owner, shouldStop);
  return true;
}

/** The last finished pass, for the settings page. */
export async function lastPass(deps: Pick<AppDeps, "db">) {
  return (
    (await deps.db
      .select()
      .from(retentionPasses)
      .where(isNotNull(retentionPasses.finishedAt))
      .orderBy(desc(retentionPasses.startedAt))
      .limit(1)
      .get()) ?? null
  );
}

/** Number, project and branch of the builds a pass lists, for the preview page. */
export async function describeListedBuilds(deps: Pick<AppDeps, "db">, buildIds: string[]) {
  const ids = [...new Set(buildIds)];
  const out = new Map<string, { number: number; projectId: string; branch: string }>();
  for (const batch of chunks(ids, 500)) {
    const rows = await deps.db
      .select({ id: builds.id, number: builds.buildNumber, projectId: builds.projectId, branch: builds.branch })
      .from(builds)
      .where(inArray(builds.id, batch));
    for (const r of rows) out.set(r.id, { number: r.number, projectId: r.projectId, branch: r.branch });
  }
  return out;
}
