import { and, eq, inArray, lt, ne, sql } from "drizzle-orm";
import { builds, runners } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { endStepResultsSql } from "./step-results.ts";
import { failLostBuild } from "./runner-lost.ts";

/** Claims a build may use before a lapsed lease fails it instead of requeueing it (docs/api.md §6). */
export const MAX_CLAIM_ATTEMPTS = 3;

export interface SweepCounts {
  runnersOffline: number;
  requeued: number;
  attemptsExhausted: number;
  runnerLost: number;
  timedOut: number;
  expired: number;
}

/**
 * One sweep (docs/api.md §6). Every step is a single conditional UPDATE whose WHERE re-checks the state it moves
 * from, so running it twice, or in two daemons at once, changes each row at most once.
 * `attempt_count` counts claims: a lapsed `assigned` build goes back to the queue until it has been claimed
 * MAX_CLAIM_ATTEMPTS times, then fails.
 */
export async function sweep(deps: Pick<AppDeps, "db" | "clock" | "config" | "jobSignal">): Promise<SweepCounts> {
  const now = deps.clock.now();
  const { db, config } = deps;

  const offline = await db
    .update(runners)
    .set({ status: "offline", updatedAt: now })
    .where(and(ne(runners.status, "offline"), sql`COALESCE(${runners.lastHeartbeatAt}, ${runners.createdAt}) < ${now - config.runnerOfflineAfterS}`))
    .returning({ id: runners.id });

  // Timeouts first: a build both past its time limit and without a lease timed out, whatever else happened.
  const timedOut = await db
    .update(builds)
    .set({
      status: "timed_out",
      failureReason: "timeout",
      cancelRequested: true,
      finishedAt: now,
      updatedAt: now,
      stepResults: endStepResultsSql(now),
    })
    .where(and(eq(builds.status, "running"), sql`COALESCE(${builds.startedAt}, ${builds.queuedAt}) + ${builds.timeoutS} < ${now}`))
    .returning({ id: builds.id });

  const exhausted = await db
    .update(builds)
    .set({ status: "failed", failureReason: "claim_attempts_exhausted", finishedAt: now, updatedAt: now, stepResults: endStepResultsSql(now) })
    .where(and(eq(builds.status, "assigned"), lt(builds.leaseExpiresAt, now), sql`${builds.attemptCount} >= ${MAX_CLAIM_ATTEMPTS}`))
    .returning({ id: builds.id });

  const requeued = await db
    .update(builds)
    .set({ status: "queued", runnerId: null, leaseExpiresAt: null, updatedAt: now })
    .where(and(eq(builds.status, "assigned"), lt(builds.leaseExpiresAt, now), sql`${builds.attemptCount} < ${MAX_CLAIM_ATTEMPTS}`))
    .returning({ id: builds.id });
  if (requeued.length > 0) deps.jobSignal.notify();

  // One batch per lost build: its log line and its automatic retry go with the failure (src/domain/builds/runner-lost.ts).
  const lapsed = await db
    .select({ id: builds.id })
    .from(builds)
    .where(and(eq(builds.status, "running"), lt(builds.leaseExpiresAt, now)));
  const lost: string[] = [];
  for (const { id } of lapsed) if (await failLostBuild(deps, id, now)) lost.push(id);
  // A retry is a queued build: wake the runners long-polling this process.
  if (lost.length > 0) deps.jobSignal.notify();

  const expired = await db
    .update(builds)
    .set({ status: "expired", failureReason: "queue_ttl", finishedAt: now, updatedAt: now })
    .where(and(eq(builds.status, "queued"), lt(builds.queuedAt, now - config.queueTtlS)))
    .returning({ id: builds.id });

  // Busy runners whose last job just ended by one of the moves above are free again.
  await db
    .update(runners)
    .set({ status: "online", updatedAt: now })
    .where(
      and(
        inArray(runners.status, ["busy"]),
        sql`NOT EXISTS (SELECT 1 FROM ${builds} WHERE ${builds.runnerId} = ${runners.id} AND ${builds.status} IN ('assigned', 'running'))`,
      ),
    );

  return {
    runnersOffline: offline.length,
    requeued: requeued.length,
    attemptsExhausted: exhausted.length,
    runnerLost: lost.length,
    timedOut: timedOut.length,
    expired: expired.length,
  };
}
