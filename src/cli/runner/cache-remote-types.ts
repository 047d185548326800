// The seam between the runner's cache (restore before the first step, save after a succeeded build; local store with
// LRU eviction) and the instance's shared cache (S3/R2 through presigned URLs the daemon hands out). See
// docs/api.md §16.

/** An entry found in the instance's shared storage: `GET /v1/runners/{rid}/jobs/{jid}/caches`. */
export interface RemoteCacheHit {
  key: string;
  url: string;
  size_bytes: number;
  sha256: string;
}

/** The instance's shared cache as one job sees it (scoped by the daemon to the job's project and trust). */
export interface RemoteCache {
  /** The exact key's entry, else the newest whose key starts with one of `restoreKeys`, in order; null when none. */
  find(key: string, restoreKeys: string[]): Promise<RemoteCacheHit | null>;
  /** Streams the entry's archive into `file` (never whole in memory), checking its size and SHA-256. */
  download(hit: RemoteCacheHit, file: string): Promise<void>;
  /** Uploads the archive in `file` under `key`: a presigned PUT asked of the daemon, then the file streamed to it. */
  upload(key: string, file: string, sizeBytes: number, sha256: string): Promise<void>;
}

/** What the runner reports per `cache` entry, in order, in the final status report (`caches`). */
export interface CacheEntryReport {
  /** The exact key, placeholders filled in. */
  key: string;
  result: "exact" | "partial" | "miss";
  /** The key actually restored (equal to `key` on an exact hit), null on a miss. */
  restored_key: string | null;
  /** Where the restored entry came from. */
  source: "local" | "shared" | null;
  /** Size of the restored archive, or of the saved one when nothing was restored; null when neither. */
  size_bytes: number | null;
  restore_ms: number | null;
  /** Null when nothing was saved (an exact hit, a failed build, or a save that failed). */
  save_ms: number | null;
  saved: boolean;
}
