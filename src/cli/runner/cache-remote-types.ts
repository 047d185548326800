// The seam between the runner's cache (restore before the first step, save after a succeeded build; local store with
// LRU eviction) and the instance's shared cache (S3/R2 through presigned URLs the daemon hands out). See
// docs/api.md §16.

import type { RemoteCacheHit } from "../../protocol/runner.ts";

// The wire shapes (a shared storage hit, the per-entry report) are the protocol's, shared with the daemon.
export type { CacheEntryReport, RemoteCacheHit } from "../../protocol/runner.ts";

/** The instance's shared cache as one job sees it (scoped by the daemon to the job's project and trust). */
export interface RemoteCache {
  /** The exact key's entry, else the newest whose key starts with one of `restoreKeys`, in order; null when none. */
  find(key: string, restoreKeys: string[]): Promise<RemoteCacheHit | null>;
  /** Streams the entry's archive into `file` (never whole in memory), checking its size and SHA-256. */
  download(hit: RemoteCacheHit, file: string): Promise<void>;
  /** Uploads the archive in `file` under `key`: a presigned PUT asked of the daemon, then the file streamed to it. */
  upload(key: string, file: string, sizeBytes: number, sha256: string): Promise<void>;
}
