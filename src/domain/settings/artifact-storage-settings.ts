import type { StorageProvider } from "../../db/schema/constants.ts";
import type { AppDeps } from "../../deps.ts";
import type { StoreTarget } from "../../storage/types.ts";
import { readSetting } from "./instance-settings.ts";

/** Settings key of the artifact-storage document in instance_settings. */
export const ARTIFACT_STORAGE_SETTING = "artifact_storage";

/** The stored document (docs/api.md §4). The secret access key is sealed with the key file's box. */
export interface StoredArtifactStorageSettings {
  provider: StorageProvider;
  local: { base_dir: string | null };
  s3: {
    endpoint: string | null;
    region: string | null;
    bucket: string | null;
    prefix: string | null;
    access_key_id: string | null;
    force_path_style: boolean;
    secret_access_key_sealed: string | null;
  };
}

/** What the storage providers need: the active provider with its secret opened, plus the bucket's key prefix. */
export type ActiveStorageSettings =
  | Extract<StoreTarget, { provider: "local" }>
  | (Extract<StoreTarget, { provider: "s3" | "r2" }> & { prefix: string });

/** Local disk under `<data dir>/artifacts` until an owner or admin chooses otherwise. */
export function defaultLocalBaseDir(deps: Pick<AppDeps, "config">): string {
  return `${deps.config.dataDir}/artifacts`;
}

/** The storage the next artifact goes to. */
export async function readActiveStorageSettings(deps: Pick<AppDeps, "db" | "config" | "secrets">): Promise<ActiveStorageSettings> {
  const stored = await readSetting<StoredArtifactStorageSettings>(deps, ARTIFACT_STORAGE_SETTING);
  if (!stored || stored.value.provider === "local") {
    return { provider: "local", baseDir: stored?.value.local.base_dir ?? defaultLocalBaseDir(deps) };
  }
  const s3 = stored.value.s3;
  return {
    provider: stored.value.provider,
    endpoint: s3.endpoint ?? "",
    region: s3.region ?? (stored.value.provider === "r2" ? "auto" : "us-east-1"),
    bucket: s3.bucket ?? "",
    prefix: s3.prefix ?? "",
    accessKeyId: s3.access_key_id ?? "",
    secretAccessKey: s3.secret_access_key_sealed ? await deps.secrets.open(s3.secret_access_key_sealed) : "",
    forcePathStyle: s3.force_path_style,
  };
}
