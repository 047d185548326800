// The two store flows (docs/publishing.md). Each step records what it reached in `progress`, so an attempt
// after a crash or a retryable failure continues from there instead of starting over.
import { importPKCS8, SignJWT } from "jose";
import { md5 } from "@noble/hashes/legacy.js";
import { bytesToHex } from "@noble/hashes/utils.js";
import type { AppDeps, IncrementalHash } from "../../deps.ts";
import type { ArtifactStore } from "../../storage/types.ts";
import { answerBody, StoreError, storeCall, storeErrorOfAnswer, storeSend, type StoreAnswer } from "./store-http.ts";
import type { AppStoreConnectKey, GooglePlayKey } from "./store-credentials.ts";
import type { GooglePlayPublish, TestflightPublish } from "./config.ts";

type StoreDeps = Pick<AppDeps, "fetch" | "uploadFetch" | "config" | "md5">;

/** Interrupted chunks (or status queries) in a row, without progress, before the attempt gives up. */
const MAX_RESUMES_WITHOUT_PROGRESS = 5;

/** The artifact a publish sends, read from storage as the request pulls it. */
export interface ArtifactSource {
  store: ArtifactStore;
  key: string;
  filename: string;
  sizeBytes: number;
  bundleIdentifier: string | null;
  version: string | null;
  build: string | null;
}

/** Where a flow is; the publisher saves it after every step. */
export type Progress = Record<string, string | number | boolean | undefined>;
export interface StepContext {
  progress: Progress;
  save(progress: Progress, state?: "uploading" | "processing", detail?: string): Promise<void>;
}

/** The flow asks to be called again after the poll interval (the store is still processing). */
export class StillProcessing extends Error {}

const UPLOAD_TIMEOUT_MS = 6 * 60 * 60 * 1000;

// ---------------------------------------------------------------------------------------------- App Store Connect

/** An App Store Connect token: ES256, signed with the team's API key, valid 20 minutes (Apple's maximum). */
export async function appStoreConnectToken(key: AppStoreConnectKey, nowS = Math.floor(Date.now() / 1000)): Promise<string> {
  const privateKey = await importPKCS8(key.private_key_p8, "ES256");
  return new SignJWT({})
    .setProtectedHeader({ alg: "ES256", kid: key.key_id, typ: "JWT" })
    .setIssuer(key.issuer_id)
    .setIssuedAt(nowS)
    .setExpirationTime(nowS + 19 * 60)
    .setAudience("appstoreconnect-v1")
    .sign(privateKey);
}

interface AscData {
  data?:
    | { id?: string; attributes?: Record<string, unknown>; relationships?: Record<string, { data?: { id?: string } | null }> }
    | Array<{ id?: string; attributes?: Record<string, unknown> }>;
}

interface UploadOperation {
  method: string;
  url: string;
  offset: number;
  length: number;
  requestHeaders?: Array<{ name: string; value: string }>;
}

/** The pure-JS MD5, where the host offers none of its own. */
function nobleMd5(): IncrementalHash {
  const hash = md5.create();
  return { update: (data) => void hash.update(data), digestHex: () => bytesToHex(hash.digest()) };
}

/** Sends one byte range of the artifact, hashing it on the way (ranges are sent in order, so the hash is the file's). */
async function sendRange(deps: StoreDeps, source: ArtifactSource, op: UploadOperation, hash: IncrementalHash): Promise<void> {
  const body = (await source.store.read(source.key, { start: op.offset, end: op.offset + op.length - 1 })).pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        hash.update(chunk);
        controller.enqueue(chunk);
      },
    }),
  );
  const headers: Record<string, string> = { "content-length": String(op.length) };
  for (const h of op.requestHeaders ?? []) headers[h.name.toLowerCase()] = h.value;
  await storeCall(deps, { method: op.method, url: op.url, headers, body, timeoutMs: UPLOAD_TIMEOUT_MS });
}

/** TestFlight: create the build upload, send the file in the given ranges, commit its checksum, wait, distribute. */
export async function publishToTestflight(
  deps: StoreDeps,
  key: AppStoreConnectKey,
  entry: TestflightPublish,
  source: ArtifactSource,
  ctx: StepContext,
): Promise<string> {
  const base = deps.config.ascApiUrl;
  const auth = async () => ({ authorization: `Bearer ${await appStoreConnectToken(key)}`, "content-type": "application/json" });
  const api = async (method: string, path: string, body?: unknown) =>
    (await storeCall(deps, {
      method,
      url: `${base}${path}`,
      headers: await auth(),
      body: body === undefined ? null : JSON.stringify(body),
    })) as AscData;
  const p = { ...ctx.progress };
  if (!source.bundleIdentifier || !source.version || !source.build) {
    throw new StoreError(null, "missing_app_metadata", `${source.filename} has no bundle identifier, version or build number Hangar could read`);
  }
  if (!p.app_id) {
    const apps = await api("GET", `/v1/apps?filter[bundleId]=${encodeURIComponent(source.bundleIdentifier)}&limit=1`);
    const app = Array.isArray(apps.data) ? apps.data[0] : undefined;
    if (!app?.id) throw new StoreError(404, "app_not_found", `no app with bundle id ${source.bundleIdentifier} in this App Store Connect team`);
    p.app_id = app.id;
    await ctx.save(p, "uploading", "found the app");
  }
  if (!p.committed) {
    // A resumed attempt starts a new build upload: the parts of an uncommitted one cannot be trusted to be whole.
    const upload = await api("POST", "/v1/buildUploads", {
      data: {
        type: "buildUploads",
        attributes: { cfBundleShortVersionString: source.version, cfBundleVersion: source.build, platform: "IOS" },
        relationships: { app: { data: { type: "apps", id: p.app_id } } },
      },
    });
    const uploadId = !Array.isArray(upload.data) ? upload.data?.id : undefined;
    if (!uploadId) throw new StoreError(502, "bad_answer", "App Store Connect answered a build upload without an id");
    const file = await api("POST", "/v1/buildUploadFiles", {
      data: {
        type: "buildUploadFiles",
        attributes: { assetType: "ASSET", fileName: source.filename, fileSize: source.sizeBytes, uti: "com.apple.ipa" },
        relationships: { buildUpload: { data: { type: "buildUploads", id: uploadId } } },
      },
    });
    const fileData = !Array.isArray(file.data) ? file.data : undefined;
    const ops = ((fileData?.attributes?.uploadOperations as UploadOperation[] | undefined) ?? []).slice().sort((a, b) => a.offset - b.offset);
    if (!fileData?.id || ops.length === 0) throw new StoreError(502, "bad_answer", "App Store Connect answered no upload operations");
    let expected = 0;
    for (const op of ops) {
      if (op.offset !== expected || op.length <= 0)
        throw new StoreError(502, "bad_answer", "App Store Connect's upload ranges do not cover the file in order");
      expected += op.length;
    }
    if (expected !== source.sizeBytes)
      throw new StoreError(502, "bad_answer", `App Store Connect asked for ${expected} bytes of a ${source.sizeBytes}-byte file`);
    await ctx.save({ ...p, upload_id: uploadId }, "uploading", `uploading ${source.filename} (${ops.length} parts)`);
    const hash = deps.md5?.() ?? nobleMd5();
    for (const op of ops) await sendRange(deps, source, op, hash);
    await api("PATCH", `/v1/buildUploadFiles/${fileData.id}`, {
      data: {
        type: "buildUploadFiles",
        id: fileData.id,
        attributes: { sourceFileChecksums: { file: { hash: hash.digestHex(), algorithm: "MD5" } }, uploaded: true },
      },
    });
    p.upload_id = uploadId;
    p.committed = true;
    await ctx.save(p, "processing", "uploaded; App Store Connect is processing the build");
  }
  if (!p.build_id) {
    const upload = await api("GET", `/v1/buildUploads/${p.upload_id}?include=build`);
    const data = !Array.isArray(upload.data) ? upload.data : undefined;
    const state = data?.attributes?.state as { state?: string; errors?: Array<{ code?: string; description?: string }> } | undefined;
    if (state?.state === "FAILED") {
      const first = state.errors?.[0];
      throw new StoreError(409, first?.code ?? "PROCESSING_FAILED", first?.description ?? "App Store Connect could not process the build");
    }
    const buildId = data?.relationships?.build?.data?.id;
    if (state?.state !== "COMPLETE" || !buildId)
      throw new StillProcessing(`App Store Connect is processing the build (${state?.state ?? "unknown"})`);
    p.build_id = buildId;
    await ctx.save(p, "processing", "processed; distributing to testers");
  }
  if (entry.groups?.length && !p.groups_added) {
    const ids: string[] = [];
    for (const name of entry.groups) {
      const groups = await api("GET", `/v1/apps/${p.app_id}/betaGroups?filter[name]=${encodeURIComponent(name)}&limit=1`);
      const group = Array.isArray(groups.data) ? groups.data[0] : undefined;
      if (!group?.id) throw new StoreError(404, "beta_group_not_found", `no TestFlight group named ${name}`);
      ids.push(group.id);
    }
    await api("POST", `/v1/builds/${p.build_id}/relationships/betaGroups`, { data: ids.map((id) => ({ type: "betaGroups", id })) });
    p.groups_added = true;
    await ctx.save(p, "processing", `added to ${entry.groups.join(", ")}`);
  }
  if (entry.what_to_test && !p.notes_set) {
    await api("POST", "/v1/betaBuildLocalizations", {
      data: {
        type: "betaBuildLocalizations",
        attributes: { locale: "en-US", whatsNew: entry.what_to_test },
        relationships: { build: { data: { type: "builds", id: p.build_id } } },
      },
    });
    p.notes_set = true;
    await ctx.save(p, "processing");
  }
  return `on TestFlight as ${source.version} (${source.build})${entry.groups?.length ? `, groups ${entry.groups.join(", ")}` : ""}`;
}

// ---------------------------------------------------------------------------------------------- Google Play

const ANDROID_PUBLISHER_SCOPE = "https://www.googleapis.com/auth/androidpublisher";

/** The service account's RS256 assertion for Google's token endpoint (`aud` is the key file's `token_uri`). */
export async function googleAssertion(key: GooglePlayKey, nowS = Math.floor(Date.now() / 1000)): Promise<string> {
  const privateKey = await importPKCS8(key.private_key, "RS256");
  return new SignJWT({ scope: ANDROID_PUBLISHER_SCOPE })
    .setProtectedHeader({ alg: "RS256", typ: "JWT", ...(key.private_key_id ? { kid: key.private_key_id } : {}) })
    .setIssuer(key.client_email)
    .setAudience(key.token_uri)
    .setIssuedAt(nowS)
    .setExpirationTime(nowS + 3600)
    .sign(privateKey);
}

async function googleAccessToken(deps: StoreDeps, key: GooglePlayKey): Promise<string> {
  const body = new URLSearchParams({ grant_type: "urn:ietf:params:oauth:grant-type:jwt-bearer", assertion: await googleAssertion(key) });
  const answer = (await storeCall(deps, {
    method: "POST",
    url: key.token_uri,
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: body.toString(),
  })) as { access_token?: string };
  if (!answer?.access_token) throw new StoreError(502, "bad_answer", "Google's token endpoint answered no access_token");
  return answer.access_token;
}

/** Google Play: insert an edit, upload the bundle or APK, set the track's release, commit the edit. */
export async function publishToGooglePlay(
  deps: StoreDeps,
  key: GooglePlayKey,
  entry: GooglePlayPublish,
  source: ArtifactSource,
  ctx: StepContext,
): Promise<string> {
  const packageName = entry.package_name ?? source.bundleIdentifier;
  if (!packageName)
    throw new StoreError(
      null,
      "missing_package_name",
      `${source.filename}: set package_name in the publish entry (Hangar cannot read it from an .aab)`,
    );
  const kind = source.filename.toLowerCase().endsWith(".aab") ? "bundles" : "apks";
  const token = await googleAccessToken(deps, key);
  const base = deps.config.googleApiUrl;
  const app = `/androidpublisher/v3/applications/${encodeURIComponent(packageName)}`;
  const api = async (method: string, path: string, body?: unknown) =>
    (await storeCall(deps, {
      method,
      url: `${base}${path}`,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? null : JSON.stringify(body),
    })) as Record<string, unknown> | null;
  // An edit is cheap and expires on its own: every attempt makes its own, so a half-made one is never committed.
  const edit = await api("POST", `${app}/edits`, {});
  const editId = edit?.id;
  if (typeof editId !== "string") throw new StoreError(502, "bad_answer", "Google Play answered an edit without an id");
  await ctx.save({ ...ctx.progress, edit_id: editId }, "uploading", `uploading ${source.filename}`);
  const uploaded = (await resumableUpload(deps, `${base}/upload${app}/edits/${encodeURIComponent(editId)}/${kind}`, token, source)) as {
    versionCode?: number;
  } | null;
  if (typeof uploaded?.versionCode !== "number") throw new StoreError(502, "bad_answer", "Google Play answered the upload without a versionCode");
  const staged = entry.user_fraction !== undefined;
  const release: Record<string, unknown> = {
    versionCodes: [String(uploaded.versionCode)],
    status: staged ? "inProgress" : (entry.status ?? "completed"),
    ...(staged ? { userFraction: entry.user_fraction } : {}),
  };
  await ctx.save({ ...ctx.progress, edit_id: editId }, "processing", `uploaded version code ${uploaded.versionCode}; setting track ${entry.track}`);
  await api("PUT", `${app}/edits/${encodeURIComponent(editId)}/tracks/${encodeURIComponent(entry.track)}`, {
    track: entry.track,
    releases: [release],
  });
  await api("POST", `${app}/edits/${encodeURIComponent(editId)}:commit`);
  return `version code ${uploaded.versionCode} on track ${entry.track} (${String(release.status)}${staged ? `, ${entry.user_fraction! * 100}% of users` : ""})`;
}

/** The next byte a resumable session wants, from its 308's `Range: bytes=0-N` (no header: nothing kept). */
function nextOffset(answer: StoreAnswer): number {
  const range = /^bytes=0-(\d+)$/.exec(answer.headers.get("range") ?? "");
  return range ? Number(range[1]) + 1 : 0;
}

/**
 * Google's resumable upload protocol (docs/publishing.md): start a session, PUT the file in chunks, each a ranged
 * read of the artifact streamed as the socket takes it. A chunk that is cut off or answered with a 5xx is not
 * sent again from the start: the session is asked how far it got (`Content-Range: bytes *\/size`) and the upload
 * continues from there. Answers the final chunk's JSON (the bundle or APK).
 */
async function resumableUpload(deps: StoreDeps, url: string, token: string, source: ArtifactSource): Promise<unknown> {
  const size = source.sizeBytes;
  const started = await storeSend(deps, {
    method: "POST",
    url: `${url}?uploadType=resumable`,
    headers: {
      authorization: `Bearer ${token}`,
      "content-length": "0",
      "x-upload-content-type": "application/octet-stream",
      "x-upload-content-length": String(size),
    },
    body: "",
  });
  if (started.status >= 300) throw storeErrorOfAnswer(started);
  const session = started.headers.get("location");
  if (!session || !/^https?:\/\//.test(session)) throw new StoreError(502, "bad_answer", "Google Play started an upload session without its URL");
  const chunkBytes = deps.config.googleUploadChunkBytes;
  let offset = 0;
  let failuresInARow = 0;
  let lastFailure: StoreError | null = null;
  let askStatus = false;
  for (;;) {
    let answer: StoreAnswer | null = null;
    try {
      if (askStatus) {
        answer = await storeSend(deps, {
          method: "PUT",
          url: session,
          headers: { authorization: `Bearer ${token}`, "content-length": "0", "content-range": `bytes */${size}` },
          body: "",
        });
      } else {
        const end = Math.min(offset + chunkBytes, size) - 1;
        answer = await storeSend(deps, {
          method: "PUT",
          url: session,
          headers: {
            authorization: `Bearer ${token}`,
            "content-type": "application/octet-stream",
            "content-length": String(end - offset + 1),
            "content-range": `bytes ${offset}-${end}/${size}`,
          },
          body: await source.store.read(source.key, { start: offset, end }),
          timeoutMs: UPLOAD_TIMEOUT_MS,
        });
      }
    } catch (err) {
      if (!(err instanceof StoreError) || !err.retryable) throw err;
      lastFailure = err;
    }
    if (answer && (answer.status === 200 || answer.status === 201)) return answerBody(answer.text);
    if (answer?.status === 308) {
      const next = nextOffset(answer);
      if (next > offset) failuresInARow = 0;
      offset = next;
      askStatus = false;
      continue;
    }
    if (answer) {
      // A session Google no longer knows (404, 410) is over: the attempt is retried with a new edit and session.
      if (answer.status === 404 || answer.status === 410)
        throw new StoreError(null, "upload_session_lost", `Google Play no longer knows the upload session (HTTP ${answer.status})`);
      const refusal = storeErrorOfAnswer(answer);
      if (!refusal.retryable) throw refusal;
      lastFailure = refusal;
    }
    if (++failuresInARow > MAX_RESUMES_WITHOUT_PROGRESS) throw lastFailure!;
    await new Promise((resolve) => setTimeout(resolve, Math.min(deps.config.outboxRetryBaseMs * 2 ** (failuresInARow - 1), 30_000)));
    askStatus = true;
  }
}
