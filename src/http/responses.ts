import { z } from "zod";
import {
  ARTIFACT_KINDS,
  ARTIFACT_STATUSES,
  BUILD_STATUSES,
  BUILD_TRUSTS,
  DELIVERY_OUTCOMES,
  FORGE_PROVIDERS,
  NOTIFICATION_KINDS,
  REMOTE_AUTH_MODES,
  RUNNER_STATUSES,
  RUNNER_TRUSTS,
  RUNTIME_MODES,
  SETUP_STATES,
  STORAGE_PROVIDERS,
  TRIGGER_TYPES,
  USER_ROLES,
  USER_STATUSES,
} from "../db/schema/constants.ts";
import type {
  abortArtifact,
  createArtifact,
  createDownloadLink,
  getArtifact,
  listBuildArtifacts,
  receiveLocalUpload,
  toArtifactJson,
} from "../domain/artifacts/artifacts.ts";
import type { createInstallLink } from "../domain/artifacts/install.ts";
import type { LOCAL_LOGIN_MODES, localLogin, readLocalLoginSetting } from "../domain/auth/local-login.ts";
import type { configureOidcSettings, configureSetupOidc, completeOidcSignIn, startOidcSignIn, verifySetupOwnerOidc } from "../domain/auth/oidc.ts";
import type { readPreferences, updatePreferences } from "../domain/auth/preferences.ts";
import type { claimTrustedProxyOwner, configureTrustedProxy, readTrustedProxySettingsJson } from "../domain/auth/trusted-proxy.ts";
import type { toUserJson, transferOwnership } from "../domain/auth/users.ts";
import type { signInLink } from "../domain/auth/sign-in-link.ts";
import type { getBuildWithQueue, toBuildJson, toCreatedBuildJson } from "../domain/builds/builds.ts";
import { QUEUE_REASONS, stepResultSchema } from "../domain/builds/builds.ts";
import type { androidSigning, checkoutAuth, claimJob, iosSigning, jobSecrets, toJobJson } from "../domain/builds/scheduler.ts";
import type { listAuditEvents } from "../domain/common/audit.ts";
import { cacheEntryReportSchema } from "../domain/caches/cache-report.ts";
import type { createCacheUpload, findCacheEntry } from "../domain/caches/shared-caches.ts";
import type { listNotificationDeliveries, toNotificationJson, createNotification } from "../domain/events/notifications.ts";
import type { createWebhook, listWebhookDeliveries, receiveWebhook, toWebhookJson } from "../domain/events/webhooks.ts";
import type { appendLog } from "../domain/logs/logs.ts";
import type { listSecrets, toProtectionJson } from "../domain/projects/project-secrets.ts";
import { pipelineConfigSchema, type toPipelineJson, type toProjectJson } from "../domain/projects/projects.ts";
import { RUNNER_PLATFORMS, type heartbeat, type toRunnerJson } from "../domain/runners/runners.ts";
import type { readArtifactStorageSettings } from "../domain/settings/artifact-storage-update.ts";
import type { readNetworkSettings } from "../domain/settings/network-settings.ts";
import type { runPreflight } from "../domain/setup/preflight.ts";
import type { completeSetup, setSetupPreferences, setupStatus, verifyBootstrapToken } from "../domain/setup/setup.ts";
import { ERROR_CODES } from "../errors.ts";
import * as protocol from "../protocol/runner.ts";
import type { readSigning, toSigningAnswer } from "../domain/signing/signing.ts";
import type { signingHealth } from "../domain/signing/health.ts";

/**
 * The JSON every `/v1/` route answers, as zod schemas: the OpenAPI document's response schemas (registered per
 * route with `apiDoc`) and the contract test's expectations. Each one is tied to the domain function or
 * serializer that produces the answer by a compile-time check at the end of this file, so a field added to,
 * removed from or retyped in a serializer without its schema (or the other way round) fails `tsc`. Objects are
 * closed (the document says `additionalProperties: false`): the contract test refuses an undocumented field.
 */

/**
 * Built on first use, all together: the OpenAPI document, the /api page and the contract test read them, no request
 * does. Building these ~370 zod objects at import was about a third of the daemon's zod work at every start (issue
 * 16); each export below is a `z.lazy` over this set, which parses, infers and converts to JSON Schema the same.
 */
function buildAnswerSchemas() {
  const time = z.number().int().describe("Unix seconds");
  const id = z.string();

  const ErrorJson = z.object({
    code: z.enum(ERROR_CODES),
    message: z.string(),
    issues: z
      .array(z.object({ path: z.string(), message: z.string(), line: z.number().int().optional(), column: z.number().int().optional() }))
      .optional(),
  });

  const OkJson = z.object({ ok: z.literal(true) });

  // ---------------------------------------------------------------- setup, sign-in, users

  const SetupStatusJson = z.object({ instance_id: z.string(), state: z.enum(SETUP_STATES), setup_mode: z.boolean(), is_configured: z.boolean() });
  const SessionTokenJson = z.object({ session_token: z.string(), expires_at: time });
  const SetupPreferencesJson = z.object({
    runtime_mode: z.enum(RUNTIME_MODES),
    remote_auth_mode: z.enum(REMOTE_AUTH_MODES),
    session_expires_at: time,
  });
  const OwnerCreatedJson = z.object({ state: z.enum(SETUP_STATES), owner_email: z.string(), session_expires_at: time });
  const OidcOwnerVerifiedJson = OwnerCreatedJson.extend({ oidc_subject: z.string() });
  const SetupCompleteJson = z.object({ state: z.literal("ready"), instance_id: z.string() });
  const OidcConfiguredJson = z.object({ state: z.literal("idp_configured"), discovered_issuer: z.string(), session_expires_at: time });
  const AuthorizationJson = z.object({ authorization_url: z.string(), state: z.string() });
  const ProxyAssertionJson = z.object({
    header: z.string(),
    jwks_url: z.string(),
    issuer: z.string(),
    audience: z.string(),
    email_claim: z.string(),
  });
  const TrustedProxyConfiguredJson = z.object({
    state: z.enum(SETUP_STATES),
    setup_owner_email: z.string().nullable(),
    user_email_header: z.string(),
    trusted_proxy_cidrs: z.array(z.string()),
    has_shared_secret: z.boolean(),
    has_gateway_access_ticket: z.boolean(),
    assertion: ProxyAssertionJson.nullable(),
    configured_at: time,
    session_expires_at: time,
  });
  const TrustedProxySettingsJson = z.object({
    configured: z.boolean(),
    in_use: z.boolean(),
    user_email_header: z.string(),
    trusted_proxy_cidrs: z.array(z.string()),
    has_shared_secret: z.boolean(),
    has_gateway_access_ticket: z.boolean(),
    assertion: ProxyAssertionJson.nullable(),
    configured_at: time.nullable(),
  });

  const SignedInJson = z.object({
    session_token: z.string(),
    expires_at: time,
    user: z.object({
      user_id: id,
      email: z.string(),
      display_name: z.string(),
      role: z.enum(USER_ROLES),
      avatar_url: z.string().nullable(),
      oidc_subject: z.string().nullable(),
    }),
  });

  const UserJson = z.object({
    id,
    email: z.string(),
    display_name: z.string(),
    role: z.enum(USER_ROLES),
    status: z.enum(USER_STATUSES),
    avatar_url: z.string().nullable(),
    created_at: time,
    updated_at: time,
  });
  const InvitedUserJson = UserJson.extend({ sign_in_url: z.string().nullable(), sign_in_note: z.string().nullable() });
  const BriefUserJson = UserJson.omit({ display_name: true, avatar_url: true });
  const OwnershipTransferJson = z.object({ previous_owner: BriefUserJson, owner: BriefUserJson });

  const AuditEventJson = z.object({
    id,
    action: z.string(),
    actor_user_id: z.string().nullable(),
    actor_email: z.string().nullable(),
    target_type: z.string().nullable(),
    target_id: z.string().nullable(),
    details: z.record(z.string(), z.unknown()),
    created_at: time,
  });

  // ---------------------------------------------------------------- settings

  const PreferencesValuesJson = z.object({
    key_storage_mode: z.string(),
    runtime_mode: z.enum(RUNTIME_MODES),
    restart_required: z.boolean(),
    updated_at: time,
  });
  const PreferencesJson = z.object({ preferences: PreferencesValuesJson });
  const PreferencesUpdatedJson = z.object({ preferences: PreferencesValuesJson, sessions_revoked: z.boolean() });

  const NetworkSettingsJson = z.object({
    public_url: z.string().nullable(),
    artifact_delivery_url: z.string().nullable(),
    allowed_origins: z.array(z.string()),
    source: z.enum(["database", "default"]),
    updated_at: time.nullable(),
  });
  const NetworkSettingsAnswerJson = z.object({ settings: NetworkSettingsJson });

  const PreflightJson = z.object({
    ready: z.boolean(),
    checks: z.array(
      z.object({ id: z.string(), label: z.string(), ok: z.boolean(), message: z.string(), failure_code: z.enum(ERROR_CODES), required: z.boolean() }),
    ),
  });

  const OidcSettingsJson = z.object({
    discovered_issuer: z.string(),
    has_client_secret: z.boolean(),
    trust_unverified_email: z.boolean(),
    configured_at: time,
  });

  const LocalLoginSettingJson = z.object({ mode: z.enum(["loopback", "cli_only"]) });

  const ArtifactStorageJson = z.object({
    provider: z.enum(STORAGE_PROVIDERS),
    local: z.object({ base_dir: z.string() }),
    s3: z.object({
      endpoint: z.string().nullable(),
      region: z.string().nullable(),
      bucket: z.string().nullable(),
      prefix: z.string().nullable(),
      access_key_id: z.string().nullable(),
      force_path_style: z.boolean(),
      has_secret_access_key: z.boolean(),
    }),
    updated_at: time.nullable(),
  });

  // ---------------------------------------------------------------- projects and pipelines

  const ProjectJson = z.object({
    id,
    name: z.string(),
    repo_url: z.string(),
    default_branch: z.string(),
    has_source_credentials: z.boolean(),
    has_android_signing: z.boolean(),
    has_ios_signing: z.boolean(),
    config_path: z.string().nullable(),
    created_at: time,
    updated_at: time,
  });

  const PipelineJson = z.object({
    id,
    project_id: id,
    name: z.string(),
    config: pipelineConfigSchema,
    source: z.enum(["stored", "repository"]),
    file: z.object({ path: z.string(), commit_sha: z.string(), config: pipelineConfigSchema }).nullable(),
    created_at: time,
    updated_at: time,
  });
  const SecretJson = z.object({ name: z.string(), updated_at: time });
  const ProtectionJson = z.object({ branches: z.array(z.string()), tags: z.array(z.string()) });

  // ---------------------------------------------------------------- builds

  const TestsSummaryJson = z.object({
    total: z.number().int(),
    passed: z.number().int(),
    failed: z.number().int(),
    skipped: z.number().int(),
    errored: z.number().int(),
    duration_ms: z.number().int(),
  });
  const BuildJson = z.object({
    id,
    project_id: id,
    pipeline_id: id,
    build_number: z.number().int(),
    status: z.enum(BUILD_STATUSES),
    trigger_type: z.enum(TRIGGER_TYPES),
    trigger_actor: z.string().nullable(),
    trigger_event: z.string().nullable(),
    trigger_ref: z.string().nullable(),
    rerun_of: z.string().nullable(),
    commit_sha: z.string(),
    branch: z.string(),
    config_snapshot: pipelineConfigSchema,
    trust: z.enum(BUILD_TRUSTS),
    runner_id: z.string().nullable(),
    step_results: z.array(stepResultSchema),
    exit_code: z.number().int().nullable(),
    failure_reason: z.string().nullable(),
    attempt_count: z.number().int(),
    cancel_requested: z.boolean(),
    pinned: z.boolean(),
    timeout_s: z.number().int(),
    queued_at: time,
    started_at: time.nullable(),
    finished_at: time.nullable(),
    tests_summary: TestsSummaryJson.nullable(),
    caches: z.array(cacheEntryReportSchema),
    created_at: time,
    updated_at: time,
  });

  const QueueJson = z.object({
    position: z.number().int().nullable(),
    matching_runners: z.object({ online: z.number().int(), busy: z.number().int(), draining: z.number().int(), offline: z.number().int() }),
    reason: z.enum(QUEUE_REASONS),
  });
  const BuildWithQueueJson = BuildJson.extend({ queue: QueueJson.nullable() });

  const CreatedBuildJson = BuildJson.pick({
    id: true,
    project_id: true,
    pipeline_id: true,
    build_number: true,
    status: true,
    trigger_type: true,
    branch: true,
    queued_at: true,
    created_at: true,
    updated_at: true,
  }).extend({ rerun_of: z.string().optional() });

  // ---------------------------------------------------------------- runners and jobs

  const RunnerJson = z.object({
    id,
    name: z.string().nullable(),
    status: z.enum(RUNNER_STATUSES),
    // Capabilities are the runner's own report: `platforms` drives the claim, other keys are kept as given.
    capabilities: z.looseObject({
      platforms: z.array(z.enum(RUNNER_PLATFORMS)),
      max_jobs: z.number().int().nullable().optional(),
      isolation: z.enum(["user", "none"]).optional(),
    }),
    trust: z.enum(RUNNER_TRUSTS),
    last_heartbeat_at: time.nullable(),
    free_disk_bytes: z.number().int().nullable(),
    low_disk: z.boolean().nullable(),
    registered_by: z.string(),
    created_at: time,
    updated_at: time,
  });
  const RegisteredRunnerJson = RunnerJson.extend({ token: z.string() });
  const RunnerTokenJson = z.object({ token: z.string() });
  const HeartbeatJson = z.object({ ...protocol.heartbeatAnswerSchema.shape, runner: RunnerJson });

  // The runner's side of the wire is the protocol module's: these answers are its schemas, with the daemon's own
  // detail (the pipeline as validated, the build statuses, the runner and artifact as GET shows them) in place.
  const ClaimedJobJson = z.object({ ...protocol.claimedJobSchema.shape, config_snapshot: pipelineConfigSchema });
  const JobJson = z.object({ ...protocol.jobStateSchema.shape, status: z.enum(BUILD_STATUSES) });
  const LogAppendedJson = z.object({ log_bytes: z.number().int() });
  const CheckoutAuthJson = z.object({ username: z.string(), password: z.string(), expires_at: time.nullable() });
  const AndroidSigningJson = z.object({
    keystore_base64: z.string(),
    keystore_password: z.string(),
    key_alias: z.string(),
    key_password: z.string(),
  });
  const IosSigningJson = z.object({
    certificate_p12_base64: z.string(),
    certificate_password: z.string(),
    provisioning_profile_base64: z.string(),
    provisioning_profiles: z.array(
      z.object({ uuid: z.string().nullable(), name: z.string().nullable(), bundle_id_pattern: z.string().nullable(), profile_base64: z.string() }),
    ),
  });
  const SigningCertificateJson = z.object({ subject: z.string(), team_id: z.string().nullable(), serial: z.string(), expires_at: time });
  const SigningProfileJson = z.object({
    name: z.string(),
    uuid: z.string(),
    app_id: z.string(),
    team_id: z.string().nullable(),
    kind: z.enum(["app_store", "ad_hoc", "enterprise", "development"]),
    expires_at: time.nullable(),
    device_count: z.number().int().nullable(),
  });
  const SigningJson = z.object({
    ios: z.object({ certificate: SigningCertificateJson, profiles: z.array(SigningProfileJson) }).nullable(),
    android: z.object({ key_alias: z.string(), certificate: z.object({ subject: z.string(), expires_at: time }) }).nullable(),
  });
  const SigningAnswerJson = ProjectJson.extend(SigningJson.shape);
  const SigningHealthJson = z.object({
    items: z.array(
      z.object({
        project_id: id,
        kind: z.enum(["ios_certificate", "ios_profile", "android_certificate"]),
        uuid: z.string().optional(),
        serial: z.string().optional(),
        name: z.string(),
        expires_at: time,
        state: z.enum(["ok", "expiring", "expired"]),
      }),
    ),
  });
  const JobSecretsJson = z.record(z.string(), z.string());

  // ---------------------------------------------------------------- artifacts

  const AppMetadataJson = z.object({
    platform: z.enum(["ios", "android"]),
    name: z.string().nullable(),
    bundle_identifier: z.string().nullable(),
    version: z.string().nullable(),
    build: z.string().nullable(),
    min_os: z.string().nullable(),
    has_icon: z.boolean(),
    signing: z
      .object({
        kind: z.enum(["app_store", "ad_hoc", "enterprise", "development"]),
        profile_name: z.string().nullable(),
        team: z.string().nullable(),
        expires_at: time.nullable(),
        device_count: z.number().int().nullable(),
      })
      .nullable(),
  });

  const ArtifactJson = z.object({
    id,
    build_id: id,
    filename: z.string(),
    size_bytes: z.number().int(),
    content_type: z.string(),
    sha256: z.string().nullable(),
    status: z.enum(ARTIFACT_STATUSES),
    kind: z.enum(ARTIFACT_KINDS),
    install_metadata: z.object({ bundle_identifier: z.string(), bundle_version: z.string(), title: z.string() }).nullable(),
    app: AppMetadataJson.nullable(),
    created_at: time,
    updated_at: time,
  });
  const ArtifactCreatedJson = z.object({ ...protocol.artifactCreatedSchema.shape, artifact: ArtifactJson });
  const ArtifactAnswerJson = z.object({ artifact: ArtifactJson });
  const CacheUploadJson = z.object(protocol.cacheUploadAnswerSchema.shape);
  const CacheHitJson = z.object(protocol.cacheHitSchema.shape);
  const UploadReceivedJson = z.object({ artifact: ArtifactJson, received_bytes: z.number().int(), sha256: z.string() });
  const DownloadLinkJson = z.object({ url: z.string(), expires_at: time });
  const InstallLinkJson = z.object({
    platform: z.enum(["ios", "android"]),
    install_url: z.string(),
    download_url: z.string(),
    manifest_url: z.string().optional(),
    page_url: z.string(),
    expires_at: time,
  });

  // ---------------------------------------------------------------- webhooks and notifications

  const WebhookJson = z.object({
    id,
    project_id: id,
    provider: z.enum(FORGE_PROVIDERS),
    url: z.string(),
    api_url: z.string().nullable(),
    report_status: z.boolean(),
    disabled: z.boolean(),
    created_at: time,
  });
  const WebhookCreatedJson = WebhookJson.pick({ id: true, provider: true, url: true, report_status: true, api_url: true, created_at: true }).extend({
    secret: z.string(),
  });
  const WebhookDeliveryJson = z.object({
    delivery_id: z.string().nullable(),
    event: z.string(),
    received_at: time,
    outcome: z.enum(DELIVERY_OUTCOMES),
    reason: z.string().nullable(),
    build_ids: z.array(z.string()),
  });
  const HookAnswerJson = z.object({
    builds: z.array(z.object({ id, pipeline_id: id, build_number: z.number().int() })),
    ignored: z.string().optional(),
    duplicate: z.literal(true).optional(),
  });

  const NotificationJson = z.object({
    id,
    project_id: id,
    kind: z.enum(NOTIFICATION_KINDS),
    on: z.array(z.string()),
    branches: z.array(z.string()).nullable(),
    has_url: z.literal(true),
    disabled: z.boolean(),
    created_at: time,
  });
  const NotificationCreatedJson = NotificationJson.extend({ secret: z.string().optional() });
  const DeliveryAttemptJson = z.object({
    id,
    attempt: z.number().int(),
    status_code: z.number().int().nullable(),
    error: z.string().nullable(),
    created_at: time,
  });
  return {
    ErrorJson,
    OkJson,
    SetupStatusJson,
    SessionTokenJson,
    SetupPreferencesJson,
    OwnerCreatedJson,
    OidcOwnerVerifiedJson,
    SetupCompleteJson,
    OidcConfiguredJson,
    AuthorizationJson,
    TrustedProxyConfiguredJson,
    TrustedProxySettingsJson,
    SignedInJson,
    UserJson,
    InvitedUserJson,
    OwnershipTransferJson,
    AuditEventJson,
    PreferencesJson,
    PreferencesUpdatedJson,
    NetworkSettingsJson,
    NetworkSettingsAnswerJson,
    PreflightJson,
    OidcSettingsJson,
    LocalLoginSettingJson,
    ArtifactStorageJson,
    ProjectJson,
    PipelineJson,
    SecretJson,
    ProtectionJson,
    BuildJson,
    QueueJson,
    BuildWithQueueJson,
    CreatedBuildJson,
    RunnerJson,
    RegisteredRunnerJson,
    RunnerTokenJson,
    HeartbeatJson,
    ClaimedJobJson,
    JobJson,
    LogAppendedJson,
    CheckoutAuthJson,
    AndroidSigningJson,
    IosSigningJson,
    SigningJson,
    SigningAnswerJson,
    SigningHealthJson,
    JobSecretsJson,
    AppMetadataJson,
    ArtifactJson,
    ArtifactCreatedJson,
    ArtifactAnswerJson,
    CacheUploadJson,
    CacheHitJson,
    UploadReceivedJson,
    DownloadLinkJson,
    InstallLinkJson,
    WebhookJson,
    WebhookCreatedJson,
    WebhookDeliveryJson,
    HookAnswerJson,
    NotificationJson,
    NotificationCreatedJson,
    DeliveryAttemptJson,
  };
}

let answerSchemas: ReturnType<typeof buildAnswerSchemas> | undefined;
const answers = () => (answerSchemas ??= buildAnswerSchemas());

export const ErrorJson = z.lazy(() => answers().ErrorJson);
export const OkJson = z.lazy(() => answers().OkJson);
export const SetupStatusJson = z.lazy(() => answers().SetupStatusJson);
export const SessionTokenJson = z.lazy(() => answers().SessionTokenJson);
export const SetupPreferencesJson = z.lazy(() => answers().SetupPreferencesJson);
export const OwnerCreatedJson = z.lazy(() => answers().OwnerCreatedJson);
export const OidcOwnerVerifiedJson = z.lazy(() => answers().OidcOwnerVerifiedJson);
export const SetupCompleteJson = z.lazy(() => answers().SetupCompleteJson);
export const OidcConfiguredJson = z.lazy(() => answers().OidcConfiguredJson);
export const AuthorizationJson = z.lazy(() => answers().AuthorizationJson);
export const TrustedProxyConfiguredJson = z.lazy(() => answers().TrustedProxyConfiguredJson);
export const TrustedProxySettingsJson = z.lazy(() => answers().TrustedProxySettingsJson);
export const SignedInJson = z.lazy(() => answers().SignedInJson);
export const UserJson = z.lazy(() => answers().UserJson);
export const InvitedUserJson = z.lazy(() => answers().InvitedUserJson);
export const OwnershipTransferJson = z.lazy(() => answers().OwnershipTransferJson);
export const AuditEventJson = z.lazy(() => answers().AuditEventJson);
export const PreferencesJson = z.lazy(() => answers().PreferencesJson);
export const PreferencesUpdatedJson = z.lazy(() => answers().PreferencesUpdatedJson);
export const NetworkSettingsJson = z.lazy(() => answers().NetworkSettingsJson);
export const NetworkSettingsAnswerJson = z.lazy(() => answers().NetworkSettingsAnswerJson);
export const PreflightJson = z.lazy(() => answers().PreflightJson);
export const OidcSettingsJson = z.lazy(() => answers().OidcSettingsJson);
export const LocalLoginSettingJson = z.lazy(() => answers().LocalLoginSettingJson);
export const ArtifactStorageJson = z.lazy(() => answers().ArtifactStorageJson);
export const ProjectJson = z.lazy(() => answers().ProjectJson);
export const PipelineJson = z.lazy(() => answers().PipelineJson);
export const SecretJson = z.lazy(() => answers().SecretJson);
export const ProtectionJson = z.lazy(() => answers().ProtectionJson);
export const BuildJson = z.lazy(() => answers().BuildJson);
export const QueueJson = z.lazy(() => answers().QueueJson);
export const BuildWithQueueJson = z.lazy(() => answers().BuildWithQueueJson);
export const CreatedBuildJson = z.lazy(() => answers().CreatedBuildJson);
export const RunnerJson = z.lazy(() => answers().RunnerJson);
export const RegisteredRunnerJson = z.lazy(() => answers().RegisteredRunnerJson);
export const RunnerTokenJson = z.lazy(() => answers().RunnerTokenJson);
export const HeartbeatJson = z.lazy(() => answers().HeartbeatJson);
export const ClaimedJobJson = z.lazy(() => answers().ClaimedJobJson);
export const JobJson = z.lazy(() => answers().JobJson);
export const LogAppendedJson = z.lazy(() => answers().LogAppendedJson);
export const CheckoutAuthJson = z.lazy(() => answers().CheckoutAuthJson);
export const AndroidSigningJson = z.lazy(() => answers().AndroidSigningJson);
export const IosSigningJson = z.lazy(() => answers().IosSigningJson);
export const SigningJson = z.lazy(() => answers().SigningJson);
export const SigningAnswerJson = z.lazy(() => answers().SigningAnswerJson);
export const SigningHealthJson = z.lazy(() => answers().SigningHealthJson);
export const JobSecretsJson = z.lazy(() => answers().JobSecretsJson);
export const AppMetadataJson = z.lazy(() => answers().AppMetadataJson);
export const ArtifactJson = z.lazy(() => answers().ArtifactJson);
export const ArtifactCreatedJson = z.lazy(() => answers().ArtifactCreatedJson);
export const ArtifactAnswerJson = z.lazy(() => answers().ArtifactAnswerJson);
export const UploadReceivedJson = z.lazy(() => answers().UploadReceivedJson);
export const CacheUploadJson = z.lazy(() => answers().CacheUploadJson);
export const CacheHitJson = z.lazy(() => answers().CacheHitJson);
export const DownloadLinkJson = z.lazy(() => answers().DownloadLinkJson);
export const InstallLinkJson = z.lazy(() => answers().InstallLinkJson);
export const WebhookJson = z.lazy(() => answers().WebhookJson);
export const WebhookCreatedJson = z.lazy(() => answers().WebhookCreatedJson);
export const WebhookDeliveryJson = z.lazy(() => answers().WebhookDeliveryJson);
export const HookAnswerJson = z.lazy(() => answers().HookAnswerJson);
export const NotificationJson = z.lazy(() => answers().NotificationJson);
export const NotificationCreatedJson = z.lazy(() => answers().NotificationCreatedJson);
export const DeliveryAttemptJson = z.lazy(() => answers().DeliveryAttemptJson);

// ---------------------------------------------------------------- the compile-time tie to the code

type Output<S extends z.ZodType> = z.output<S>;
type Answer<F extends (...args: never[]) => unknown> = Awaited<ReturnType<F>>;

/** Every key path of a JSON value (`a`, `a.b`, `a[].c`), to compare field sets and not only assignability. */
type Paths<T, Depth extends unknown[] = []> = Depth["length"] extends 6
  ? never
  : T extends readonly (infer E)[]
    ? `[]` | `[].${Paths<E, [...Depth, 1]>}`
    : T extends object
      ? { [K in keyof T & string]-?: K | `${K}.${Paths<NonNullable<T[K]>, [...Depth, 1]>}` }[keyof T & string]
      : never;

/** `true` when the code's answer and the schema have the same fields and each is assignable to the other. */
type SameShape<Code, Schema> = [Code] extends [Schema]
  ? [Schema] extends [Code]
    ? [Exclude<Paths<Code>, Paths<Schema>>, Exclude<Paths<Schema>, Paths<Code>>] extends [never, never]
      ? true
      : { only_in_code: Exclude<Paths<Code>, Paths<Schema>>; only_in_schema: Exclude<Paths<Schema>, Paths<Code>> }
    : { schema_not_assignable_to_code: Schema }
  : { code_not_assignable_to_schema: Code };

type Tie<T extends true> = T;

// A failure here reads "Type '{ only_in_code: "x" … }' does not satisfy the constraint 'true'".
export type ResponseSchemaTies = [
  Tie<SameShape<Answer<typeof setupStatus>, Output<typeof SetupStatusJson>>>,
  Tie<SameShape<Answer<typeof verifyBootstrapToken>, Output<typeof SessionTokenJson>>>,
  Tie<SameShape<Answer<typeof setSetupPreferences> & { session_expires_at: number }, Output<typeof SetupPreferencesJson>>>,
  Tie<SameShape<Answer<typeof completeSetup>, Output<typeof SetupCompleteJson>>>,
  Tie<SameShape<Answer<typeof configureSetupOidc> & { session_expires_at: number }, Output<typeof OidcConfiguredJson>>>,
  Tie<SameShape<Answer<typeof verifySetupOwnerOidc> & { session_expires_at: number }, Output<typeof OidcOwnerVerifiedJson>>>,
  Tie<SameShape<Answer<typeof startOidcSignIn>, Output<typeof AuthorizationJson>>>,
  Tie<SameShape<Answer<typeof completeOidcSignIn>, Output<typeof SignedInJson>>>,
  Tie<SameShape<Answer<typeof configureOidcSettings>, Output<typeof OidcSettingsJson>>>,
  Tie<SameShape<Answer<typeof configureTrustedProxy> & { session_expires_at: number }, Output<typeof TrustedProxyConfiguredJson>>>,
  Tie<SameShape<Answer<typeof claimTrustedProxyOwner> & { session_expires_at: number }, Output<typeof OwnerCreatedJson>>>,
  Tie<SameShape<Answer<typeof readTrustedProxySettingsJson>, Output<typeof TrustedProxySettingsJson>>>,
  Tie<SameShape<Answer<typeof localLogin>, Output<typeof SignedInJson>>>,
  Tie<SameShape<ReturnType<typeof toUserJson>, Output<typeof UserJson>>>,
  Tie<SameShape<ReturnType<typeof toUserJson> & Answer<typeof signInLink>, Output<typeof InvitedUserJson>>>,
  Tie<SameShape<Answer<typeof transferOwnership>, Output<typeof OwnershipTransferJson>>>,
  Tie<SameShape<Answer<typeof listAuditEvents>, Output<typeof AuditEventJson>[]>>,
  Tie<SameShape<Answer<typeof readPreferences>, Output<typeof PreferencesJson>>>,
  Tie<SameShape<Answer<typeof updatePreferences>, Output<typeof PreferencesUpdatedJson>>>,
  Tie<SameShape<Answer<typeof readNetworkSettings>, Output<typeof NetworkSettingsJson>>>,
  Tie<SameShape<Answer<typeof runPreflight>, Output<typeof PreflightJson>>>,
  Tie<SameShape<Answer<typeof readLocalLoginSetting>, Output<typeof LocalLoginSettingJson>>>,
  Tie<SameShape<{ mode: (typeof LOCAL_LOGIN_MODES)[number] }, Output<typeof LocalLoginSettingJson>>>,
  Tie<SameShape<Answer<typeof readArtifactStorageSettings>, Output<typeof ArtifactStorageJson>>>,
  Tie<SameShape<ReturnType<typeof toProjectJson>, Output<typeof ProjectJson>>>,
  Tie<SameShape<ReturnType<typeof toPipelineJson>, Output<typeof PipelineJson>>>,
  Tie<SameShape<Answer<typeof listSecrets>, Output<typeof SecretJson>[]>>,
  Tie<SameShape<ReturnType<typeof toProtectionJson>, Output<typeof ProtectionJson>>>,
  Tie<SameShape<ReturnType<typeof toBuildJson>, Output<typeof BuildJson>>>,
  Tie<SameShape<Answer<typeof getBuildWithQueue>, Output<typeof BuildWithQueueJson>>>,
  Tie<SameShape<ReturnType<typeof toCreatedBuildJson>, Output<typeof CreatedBuildJson>>>,
  Tie<SameShape<ReturnType<typeof toRunnerJson>, Output<typeof RunnerJson>>>,
  Tie<SameShape<Answer<typeof heartbeat>, Output<typeof HeartbeatJson>>>,
  Tie<SameShape<NonNullable<Answer<typeof claimJob>>, Output<typeof ClaimedJobJson>>>,
  Tie<SameShape<ReturnType<typeof toJobJson>, Output<typeof JobJson>>>,
  Tie<SameShape<Answer<typeof appendLog>, Output<typeof LogAppendedJson>>>,
  Tie<SameShape<Answer<typeof checkoutAuth>, Output<typeof CheckoutAuthJson>>>,
  Tie<SameShape<Answer<typeof jobSecrets>, Output<typeof JobSecretsJson>>>,
  Tie<SameShape<Answer<typeof androidSigning>, Output<typeof AndroidSigningJson>>>,
  Tie<SameShape<Answer<typeof iosSigning>, Output<typeof IosSigningJson>>>,
  Tie<SameShape<Answer<typeof readSigning>, Output<typeof SigningJson>>>,
  Tie<SameShape<ReturnType<typeof toSigningAnswer>, Output<typeof SigningAnswerJson>>>,
  Tie<SameShape<Answer<typeof signingHealth>, Output<typeof SigningHealthJson>>>,
  Tie<SameShape<ReturnType<typeof toArtifactJson>, Output<typeof ArtifactJson>>>,
  Tie<SameShape<Answer<typeof createArtifact>, Output<typeof ArtifactCreatedJson>>>,
  Tie<SameShape<Answer<typeof createCacheUpload>, Output<typeof CacheUploadJson>>>,
  Tie<SameShape<Answer<typeof findCacheEntry>, Output<typeof CacheHitJson>>>,
  Tie<SameShape<{ artifact: Answer<typeof abortArtifact> }, Output<typeof ArtifactAnswerJson>>>,
  Tie<SameShape<Answer<typeof receiveLocalUpload>, Output<typeof UploadReceivedJson>>>,
  Tie<SameShape<Answer<typeof listBuildArtifacts>, Output<typeof ArtifactJson>[]>>,
  Tie<SameShape<Answer<typeof getArtifact>, Output<typeof ArtifactJson>>>,
  Tie<SameShape<Answer<typeof createDownloadLink>, Output<typeof DownloadLinkJson>>>,
  Tie<SameShape<Answer<typeof createInstallLink>, Output<typeof InstallLinkJson>>>,
  Tie<SameShape<ReturnType<typeof toWebhookJson>, Output<typeof WebhookJson>>>,
  Tie<SameShape<Answer<typeof createWebhook>, Output<typeof WebhookCreatedJson>>>,
  Tie<SameShape<Answer<typeof listWebhookDeliveries>, Output<typeof WebhookDeliveryJson>[]>>,
  Tie<SameShape<Answer<typeof receiveWebhook>, Output<typeof HookAnswerJson>>>,
  Tie<SameShape<ReturnType<typeof toNotificationJson>, Output<typeof NotificationJson>>>,
  Tie<SameShape<Answer<typeof createNotification>, Output<typeof NotificationCreatedJson>>>,
  Tie<SameShape<Answer<typeof listNotificationDeliveries>, Output<typeof DeliveryAttemptJson>[]>>,
];
