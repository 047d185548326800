// The Node hosts' store opener: local disk or S3/R2, whichever an artifact's location names.
import type { Clock } from "../deps.ts";
import { createLocalDiskStore } from "./local-disk.ts";
import { createS3Store } from "./s3.ts";
import type { ArtifactStore, StoreTarget } from "./types.ts";

export function openNodeArtifactStore(target: StoreTarget, fetchFn: typeof fetch, clock: Clock): ArtifactStore {
  if (target.provider === "local") return createLocalDiskStore(target.baseDir);
  return createS3Store(target, { fetch: fetchFn, now: () => clock.now() });
}
