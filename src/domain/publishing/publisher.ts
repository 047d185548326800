// Publishes as outbox work (docs/publishing.md): leased one at a time per row, the lease renewed while a long
// upload runs, retried with the outbox's backoff, resumed from `progress` after a crash, and never worked by two
// daemons at once (the claim is one conditional UPDATE, every later write is guarded by the lease).
import { and, asc, eq, inArray, isNull, or, lt, sql } from "drizzle-orm";
import { artifacts, builds, notifications, outbox, projects, publishes } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError, describeError } from "../../errors.ts";
import { openStoreAt } from "../artifacts/artifacts.ts";
import type { AppMetadata } from "../artifacts/app-metadata.ts";
import { OUTBOX_MAX_ATTEMPTS, retryDelayMs } from "../events/outbox.ts";
import { matchesAnyRefGlob } from "../common/ref-glob.ts";
import type { StorageLocation } from "../../storage/types.ts";
import { publishEntrySchema, type PublishEntry } from "./config.ts";
import { openAppStoreConnectKey, openGooglePlayKey } from "./store-credentials.ts";
import { StoreError } from "./store-http.ts";
import { publishToGooglePlay, publishToTestflight, StillProcessing, type ArtifactSource, type Progress } from "./stores.ts";

export type PublishRow = typeof publishes.$inferSelect;
type PublisherDeps = Pick<AppDeps, "db" | "clock" | "config" | "secrets" | "fetch" | "uploadFetch" | "md5" | "log" | "openArtifactStore">;

/** How long processing may take before the publish fails. */
export const PUBLISH_PROCESSING_LIMIT_MS = 60 * 60 * 1000;

export function toPublishJson(row: PublishRow) {
  return { id: row.id, build_id: row.buildId, to: row.to, state: row.state, detail: row.detail, attempts: row.attempts, updated_at: row.updatedAt };
}

export async function listPublishes(deps: Pick<AppDeps, "db">, buildId: string) {
  const rows = await deps.db.select().from(publishes).where(eq(publishes.buildId, buildId)).orderBy(asc(publishes.createdAt), asc(publishes.to));
  return rows.map(toPublishJson);
}

/**
 * A publish by hand: a finished, succeeded, protected build (an open or fork build → 403 forbidden) whose
 * pipeline names the store (its entry is used) or not (defaults: TestFlight with no groups; Google Play needs a
 * `track`, so a pipeline without a google_play entry publishes to `internal`). A publish already running or done
 * for that store is answered as it is; a failed one starts again.
 */
export async function publishByHand(deps: Pick<AppDeps, "db" | "clock">, buildId: string, to: PublishEntry["to"]) {
  const build = await deps.db.select().from(builds).where(eq(builds.id, buildId)).get();
  if (!build) throw new ApiError("not_found", "no such build");
  if (build.trust !== "protected")
    throw new ApiError(
      "forbidden",
      `${build.trust === "open" ? "an" : "a"} ${build.trust} build never publishes: only protected builds reach the stores`,
    );
  if (build.status !== "succeeded") throw new ApiError("invalid_state", `only a succeeded build can be published (this one is ${build.status})`);
  const entries = ((build.configSnapshot as { publish?: unknown[] }).publish ?? [])
    .map((e) => publishEntrySchema.safeParse(e))
    .flatMap((r) => (r.success ? [r.data] : []));
  const entry: PublishEntry = entries.find((e) => e.to === to) ?? (to === "testflight" ? { to } : { to, track: "internal" });
  const now = deps.clock.now();
  await deps.db
    .insert(publishes)
    .values({
      id: crypto.randomUUID().replace(/-/g, ""),
      buildId,
      projectId: build.projectId,
      to,
      config: entry,
      state: "pending",
      attempts: 0,
      nextAttemptAtMs: Date.now(),
      createdAt: now,
      updatedAt: now,
    })
    .onConflictDoUpdate({
      target: [publishes.buildId, publishes.to],
      set: { state: "pending", detail: null, attempts: 0, nextAttemptAtMs: Date.now(), progress: null, processingSinceMs: null, updatedAt: now },
      setWhere: eq(publishes.state, "failed"),
    });
  const row = await deps.db
    .select()
    .from(publishes)
    .where(and(eq(publishes.buildId, buildId), eq(publishes.to, to)))
    .get();
  return toPublishJson(row!);
}

/** Leases due publishes to `owner` in one conditional UPDATE. */
export async function claimPublishes(deps: Pick<AppDeps, "db" | "config">, owner: string, limit: number): Promise<PublishRow[]> {
  const now = Date.now();
  return deps.db
    .update(publishes)
    .set({ leaseOwner: owner, leaseUntilMs: now + deps.config.publishLeaseMs })
    .where(
      and(
        inArray(publishes.state, ["pending", "uploading", "processing"]),
        or(isNull(publishes.leaseUntilMs), lt(publishes.leaseUntilMs, now)),
        sql`${publishes.id} IN (SELECT p.id FROM publishes p WHERE p.state IN ('pending', 'uploading', 'processing') AND p.next_attempt_at_ms <= ${now}
          AND (p.lease_until_ms IS NULL OR p.lease_until_ms < ${now}) ORDER BY p.next_attempt_at_ms LIMIT ${limit})`,
      ),
    )
    .returning();
}

/** The build's artifact for this store: the newest complete `.ipa`, or `.aab` before `.apk`. */
async function artifactFor(deps: PublisherDeps, row: PublishRow): Promise<ArtifactSource> {
  const list = await deps.db
    .select()
    .from(artifacts)
    .where(and(eq(artifacts.buildId, row.buildId), eq(artifacts.status, "available")));
  const byExt = (ext: string) => list.filter((a) => a.filename.toLowerCase().endsWith(ext)).at(-1);
  const found = row.to === "testflight" ? byExt(".ipa") : (byExt(".aab") ?? byExt(".apk"));
  if (!found)
    throw new StoreError(null, "no_artifact", row.to === "testflight" ? "the build has no .ipa artifact" : "the build has no .aab or .apk artifact");
  const location = found.storageLocation as StorageLocation;
  const app = found.appMetadata as AppMetadata | null;
  return {
    store: await openStoreAt(deps, location),
    key: location.key,
    filename: found.filename.split("/").at(-1) ?? found.filename,
    sizeBytes: found.sizeBytes,
    bundleIdentifier: app?.bundle_identifier ?? null,
    version: app?.version ?? null,
    build: app?.build ?? null,
  };
}

/** Notification rows for a publish's end, for every target that wants the event (outbox, at least once). */
async function publishNotifications(deps: Pick<AppDeps, "db" | "clock">, row: PublishRow, event: "published" | "publish_failed") {
  const build = await deps.db.select().from(builds).where(eq(builds.id, row.buildId)).get();
  if (!build) return [];
  const targets = await deps.db
    .select()
    .from(notifications)
    .where(and(eq(notifications.projectId, row.projectId), isNull(notifications.disabledAt)));
  const now = deps.clock.now();
  return targets
    .filter(
      (t) => (t.on as string[]).includes(event) && (!(t.branches as string[] | null) || matchesAnyRefGlob(t.branches as string[], build.branch)),
    )
    .map((t) =>
      deps.db.insert(outbox).values({
        buildId: row.buildId,
        targetKind: "notification",
        targetId: t.id,
        event,
        messageId: `msg_${crypto.randomUUID().replace(/-/g, "")}`,
        status: "pending",
        attempts: 0,
        nextAttemptAtMs: Date.now(),
        payload: { publish_id: row.id, to: row.to },
        createdAt: now,
        updatedAt: now,
      }),
    );
}

/** One attempt at one leased publish; every write is guarded by the lease, so a lost lease changes nothing. */
export async function workPublish(deps: PublisherDeps, row: PublishRow, owner: string): Promise<void> {
  const ours = and(eq(publishes.id, row.id), eq(publishes.leaseOwner, owner));
  let progress: Progress = (row.progress as Progress | null) ?? {};
  let state = row.state;
  const renew = setInterval(() => {
    deps.db
      .update(publishes)
      .set({ leaseUntilMs: Date.now() + deps.config.publishLeaseMs })
      .where(ours)
      .catch(() => undefined);
  }, deps.config.publishLeaseMs / 3);
  (renew as { unref?: () => void }).unref?.();
  const attempt = row.attempts + 1;
  const finish = async (set: Partial<typeof publishes.$inferInsert>, event?: "published" | "publish_failed") => {
    const update = deps.db
      .update(publishes)
      .set({ ...set, leaseOwner: null, leaseUntilMs: null, updatedAt: deps.clock.now() })
      .where(ours);
    const notes = event ? await publishNotifications(deps, row, event) : [];
    await deps.db.batch([update, ...notes]);
  };
  try {
    const entry = publishEntrySchema.parse(row.config);
    const project = await deps.db.select().from(projects).where(eq(projects.id, row.projectId)).get();
    if (!project) throw new StoreError(null, "project_deleted", "the project no longer exists");
    const source = await artifactFor(deps, row);
    const ctx = {
      get progress() {
        return progress;
      },
      save: async (next: Progress, nextState?: "uploading" | "processing", detail?: string) => {
        progress = next;
        if (nextState) state = nextState;
        const processingSince = nextState === "processing" && row.processingSinceMs === null ? Date.now() : undefined;
        if (processingSince !== undefined) row.processingSinceMs = processingSince;
        await deps.db
          .update(publishes)
          .set({
            progress: next,
            state,
            ...(detail ? { detail } : {}),
            ...(processingSince !== undefined ? { processingSinceMs: processingSince } : {}),
            updatedAt: deps.clock.now(),
          })
          .where(ours);
      },
    };
    let summary: string;
    if (entry.to === "testflight") {
      const key = await openAppStoreConnectKey(deps, project);
      if (!key)
        throw new StoreError(
          null,
          "no_store_credentials",
          "the project has no App Store Connect key: set one on the project page under Credentials and signing",
        );
      summary = await publishToTestflight(deps, key, entry, source, ctx);
    } else {
      const key = await openGooglePlayKey(deps, project);
      if (!key)
        throw new StoreError(
          null,
          "no_store_credentials",
          "the project has no Google Play service account: set one on the project page under Credentials and signing",
        );
      summary = await publishToGooglePlay(deps, key, entry, source, ctx);
    }
    await finish({ state: "done", detail: summary, attempts: attempt }, "published");
  } catch (err) {
    if (err instanceof StillProcessing) {
      const since = row.processingSinceMs ?? Date.now();
      if (Date.now() - since > PUBLISH_PROCESSING_LIMIT_MS) {
        await finish({ state: "failed", detail: "the store did not finish processing within 60 minutes", attempts: attempt }, "publish_failed");
      } else {
        // A poll is not a failed attempt: `attempts` counts tries that went wrong or ended.
        await finish({ state: "processing", detail: err.message, nextAttemptAtMs: Date.now() + deps.config.publishPollMs });
      }
      return;
    }
    const storeError = err instanceof StoreError ? err : new StoreError(null, "internal_error", describeError(err).slice(0, 300));
    const final = !storeError.retryable || attempt >= OUTBOX_MAX_ATTEMPTS;
    deps.log({
      time: new Date().toISOString(),
      level: final ? "error" : "warn",
      msg: "publish attempt failed",
      publish_id: row.id,
      to: row.to,
      error: storeError.detail,
    });
    if (final) await finish({ state: "failed", detail: storeError.detail, attempts: attempt }, "publish_failed");
    else
      await finish({
        state,
        detail: `${storeError.detail} (retrying)`,
        attempts: attempt,
        nextAttemptAtMs: Date.now() + retryDelayMs(deps.config.outboxRetryBaseMs, attempt),
      });
  } finally {
    clearInterval(renew);
  }
}

/** One pass: lease due publishes and work them in parallel. Answers how many were worked. */
export async function runPublishesOnce(deps: PublisherDeps, owner: string, limit = 4): Promise<number> {
  const claimed = await claimPublishes(deps, owner, limit);
  await Promise.all(
    claimed.map((row) =>
      workPublish(deps, row, owner).catch((err) =>
        deps.log({ time: new Date().toISOString(), level: "error", msg: "publish failed", error: describeError(err) }),
      ),
    ),
  );
  return claimed.length;
}
