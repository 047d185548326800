import { z } from "zod";
import { parseOutboundAllow, type OutboundAllowList } from "./domain/common/outbound.ts";

const seconds = (fallback: number) => z.coerce.number().int().min(1).default(fallback);

/** Every HANGAR_* setting. This module is the only reader of the environment (STYLE habit 1). */
export const ConfigSchema = z.object({
  HANGAR_HOST: z.string().min(1).default("127.0.0.1"),
  HANGAR_PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HANGAR_DATA_DIR: z.string().min(1).default("./data"),
  HANGAR_DATABASE_URL: z.string().min(1).optional(),
  HANGAR_DATABASE_AUTH_TOKEN: z.string().min(1).optional(),
  HANGAR_RUNNER_OFFLINE_AFTER_S: seconds(60),
  HANGAR_JOB_LEASE_S: seconds(120),
  HANGAR_QUEUE_TTL_S: seconds(86_400),
  HANGAR_BUILD_TIMEOUT_S: seconds(3_600),
  HANGAR_SWEEP_INTERVAL_MS: z.coerce.number().int().min(10).default(5_000),
  HANGAR_OUTBOX_RETRY_BASE_MS: z.coerce.number().int().min(1).default(30_000),
  HANGAR_OUTBOX_POLL_MS: z.coerce.number().int().min(5).default(1_000),
  HANGAR_ASC_API_URL: z.string().url().default("https://api.appstoreconnect.apple.com"),
  HANGAR_GOOGLE_API_URL: z.string().url().default("https://androidpublisher.googleapis.com"),
  HANGAR_PUBLISH_POLL_MS: z.coerce.number().int().min(10).default(10_000),
  // Google's resumable uploads take chunks in multiples of 256 KiB (docs/publishing.md).
  HANGAR_GOOGLE_UPLOAD_CHUNK_BYTES: z.coerce
    .number()
    .int()
    .min(256 * 1024)
    .refine((n) => n % (256 * 1024) === 0, "a multiple of 262144 (256 KiB)")
    .default(32 * 1024 * 1024),
  HANGAR_PUBLISH_LEASE_MS: z.coerce.number().int().min(1_000).default(90_000),
  HANGAR_REPORT_LEASE_MS: z.coerce.number().int().min(500).default(30_000),
  HANGAR_MAX_UPLOAD_BYTES: z.coerce
    .number()
    .int()
    .min(1)
    .default(4 * 1024 ** 3),
  HANGAR_LOG_REQUESTS: z.enum(["0", "1"]).default("1"),
  HANGAR_METRICS_TOKEN: z.string().min(16, "must be at least 16 characters").optional(),
  HANGAR_DB_SYNCHRONOUS: z
    .string()
    .transform((v) => v.toLowerCase())
    .pipe(z.enum(["normal", "full"]))
    .default("normal"),
  // 0 leaves WAL checkpoints to SQLite (inside the commit that crosses 1,000 pages).
  HANGAR_DB_CHECKPOINT_MS: z.coerce.number().int().min(0).default(5_000),
  // Comma-separated CIDRs the outbound guard lets through (docs/api.md §12); empty refuses every private address.
  HANGAR_OUTBOUND_ALLOW: z.string().default(""),
  HANGAR_ALLOW_LOCAL_REPOS: z.enum(["0", "1"]).default("0"),
  HANGAR_MAX_LOG_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(64 * 1024 * 1024),
  HANGAR_LOG_GRACE_S: z.coerce.number().int().min(0).default(60),
  HANGAR_LOG_STREAM_MAX_S: seconds(300),
  HANGAR_HEADERS_TIMEOUT_MS: z.coerce.number().int().min(100).default(20_000),
  HANGAR_BODY_TIMEOUT_MS: z.coerce.number().int().min(100).default(60_000),
  HANGAR_SIGNING_CHECK_INTERVAL_S: seconds(86_400),
  HANGAR_RETENTION_LEASE_S: seconds(120),
  // Comma-separated OS user names whose loopback connections may use local login, besides the daemon's own user.
  HANGAR_LOCAL_LOGIN_USERS: z.string().default(""),
  // Runner affinity (docs/api.md §16): how long a build waits for the runner holding its warm workspace; 0 turns it off.
  HANGAR_AFFINITY_WAIT_MS: z.coerce.number().int().min(0).max(600_000).default(3_000),
  // Shared caches (docs/api.md §16): bytes of ready entries kept per project, GB = 2^30, fractions allowed.
  HANGAR_SHARED_CACHE_MAX_GB: z.coerce.number().min(0).max(100_000).default(10),
});

export interface HangarConfig {
  host: string;
  port: number;
  dataDir: string;
  databaseUrl: string;
  databaseAuthToken?: string;
  runnerOfflineAfterS: number;
  jobLeaseS: number;
  queueTtlS: number;
  buildTimeoutS: number;
  sweepIntervalMs: number;
  /** First retry delay of an outbox delivery; each further one doubles it, ±20 % (docs/api.md §12). */
  outboxRetryBaseMs: number;
  /** How often an idle daemon looks for due outbox deliveries. */
  outboxPollMs: number;
  /** Store API bases (docs/publishing.md); tests point them at local servers. */
  ascApiUrl: string;
  googleApiUrl: string;
  /** How often a store's processing of an upload is polled. */
  publishPollMs: number;
  /** Bytes per PUT of a Google Play resumable upload. */
  googleUploadChunkBytes: number;
  /** How long a daemon holds a publish without renewing (it renews every third): a crashed one's is taken after. */
  publishLeaseMs: number;
  /** How long a daemon holds a test report it is storing without renewing: a crashed one's is redone after. */
  reportLeaseMs: number;
  maxUploadBytes: number;
  /** Largest JSON body accepted (docs/api.md §1). */
  maxJsonBytes: number;
  logRequests: boolean;
  /** Bearer token for GET /metrics; without one, only loopback clients in local mode may scrape (docs/api.md §13). */
  metricsToken?: string;
  /** `PRAGMA synchronous` on the embedded file's connections (docs/decisions.md "synchronous=NORMAL"). */
  dbSynchronous: "normal" | "full";
  /** The embedded file's WAL checkpointed by a timer this often, off the commit path; 0: by SQLite in commits. */
  dbCheckpointMs: number;
  /** HANGAR_OUTBOUND_ALLOW, parsed: addresses the outbound guard lets through although private or loopback. */
  outboundAllow: OutboundAllowList;
  /** Local paths and file:// repositories in remote mode too (HANGAR_ALLOW_LOCAL_REPOS=1). */
  allowLocalRepos: boolean;
  /** A build's stored log stops here with one truncation line (docs/api.md §6). */
  maxLogBytes: number;
  /** How long after a build became final its runner may still send log chunks. */
  logGraceS: number;
  /** How long one live-log event stream of the build page stays open; the browser then resumes it (Last-Event-ID). */
  logStreamMaxS: number;
  /** A request's line and headers must arrive within this (408 otherwise). */
  headersTimeoutMs: number;
  /** A request's body must arrive within this after its headers (408 or the connection closed; uploads: while moving). */
  bodyTimeoutMs: number;
  /** How often the signing health pass looks for expiring certificates and profiles (docs/signing.md). */
  signingCheckIntervalS: number;
  /** How long a daemon running a retention pass holds it without renewing; another daemon then resumes it. */
  retentionLeaseS: number;
  /** OS users, besides the daemon's own, whose loopback connections may sign in locally (HANGAR_LOCAL_LOGIN_USERS). */
  localLoginUsers: string[];
  /** HANGAR_AFFINITY_WAIT_MS: a queued build is held this long for the runner with its warm workspace (docs/api.md §16). */
  affinityWaitMs: number;
  /** HANGAR_SHARED_CACHE_MAX_GB in bytes: ready shared-cache entries kept per project, least recently used dropped first. */
  sharedCacheMaxBytes: number;
}

export class ConfigError extends Error {}

/** Parses a record of environment values into a config; unknown keys are ignored. */
export function loadConfig(env: Record<string, string | undefined>): HangarConfig {
  const picked: Record<string, string> = {};
  for (const key of Object.keys(ConfigSchema.shape)) {
    const value = env[key];
    if (value !== undefined && value !== "") picked[key] = value;
  }
  const parsed = ConfigSchema.safeParse(picked);
  if (!parsed.success) {
    const detail = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ");
    throw new ConfigError(`invalid configuration: ${detail}`);
  }
  const e = parsed.data;
  let outboundAllow: OutboundAllowList;
  try {
    outboundAllow = parseOutboundAllow(e.HANGAR_OUTBOUND_ALLOW);
  } catch (err) {
    throw new ConfigError(`invalid configuration: ${(err as Error).message}`);
  }
  const dataDir = e.HANGAR_DATA_DIR.replace(/\/+$/, "") || "/";
  return {
    host: e.HANGAR_HOST,
    port: e.HANGAR_PORT,
    dataDir,
    databaseUrl: e.HANGAR_DATABASE_URL ?? `file:${dataDir}/hangar.db`,
    databaseAuthToken: e.HANGAR_DATABASE_AUTH_TOKEN,
    runnerOfflineAfterS: e.HANGAR_RUNNER_OFFLINE_AFTER_S,
    jobLeaseS: e.HANGAR_JOB_LEASE_S,
    queueTtlS: e.HANGAR_QUEUE_TTL_S,
    buildTimeoutS: e.HANGAR_BUILD_TIMEOUT_S,
    sweepIntervalMs: e.HANGAR_SWEEP_INTERVAL_MS,
    outboxRetryBaseMs: e.HANGAR_OUTBOX_RETRY_BASE_MS,
    outboxPollMs: e.HANGAR_OUTBOX_POLL_MS,
    ascApiUrl: e.HANGAR_ASC_API_URL.replace(/\/+$/, ""),
    googleApiUrl: e.HANGAR_GOOGLE_API_URL.replace(/\/+$/, ""),
    publishPollMs: e.HANGAR_PUBLISH_POLL_MS,
    googleUploadChunkBytes: e.HANGAR_GOOGLE_UPLOAD_CHUNK_BYTES,
    publishLeaseMs: e.HANGAR_PUBLISH_LEASE_MS,
    reportLeaseMs: e.HANGAR_REPORT_LEASE_MS,
    maxUploadBytes: e.HANGAR_MAX_UPLOAD_BYTES,
    maxJsonBytes: 1024 * 1024,
    logRequests: e.HANGAR_LOG_REQUESTS === "1",
    metricsToken: e.HANGAR_METRICS_TOKEN,
    dbSynchronous: e.HANGAR_DB_SYNCHRONOUS,
    dbCheckpointMs: e.HANGAR_DB_CHECKPOINT_MS,
    outboundAllow,
    allowLocalRepos: e.HANGAR_ALLOW_LOCAL_REPOS === "1",
    maxLogBytes: e.HANGAR_MAX_LOG_BYTES,
    logGraceS: e.HANGAR_LOG_GRACE_S,
    logStreamMaxS: e.HANGAR_LOG_STREAM_MAX_S,
    headersTimeoutMs: e.HANGAR_HEADERS_TIMEOUT_MS,
    bodyTimeoutMs: e.HANGAR_BODY_TIMEOUT_MS,
    signingCheckIntervalS: e.HANGAR_SIGNING_CHECK_INTERVAL_S,
    retentionLeaseS: e.HANGAR_RETENTION_LEASE_S,
    localLoginUsers: e.HANGAR_LOCAL_LOGIN_USERS.split(",")
      .map((u) => u.trim())
      .filter((u) => u !== ""),
    affinityWaitMs: e.HANGAR_AFFINITY_WAIT_MS,
    sharedCacheMaxBytes: Math.floor(e.HANGAR_SHARED_CACHE_MAX_GB * 2 ** 30),
  };
}
