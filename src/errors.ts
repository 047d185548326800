import type { Context } from "hono";
import { isBusyError } from "./db/busy.ts";

/**
 * Every error code the API can answer with: the spec's codes plus docs/api.md §2/§5–§7's.
 * A closed union, so a typo is a compile error rather than a new code (Unkey's ErrorCode).
 */
export const ERROR_CODES = [
  // generic (docs/api.md §2)
  "invalid_input",
  "not_found",
  "internal_error",
  "payload_too_large",
  "forbidden",
  "insufficient_role",
  // setup
  "missing_auth",
  "invalid_session",
  "session_expired",
  "invalid_token",
  "already_configured",
  "token_consumed",
  "token_expired",
  "too_many_attempts",
  "no_bootstrap_token",
  "invalid_state",
  "mode_restricted",
  "oidc_discovery_failed",
  "encryption_error",
  "invalid_redirect_uri",
  "too_many_pending",
  "oidc_discovery_error",
  "auth_expired",
  "decryption_error",
  "store_error",
  "token_exchange_error",
  "missing_id_token",
  "id_token_verification_error",
  "missing_email",
  // trusted proxy
  "trusted_proxy_shared_secret_missing",
  "trusted_proxy_shared_secret_invalid",
  "trusted_proxy_identity_missing",
  "trusted_proxy_identity_invalid",
  "trusted_proxy_peer_not_allowed",
  "trusted_proxy_owner_email_mismatch",
  "trusted_proxy_not_configured",
  "trusted_proxy_assertion_missing",
  "trusted_proxy_assertion_invalid",
  // auth
  "setup_incomplete",
  "oidc_not_configured",
  "user_not_found",
  "session_error",
  "email_required",
  "local_login_loopback_required",
  "local_login_disabled",
  "too_many_streams",
  // settings
  "invalid_local_base_dir",
  "invalid_s3_bucket",
  "invalid_s3_endpoint",
  "missing_s3_credentials",
  "external_access_https_required",
  "external_access_origin_not_allowed",
  "artifact_delivery_https_required",
  "artifact_delivery_public_url_required",
  "artifact_delivery_url_invalid",
  "external_access_owner_required",
  "external_access_loopback_required",
  "unsupported_key_storage_mode",
  "external_access_preflight_failed",
  "external_access_public_url_missing",
  "external_access_auth_missing",
  // users
  "already_exists",
  "invalid_email",
  "user_not_active",
  // projects, runners, builds
  "branch_not_found",
  "source_unreachable",
  "invalid_transition",
  "build_canceled",
  "log_offset_mismatch",
  "no_credentials",
  "job_not_active",
  "invalid_runner_token",
  "invalid_job_token",
  "runner_mismatch",
  "project_busy",
  "runner_bundle_missing",
  // pipelines in the repository (docs/pipelines.md)
  "invalid_pipeline_config",
  "pipeline_not_in_config",
  "config_unavailable",
  // outbound guard (docs/api.md §12)
  "destination_not_allowed",
  "source_not_allowed",
  // artifacts
  "size_mismatch",
  "upload_too_large",
  "checksum_mismatch",
  "upload_incomplete",
  "link_expired",
  "install_base_url_missing",
  "install_https_required",
  "unsupported_artifact",
  "install_metadata_missing",
  "install_not_possible",
  // webhooks, notifications, credential release (docs/api.md §5, §11, §12)
  "invalid_signature",
  "secrets_withheld",
  "destination_not_allowed",
  // signing material checked on upload (docs/signing.md)
  "invalid_certificate",
  "invalid_profile",
  "certificate_not_in_profile",
  "invalid_keystore",
  // retention and disk
  "artifact_expired",
  "log_expired",
  "retention_pass_running",
  "data_dir_low_space",
  // store keys and publishing (docs/publishing.md)
  "invalid_store_credentials",
  // several daemons on a libSQL server (docs/api.md §8)
  "database_busy",
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export type ErrorStatus = 400 | 401 | 403 | 404 | 409 | 410 | 412 | 413 | 415 | 422 | 429 | 500 | 502 | 503;

export interface ValidationIssue {
  path: string;
  message: string;
  /** 1-based position in a file (a pipeline file's issues). */
  line?: number;
  column?: number;
}

/** The one error type domain code throws; `onError` renders it as `{code, message[, issues]}`. */
export class ApiError extends Error {
  constructor(
    readonly status: ErrorStatus,
    readonly code: ErrorCode,
    message: string,
    readonly issues?: ValidationIssue[],
  ) {
    super(message);
    this.name = "ApiError";
  }
}

export interface ErrorBody {
  code: ErrorCode;
  message: string;
  issues?: ValidationIssue[];
}

export function errorBody(err: ApiError): ErrorBody {
  return err.issues ? { code: err.code, message: err.message, issues: err.issues } : { code: err.code, message: err.message };
}

/**
 * The answer for a database still busy/locked after the retries of src/db/busy.ts (docs/api.md §8: never a 500).
 * Nothing of the request's failed statement was committed, so the client may simply try again.
 */
export function databaseBusyError(): ApiError {
  return new ApiError(503, "database_busy", "the database is busy: try again in a moment");
}

/** Renders any thrown value. Unknown failures become a bare 500: their message may hold a secret or a path. */
export function toErrorResponse(c: Context, err: unknown): Response {
  if (err instanceof ApiError) return c.json(errorBody(err), err.status);
  if (isBusyError(err)) {
    c.header("Retry-After", "1");
    return c.json(errorBody(databaseBusyError()), 503);
  }
  return c.json({ code: "internal_error", message: "internal error" } satisfies ErrorBody, 500);
}

/**
 * A failure as it may be logged: the innermost driver error's name and message. Drizzle's own message repeats
 * the query's parameters (emails, hashes, sealed blobs), so it never reaches a log line.
 */
export function describeError(err: unknown): string {
  let inner: unknown = err;
  while (inner instanceof Error && inner.cause instanceof Error) inner = inner.cause;
  if (!(inner instanceof Error)) return "unknown error";
  const message = inner.name === "DrizzleQueryError" ? "database query failed" : inner.message;
  return `${inner.name}: ${message}`;
}
