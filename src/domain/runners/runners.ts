import { and, asc, eq, gte, inArray, sql, type SQL } from "drizzle-orm";
import { z } from "zod";
import { heartbeatBodySchema } from "../../protocol/runner.ts";
import { builds, runners } from "../../db/schema/index.ts";
import { RUNNER_TRUSTS } from "../../db/schema/constants.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { auditStatement } from "../common/audit.ts";
import { ACTIVE_STATUSES } from "../builds/build-machine.ts";
import { prefixedToken, sha256Hex, TOKEN_PREFIXES } from "../common/crypto.ts";
import type { RunnerRow } from "./runner-auth.ts";
import { endStepResultsSql } from "../builds/step-results.ts";
import type { UserRow } from "../auth/users.ts";

type DbDeps = Pick<AppDeps, "db" | "clock">;

/** Platforms a runner can build for (docs/api.md §6): `any` is a pipeline's wildcard, never a capability. */
export const RUNNER_PLATFORMS = ["ios", "android", "macos"] as const;

/** How a runner isolates its steps from itself, as it reports it (docs/runner-isolation.md). */
export const RUNNER_ISOLATIONS = ["user", "none"] as const;

/**
 * `platforms` and `max_jobs` drive the claim; `isolation` is the runner's own report; other keys are kept as
 * given (docs/spec.md: not shown). `max_jobs: null` lifts a cap (owners and admins only).
 */
export const capabilitiesSchema = z.looseObject({
  platforms: z
    .array(z.enum(RUNNER_PLATFORMS, { error: "a platform is one of ios, android, macos" }))
    .max(16)
    .default([])
    // A repeated platform means nothing more; keep the list a set so narrowing compares cleanly.
    .transform((list) => [...new Set(list)]),
  max_jobs: z.number().int().min(1).max(1000).nullable().optional(),
  isolation: z.enum(RUNNER_ISOLATIONS).optional(),
});
export type RunnerCapabilities = z.infer<typeof capabilitiesSchema>;

export const registerRunnerSchema = z.object({
  name: z.string().trim().min(1).max(100).optional(),
  capabilities: capabilitiesSchema.optional(),
  trust: z.enum(RUNNER_TRUSTS).optional(),
});

export const patchRunnerSchema = z.object({
  name: z.string().trim().min(1).max(100).optional(),
  capabilities: capabilitiesSchema.optional(),
  status: z.enum(["online", "draining"]).optional(),
  trust: z.enum(RUNNER_TRUSTS).optional(),
});

/** Stored capabilities: a cap of null is no cap, so the key goes rather than being kept as null. */
function storedCapabilities(caps: RunnerCapabilities): RunnerCapabilities {
  const { max_jobs, ...rest } = caps;
  return max_jobs === null || max_jobs === undefined ? rest : { ...rest, max_jobs };
}

/**
 * A runner may report `busy` too; the daemon derives online/busy from its active jobs either way. Since docs/api.md §16
 * it also reports its free disk and whether it is below its --min-free-gb (both optional: older runners send neither).
 */
/** The heartbeat's body: the wire protocol's (src/protocol/runner.ts), in full zod for the OpenAPI document. */
export const heartbeatSchema = z.object(heartbeatBodySchema.shape);

export function toRunnerJson(r: RunnerRow) {
  return {
    id: r.id,
    name: r.name,
    status: r.status,
    capabilities: r.capabilities as RunnerCapabilities,
    trust: r.trust,
    last_heartbeat_at: r.lastHeartbeatAt,
    free_disk_bytes: r.freeDiskBytes,
    low_disk: r.lowDisk,
    registered_by: r.registeredBy,
    created_at: r.createdAt,
    updated_at: r.updatedAt,
  };
}

/**
 * A runner registered or edited by a user builds for at least one platform (docs/api.md §21): with none it could
 * only ever take `platform: any` builds, which is almost always a mistake made by leaving the list out.
 */
function assertSomePlatform(platforms: readonly string[] | undefined): void {
  if (platforms && platforms.length > 0) return;
  throw new ApiError("invalid_input", "a runner builds for at least one platform: capabilities.platforms names ios, android or macos", [
    { path: "capabilities.platforms", message: "at least one platform is required" },
  ]);
}

export async function registerRunner(
  deps: DbDeps,
  actor: UserRow,
  input: z.infer<typeof registerRunnerSchema>,
): Promise<{ runner: RunnerRow; token: string }> {
  assertSomePlatform(input.capabilities?.platforms);
  const token = prefixedToken(TOKEN_PREFIXES.runner);
  const now = deps.clock.now();
  const runner: RunnerRow = {
    id: crypto.randomUUID(),
    name: input.name ?? null,
    tokenHash: await sha256Hex(token),
    status: "online",
    capabilities: storedCapabilities(input.capabilities ?? { platforms: [] }),
    trust: input.trust ?? "protected",
    // Null until the runner first calls in (the UI says "not started yet", docs/api.md §21); the sweeper counts the
    // offline window from registration then, so a runner that never calls in goes offline like any other.
    lastHeartbeatAt: null,
    freeDiskBytes: null,
    lowDisk: null,
    registeredBy: actor.id,
    createdAt: now,
    updatedAt: now,
  };
  await deps.db.batch([
    deps.db.insert(runners).values(runner),
    auditStatement(deps, { action: "runner.register", actor, targetType: "runner", targetId: runner.id, details: { trust: runner.trust } }),
  ]);
  return { runner, token };
}

export async function listRunners(deps: Pick<AppDeps, "db">): Promise<RunnerRow[]> {
  return deps.db.select().from(runners).orderBy(asc(runners.createdAt), asc(runners.id));
}

export async function getRunner(deps: Pick<AppDeps, "db">, id: string): Promise<RunnerRow> {
  const row = await deps.db.select().from(runners).where(eq(runners.id, id)).get();
  if (!row) throw new ApiError("not_found", "no such runner");
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

/**
 * Who is changing a runner: the runner itself (its token) may only narrow its platforms and report its isolation,
 * so a stolen token cannot widen a runner to claim another platform's jobs and their signing keys, lift its cap or
 * raise its trust (docs/runner-isolation.md); an owner or admin may set any.
 */
export type RunnerEditor = { kind: "runner" } | { kind: "user"; user: UserRow };

export async function updateRunner(
  deps: DbDeps,
  runnerId: string,
  input: z.infer<typeof patchRunnerSchema>,
  editor: RunnerEditor = { kind: "runner" },
): Promise<RunnerRow> {
  const current = await getRunner(deps, runnerId);
  const now = deps.clock.now();
  const fields: Partial<RunnerRow> = { updatedAt: now };
  if (input.name !== undefined) fields.name = input.name;
  if (input.trust !== undefined) {
    if (editor.kind === "runner") throw new ApiError("forbidden", "only an owner or admin changes a runner's trust");
    fields.trust = input.trust;
  }
  let guard: SQL | undefined;
  const had = current.capabilities as RunnerCapabilities;
  if (input.capabilities !== undefined) {
    const wanted = input.capabilities;
    // A runner may narrow its own list to nothing (it then takes only `platform: any` builds); a user may not empty
    // it, though a runner registered with none before the rule keeps its empty list through other edits (max jobs).
    if (editor.kind === "user" && (had.platforms ?? []).length > 0) assertSomePlatform(wanted.platforms);
    if (editor.kind === "runner") {
      const widened = wanted.platforms.filter((p) => !(had.platforms ?? []).includes(p));
      if (widened.length > 0) {
        throw new ApiError("forbidden", `a runner may only narrow its platforms; ${widened.join(", ")} needs an owner or admin`);
      }
      if (wanted.max_jobs !== undefined && (wanted.max_jobs ?? undefined) !== had.max_jobs) {
        throw new ApiError("forbidden", "only an owner or admin sets a runner's max_jobs");
      }
      // The check above read the row; the UPDATE only lands while the capabilities are still what was read, so a
      // concurrent narrowing by an admin cannot be undone by a stale runner write.
      guard = sql`${runners.capabilities} = ${JSON.stringify(current.capabilities)}`;
    }
    // Keys left out keep their value: the cap is not lifted by a runner's report of its platforms, and the
    // isolation the runner reported is not erased by an admin's edit of the platforms.
    fields.capabilities = storedCapabilities({
      ...wanted,
      max_jobs: wanted.max_jobs === undefined ? had.max_jobs : wanted.max_jobs,
      isolation: wanted.isolation ?? had.isolation,
    });
  }
  const [updated] = await deps.db.batch([
    deps.db
      .update(runners)
      .set(fields)
      .where(guard ? and(eq(runners.id, runnerId), guard) : eq(runners.id, runnerId))
      .returning({ id: runners.id }),
    // A user's edit is not a sign of life from the runner.
    refreshRunnerStatement(deps, runnerId, { heartbeat: editor.kind === "runner", requested: input.status }),
    auditStatement(deps, {
      action: "runner.update",
      actor: editor.kind === "user" ? editor.user : null,
      targetType: "runner",
      targetId: runnerId,
      details: {
        by: editor.kind,
        ...(input.capabilities ? { platforms: input.capabilities.platforms } : {}),
        ...(input.capabilities?.max_jobs !== undefined ? { max_jobs: input.capabilities.max_jobs } : {}),
        ...(input.status ? { status: input.status } : {}),
        ...(input.trust ? { trust: input.trust } : {}),
      },
    }),
  ]);
  if (updated.length === 0) throw new ApiError("invalid_transition", "the runner changed meanwhile; read it and try again");
  return getRunner(deps, runnerId);
}

/**
 * Removes a runner (docs/api.md §6). One batch: its assigned build goes back to the queue, a running one fails with
 * `runner_removed`, the row goes (so its token fails on the next lookup of every daemon), and the audit event.
 */
export async function removeRunner(deps: DbDeps & Pick<AppDeps, "jobSignal">, actor: UserRow, runnerId: string): Promise<void> {
  const runner = await getRunner(deps, runnerId);
  const now = deps.clock.now();
  await deps.db.batch([
    deps.db
      .update(builds)
      .set({ status: "queued", runnerId: null, leaseExpiresAt: null, updatedAt: now })
      .where(and(eq(builds.runnerId, runnerId), eq(builds.status, "assigned"))),
    deps.db
      .update(builds)
      .set({
        status: "failed",
        failureReason: "runner_removed",
        exitCode: null,
        finishedAt: now,
        updatedAt: now,
        stepResults: endStepResultsSql(now),
      })
      .where(and(eq(builds.runnerId, runnerId), eq(builds.status, "running"))),
    deps.db.delete(runners).where(eq(runners.id, runnerId)),
    auditStatement(deps, {
      action: "runner.remove",
      actor,
      targetType: "runner",
      targetId: runnerId,
      details: { name: runner.name, registered_by: runner.registeredBy },
    }),
  ]);
  // A build back in the queue wakes the runners long-polling this process (others find it by polling).
  deps.jobSignal.notify();
}

/** A fresh token for a runner; the old one fails on the next call to any daemon. Only the hash is kept. */
export async function rotateRunnerToken(deps: DbDeps, actor: UserRow, runnerId: string): Promise<string> {
  await getRunner(deps, runnerId);
  const token = prefixedToken(TOKEN_PREFIXES.runner);
  const now = deps.clock.now();
  const [updated] = await deps.db.batch([
    deps.db
      .update(runners)
      .set({ tokenHash: await sha256Hex(token), updatedAt: now })
      .where(eq(runners.id, runnerId))
      .returning({ id: runners.id }),
    auditStatement(deps, { action: "runner.rotate_token", actor, targetType: "runner", targetId: runnerId }),
  ]);
  if (updated.length === 0) throw new ApiError("not_found", "no such runner");
  return token;
}

/** Seconds between heartbeats we ask for: a third of the tighter of the offline window and the lease. */
export function heartbeatInterval(deps: Pick<AppDeps, "config">): number {
  return Math.max(1, Math.floor(Math.min(deps.config.runnerOfflineAfterS, deps.config.jobLeaseS) / 3));
}

/**
 * A heartbeat records the call, renews the leases of the runner's active jobs and names the jobs it must stop:
 * builds on this runner that were canceled (or timed out) within the last lease period.
 */
export async function heartbeat(deps: Pick<AppDeps, "db" | "clock" | "config">, runnerId: string, input: z.infer<typeof heartbeatSchema> = {}) {
  const now = deps.clock.now();
  const disk: Partial<RunnerRow> = {};
  if (input.free_disk_bytes !== undefined) disk.freeDiskBytes = input.free_disk_bytes;
  if (input.low_disk !== undefined) disk.lowDisk = input.low_disk;
  await deps.db.batch([
    deps.db
      .update(builds)
      .set({ leaseExpiresAt: now + deps.config.jobLeaseS, updatedAt: now })
      .where(and(eq(builds.runnerId, runnerId), inArray(builds.status, [...ACTIVE_STATUSES]))),
    refreshRunnerStatement(deps, runnerId, { heartbeat: true, requested: input.status }),
    // Stored as reported: the Runners page shows them and affinity passes over a runner low on disk.
    ...(Object.keys(disk).length > 0 ? [deps.db.update(runners).set(disk).where(eq(runners.id, runnerId))] : []),
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
