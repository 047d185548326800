// Artifacts (docs/spec.md Artifacts, docs/api.md §7): runner-side create / local upload / complete / abort, user-side
// list and download links, the byte-serving rules shared with the installer paths, and the orphan sweep.
import { and, eq, gt, inArray, lte, sql } from "drizzle-orm";
import { artifactIcons, artifacts, builds, urlTokens } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { UploadRejectedError, type ArtifactStore, type StorageLocation, type StoreTarget } from "../../storage/types.ts";
import { readActiveStorageSettings, type StoredArtifactStorageSettings, ARTIFACT_STORAGE_SETTING } from "../settings/artifact-storage-settings.ts";
import { loadInstance } from "../setup/instance.ts";
import { readSetting } from "../settings/instance-settings.ts";
import { artifactPlatform, extractAppMetadata, type AppMetadata } from "./app-metadata.ts";
import type { StoredAppSigning } from "./mobileprovision.ts";
import { readNetworkSettings } from "../settings/network-settings.ts";
import { claimUploadToken, newUrlToken, releaseUploadToken, resolveUrlToken } from "../auth/url-tokens.ts";
import type { ArtifactKind } from "../../db/schema/constants.ts";
import { ingestJunitReport, logIngestError, pendingReportStatement, resumeTestReports } from "../tests/test-reports.ts";

export type ArtifactRow = typeof artifacts.$inferSelect;

export interface InstallMetadata {
  bundle_identifier: string;
  bundle_version: string;
  title: string;
}

/** Upload links last an hour: long enough for a multi-GiB upload to start on a slow runner. */
export const UPLOAD_TTL_S = 3600;
/** Download links: 15 minutes (docs/api.md §7). */
export const DOWNLOAD_TTL_S = 15 * 60;
/**
 * A pending artifact is swept this long after its upload link expired: an upload that started just before
 * expiry may still be streaming, and its complete call must find the row.
 */
export const ORPHAN_GRACE_S = 3600;

type Deps = Pick<AppDeps, "db" | "clock" | "config" | "secrets" | "openArtifactStore"> & Partial<Pick<AppDeps, "log">>;

// ---------------------------------------------------------------------------------------------------------
// Names and headers

/**
 * RFC 6266 `attachment` with an ASCII fallback and, for anything else, RFC 8187 `filename*`. Quotes,
 * backslashes and every non-printable character are replaced in the fallback, so no filename can end the
 * header value or start another header.
 */
export function contentDisposition(filename: string): string {
  const fallback = filename.replace(/[^\x20-\x7e]|["\\%]/g, "_");
  if (fallback === filename) return `attachment; filename="${filename}"`;
  const encoded = encodeURIComponent(filename).replace(/['()*]/g, (ch) => `%${ch.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${fallback}"; filename*=UTF-8''${encoded}`;
}

/**
 * One `bytes=` range of a resource of `size` bytes (RFC 9110 §14). Multiple ranges and malformed headers
 * are served whole (allowed by the RFC); a range that starts past the end is unsatisfiable.
 */
export function parseRange(header: string | undefined, size: number): { start: number; end: number } | "unsatisfiable" | null {
  if (!header) return null;
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!match) return null;
  const [, first = "", last = ""] = match;
  if (first === "" && last === "") return null;
  if (first === "") {
    const suffix = Number(last);
    if (suffix === 0 || size === 0) return "unsatisfiable";
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(first);
  const end = last === "" ? size - 1 : Math.min(Number(last), size - 1);
  if (last !== "" && Number(last) < start) return null;
  if (start >= size) return "unsatisfiable";
  return { start, end };
}

export interface ByteResponse {
  status: 200 | 206 | 416;
  headers: Record<string, string>;
  body: ReadableStream<Uint8Array> | null;
}

/** The bytes of an available artifact with Content-Type, Content-Length, Content-Disposition and ranges. */
export async function serveArtifactBytes(deps: Deps, artifact: ArtifactRow, rangeHeader: string | undefined): Promise<ByteResponse> {
  const location = artifact.storageLocation as StorageLocation;
  const store = await openStoreAt(deps, location);
  const size = artifact.sizeBytes;
  // Bytes removed behind our back (a cleaned disk) are a 404 now rather than a body cut off after the headers.
  if ((await store.head(location.key))?.sizeBytes !== size) throw new ApiError("not_found", "the artifact's bytes are no longer stored");
  const headers: Record<string, string> = {
    "content-type": artifact.contentType,
    "content-disposition": contentDisposition(artifact.filename),
    "accept-ranges": "bytes",
    "x-content-type-options": "nosniff",
  };
  if (artifact.sha256) headers.etag = `"${artifact.sha256}"`;
  const range = parseRange(rangeHeader, size);
  if (range === "unsatisfiable") {
    return { status: 416, headers: { ...headers, "content-range": `bytes */${size}`, "content-length": "0" }, body: null };
  }
  if (range) {
    const body = await store.read(location.key, range);
    const length = range.end - range.start + 1;
    return {
      status: 206,
      headers: { ...headers, "content-range": `bytes ${range.start}-${range.end}/${size}`, "content-length": String(length) },
      body,
    };
  }
  const body = size === 0 ? null : await store.read(location.key);
  return { status: 200, headers: { ...headers, "content-length": String(size) }, body };
}

// ---------------------------------------------------------------------------------------------------------
// Storage locations

function withSlash(prefix: string): string {
  const trimmed = prefix.replace(/^\/+/, "");
  return trimmed === "" || trimmed.endsWith("/") ? trimmed : `${trimmed}/`;
}

/** Where a new artifact goes: the active provider, frozen into the artifact row. */
function newStorageLocation(deps: Deps, buildId: string, artifactId: string): Promise<StorageLocation> {
  return newStorageLocationAt(deps, `${buildId}/${artifactId}`);
}

/** A new object at `key` (under the bucket's prefix) in the active provider; shared caches store theirs so too. */
export async function newStorageLocationAt(deps: Pick<AppDeps, "db" | "config" | "secrets">, key: string): Promise<StorageLocation> {
  const active = await readActiveStorageSettings(deps);
  if (active.provider === "local") return { provider: "local", base_dir: active.baseDir, key };
  const stored = await readSetting<StoredArtifactStorageSettings>(deps, ARTIFACT_STORAGE_SETTING);
  return {
    provider: active.provider,
    endpoint: active.endpoint,
    region: active.region,
    bucket: active.bucket,
    force_path_style: active.forcePathStyle,
    access_key_id: active.accessKeyId,
    secret_access_key_sealed: stored?.value.s3.secret_access_key_sealed ?? null,
    key: `${withSlash(active.prefix)}${key}`,
  };
}

/**
 * The store an artifact was written to. For S3/R2 the current settings' credentials win when they still name
 * the same endpoint and bucket (a rotated key keeps working); otherwise the credentials frozen with the artifact.
 */
export async function openStoreAt(deps: Deps, location: StorageLocation): Promise<ArtifactStore> {
  if (location.provider === "local") return deps.openArtifactStore({ provider: "local", baseDir: location.base_dir });
  const active = await readActiveStorageSettings(deps);
  let accessKeyId = location.access_key_id;
  let secretAccessKey = location.secret_access_key_sealed ? await deps.secrets.open(location.secret_access_key_sealed) : "";
  if (active.provider !== "local" && active.endpoint === location.endpoint && active.bucket === location.bucket && active.accessKeyId) {
    accessKeyId = active.accessKeyId;
    secretAccessKey = active.secretAccessKey;
  }
  const target: StoreTarget = {
    provider: location.provider,
    endpoint: location.endpoint,
    region: location.region,
    bucket: location.bucket,
    accessKeyId,
    secretAccessKey,
    forcePathStyle: location.force_path_style,
  };
  return deps.openArtifactStore(target);
}

// ---------------------------------------------------------------------------------------------------------
// Public shape

export function toArtifactJson(row: ArtifactRow) {
  return {
    id: row.id,
    build_id: row.buildId,
    filename: row.filename,
    size_bytes: row.sizeBytes,
    content_type: row.contentType,
    sha256: row.sha256,
    status: row.status,
    kind: row.kind,
    install_metadata: (row.installMetadata as InstallMetadata | null) ?? null,
    app: publicAppMetadata(row.appMetadata as AppMetadata | null),
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

/** The app metadata as docs/api.md §7 answers it: the profile's device list stays inside (the tester page's hint). */
function publicAppMetadata(app: AppMetadata | null): AppMetadata | null {
  if (!app?.signing) return app ?? null;
  const { provisioned_devices: _devices, ...signing } = app.signing as StoredAppSigning;
  return { ...app, signing };
}

/** The base URL links to the daemon are built on: the public URL in remote mode, else where the caller came. */
export async function daemonBaseUrl(deps: Pick<AppDeps, "db" | "clock">, requestOrigin: string): Promise<string> {
  const inst = await loadInstance(deps);
  if (inst.runtimeMode === "remote") {
    const publicUrl = (await readNetworkSettings(deps)).public_url;
    if (publicUrl) return publicUrl.replace(/\/+$/, "");
  }
  return requestOrigin;
}

// ---------------------------------------------------------------------------------------------------------
// Runner side

/** The build a runner works on; 404 when it is not this runner's job (docs/api.md §6). */
async function loadRunnerJob(deps: Pick<AppDeps, "db">, runnerId: string, jobId: string) {
  const build = await deps.db.select().from(builds).where(eq(builds.id, jobId)).get();
  if (!build || build.runnerId !== runnerId) throw new ApiError("not_found", "no such job on this runner");
  return build;
}

async function loadRunnerArtifact(deps: Pick<AppDeps, "db">, runnerId: string, jobId: string, artifactId: string): Promise<ArtifactRow> {
  await loadRunnerJob(deps, runnerId, jobId);
  const row = await deps.db.select().from(artifacts).where(eq(artifacts.id, artifactId)).get();
  if (!row || row.buildId !== jobId || row.runnerId !== runnerId) throw new ApiError("not_found", "no such artifact for this job");
  return row;
}

/** Builds a runner may still attach artifacts to: running ones, and finished ones it reported itself. */
const UPLOADABLE_BUILD_STATUSES = new Set(["assigned", "running", "succeeded", "failed"]);

export interface CreateArtifactInput {
  filename: string;
  size_bytes: number;
  content_type: string;
  sha256?: string;
  install_metadata?: InstallMetadata;
  /** `junit`: a test report, parsed when completed (docs/test-reports.md). */
  kind?: ArtifactKind;
}

/** POST …/jobs/{job_id}/artifacts: a pending artifact and where to send its bytes. */
export async function createArtifact(deps: Deps, input: CreateArtifactInput & { runnerId: string; jobId: string; requestOrigin: string }) {
  const build = await loadRunnerJob(deps, input.runnerId, input.jobId);
  if (!UPLOADABLE_BUILD_STATUSES.has(build.status)) {
    throw new ApiError("job_not_active", `artifacts cannot be added to a ${build.status} build`);
  }
  const id = crypto.randomUUID();
  const location = await newStorageLocation(deps, build.id, id);
  if (location.provider === "local" && input.size_bytes > deps.config.maxUploadBytes) {
    throw new ApiError("upload_too_large", `local uploads are limited to ${deps.config.maxUploadBytes} bytes`);
  }
  const now = deps.clock.now();
  const row: ArtifactRow = {
    id,
    buildId: build.id,
    runnerId: input.runnerId,
    filename: input.filename,
    sizeBytes: input.size_bytes,
    contentType: input.content_type,
    sha256: input.sha256?.toLowerCase() ?? null,
    status: "pending",
    kind: input.kind ?? "file",
    storageLocation: location,
    installMetadata: input.install_metadata ?? null,
    appMetadata: null,
    uploadExpiresAt: now + UPLOAD_TTL_S,
    completedAt: null,
    expiredAt: null,
    storageRemovedAt: null,
    createdAt: now,
    updatedAt: now,
  };
  let upload: { method: "PUT"; url: string; headers: Record<string, string>; expires_at: number };
  if (location.provider === "local") {
    const { token, expiresAt, statement } = await newUrlToken(deps, { kind: "upload", artifactId: id, ttlS: UPLOAD_TTL_S });
    await deps.db.batch([deps.db.insert(artifacts).values(row), statement]);
    upload = {
      method: "PUT",
      url: `${input.requestOrigin}/v1/artifacts/local-upload/${token}`,
      headers: { "content-type": "application/octet-stream" },
      expires_at: expiresAt,
    };
  } else {
    const store = await openStoreAt(deps, location);
    const presigned = await store.presignUpload!(location.key, { contentType: input.content_type, expiresInS: UPLOAD_TTL_S, now });
    await deps.db.insert(artifacts).values(row);
    upload = { method: "PUT", url: presigned.url, headers: presigned.headers, expires_at: now + UPLOAD_TTL_S };
  }
  return { artifact: toArtifactJson(row), upload };
}

/**
 * PUT /v1/artifacts/local-upload/{token}: streams the body to disk. The token is claimed first (one upload at
 * a time) and given back when the body is refused, so a runner can retry the same URL.
 */
export async function receiveLocalUpload(
  deps: Deps,
  input: { token: string; body: AsyncIterable<Uint8Array> | null; contentLength: string | undefined },
) {
  const claimed = await claimUploadToken(deps, input.token);
  try {
    const artifact = await deps.db.select().from(artifacts).where(eq(artifacts.id, claimed.artifactId)).get();
    if (!artifact || artifact.status !== "pending") throw new ApiError("token_expired", "this upload is no longer open");
    const location = artifact.storageLocation as StorageLocation;
    const max = deps.config.maxUploadBytes;
    // Refuse what the headers already tell, before reading a byte.
    if (input.contentLength !== undefined) {
      const declared = Number(input.contentLength);
      if (Number.isFinite(declared) && declared > max) throw new ApiError("upload_too_large", `the body exceeds the upload limit of ${max} bytes`);
      if (Number.isFinite(declared) && declared !== artifact.sizeBytes) {
        throw new ApiError("size_mismatch", `Content-Length is ${declared}, ${artifact.sizeBytes} bytes were declared`);
      }
    }
    if (artifact.sizeBytes > max) throw new ApiError("upload_too_large", `the body exceeds the upload limit of ${max} bytes`);
    const store = await openStoreAt(deps, location);
    if (!store.writeStream) throw new ApiError("not_found", "this artifact is not stored on local disk");
    const body: AsyncIterable<Uint8Array> = input.body ?? (async function* () {})();
    let sha256: string;
    try {
      ({ sha256 } = await store.writeStream(location.key, body, {
        expectedSize: artifact.sizeBytes,
        maxBytes: max,
        sha256: artifact.sha256 ?? undefined,
      }));
    } catch (err) {
      if (err instanceof UploadRejectedError) {
        throw new ApiError(err.reason, err.message);
      }
      throw err;
    }
    // The artifact may have been aborted or swept while the bytes streamed: then they must not stay.
    const updated = await deps.db
      .update(artifacts)
      .set({ sha256, updatedAt: deps.clock.now() })
      .where(and(eq(artifacts.id, artifact.id), eq(artifacts.status, "pending")))
      .returning()
      .get();
    if (!updated) {
      await store.remove(location.key);
      throw new ApiError("token_expired", "this upload is no longer open");
    }
    return { artifact: toArtifactJson(updated), received_bytes: updated.sizeBytes, sha256 };
  } catch (err) {
    // A refused body or a dropped connection leaves the link usable for a retry; a closed upload does not.
    if (!(err instanceof ApiError && err.status === 410)) await releaseUploadToken(deps, claimed.tokenHash).catch(() => undefined);
    throw err;
  }
}

/** POST …/artifacts/{id}/complete: checks the stored object, reads IPA metadata, makes it available. */
export async function completeArtifact(deps: Deps, input: { runnerId: string; jobId: string; artifactId: string }) {
  const artifact = await loadRunnerArtifact(deps, input.runnerId, input.jobId, input.artifactId);
  if (artifact.status === "available") {
    // A retried complete (its first answer lost, or the daemon restarted meanwhile) waits for the report too.
    if (artifact.kind === "junit") await storeTestReport(deps, artifact.id);
    return toArtifactJson(artifact);
  }
  if (artifact.status !== "pending") throw new ApiError("invalid_transition", `the artifact is ${artifact.status}`);
  const location = artifact.storageLocation as StorageLocation;
  const store = await openStoreAt(deps, location);
  const stored = await store.head(location.key);
  if (!stored || stored.sizeBytes !== artifact.sizeBytes) {
    throw new ApiError(
      "upload_incomplete",
      stored ? `the stored object has ${stored.sizeBytes} bytes, ${artifact.sizeBytes} were declared` : "nothing has been uploaded yet",
    );
  }
  let metadata = artifact.installMetadata as InstallMetadata | null;
  let app: AppMetadata | null = null;
  const platform = artifactPlatform(artifact.filename);
  if (platform) {
    // Only the zip directory and a few small entries are read (ranged reads), never the whole archive.
    const extracted = await extractAppMetadata((range) => store.readRange(location.key, range), artifact.sizeBytes, platform);
    if (extracted) {
      app = extracted.app;
      metadata ??= extracted.install;
      // The icon goes first: a crash before the row turns available leaves an icon the orphan sweep removes,
      // never an artifact that claims an icon it lacks.
      if (extracted.icon) {
        const png = bytesToBase64(extracted.icon);
        await deps.db
          .insert(artifactIcons)
          .values({ artifactId: artifact.id, pngBase64: png, createdAt: deps.clock.now() })
          .onConflictDoUpdate({ target: artifactIcons.artifactId, set: { pngBase64: png } });
      }
    }
  }
  const now = deps.clock.now();
  const [made] = await deps.db.batch([
    deps.db
      .update(artifacts)
      .set({ status: "available", installMetadata: metadata, appMetadata: app, completedAt: now, updatedAt: now })
      // Not once the orphan sweep may take it: the sweep removes the bytes before the row.
      .where(and(eq(artifacts.id, artifact.id), eq(artifacts.status, "pending"), gt(artifacts.uploadExpiresAt, now - ORPHAN_GRACE_S)))
      .returning(),
    // A test report's pending row in the same transaction: a crash before its parse leaves work to resume.
    pendingReportStatement(deps.db, artifact.id, now),
  ]);
  const updated = made[0];
  if (!updated) {
    const current = await deps.db.select().from(artifacts).where(eq(artifacts.id, artifact.id)).get();
    if (current?.status === "available") return toArtifactJson(current);
    if (current?.status === "pending")
      throw new ApiError("invalid_transition", "the upload link expired over an hour ago; the artifact is left for cleanup");
    throw new ApiError("invalid_transition", "the artifact was aborted meanwhile");
  }
  await deps.db.delete(urlTokens).where(and(eq(urlTokens.artifactId, artifact.id), eq(urlTokens.kind, "upload")));
  if (updated.kind === "junit") await storeTestReport(deps, updated.id);
  return toArtifactJson(updated);
}

/**
 * Stores a report before the complete call answers, so its tests are listed once the runner's complete call
 * returns; a report that cannot be read is recorded as unparsed, never a failed upload. An error leaves it for the
 * maintenance pass (resumeReportIngestion) once its lease lapses.
 */
async function storeTestReport(deps: Deps, artifactId: string): Promise<void> {
  try {
    await ingestJunitReport(deps, artifactId, (location) => openStoreAt(deps, location));
  } catch (err) {
    logIngestError(deps, artifactId, err);
  }
}

/** The maintenance pass's share: test reports a crash left unstored (docs/decisions.md "Test reports and log search"). */
export function resumeReportIngestion(deps: Deps): Promise<number> {
  return resumeTestReports(deps, (location) => openStoreAt(deps, location));
}

/** POST …/artifacts/{id}/abort: status `aborted`, stored bytes deleted, upload link void. */
export async function abortArtifact(deps: Deps, input: { runnerId: string; jobId: string; artifactId: string }) {
  const artifact = await loadRunnerArtifact(deps, input.runnerId, input.jobId, input.artifactId);
  if (artifact.status === "available") throw new ApiError("invalid_transition", "a completed artifact cannot be aborted");
  const now = deps.clock.now();
  const [updated] = await deps.db.batch([
    deps.db
      .update(artifacts)
      .set({ status: "aborted", updatedAt: now })
      .where(and(eq(artifacts.id, artifact.id), inArray(artifacts.status, ["pending", "aborted"])))
      .returning(),
    // Only when the abort landed: a complete that won meanwhile keeps its download and install links.
    deps.db
      .delete(urlTokens)
      .where(
        and(
          eq(urlTokens.artifactId, artifact.id),
          sql`exists (select 1 from ${artifacts} where ${artifacts.id} = ${artifact.id} and ${artifacts.status} = 'aborted')`,
        ),
      ),
  ]);
  const row = updated[0];
  if (!row) throw new ApiError("invalid_transition", "the artifact was completed meanwhile");
  const location = row.storageLocation as StorageLocation;
  await (await openStoreAt(deps, location)).remove(location.key);
  return toArtifactJson(row);
}

// ---------------------------------------------------------------------------------------------------------
// User side

export async function listBuildArtifacts(deps: Pick<AppDeps, "db">, buildId: string) {
  const build = await deps.db.select({ id: builds.id }).from(builds).where(eq(builds.id, buildId)).get();
  if (!build) throw new ApiError("not_found", "no such build");
  const rows = await deps.db
    .select()
    .from(artifacts)
    // Expired ones stay listed with that status (docs/decisions.md, Retention): the build shows what it made.
    .where(and(eq(artifacts.buildId, buildId), inArray(artifacts.status, ["available", "expired"])))
    .orderBy(artifacts.createdAt, artifacts.filename);
  return rows.map(toArtifactJson);
}

/** An artifact users may see (available or expired), or 404 not_found (pending and aborted ones are invisible). */
async function loadListedArtifact(deps: Pick<AppDeps, "db">, artifactId: string): Promise<ArtifactRow> {
  const row = await deps.db.select().from(artifacts).where(eq(artifacts.id, artifactId)).get();
  if (!row || (row.status !== "available" && row.status !== "expired")) throw new ApiError("not_found", "no such artifact");
  return row;
}

/**
 * An available artifact, for everything that reaches its bytes (links, downloads, installs, icons): 410
 * artifact_expired once a retention pass deleted them, 404 not_found for pending and aborted ones.
 */
export async function loadAvailableArtifact(deps: Pick<AppDeps, "db">, artifactId: string): Promise<ArtifactRow> {
  const row = await loadListedArtifact(deps, artifactId);
  if (row.status === "expired") throw new ApiError("artifact_expired", "this artifact was deleted by the retention policy");
  return row;
}

/** GET /v1/artifacts/{id}. */
export async function getArtifact(deps: Pick<AppDeps, "db">, artifactId: string) {
  return toArtifactJson(await loadListedArtifact(deps, artifactId));
}

/** The stored icon of an artifact as PNG bytes, or null. */
export async function loadArtifactIcon(deps: Pick<AppDeps, "db">, artifactId: string): Promise<Uint8Array | null> {
  const row = await deps.db.select({ png: artifactIcons.pngBase64 }).from(artifactIcons).where(eq(artifactIcons.artifactId, artifactId)).get();
  return row ? base64ToBytes(row.png) : null;
}

/** GET /v1/artifacts/{id}/icon: 404 not_found when the artifact is unknown or has no icon. */
export async function artifactIcon(deps: Pick<AppDeps, "db">, artifactId: string): Promise<Uint8Array> {
  const artifact = await loadAvailableArtifact(deps, artifactId);
  const png = await loadArtifactIcon(deps, artifact.id);
  if (!png) throw new ApiError("not_found", "this artifact has no icon");
  return png;
}

function bytesToBase64(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

function base64ToBytes(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

/** POST /v1/artifacts/{id}/download-link: 15 minutes; S3/R2 presigned, local through the daemon. */
export async function createDownloadLink(deps: Deps, input: { artifactId: string; requestOrigin: string }) {
  const artifact = await loadAvailableArtifact(deps, input.artifactId);
  const location = artifact.storageLocation as StorageLocation;
  const now = deps.clock.now();
  if (location.provider !== "local") {
    const store = await openStoreAt(deps, location);
    const url = await store.presignDownload!(location.key, {
      contentDisposition: contentDisposition(artifact.filename),
      contentType: artifact.contentType,
      expiresInS: DOWNLOAD_TTL_S,
      now,
    });
    return { url, expires_at: now + DOWNLOAD_TTL_S };
  }
  const { token, expiresAt, statement } = await newUrlToken(deps, { kind: "download", artifactId: artifact.id, ttlS: DOWNLOAD_TTL_S });
  await statement;
  return { url: `${await daemonBaseUrl(deps, input.requestOrigin)}/v1/artifacts/download/${token}`, expires_at: expiresAt };
}

/** GET /v1/artifacts/download/{token}: 404 not_found for an unknown token, 410 link_expired once it lapsed. */
export async function openDownload(deps: Deps, input: { token: string; range: string | undefined }): Promise<ByteResponse> {
  const row = await resolveUrlToken(deps, "download", input.token, "link_expired");
  const artifact = await loadAvailableArtifact(deps, row.artifactId);
  return serveArtifactBytes(deps, artifact, input.range);
}

// ---------------------------------------------------------------------------------------------------------
// Maintenance

/**
 * Pending artifacts whose upload link expired (plus the grace) are deleted, bytes first: removing is
 * idempotent, so a removal that fails (or a crash after it) leaves the row pending and the next pass retries.
 * Tokens and row then go in one batch, only while the row is still an orphan, so two daemons sweeping
 * together delete it once. completeArtifact refuses an orphan, so none turns available without its bytes.
 */
export async function deleteOrphanArtifacts(deps: Deps): Promise<number> {
  const cutoff = deps.clock.now() - ORPHAN_GRACE_S;
  const candidates = await deps.db
    .select({ id: artifacts.id, storageLocation: artifacts.storageLocation })
    .from(artifacts)
    .where(and(eq(artifacts.status, "pending"), lte(artifacts.uploadExpiresAt, cutoff)))
    .limit(100);
  let deleted = 0;
  let firstError: unknown = null;
  for (const { id, storageLocation } of candidates) {
    const location = storageLocation as StorageLocation;
    try {
      await (await openStoreAt(deps, location)).remove(location.key);
    } catch (err) {
      // The others still go; the failure is reported once the pass is over.
      firstError ??= err;
      continue;
    }
    const orphan = and(eq(artifacts.id, id), eq(artifacts.status, "pending"), lte(artifacts.uploadExpiresAt, cutoff));
    const [, , gone] = await deps.db.batch([
      deps.db.delete(urlTokens).where(and(eq(urlTokens.artifactId, id), sql`exists (select 1 from ${artifacts} where ${orphan})`)),
      deps.db.delete(artifactIcons).where(and(eq(artifactIcons.artifactId, id), sql`exists (select 1 from ${artifacts} where ${orphan})`)),
      deps.db.delete(artifacts).where(orphan).returning({ id: artifacts.id }),
    ]);
    if (gone.length > 0) deleted++;
  }
  if (firstError !== null) throw firstError;
  return deleted;
}
