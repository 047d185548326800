// The runner's side of the instance's shared cache (docs/api.md §16): a lookup and a save asked of the daemon with the
// job's own token, then the archive streamed straight from or to the presigned S3/R2 URL the daemon handed out. Never
// the whole archive in memory: the download is hashed and counted as it is written, the upload read from disk.
import { createHash } from "node:crypto";
import { createWriteStream } from "node:fs";
import { rm } from "node:fs/promises";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream as NodeReadableStream } from "node:stream/web";
import type { RemoteCache, RemoteCacheHit } from "./cache-remote-types.ts";
import type { CacheLookupQuery, CacheUploadAnswer, CacheUploadBody, ClaimedJob, UploadTarget } from "../../protocol/runner.ts";
import { backoffDelay, DaemonError, sleep, toDaemonError, type RetryPolicy, type RunnerClient } from "./client.ts";
import { putFile } from "./upload.ts";

/** Tries of one PUT or GET of an archive: a dropped connection is worth another go, a refusal is not. */
const TRANSFER_ATTEMPTS = 3;
/** A download whose bytes stop coming for this long is abandoned (the cache is then a miss, never a hang). */
const STALL_MS = 120_000;

export interface RemoteCacheOptions {
  /** For the daemon calls (lookup, save); three attempts by default. */
  retry?: RetryPolicy;
  /** A line for the build log (why an entry was not shared, for one). */
  say?: (line: string) => void;
}

/** Why a downloaded archive was refused: the size or the SHA-256 differ from what the daemon recorded. */
export class CacheIntegrityError extends Error {
  override name = "CacheIntegrityError";
}

/**
 * The shared cache as the claimed job sees it. Calls go with the job's token (`client.forJob`), so the runner token is
 * never sent for them. When the instance keeps its artifacts on local disk the daemon answers 409 `invalid_state`:
 * from then on this job's lookups find nothing and its saves do nothing (the runner's local cache still works).
 */
export function createRemoteCache(
  client: RunnerClient,
  job: Pick<ClaimedJob, "build_id" | "job_token">,
  options: RemoteCacheOptions = {},
): RemoteCache {
  const jobClient = client.forJob(job.job_token);
  const path = jobClient.jobPath(job.build_id, "/caches");
  const retry = options.retry ?? { attempts: 3 };
  let unavailable = false;

  const noteUnavailable = (err: DaemonError): boolean => {
    if (err.status !== 409 || err.code !== "invalid_state") return false;
    if (!unavailable) options.say?.(`hangar: shared cache unavailable: ${err.message}`);
    unavailable = true;
    return true;
  };

  return {
    async find(key, restoreKeys) {
      if (unavailable) return null;
      const lookup: CacheLookupQuery = { key, restore_key: restoreKeys };
      const query = new URLSearchParams({ key: lookup.key });
      for (const prefix of lookup.restore_key) query.append("restore_key", prefix);
      const answer = await jobClient.call("GET", `${path}?${query}`, { retry });
      if (answer.status === 404) return null;
      if (answer.status !== 200) {
        const err = toDaemonError(answer);
        if (noteUnavailable(err)) return null;
        throw err;
      }
      return toHit(answer.body);
    },

    async download(hit, file) {
      let last: unknown;
      for (let attempt = 0; attempt < TRANSFER_ATTEMPTS; attempt++) {
        try {
          await downloadOnce(hit, file);
          return;
        } catch (err) {
          await rm(file, { force: true });
          // A wrong archive stays wrong: only a transfer that broke off is tried again.
          if (err instanceof CacheIntegrityError || err instanceof DaemonError) throw err;
          last = err;
        }
        await sleep(backoffDelay(attempt + 1), retry.signal);
      }
      throw last instanceof Error ? last : new Error(String(last));
    },

    async upload(key, file, sizeBytes, sha256) {
      if (unavailable) return;
      let target: Partial<UploadTarget> | undefined;
      try {
        const entry: CacheUploadBody = { key, size_bytes: sizeBytes, sha256 };
        const created = await jobClient.ok("POST", path, { json: entry, retry });
        target = (created.body as Partial<CacheUploadAnswer> | null)?.upload;
      } catch (err) {
        if (err instanceof DaemonError && noteUnavailable(err)) return;
        throw err;
      }
      if (!target?.url) throw new Error("the daemon's cache answer has no upload URL");
      const url = new URL(target.url, `${jobClient.baseUrl}/`);
      let last: Error = new Error("cache upload failed");
      for (let attempt = 0; attempt < TRANSFER_ATTEMPTS; attempt++) {
        try {
          const res = await putFile(url, target.method || "PUT", target.headers ?? {}, file, sizeBytes);
          if (res.status >= 200 && res.status < 300) return;
          last = new DaemonError(res.status, `http_${res.status}`, `cache upload answered ${res.status}`);
          if (res.status < 500 && res.status !== 408 && res.status !== 429) throw last;
        } catch (err) {
          if (err === last) throw err;
          last = err instanceof Error ? err : new Error(String(err));
        }
        await sleep(backoffDelay(attempt + 1), retry.signal);
      }
      throw last;
    },
  };
}

/** The daemon's lookup answer, checked: a malformed one is an error, not a hit. */
function toHit(body: unknown): RemoteCacheHit {
  const b = body as Partial<RemoteCacheHit> | null;
  if (
    typeof b?.key !== "string" ||
    typeof b.url !== "string" ||
    typeof b.size_bytes !== "number" ||
    !Number.isSafeInteger(b.size_bytes) ||
    b.size_bytes < 0 ||
    typeof b.sha256 !== "string" ||
    !/^[0-9a-f]{64}$/.test(b.sha256)
  ) {
    throw new Error("the daemon's cache answer is malformed");
  }
  return { key: b.key, url: b.url, size_bytes: b.size_bytes, sha256: b.sha256 };
}

/** One streamed GET of the archive into `file`, hashed and counted on the way; refused when either differs. */
async function downloadOnce(hit: RemoteCacheHit, file: string): Promise<void> {
  const controller = new AbortController();
  let stalled: ReturnType<typeof setTimeout> | undefined;
  const watch = () => {
    clearTimeout(stalled);
    stalled = setTimeout(() => controller.abort(new Error(`cache download stalled for ${STALL_MS / 1000} s`)), STALL_MS);
  };
  watch();
  try {
    // Redirects are not followed: the signed URL names the object, and a 3xx is simply not ok.
    const res = await fetch(hit.url, { redirect: "manual", signal: controller.signal });
    if (!res.ok || !res.body) {
      await res.body?.cancel();
      throw new DaemonError(res.status, `http_${res.status}`, `cache download answered ${res.status}`);
    }
    const hash = createHash("sha256");
    let received = 0;
    const check = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        watch();
        received += chunk.length;
        // Past the recorded size the rest is not even written.
        if (received > hit.size_bytes) return done(new CacheIntegrityError(`the cache archive is larger than its recorded ${hit.size_bytes} bytes`));
        hash.update(chunk);
        done(null, chunk);
      },
    });
    await pipeline(Readable.fromWeb(res.body as NodeReadableStream<Uint8Array>), check, createWriteStream(file, { mode: 0o600 }));
    if (received !== hit.size_bytes) throw new CacheIntegrityError(`the cache archive has ${received} bytes, ${hit.size_bytes} were recorded`);
    const digest = hash.digest("hex");
    if (digest !== hit.sha256) throw new CacheIntegrityError(`the cache archive's SHA-256 is ${digest}, ${hit.sha256} was recorded`);
  } finally {
    clearTimeout(stalled);
  }
}
