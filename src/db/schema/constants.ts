// Value lists shared by the Drizzle columns and the zod request schemas (OpenStatus constants.ts).

export const SETUP_STATES = ["uninitialized", "bootstrap_pending", "idp_configured", "owner_created", "ready"] as const;
export type SetupState = (typeof SETUP_STATES)[number];

export const RUNTIME_MODES = ["local", "remote"] as const;
export type RuntimeMode = (typeof RUNTIME_MODES)[number];

export const REMOTE_AUTH_MODES = ["oidc", "trusted_proxy"] as const;
export type RemoteAuthMode = (typeof REMOTE_AUTH_MODES)[number];

export const KEY_STORAGE_MODES = ["file"] as const;

export const USER_ROLES = ["owner", "admin", "developer", "qa_viewer"] as const;
export type UserRole = (typeof USER_ROLES)[number];
/** Roles that can be given by invite or PATCH: the owner role moves only by transfer. */
export const ASSIGNABLE_ROLES = ["admin", "developer", "qa_viewer"] as const;

export const USER_STATUSES = ["invited", "active", "disabled"] as const;
export type UserStatus = (typeof USER_STATUSES)[number];

export const AUTH_METHODS = ["local", "oidc", "trusted_proxy"] as const;
export type AuthMethod = (typeof AUTH_METHODS)[number];

export const OIDC_PURPOSES = ["setup_owner", "login"] as const;
export type OidcPurpose = (typeof OIDC_PURPOSES)[number];

export const PLATFORMS = ["ios", "android", "macos", "any"] as const;
export type Platform = (typeof PLATFORMS)[number];

export const RUNNER_STATUSES = ["online", "offline", "busy", "draining"] as const;
export type RunnerStatus = (typeof RUNNER_STATUSES)[number];

/** A runner's trust (docs/runner-isolation.md): `protected` may receive credentials, `open` never does. */
export const RUNNER_TRUSTS = ["protected", "open"] as const;
export type RunnerTrust = (typeof RUNNER_TRUSTS)[number];
/** A build's trust, decided at queue time: which runners may take it and whether it may receive credentials. */
export const BUILD_TRUSTS = ["protected", "open", "fork"] as const;
export type BuildTrust = (typeof BUILD_TRUSTS)[number];

export const BUILD_STATUSES = ["queued", "scheduled", "assigned", "running", "succeeded", "failed", "canceled", "timed_out", "expired"] as const;
export type BuildStatus = (typeof BUILD_STATUSES)[number];
export const FINAL_BUILD_STATUSES = ["succeeded", "failed", "canceled", "timed_out", "expired"] as const;

export const TRIGGER_TYPES = ["manual", "webhook", "schedule"] as const;

export const PIPELINE_SOURCES = ["stored", "repository"] as const;
export type PipelineSource = (typeof PIPELINE_SOURCES)[number];

/** A shared cache entry (docs/api.md §16): visible once `ready`; `deleting` while retention removes its object. */
export const CACHE_ENTRY_STATUSES = ["pending", "ready", "deleting"] as const;
export type CacheEntryStatus = (typeof CACHE_ENTRY_STATUSES)[number];

export const ARTIFACT_STATUSES = ["pending", "available", "aborted", "expired"] as const;
export type ArtifactStatus = (typeof ARTIFACT_STATUSES)[number];

export const STORAGE_PROVIDERS = ["local", "s3", "r2"] as const;
export type StorageProvider = (typeof STORAGE_PROVIDERS)[number];

export const URL_TOKEN_KINDS = ["download", "upload", "install"] as const;
export type UrlTokenKind = (typeof URL_TOKEN_KINDS)[number];

export const FORGE_PROVIDERS = ["github", "gitlab", "gitea", "forgejo", "bitbucket"] as const;
export type ForgeProvider = (typeof FORGE_PROVIDERS)[number];

export const DELIVERY_OUTCOMES = ["built", "ignored", "duplicate", "refused"] as const;
export type DeliveryOutcome = (typeof DELIVERY_OUTCOMES)[number];

export const TRIGGER_EVENTS = ["push", "tag", "pull_request"] as const;
export type TriggerEvent = (typeof TRIGGER_EVENTS)[number];

export const NOTIFICATION_KINDS = ["slack", "discord", "teams", "webhook"] as const;
export type NotificationKind = (typeof NOTIFICATION_KINDS)[number];

/** Build events, and `signing_expiring`: a certificate or profile of the project expires within 30 days or has expired (docs/signing.md). */
export const NOTIFICATION_EVENTS = [
  "started",
  "succeeded",
  "failed",
  "fixed",
  "canceled",
  "timed_out",
  "expired",
  "signing_expiring",
  "published",
  "publish_failed",
] as const;
export type NotificationEvent = (typeof NOTIFICATION_EVENTS)[number];

export const OUTBOX_TARGET_KINDS = ["commit_status", "notification", "mail"] as const;
export type OutboxTargetKind = (typeof OUTBOX_TARGET_KINDS)[number];

export const OUTBOX_STATUSES = ["pending", "delivered", "failed", "superseded", "disabled"] as const;
export type OutboxStatus = (typeof OUTBOX_STATUSES)[number];

export const ARTIFACT_KINDS = ["file", "junit"] as const;
export type ArtifactKind = (typeof ARTIFACT_KINDS)[number];

export const TEST_REPORT_STATUSES = ["parsed", "unparsed", "truncated"] as const;
export type TestReportStatus = (typeof TEST_REPORT_STATUSES)[number];
export const TEST_REPORT_STATES = ["pending", "storing", "stored"] as const;
export type TestReportState = (typeof TEST_REPORT_STATES)[number];

export const TEST_CASE_STATUSES = ["passed", "failed", "skipped", "errored"] as const;
export type TestCaseStatus = (typeof TEST_CASE_STATUSES)[number];
