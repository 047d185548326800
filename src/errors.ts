import type { Context } from "hono";
import { isBusyError } from "./db/busy.ts";

export type ErrorStatus = 400 | 401 | 403 | 404 | 409 | 410 | 412 | 413 | 415 | 422 | 429 | 500 | 502 | 503;

/**
 * Every error code the API can answer with and its HTTP status: the spec's codes (docs/spec.md "Errors") plus
 * docs/api.md's. The one place a status is chosen: a throw names its code only (Unkey's code-to-status table).
 * A closed set, so a typo is a compile error rather than a new code; a new code needs its status here.
 */
export const ERROR_STATUS = {
  // generic (docs/api.md §2)
  invalid_input: 400,
  not_found: 404,
  internal_error: 500,
  payload_too_large: 413,
  forbidden: 403,
  insufficient_role: 403,
  // setup
  missing_auth: 401,
  invalid_session: 401,
  session_expired: 401,
  invalid_token: 401,
  already_configured: 409,
  token_consumed: 410,
  token_expired: 410,
  too_many_attempts: 429,
  no_bootstrap_token: 500,
  invalid_state: 409,
  mode_restricted: 403,
  oidc_discovery_failed: 400,
  encryption_error: 500,
  invalid_redirect_uri: 400,
  too_many_pending: 429,
  oidc_discovery_error: 502,
  auth_expired: 400,
  decryption_error: 500,
  store_error: 500,
  token_exchange_error: 502,
  missing_id_token: 502,
  id_token_verification_error: 502,
  missing_email: 502,
  // trusted proxy
  trusted_proxy_shared_secret_missing: 401,
  trusted_proxy_shared_secret_invalid: 401,
  trusted_proxy_identity_missing: 401,
  trusted_proxy_identity_invalid: 401,
  trusted_proxy_peer_not_allowed: 403,
  trusted_proxy_owner_email_mismatch: 403,
  trusted_proxy_not_configured: 409,
  trusted_proxy_assertion_missing: 401,
  trusted_proxy_assertion_invalid: 401,
  // auth
  setup_incomplete: 409,
  oidc_not_configured: 500,
  user_not_found: 403,
  session_error: 500,
  email_required: 400,
  local_login_loopback_required: 403,
  local_login_disabled: 403,
  too_many_streams: 429,
  // settings
  invalid_local_base_dir: 400,
  invalid_s3_bucket: 400,
  invalid_s3_endpoint: 400,
  missing_s3_credentials: 400,
  external_access_https_required: 400,
  external_access_origin_not_allowed: 400,
  artifact_delivery_https_required: 400,
  artifact_delivery_public_url_required: 400,
  artifact_delivery_url_invalid: 400,
  external_access_owner_required: 403,
  external_access_loopback_required: 403,
  unsupported_key_storage_mode: 400,
  external_access_preflight_failed: 400,
  external_access_public_url_missing: 400,
  external_access_auth_missing: 400,
  // users
  already_exists: 409,
  invalid_email: 400,
  user_not_active: 409,
  // projects, runners, builds
  branch_not_found: 422,
  source_unreachable: 422,
  invalid_transition: 409,
  build_canceled: 409,
  log_offset_mismatch: 409,
  no_credentials: 404,
  job_not_active: 409,
  invalid_runner_token: 401,
  invalid_job_token: 401,
  runner_mismatch: 403,
  project_busy: 409,
  runner_bundle_missing: 503,
  // pipelines in the repository (docs/pipelines.md)
  invalid_pipeline_config: 422,
  pipeline_not_in_config: 422,
  config_unavailable: 422,
  // outbound guard (docs/api.md §12)
  destination_not_allowed: 400,
  source_not_allowed: 422,
  // artifacts
  size_mismatch: 400,
  upload_too_large: 413,
  checksum_mismatch: 400,
  upload_incomplete: 409,
  link_expired: 410,
  install_base_url_missing: 412,
  install_https_required: 412,
  unsupported_artifact: 422,
  install_metadata_missing: 422,
  install_not_possible: 422,
  // webhooks, notifications, credential release (docs/api.md §5, §11, §12)
  invalid_signature: 401,
  secrets_withheld: 403,
  // signing material checked on upload (docs/signing.md)
  invalid_certificate: 400,
  invalid_profile: 400,
  certificate_not_in_profile: 400,
  invalid_keystore: 400,
  // retention and disk
  artifact_expired: 410,
  log_expired: 410,
  retention_pass_running: 409,
  data_dir_low_space: 400,
  // store keys and publishing (docs/publishing.md)
  invalid_store_credentials: 400,
  // several daemons on a libSQL server (docs/api.md §8)
  database_busy: 503,
} as const satisfies Record<string, ErrorStatus>;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** Every code, in the table's order (the OpenAPI document's enum of error codes). */
export const ERROR_CODES = Object.keys(ERROR_STATUS) as [ErrorCode, ...ErrorCode[]];

/**
 * The two codes the spec answers with a second status, each in one place (docs/spec.md "Errors"): an unknown or
 * expired OIDC state is 400 `invalid_state` (verify-oidc, oidc/callback) where every other `invalid_state` is a
 * 409; transfer-owner's missing target is 404 `user_not_found` where sign-in's is a 403.
 */
export const SECOND_STATUS = {
  invalid_state: 400,
  user_not_found: 404,
} as const satisfies Partial<Record<ErrorCode, ErrorStatus>>;

export interface ValidationIssue {
  path: string;
  message: string;
  /** 1-based position in a file (a pipeline file's issues). */
  line?: number;
  column?: number;
}

/**
 * The one error type domain code throws; `onError` renders it as `{code, message[, issues]}` with the status
 * ERROR_STATUS gives its code.
 */
export class ApiError extends Error {
  readonly status: ErrorStatus;
  readonly code: ErrorCode;
  readonly issues?: ValidationIssue[];

  constructor(code: ErrorCode, message: string, issues?: ValidationIssue[]) {
    super(message);
    this.name = "ApiError";
    this.code = code;
    this.status = ERROR_STATUS[this.code];
    if (issues) this.issues = issues;
  }

  /** A code answered with its second status (SECOND_STATUS), where the spec says so. */
  static withSecondStatus(code: keyof typeof SECOND_STATUS, message: string): ApiError {
    const err = new ApiError(code, message);
    // The constructor takes the first status from the table; this is the only place it is replaced.
    (err as { status: ErrorStatus }).status = SECOND_STATUS[code];
    return err;
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
  return new ApiError("database_busy", "the database is busy: try again in a moment");
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
