// Shared caches (docs/api.md §16, docs/decisions.md "Shared caches"): archives runners keep in the instance's S3/R2
// bucket. The daemon only hands out presigned URLs and keeps the index; the bytes never pass through it. An entry is
// scoped to its project and to the trust of the build that wrote it, so an open or fork build never writes what a
// protected build restores.
import { and, desc, eq, inArray, isNull, lt, lte, notInArray, sql } from "drizzle-orm";
import { z } from "zod";
import { builds, cacheEntries, projects, runners } from "../../db/schema/index.ts";
import type { BuildTrust } from "../../db/schema/constants.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import type { StorageLocation } from "../../storage/types.ts";
import { newStorageLocationAt, openStoreAt } from "../artifacts/artifacts.ts";
import { readActiveStorageSettings } from "../settings/artifact-storage-settings.ts";
import { cacheLookupQuerySchema, cacheUploadBodySchema } from "../../protocol/runner.ts";

type Deps = Pick<AppDeps, "db" | "clock" | "config" | "secrets" | "openArtifactStore">;
export type CacheEntryRow = typeof cacheEntries.$inferSelect;

/** The presigned PUT lasts an hour (as an artifact's), the presigned GET 15 minutes: the runner starts it at once. */
export const CACHE_UPLOAD_TTL_S = 3600;
export const CACHE_DOWNLOAD_TTL_S = 15 * 60;
/** An entry never uploaded is dropped this long after its upload link expired (a PUT started late may still run). */
const PENDING_GRACE_S = 3600;
/** An entry nobody saved or restored for this long is dropped. */
export const CACHE_MAX_IDLE_S = 14 * 86_400;
/** Pending entries checked with a HEAD by one lookup, newest first: a lookup stays a few requests at most. */
const HEADS_PER_LOOKUP = 8;
/** Entries whose objects one maintenance pass removes. */
const REMOVALS_PER_PASS = 100;

// The request bodies are the wire protocol's (src/protocol/runner.ts), the runner's own types come from the same place.
export const cacheUploadSchema = z.object(cacheUploadBodySchema.shape);
export const cacheQuerySchema = z.object(cacheLookupQuerySchema.shape);

/**
 * Which entries a build reads: its own trust's, and a fork build also the open ones (the project's own branches,
 * no credentials, the same code it checks out anyway). Protected entries are read by protected builds only: a
 * protected build had signing material and secret variables, and what it compiled may hold them.
 */
const READS: Record<BuildTrust, BuildTrust[]> = { protected: ["protected"], open: ["open"], fork: ["fork", "open"] };

/** Builds that may still save: a succeeded build may save after its final report (within the job token's grace). */
const SAVING_STATUSES = ["assigned", "running", "succeeded"];
const RESTORING_STATUSES = ["assigned", "running"];

interface JobScope {
  projectId: string;
  buildId: string;
  /** The trust entries are written with: the build's, but never above the runner's at this moment. */
  trust: BuildTrust;
}

/** The job's project and trust; 404 when it is not this runner's job, 409 when it is past the allowed states. */
async function jobScope(deps: Pick<AppDeps, "db">, runnerId: string, jobId: string, allowed: string[]): Promise<JobScope> {
  const row = await deps.db
    .select({ id: builds.id, projectId: builds.projectId, status: builds.status, trust: builds.trust, runnerTrust: runners.trust })
    .from(builds)
    .leftJoin(runners, eq(runners.id, builds.runnerId))
    .where(and(eq(builds.id, jobId), eq(builds.runnerId, runnerId)))
    .get();
  if (!row) throw new ApiError("not_found", "no such job on this runner");
  if (!allowed.includes(row.status)) throw new ApiError("job_not_active", `a ${row.status} build has no cache to restore or save`);
  // A runner demoted to open while it holds a protected build is no longer trusted to write protected entries.
  const trust = row.trust === "protected" && row.runnerTrust !== "protected" ? "open" : row.trust;
  return { projectId: row.projectId, buildId: row.id, trust };
}

/** Shared caches live in the instance's bucket; with artifacts on local disk runners keep their caches locally. */
async function assertSharedStorage(deps: Deps): Promise<void> {
  const active = await readActiveStorageSettings(deps);
  if (active.provider === "local") {
    throw new ApiError(
      "invalid_state",
      "shared caches need S3 or R2 artifact storage; this instance stores artifacts on local disk, so runners keep their caches locally",
    );
  }
}

/** POST …/jobs/{job_id}/caches: a pending entry and a presigned PUT for its archive. */
export async function createCacheUpload(deps: Deps, input: z.infer<typeof cacheUploadSchema> & { runnerId: string; jobId: string }) {
  const scope = await jobScope(deps, input.runnerId, input.jobId, SAVING_STATUSES);
  await assertSharedStorage(deps);
  const id = crypto.randomUUID();
  const location = await newStorageLocationAt(deps, `caches/${scope.projectId}/${scope.trust}/${id}`);
  const store = await openStoreAt(deps, location);
  if (!store.presignUpload) throw new ApiError("invalid_state", "the artifact storage cannot hand out upload URLs");
  const now = deps.clock.now();
  const presigned = await store.presignUpload(location.key, { contentType: "application/octet-stream", expiresInS: CACHE_UPLOAD_TTL_S, now });
  await deps.db.insert(cacheEntries).values({
    id,
    projectId: scope.projectId,
    trust: scope.trust,
    key: input.key,
    status: "pending",
    sizeBytes: input.size_bytes,
    sha256: input.sha256,
    storageLocation: location,
    buildId: scope.buildId,
    uploadExpiresAt: now + CACHE_UPLOAD_TTL_S,
    lastUsedAt: now,
    createdAt: now,
    updatedAt: now,
  });
  return { upload: { method: "PUT" as const, url: presigned.url, headers: presigned.headers, expires_at: now + CACHE_UPLOAD_TTL_S } };
}

/** Whether `key` is the exact key or starts with one of the restore keys. */
function matches(key: string, exact: string, prefixes: string[]): boolean {
  return key === exact || prefixes.some((p) => key.startsWith(p));
}

/**
 * Pending entries this lookup could return are checked with a HEAD: one whose object has the declared size turns
 * ready (and older ready entries of its key are dropped). Newest first, a few at most.
 */
async function promoteUploaded(deps: Deps, scope: JobScope, trusts: BuildTrust[], key: string, prefixes: string[]): Promise<void> {
  const now = deps.clock.now();
  const pending = await deps.db
    .select()
    .from(cacheEntries)
    .where(
      and(
        eq(cacheEntries.projectId, scope.projectId),
        inArray(cacheEntries.trust, trusts),
        eq(cacheEntries.status, "pending"),
        sql`${cacheEntries.uploadExpiresAt} + ${PENDING_GRACE_S} > ${now}`,
      ),
    )
    .orderBy(desc(cacheEntries.createdAt));
  const candidates = pending.filter((e) => matches(e.key, key, prefixes)).slice(0, HEADS_PER_LOOKUP);
  for (const entry of candidates) {
    const location = entry.storageLocation as StorageLocation;
    const stored = await (await openStoreAt(deps, location)).head(location.key);
    // Not there yet (an upload under way, or never made) or of another size: it stays invisible.
    if (stored?.sizeBytes !== entry.sizeBytes) continue;
    await deps.db.batch([
      deps.db
        .update(cacheEntries)
        .set({ status: "ready", updatedAt: now, lastUsedAt: now })
        .where(and(eq(cacheEntries.id, entry.id), eq(cacheEntries.status, "pending"))),
      // The newest entry of a key wins; the older ones only take room.
      deps.db
        .update(cacheEntries)
        .set({ status: "deleting", updatedAt: now })
        .where(
          and(
            eq(cacheEntries.projectId, entry.projectId),
            eq(cacheEntries.trust, entry.trust),
            eq(cacheEntries.key, entry.key),
            eq(cacheEntries.status, "ready"),
            lt(cacheEntries.createdAt, entry.createdAt),
          ),
        ),
    ]);
  }
}

/**
 * GET …/jobs/{job_id}/caches: the exact key's entry, else the newest whose key starts with one of the restore keys,
 * in their order; 404 not_found when none. The answer's URL is a presigned GET of the archive.
 */
export async function findCacheEntry(deps: Deps, input: { runnerId: string; jobId: string; key: string; restoreKeys: string[] }) {
  const scope = await jobScope(deps, input.runnerId, input.jobId, RESTORING_STATUSES);
  await assertSharedStorage(deps);
  const trusts = READS[scope.trust];
  await promoteUploaded(deps, scope, trusts, input.key, input.restoreKeys);
  const ready = await deps.db
    .select()
    .from(cacheEntries)
    .where(and(eq(cacheEntries.projectId, scope.projectId), inArray(cacheEntries.trust, trusts), eq(cacheEntries.status, "ready")))
    .orderBy(desc(cacheEntries.createdAt), desc(sql`rowid`));
  // Entries per project are few (the cap keeps them so): matching in code keeps prefixes free of LIKE's wildcards.
  const hit =
    ready.find((e) => e.key === input.key) ??
    input.restoreKeys.map((prefix) => ready.find((e) => e.key.startsWith(prefix))).find((e) => e !== undefined);
  if (!hit) throw new ApiError("not_found", "no cache entry matches the key or a restore key");
  const now = deps.clock.now();
  const location = hit.storageLocation as StorageLocation;
  const store = await openStoreAt(deps, location);
  if (!store.presignDownload) throw new ApiError("invalid_state", "the artifact storage cannot hand out download URLs");
  const url = await store.presignDownload(location.key, {
    contentDisposition: "attachment",
    contentType: "application/octet-stream",
    expiresInS: CACHE_DOWNLOAD_TTL_S,
    now,
  });
  await deps.db.update(cacheEntries).set({ lastUsedAt: now }).where(eq(cacheEntries.id, hit.id));
  return { key: hit.key, url, size_bytes: hit.sizeBytes, sha256: hit.sha256 };
}

// ---------------------------------------------------------------------------------------------------------
// Maintenance

/**
 * Old entries go (docs/decisions.md "Shared caches"): uploads never made, entries idle for CACHE_MAX_IDLE_S, entries
 * of deleted projects (soft-deleted: the row stays), and per project the least recently used beyond HANGAR_SHARED_CACHE_MAX_GB. They are marked
 * `deleting` first (no lookup returns them from then on), then each object is removed and its row deleted: a removal
 * that fails leaves the row for the next pass. Conditional statements only, so two daemons may run it together.
 */
export async function sweepSharedCaches(deps: Deps): Promise<number> {
  const now = deps.clock.now();
  const doomed = (where: ReturnType<typeof and>) => deps.db.update(cacheEntries).set({ status: "deleting", updatedAt: now }).where(where);
  await doomed(and(eq(cacheEntries.status, "pending"), lte(cacheEntries.uploadExpiresAt, now - PENDING_GRACE_S)));
  await doomed(and(eq(cacheEntries.status, "ready"), lte(cacheEntries.lastUsedAt, now - CACHE_MAX_IDLE_S)));
  await doomed(
    and(
      inArray(cacheEntries.status, ["pending", "ready"]),
      notInArray(cacheEntries.projectId, deps.db.select({ id: projects.id }).from(projects).where(isNull(projects.deletedAt))),
    ),
  );
  await dropBeyondCap(deps, now);

  const gone = await deps.db.select().from(cacheEntries).where(eq(cacheEntries.status, "deleting")).limit(REMOVALS_PER_PASS);
  let deleted = 0;
  let firstError: unknown = null;
  for (const entry of gone) {
    const location = entry.storageLocation as StorageLocation;
    try {
      await (await openStoreAt(deps, location)).remove(location.key);
    } catch (err) {
      firstError ??= err;
      continue;
    }
    const removed = await deps.db
      .delete(cacheEntries)
      .where(and(eq(cacheEntries.id, entry.id), eq(cacheEntries.status, "deleting")))
      .returning({ id: cacheEntries.id });
    deleted += removed.length;
  }
  if (firstError !== null) throw firstError;
  return deleted;
}

/** Per project, ready entries beyond the byte cap, least recently used first, are marked `deleting`. */
async function dropBeyondCap(deps: Deps, now: number): Promise<void> {
  const cap = deps.config.sharedCacheMaxBytes;
  const over = await deps.db
    .select({ projectId: cacheEntries.projectId })
    .from(cacheEntries)
    .where(eq(cacheEntries.status, "ready"))
    .groupBy(cacheEntries.projectId)
    .having(sql`sum(${cacheEntries.sizeBytes}) > ${cap}`);
  for (const { projectId } of over) {
    const entries = await deps.db
      .select({ id: cacheEntries.id, sizeBytes: cacheEntries.sizeBytes })
      .from(cacheEntries)
      .where(and(eq(cacheEntries.projectId, projectId), eq(cacheEntries.status, "ready")))
      .orderBy(desc(cacheEntries.lastUsedAt), desc(cacheEntries.createdAt));
    let kept = 0;
    const drop: string[] = [];
    for (const e of entries) {
      if (drop.length === 0 && kept + e.sizeBytes <= cap) kept += e.sizeBytes;
      else drop.push(e.id);
    }
    for (let i = 0; i < drop.length; i += 100) {
      await deps.db
        .update(cacheEntries)
        .set({ status: "deleting", updatedAt: now })
        .where(and(inArray(cacheEntries.id, drop.slice(i, i + 100)), eq(cacheEntries.status, "ready")));
    }
  }
}
