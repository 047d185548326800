import { and, asc, eq, gte, inArray, sql, type SQL } from "drizzle-orm";
import { z } from "zod";
import { builds, runners } from "../db/schema/index.ts";
import type { AppDeps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { auditStatement } from "./audit.ts";
import { ACTIVE_STATUSES } from "./build-machine.ts";
import { prefixedToken, sha256Hex, TOKEN_PREFIXES } from "./crypto.ts";
import type { RunnerRow } from "./runner-auth.ts";
import type { UserRow } from "./users.ts";

type DbDeps = Pick<AppDeps, "db" | "clock">;

/** `platforms` drives the claim; other capability keys are kept as given (SPEC: not shown). */
export const capabilitiesSchema = z.looseObject({
  platforms: z
    .array(z.string().regex(/^[a-z0-9_-]{1,32}$/, "lowercase platform names such as ios, android, macos"))
    .max(16)
    .default([]),
});
export type RunnerCapabilities = z.infer<typeof capabilitiesSchema>;

export const registerRunnerSchema = z.object({
  name: z.string().trim().min(1).max(100).optional(),
  capabilities: capabilitiesSchema.optional(),
});

export const patchRunnerSchema = z.object({
  name: z.string().trim().min(1).max(100).optional(),
  capabilities: capabilitiesSchema.optional(),
  status: z.enum(["online", "draining"]).optional(),
});

/** A runner may report `busy` too; the daemon derives online/busy from its active jobs either way. */
export const heartbeatSchema = z.object({ status: z.enum(["online", "busy", "draining"]).optional() });

export function toRunnerJson(r: RunnerRow) {
  return {
    id: r.id,
    name: r.name,
    status: r.status,
    capabilities: r.capabilities as RunnerCapabilities,
    last_heartbeat_at: r.lastHeartbeatAt,
    registered_by: r.registeredBy,
    created_at: r.createdAt,
    updated_at: r.updatedAt,
  };
}

export async function registerRunner(
  deps: DbDeps,
  actor: UserRow,
  input: z.infer<typeof registerRunnerSchema>,
): Promise<{ runner: RunnerRow; token: string }> {
  const token = prefixedToken(TOKEN_PREFIXES.runner);
  const now = deps.clock.now();
  const runner: RunnerRow = {
    id: crypto.randomUUID(),
    name: input.name ?? null,
    tokenHash: await sha256Hex(token),
    status: "online",
    capabilities: input.capabilities ?? { platforms: [] },
    // Registration starts the offline clock, so a runner that never calls in goes offline like any other.
    lastHeartbeatAt: now,
    registeredBy: actor.id,
    createdAt: now,
    updatedAt: now,
  };
  await deps.db.batch([
    deps.db.insert(runners).values(runner),
    auditStatement(deps, { action: "runner.register", actor, targetType: "runner", targetId: runner.id }),
  ]);
  return { runner, token };
}

export async function listRunners(deps: Pick<AppDeps, "db">): Promise<RunnerRow[]> {
  return deps.db.select().from(runners).orderBy(asc(runners.createdAt), asc(runners.id));
}

export async function getRunner(deps: Pick<AppDeps, "db">, id: string): Promise<RunnerRow> {
  const row = await deps.db.select().from(runners).where(eq(runners.id, id)).get();
  if (!row) throw new ApiError(404, "not_found", "no such runner");
  return row;
}

/**
 * One statement that brings a runner's status in line with its jobs: `busy` while it holds an assigned or
 * running build, else `online`; `draining` sticks until the runner asks for `online`. With `heartbeat`, it
 * also records the call (an `offline` runner comes back). Conditional on the row, so it is safe to repeat.
 */
export function refreshRunnerStatement(
  deps: DbDeps,
  runnerId: string,
  options: { heartbeat?: boolean; requested?: "online" | "busy" | "draining" } = {},
) {
  const now = deps.clock.now();
  const active = sql`EXISTS (SELECT 1 FROM ${builds} WHERE ${builds.runnerId} = ${runnerId} AND ${builds.status} IN ('assigned', 'running'))`;
  const derived = sql`CASE WHEN ${active} THEN 'busy' ELSE 'online' END`;
  let status: SQL;
  if (options.requested === "draining") status = sql`'draining'`;
  else if (options.requested !== undefined) status = derived;
  else {
    // Without a request, draining sticks; offline sticks too unless the runner itself is calling in.
    const sticky = sql.raw(options.heartbeat ? "('draining')" : "('draining', 'offline')");
    status = sql`CASE WHEN ${runners.status} IN ${sticky} THEN ${runners.status} ELSE ${derived} END`;
  }
  return deps.db
    .update(runners)
    .set(options.heartbeat ? { status, lastHeartbeatAt: now, updatedAt: now } : { status, updatedAt: now })
    .where(eq(runners.id, runnerId));
}

export async function updateRunner(deps: DbDeps, runnerId: string, input: z.infer<typeof patchRunnerSchema>): Promise<RunnerRow> {
  const now = deps.clock.now();
  const fields: Partial<RunnerRow> = { updatedAt: now };
  if (input.name !== undefined) fields.name = input.name;
  if (input.capabilities !== undefined) fields.capabilities = input.capabilities;
  await deps.db.batch([
    deps.db.update(runners).set(fields).where(eq(runners.id, runnerId)),
    refreshRunnerStatement(deps, runnerId, { heartbeat: true, requested: input.status }),
  ]);
  return getRunner(deps, runnerId);
}

/** Seconds between heartbeats we ask for: a third of the tighter of the offline window and the lease. */
export function heartbeatInterval(deps: Pick<AppDeps, "config">): number {
  return Math.max(1, Math.floor(Math.min(deps.config.runnerOfflineAfterS, deps.config.jobLeaseS) / 3));
}

/**
 * A heartbeat records the call, renews the leases of the runner's active jobs and names the jobs it must stop:
 * builds on this runner that were canceled (or timed out) within the last lease period.
 */
export async function heartbeat(deps: Pick<AppDeps, "db" | "clock" | "config">, runnerId: string, requested?: "online" | "busy" | "draining") {
  const now = deps.clock.now();
  await deps.db.batch([
    deps.db
      .update(builds)
      .set({ leaseExpiresAt: now + deps.config.jobLeaseS, updatedAt: now })
      .where(and(eq(builds.runnerId, runnerId), inArray(builds.status, [...ACTIVE_STATUSES]))),
    refreshRunnerStatement(deps, runnerId, { heartbeat: true, requested }),
  ]);
  const [runner, canceled] = await Promise.all([getRunner(deps, runnerId), cancelJobIds(deps, runnerId)]);
  return { runner: toRunnerJson(runner), cancel_job_ids: canceled, next_heartbeat_in_s: heartbeatInterval(deps) };
}

async function cancelJobIds(deps: Pick<AppDeps, "db" | "clock" | "config">, runnerId: string): Promise<string[]> {
  const since = deps.clock.now() - deps.config.jobLeaseS;
  const rows = await deps.db
    .select({ id: builds.id })
    .from(builds)
    .where(
      and(
        eq(builds.runnerId, runnerId),
        inArray(builds.status, ["canceled", "timed_out"]),
        eq(builds.cancelRequested, true),
        gte(builds.finishedAt, since),
      ),
    );
  return rows.map((r) => r.id);
}
