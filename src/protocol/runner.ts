// The wire protocol between the daemon and a runner (docs/api.md §6 and §16): the one definition of every body the
// two exchange. The daemon's request validators and answer schemas (src/http/responses.ts) are built from these
// schemas, and the reference runner (src/cli/runner/) takes its types from them, so a field is added here once and
// both sides see it. zod/mini: the standalone runner bundles this file, and mini tree-shakes to the checks used;
// the daemon's full zod accepts these schemas inside its own (both are zod 4 underneath).
import * as z from "zod/mini";

const time = z.number().check(z.int(), z.describe("Unix seconds"));
const int = z.number().check(z.int());

// ---------------------------------------------------------------- the claim

/** Trust of a build: a protected build gets credentials, an open or fork one never does (docs/runner-isolation.md). */
export const BUILD_TRUST_VALUES = ["protected", "open", "fork"] as const;

/**
 * `POST /v1/runners/{rid}/claim`: the job a runner gets (docs/spec.md "Claimed job" plus docs/api.md §6's repo_url
 * and pipeline_name). `config_snapshot` is the pipeline as the daemon validated it: the daemon documents it with
 * its own pipeline schema, the runner reads the parts it runs.
 */
export const claimedJobSchema = z.object({
  build_id: z.string(),
  project_id: z.string(),
  pipeline_id: z.string(),
  pipeline_name: z.string(),
  build_number: int,
  config_snapshot: z.unknown(),
  commit_sha: z.string(),
  branch: z.string(),
  repo_url: z.string(),
  trigger_event: z.nullable(z.string()),
  lease_expires_at: time,
  /** Authenticates this job's calls only, until shortly after it is final (`hgj_…`). */
  job_token: z.string(),
  trust: z.enum(BUILD_TRUST_VALUES),
  /** CIDRs the daemon's outbound guard allows (HANGAR_OUTBOUND_ALLOW): the clone is held to the same rules. */
  outbound_allow: z.array(z.string()),
});
export type ClaimedJob = z.infer<typeof claimedJobSchema>;

/** `GET /v1/runners/{rid}/jobs/{jid}`: what the runner polls to learn of a cancel or a final status. */
export const jobStateSchema = z.object({
  build_id: z.string(),
  status: z.string(),
  cancel_requested: z.boolean(),
  lease_expires_at: z.nullable(time),
});
export type JobState = z.infer<typeof jobStateSchema>;

// ---------------------------------------------------------------- the status report

/** The statuses a runner may report (the daemon's state machine decides which follow which). */
export const REPORTABLE_STATUSES = ["running", "succeeded", "failed", "canceled", "timed_out"] as const;

export const stepResultSchema = z.object({
  name: z.string().check(z.minLength(1), z.maxLength(200)),
  status: z.enum(["pending", "running", "succeeded", "failed", "skipped"]),
  exit_code: z.optional(int),
  started_at: z.optional(int),
  finished_at: z.optional(int),
});
export type StepResult = z.infer<typeof stepResultSchema>;

/** Cache keys and restore keys: at most this many characters (GitHub's cache keys have the same bound). */
export const MAX_CACHE_KEY_LENGTH = 512;
/** At most this many entries per build (a pipeline with more `cache` entries reports its first 50). */
export const MAX_CACHE_REPORTS = 50;
/** A day in milliseconds: longer restore or save times are not believable. */
const MAX_MS = 86_400_000;

const reportedKey = z.string().check(z.minLength(1), z.maxLength(MAX_CACHE_KEY_LENGTH));
const millis = z.nullable(int.check(z.minimum(0), z.maximum(MAX_MS)));

/** What the runner reports per `cache` entry, in order, in the final status report (`caches`; docs/api.md §16). */
export const cacheEntryReportSchema = z.object({
  /** The exact key, placeholders filled in. */
  key: reportedKey,
  result: z.enum(["exact", "partial", "miss"]),
  /** The key actually restored (equal to `key` on an exact hit), null on a miss. */
  restored_key: z.nullable(reportedKey),
  /** Where the restored entry came from. */
  source: z.nullable(z.enum(["local", "shared"])),
  /** Size of the restored archive, or of the saved one when nothing was restored; null when neither. */
  size_bytes: z.nullable(int.check(z.minimum(0), z.maximum(Number.MAX_SAFE_INTEGER))),
  restore_ms: millis,
  /** Null when nothing was saved (an exact hit, a failed build, or a save that failed). */
  save_ms: millis,
  saved: z.boolean(),
});
export type CacheEntryReport = z.infer<typeof cacheEntryReportSchema>;

export const cacheReportsSchema = z.array(cacheEntryReportSchema).check(z.maxLength(MAX_CACHE_REPORTS));

/** One commit up to the build's, newest first, for release notes made of commit subjects. */
export const reportedCommitSchema = z.object({
  sha: z.string().check(z.regex(/^[0-9a-f]{7,64}$/)),
  subject: z.string().check(z.maxLength(1000)),
  author: z.string().check(z.maxLength(320)),
});

/** `POST /v1/runners/{rid}/jobs/{jid}/status`: progress while running, then the final report. */
export const statusReportSchema = z.object({
  status: z.enum(REPORTABLE_STATUSES),
  exit_code: z.optional(int.check(z.minimum(-255), z.maximum(255))),
  step_results: z.optional(z.array(stepResultSchema).check(z.maxLength(100))),
  /** Tester channels (docs/decisions.md "Tester distribution"): the pipeline's release_notes file, read after the last step. */
  release_notes: z.optional(z.string().check(z.maxLength(64 * 1024))),
  commits: z.optional(z.array(reportedCommitSchema).check(z.maxLength(50))),
  /** Per `cache` entry, in order (docs/api.md §16): kept with a final report, shown on the build page. */
  caches: z.optional(cacheReportsSchema),
});
export type StatusReport = z.input<typeof statusReportSchema>;

// ---------------------------------------------------------------- the heartbeat

/** `POST /v1/runners/{rid}/heartbeat`: the disk figures are what the runner knows of the disk holding its work root. */
export const heartbeatBodySchema = z.object({
  status: z.optional(z.enum(["online", "busy", "draining"])),
  free_disk_bytes: z.optional(int.check(z.minimum(0), z.maximum(Number.MAX_SAFE_INTEGER))),
  low_disk: z.optional(z.boolean()),
});
export type HeartbeatBody = z.input<typeof heartbeatBodySchema>;
/** What every heartbeat tells the daemon about the disk holding the work root (docs/api.md §16). */
export type DiskReport = Required<Pick<HeartbeatBody, "free_disk_bytes" | "low_disk">>;

/** The heartbeat's answer: the jobs to cancel and when to beat next (`runner` is the runner as GET shows it). */
export const heartbeatAnswerSchema = z.object({
  runner: z.unknown(),
  cancel_job_ids: z.array(z.string()),
  next_heartbeat_in_s: int,
});

// ---------------------------------------------------------------- uploads: artifacts, reports and caches

/** What an artifact is: a file to download, or a `junit` XML report the daemon reads into test results. */
export const ARTIFACT_KINDS = ["file", "junit"] as const;
export type ArtifactKind = (typeof ARTIFACT_KINDS)[number];

const utf8 = new TextEncoder();

/** docs/api.md §7: an artifact's name is a base name — no `/`, `\`, `..` or control characters, at most 255 bytes. Null when valid. */
export function artifactFilenameProblem(name: string): string | null {
  if (name.length === 0) return "must not be empty";
  if (utf8.encode(name).length > 255) return "must be at most 255 bytes";
  if (name.includes("/") || name.includes("\\")) return "must be a base name without / or \\";
  if (name.includes("..")) return "must not contain ..";
  if (name === ".") return "must not be .";
  if (/[\u0000-\u001f\u007f-\u009f]/.test(name)) return "must not contain control characters";
  return null;
}

const installMetadataText = z.string().check(z.trim(), z.minLength(1), z.maxLength(1024));

/**
 * `POST …/jobs/{jid}/artifacts` (docs/api.md §7): declare an artifact before uploading it. The content type is
 * echoed as a header on download, so quoted parameter values are visible ASCII only (no quote or backslash): a
 * control character or a non-Latin-1 one would make every download a 500.
 */
export const createArtifactBodySchema = z.object({
  filename: z.string().check(
    z.superRefine((name, ctx) => {
      const problem = artifactFilenameProblem(name);
      if (problem) ctx.addIssue({ code: "custom", message: `filename ${problem}`, input: name });
    }),
  ),
  size_bytes: int.check(z.minimum(0), z.maximum(Number.MAX_SAFE_INTEGER)),
  content_type: z
    .string()
    .check(
      z.maxLength(255),
      z.regex(
        /^[\w.+-]+\/[\w.+-]+(?:\s*;\s*[\w.+-]+=(?:[\w.+-]+|"[\x20\x21\x23-\x5b\x5d-\x7e]*"))*$/,
        "must be a media type such as application/octet-stream",
      ),
    ),
  sha256: z.optional(z.string().check(z.regex(/^[0-9a-fA-F]{64}$/, "must be 64 hex characters"))),
  /** An .ipa's or .apk's identity, for the install page when the daemon cannot read it from the file itself. */
  install_metadata: z.optional(z.object({ bundle_identifier: installMetadataText, bundle_version: installMetadataText, title: installMetadataText })),
  /** Sent only when not `file`, so a runner still talks to a daemon that predates test reports. */
  kind: z.optional(z.enum(ARTIFACT_KINDS)),
});
export type CreateArtifactBody = z.input<typeof createArtifactBodySchema>;

/** One cache archive: at most 10 GiB (GB = 2^30, as the runner's --cache-max-gb). */
export const MAX_CACHE_ENTRY_BYTES = 10 * 2 ** 30;
/** Restore keys one lookup may try, in order. */
export const MAX_RESTORE_KEYS = 16;

const cacheKey = z.string().check(
  z.minLength(1),
  z.maxLength(MAX_CACHE_KEY_LENGTH),
  z.refine((k) => !/[\u0000-\u001f\u007f]/.test(k), "must not contain control characters"),
);

/** `POST …/jobs/{jid}/caches` (docs/api.md §16): save an entry; the daemon answers where to upload its archive. */
export const cacheUploadBodySchema = z.object({
  key: cacheKey,
  size_bytes: int.check(z.minimum(1), z.maximum(MAX_CACHE_ENTRY_BYTES)),
  sha256: z.string().check(z.regex(/^[0-9a-fA-F]{64}$/, "must be 64 hexadecimal characters"), z.toLowerCase()),
});
export type CacheUploadBody = z.input<typeof cacheUploadBodySchema>;

/** `GET …/jobs/{jid}/caches?key=K&restore_key=P1&restore_key=P2`: one key; restore keys repeated, in the order tried. */
export const cacheLookupQuerySchema = z.object({
  key: cacheKey,
  restore_key: z.pipe(
    z.optional(z.union([cacheKey, z.array(cacheKey).check(z.maxLength(MAX_RESTORE_KEYS))])),
    z.transform((v) => (v === undefined ? [] : Array.isArray(v) ? v : [v])),
  ),
});
export type CacheLookupQuery = { key: string; restore_key: string[] };

/** Where to PUT the bytes: a presigned URL, or the daemon's own upload route on local storage. */
export const uploadTargetSchema = z.object({
  method: z.literal("PUT"),
  url: z.string(),
  headers: z.record(z.string(), z.string()),
  expires_at: time,
});
export type UploadTarget = z.infer<typeof uploadTargetSchema>;

/** `POST …/jobs/{jid}/artifacts` (artifacts and `junit` reports): the artifact as GET shows it, and where to upload. */
export const artifactCreatedSchema = z.object({ artifact: z.looseObject({ id: z.string() }), upload: uploadTargetSchema });
export type ArtifactCreated = z.infer<typeof artifactCreatedSchema>;

/** `POST …/jobs/{jid}/caches`: where to upload the archive. */
export const cacheUploadAnswerSchema = z.object({ upload: uploadTargetSchema });
export type CacheUploadAnswer = z.infer<typeof cacheUploadAnswerSchema>;

/** `GET …/jobs/{jid}/caches?key=…`: an entry found in the instance's shared storage (404 `not_found` when none). */
export const cacheHitSchema = z.object({ key: z.string(), url: z.string(), size_bytes: int, sha256: z.string() });
export type RemoteCacheHit = z.infer<typeof cacheHitSchema>;
