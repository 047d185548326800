import type { StorageProvider } from "../../db/schema/constants.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { ARTIFACT_STORAGE_SETTING, defaultLocalBaseDir, type StoredArtifactStorageSettings } from "./artifact-storage-settings.ts";
import { auditStatement } from "../common/audit.ts";
import { readSetting, writeSettingStatement } from "./instance-settings.ts";
import { checkDestinationNow, DestinationNotAllowedError } from "../common/outbound.ts";
import type { UserRow } from "../auth/users.ts";

type Deps = Pick<AppDeps, "db" | "clock" | "config" | "secrets" | "checkWritableDir" | "checkDestination">;

const EMPTY_S3: StoredArtifactStorageSettings["s3"] = {
  endpoint: null,
  region: null,
  bucket: null,
  prefix: null,
  access_key_id: null,
  force_path_style: false,
  secret_access_key_sealed: null,
};

/** The answer of GET and PUT (docs/api.md §4): the secret only as `has_secret_access_key`. */
function toSettingsJson(deps: Pick<AppDeps, "config">, doc: StoredArtifactStorageSettings, updatedAt: number | null) {
  const { secret_access_key_sealed, ...s3 } = doc.s3;
  return {
    provider: doc.provider,
    // The effective directory, so the answer says where artifacts go even before anyone chose one.
    local: { base_dir: doc.local.base_dir ?? defaultLocalBaseDir(deps) },
    s3: { ...s3, has_secret_access_key: secret_access_key_sealed !== null },
    updated_at: updatedAt,
  };
}

export async function readArtifactStorageSettings(deps: Pick<AppDeps, "db" | "config">) {
  const stored = await readSetting<StoredArtifactStorageSettings>(deps, ARTIFACT_STORAGE_SETTING);
  if (!stored) return toSettingsJson(deps, { provider: "local", local: { base_dir: null }, s3: EMPTY_S3 }, null);
  return toSettingsJson(deps, stored.value, stored.updatedAt);
}

/**
 * S3 bucket naming rules (general purpose buckets): 3–63 characters of lower-case letters, digits, dots and
 * hyphens, starting and ending with a letter or digit, no adjacent dots, not an IP address, and none of the
 * prefixes and suffixes AWS reserves. R2's rules are a subset of these.
 */
export function isValidBucketName(name: string): boolean {
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(name)) return false;
  if (name.includes("..") || name.includes(".-") || name.includes("-.")) return false;
  if (/^\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name)) return false;
  if (/^(?:xn--|sthree-|amzn-s3-demo-)/.test(name)) return false;
  return !/(?:-s3alias|--ol-s3|\.mrap|--x-s3|--table-s3)$/.test(name);
}

/** An absolute http(s) endpoint without credentials, query or fragment (the http rule is checked with the guard). */
export function parseS3Endpoint(text: string): string | null {
  if (!URL.canParse(text)) return null;
  const url = new URL(text);
  if (url.username || url.password || url.search || url.hash || !url.hostname) return null;
  if (url.protocol === "https:" || url.protocol === "http:") return url.href.replace(/\/+$/, "");
  return null;
}

/** POSIX or Windows absolute path, without NUL. */
function isAbsolutePath(path: string): boolean {
  return !path.includes("\0") && (path.startsWith("/") || /^[A-Za-z]:[\\/]/.test(path));
}

export interface ArtifactStorageInput {
  provider: StorageProvider;
  local?: { base_dir?: string | null };
  s3?: {
    endpoint?: string | null;
    region?: string | null;
    bucket?: string | null;
    prefix?: string | null;
    access_key_id?: string | null;
    /** Write-only. Omitted: keep the stored one (unless the key id changes); null: remove it. */
    secret_access_key?: string | null;
    force_path_style?: boolean;
  };
}

/** `undefined` keeps the stored value, anything else replaces it: a client may send back what GET answered. */
function pick<T>(given: T | undefined, kept: T): T {
  return given === undefined ? kept : given;
}

function normalizePrefix(prefix: string | null): string | null {
  if (prefix === null) return null;
  const trimmed = prefix.replace(/^\/+/, "");
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
  if (/[\x00-\x1f\x7f]/.test(trimmed) || trimmed.split("/").some((part) => part === "..")) {
    throw new ApiError("invalid_input", "s3.prefix must not contain control characters or '..' segments", [
      { path: "s3.prefix", message: "invalid prefix" },
    ]);
  }
  return trimmed === "" ? null : trimmed;
}

/**
 * PUT artifact storage (owner or admin, checked by the route). Validates the chosen provider's section with
 * the spec's codes in the spec's order; the other section is stored as given, and checked when chosen.
 */
export async function updateArtifactStorageSettings(deps: Deps, actor: Pick<UserRow, "id" | "email">, input: ArtifactStorageInput) {
  const previous = (await readSetting<StoredArtifactStorageSettings>(deps, ARTIFACT_STORAGE_SETTING))?.value;
  const prevLocal = previous?.local ?? { base_dir: null };
  const prevS3 = previous?.s3 ?? EMPTY_S3;

  let baseDir = pick(input.local?.base_dir, prevLocal.base_dir);
  // The default shown by GET may be relative to the working directory; sent back unchanged it means "default".
  if (baseDir === defaultLocalBaseDir(deps)) baseDir = null;
  const given = input.s3 ?? {};
  const accessKeyId = pick(given.access_key_id, prevS3.access_key_id)?.trim() || null;
  let secretSealed: string | null;
  if (given.secret_access_key === undefined) {
    // A new key id without its secret would pair it with the old key's secret: refused below instead.
    secretSealed = accessKeyId === prevS3.access_key_id ? prevS3.secret_access_key_sealed : null;
  } else {
    secretSealed = given.secret_access_key ? await deps.secrets.seal(given.secret_access_key) : null;
  }
  const doc: StoredArtifactStorageSettings = {
    provider: input.provider,
    local: { base_dir: baseDir },
    s3: {
      endpoint: pick(given.endpoint, prevS3.endpoint)?.trim() || null,
      region: pick(given.region, prevS3.region)?.trim() || null,
      bucket: pick(given.bucket, prevS3.bucket)?.trim() || null,
      prefix: normalizePrefix(pick(given.prefix, prevS3.prefix)),
      access_key_id: accessKeyId,
      force_path_style: pick(given.force_path_style, prevS3.force_path_style),
      secret_access_key_sealed: secretSealed,
    },
  };

  if (doc.provider === "local") {
    const dir = doc.local.base_dir ?? defaultLocalBaseDir(deps);
    if (doc.local.base_dir !== null && !isAbsolutePath(doc.local.base_dir)) {
      throw new ApiError("invalid_local_base_dir", "local.base_dir must be an absolute path");
    }
    if (!deps.checkWritableDir) throw new ApiError("invalid_local_base_dir", "this runtime has no local disk; choose s3 or r2");
    if (!(await deps.checkWritableDir(dir))) throw new ApiError("invalid_local_base_dir", "local.base_dir is not a writable directory");
  } else {
    if (!doc.s3.bucket || !isValidBucketName(doc.s3.bucket)) {
      throw new ApiError("invalid_s3_bucket", "s3.bucket must follow the S3 bucket naming rules (3-63 lower-case letters, digits, dots, hyphens)");
    }
    const endpoint = doc.s3.endpoint ? parseS3Endpoint(doc.s3.endpoint) : null;
    const httpsOnly = "s3.endpoint must be an absolute https URL (plain http only for a destination in HANGAR_OUTBOUND_ALLOW)";
    if (!endpoint) throw new ApiError("invalid_s3_endpoint", httpsOnly);
    // The outbound guard (docs/api.md §4, §12): a loopback or private endpoint is refused when saved, not only when used.
    const isHttp = endpoint.startsWith("http:");
    try {
      const { listed } = await checkDestinationNow(deps, endpoint);
      if (isHttp && !listed) throw new ApiError("invalid_s3_endpoint", httpsOnly);
    } catch (err) {
      if (err instanceof DestinationNotAllowedError) {
        throw isHttp ? new ApiError("invalid_s3_endpoint", httpsOnly) : new ApiError("destination_not_allowed", `s3.endpoint: ${err.message}`);
      }
      throw err;
    }
    doc.s3.endpoint = endpoint;
    if (!doc.s3.access_key_id || !doc.s3.secret_access_key_sealed) {
      throw new ApiError("missing_s3_credentials", "s3.access_key_id and s3.secret_access_key are both required");
    }
    // R2 is S3 with region "auto" (docs/api.md §4).
    if (doc.provider === "r2") doc.s3.region = "auto";
    else if (!doc.s3.region) doc.s3.region = "us-east-1";
  }
  if (doc.s3.region !== null && !/^[a-z0-9-]{1,64}$/.test(doc.s3.region)) {
    throw new ApiError("invalid_input", "s3.region must be a region name such as us-east-1", [{ path: "s3.region", message: "invalid region" }]);
  }

  await deps.db.batch([
    writeSettingStatement(deps, ARTIFACT_STORAGE_SETTING, doc),
    auditStatement(deps, {
      action: "settings.artifact_storage_updated",
      actor,
      targetType: "instance_settings",
      targetId: ARTIFACT_STORAGE_SETTING,
      details: {
        provider: doc.provider,
        base_dir: doc.local.base_dir,
        endpoint: doc.s3.endpoint,
        bucket: doc.s3.bucket,
        has_secret_access_key: doc.s3.secret_access_key_sealed !== null,
      },
    }),
  ]);
  return toSettingsJson(deps, doc, deps.clock.now());
}
