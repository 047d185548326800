import type { Context } from "hono";
import type { HangarConfig } from "./config.ts";
import type { Db } from "./db/types.ts";
import type { SecretBox } from "./domain/common/crypto.ts";
import type { GitClient } from "./domain/projects/git.ts";
import type { JobSignal } from "./domain/builds/job-signal.ts";
import type { LogSignal } from "./domain/logs/log-signal.ts";
import type { MetricsRegistry } from "./domain/common/metrics.ts";
import type { UserRow } from "./domain/auth/users.ts";
import type { ArtifactStore, StoreTarget } from "./storage/types.ts";
import type { MailSender } from "./domain/events/mail.ts";

/** Time source in epoch seconds. Tests pass a ManualClock; nothing else reads the wall clock. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Math.floor(Date.now() / 1000) };

/** One JSON object per line on stderr in the Node shell; never a token, secret or body. */
export type Logger = (record: Record<string, unknown>) => void;

/**
 * Everything the handler set needs from its host, passed to `createApp` (STYLE habit 1).
 * The Node daemon, an embedding Node server, the Workers entry and the tests each build one.
 */
export interface AppDeps {
  db: Db;
  clock: Clock;
  config: HangarConfig;
  /** AES-256-GCM box keyed by the key file: secrets at rest. */
  secrets: SecretBox;
  /** The TCP peer address of the request, or undefined where there is no socket (Workers). */
  getPeerAddress: (c: Context) => string | undefined;
  /**
   * Whether the client's end of the request's socket belongs to the daemon's own OS user or one named in
   * HANGAR_LOCAL_LOGIN_USERS: local sign-in asks it besides loopback (docs/decisions.md "Local login: the socket's
   * owner"). Node: src/runtime/socket-owner.ts. Absent where there is no socket (Workers): local sign-in is refused.
   */
  isLocalUserSocket?: (c: Context) => Promise<boolean>;
  log: Logger;
  /** Whether a directory exists (created if missing) and is writable: artifact-storage validation; absent on Workers. */
  checkWritableDir?: (path: string) => Promise<boolean>;
  /**
   * Outbound HTTP through the outbound guard (docs/api.md §12; src/domain/common/outbound.ts): refuses loopback, private,
   * link-local… destinations unless HANGAR_OUTBOUND_ALLOW lists them (throws DestinationNotAllowedError), never
   * follows a redirect, and has a deadline and an answer cap. Node: src/runtime/outbound.ts.
   */
  fetch: typeof fetch;
  /**
   * The same guard without the deadline and answer cap, for long uploads to the stores (docs/publishing.md): a
   * streamed request body is sent as it is read. Absent (tests, Workers): `fetch`.
   */
  uploadFetch?: typeof fetch;
  /**
   * An incremental MD5 for App Store Connect's upload checksum (docs/publishing.md): node:crypto's in Node, eight
   * times the rate of the pure-JS one. Absent (tests, Workers): @noble/hashes.
   */
  md5?: () => IncrementalHash;
  /**
   * Checks a destination URL now, resolving its name where the host can (Node), for settings saved and
   * targets created: throws DestinationNotAllowedError; `listed` = every address is in HANGAR_OUTBOUND_ALLOW
   * (plain http is allowed there only). Absent: IP literals and localhost only (src/domain/common/outbound.ts).
   */
  checkDestination?: (url: string) => Promise<{ listed: boolean }>;
  /**
   * Sends one mail through the SMTP settings' server, its host under the outbound guard (docs/api.md §18; Node:
   * src/runtime/mail.ts). Absent (Workers): mails in the outbox fail with `mail_unsupported`.
   */
  sendMail?: MailSender;
  /** `git ls-remote` for branch resolution (Node: the real git binary, src/runtime/git.ts). */
  git: GitClient;
  /** Wakes this process's long-polling claims when a build is queued; other daemons poll the database. */
  jobSignal: JobSignal;
  /** Wakes this process's live log streams when a runner sends a build's log or status; `createApp` makes one. */
  logSignal?: LogSignal;
  /** Opens the artifact store an artifact's location names (local disk needs node:fs, so the host supplies it). */
  openArtifactStore: (target: StoreTarget) => ArtifactStore;
  /** This process's Prometheus counters and histograms; `createApp` makes one when the host passes none. */
  metrics?: MetricsRegistry;
  /**
   * Free and total bytes of the file system holding a path (Node: statfs), for the disk page, the
   * `hangar_data_dir_free_bytes` gauge and the preflight's free-space check; absent on Workers (no data directory).
   */
  diskSpace?: (path: string) => Promise<{ freeBytes: number; totalBytes: number }>;
  /** The host's process metrics in Prometheus text format (Node: memory, CPU, start time); absent on Workers. */
  processMetrics?: () => string;
  /**
   * The standalone runner served at GET /runner/hangar-runner.mjs, or null while it is not built (Node: dist/
   * hangar-runner.mjs from `npm install`, src/runtime/runner-bundle.ts); absent where the host has none (Workers).
   */
  runnerBundle?: () => Promise<RunnerBundle | null>;
}

/** The standalone runner file (docs/api.md §9) as the host has it: its bytes, a strong ETag and when it was built. */
export interface RunnerBundle {
  bytes: Uint8Array<ArrayBuffer>;
  etag: string;
  /** Epoch seconds. */
  modifiedAt: number;
}

export interface AppVariables {
  requestId: string;
  isLoopback: boolean;
  user: UserRow;
  userSessionId: string;
  setupSessionId: string;
  setupSessionExpiresAt: number;
  runnerId: string;
  /** The CSP nonce of an HTML answer (src/web/security.ts). */
  cspNonce: string;
  /** Set by the web UI's session check when the data directory is under 10 % free: the pages' banner. */
  lowDiskSpace: { free_bytes: number; total_bytes: number } | null;
  /** Origins besides our own a page's forms may post to (an identity provider the setup form redirects to). */
  cspFormActions: string[];
}

export interface AppEnv {
  Variables: AppVariables;
}

/** A hash fed chunk by chunk as a stream passes through it. */
export interface IncrementalHash {
  update(data: Uint8Array): void;
  digestHex(): string;
}
