import { and, asc, eq, isNull, sql } from "drizzle-orm";
import { Cron } from "croner";
import { publishListSchema } from "../publishing/config.ts";
import { z } from "zod";
import { PLATFORMS, TRIGGER_EVENTS } from "../../db/schema/constants.ts";
import { builds, pipelines, projects, projectSecrets } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { auditStatement, auditStatementWhen } from "../common/audit.ts";
import { cachePathProblem, parseKeyTemplate } from "../common/cache-key.ts";
import { NON_FINAL_STATUSES } from "../builds/build-machine.ts";
import type { GitCredentials } from "./git.ts";
import { isValidBranchName } from "./git.ts";
import { openSecrets } from "./secret-values.ts";
import type { UserRow } from "../auth/users.ts";

export type ProjectRow = typeof projects.$inferSelect;
export type PipelineRow = typeof pipelines.$inferSelect;
type DbDeps = Pick<AppDeps, "db" | "clock">;

/**
 * Repository locations git may clone: http(s), ssh, git, file URLs, scp-like `user@host:path`, or an absolute
 * path. Nothing starting with `-` (option injection) and no whitespace or control characters.
 */
const REPO_URL = /^(?:(?:https?|ssh|git|file):\/\/[^\s]+|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s]+|\/[^\s]*)$/;

export const branchSchema = z.string().refine(isValidBranchName, "not a valid branch name");

// The request schemas below are z.lazy: each is built on its first use, not at every daemon start (a zod object
// costs about 2 KiB of heap and a few microseconds to make; docs/benchmarks.md). They parse, infer and convert to JSON Schema
// the same as the schemas they wrap.

const repoUrlSchema = () =>
  z
    .string()
    .max(2048)
    // eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
    .refine((u) => REPO_URL.test(u) && !/[\x00-\x1f\x7f]/.test(u), "must be an http(s), ssh, git or file URL or an absolute path")
    .refine((u) => !hasUrlCredentials(u), "must not carry a user name or password: put credentials in the project's source credentials");

/**
 * Whether a repository URL carries userinfo (`https://user:token@host/…`): a credential there would be stored and
 * shown in the clear, so it is refused (docs/decisions.md "No userinfo in repo_url"). An ssh URL may name its user
 * without a password (`ssh://git@host/…`, `git@host:org/repo`): that is an account name, not a secret.
 */
function hasUrlCredentials(url: string): boolean {
  const m = /^([a-z]+):\/\/([^/?#]*)/i.exec(url);
  if (!m) return false;
  const authority = m[2]!;
  const at = authority.lastIndexOf("@");
  if (at < 0) return false;
  const userinfo = authority.slice(0, at);
  return m[1]!.toLowerCase() !== "ssh" || userinfo.includes(":") || userinfo.includes("%");
}

/** The pipeline file new projects read (docs/pipelines.md). */
export const DEFAULT_CONFIG_PATH = ".hangar.yml";

/** A file path inside the repository: relative, `/`-separated, no `.`/`..` segment, nothing git could read as an option. */
const configPathSchema = () =>
  z
    .string()
    .min(1)
    .max(255)
    .refine(
      // eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
      (p) => !/[\x00-\x1f\x7f\\:*?[]/.test(p) && !p.startsWith("-") && p.split("/").every((seg) => seg !== "" && seg !== "." && seg !== ".."),
      "must be a relative path inside the repository (no leading /, no . or .. segments)",
    );

export const createProjectSchema = z.lazy(() =>
  z.object({
    name: z.string().trim().min(1).max(100),
    repo_url: repoUrlSchema(),
    default_branch: branchSchema.default("main"),
    /** null: pipelines are stored in Hangar only. */
    config_path: configPathSchema().nullable().default(DEFAULT_CONFIG_PATH),
  }),
);

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

const glob = () => z.string().min(1).max(1024);

/** One entry of `config.triggers` (docs/api.md §11); what it means lives in domain/triggers.ts. */
export const pipelineTriggerSchema = z.lazy(() =>
  z.strictObject({
    event: z.enum(TRIGGER_EVENTS),
    branches: z.array(glob()).max(100).optional(),
    tags: z.array(glob()).max(100).optional(),
  }),
);

/** An artifact item: a glob (uploaded when the build succeeds) or `{path, when}`; `always` uploads after a failure too. */
export const artifactItemSchema = z.lazy(() =>
  z.union([glob(), z.strictObject({ path: glob(), when: z.enum(["on_success", "always"]).default("on_success") })]),
);

/** The name a step written as a plain string gets: its first 40 characters (docs/pipelines.md). */
export const STEP_NAME_FROM_RUN_CHARS = 40;

/**
 * A 5-field cron expression (croner reads it; six fields, seconds, are refused) and an IANA time zone. Shared by
 * a stored config's `schedules` and the pipeline file's top-level `schedules` (docs/pipelines.md).
 */
const cronSchema = () =>
  z
    .string()
    .trim()
    .min(1)
    .max(200)
    .refine((expr) => expr.split(/\s+/).length === 5 && cronIsValid(expr), "not a valid 5-field cron expression");
const timezoneSchema = () => z.string().min(1).max(100).refine(isTimeZone, "not an IANA time zone name");

export const pipelineScheduleSchema = z.lazy(() =>
  z.strictObject({ cron: cronSchema(), branch: branchSchema.optional(), timezone: timezoneSchema().optional() }),
);
export const fileScheduleSchema = z.lazy(() =>
  z.strictObject({
    pipeline: z.string().trim().min(1).max(100),
    cron: cronSchema(),
    branch: branchSchema.optional(),
    timezone: timezoneSchema().optional(),
  }),
);
export type PipelineSchedule = z.infer<typeof pipelineScheduleSchema>;

function cronIsValid(expr: string): boolean {
  try {
    new Cron(expr, { paused: true });
    return true;
  } catch {
    return false;
  }
}

function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: name });
    return true;
  } catch {
    return false;
  }
}
/** `reports`: test report files the runner uploads after the last step whatever the result (docs/test-reports.md). */
export const pipelineReportsSchema = z.lazy(() => z.strictObject({ junit: z.array(glob()).min(1).max(100) }));

/** The most automatic requeues a pipeline may ask for after lost runners (docs/api.md §21). */
export const MAX_RUNNER_LOST_RETRIES = 3;
/** A key template (docs/api.md §16): its placeholders are checked here, filled in by the runner. */
const cacheKeyTemplate = () =>
  z
    .string()
    .min(1)
    .max(512)
    .superRefine((template, ctx) => {
      const parsed = parseKeyTemplate(template);
      if (!parsed.ok) ctx.addIssue({ code: "custom", message: parsed.message });
    });

/** A `cache` entry: the key, the paths it holds (workspace-relative or `~/…`), and the prefixes to fall back to. */
export const cacheEntrySchema = z.lazy(() =>
  z.strictObject({
    key: cacheKeyTemplate(),
    paths: z
      .array(
        z
          .string()
          .min(1)
          .max(1024)
          .superRefine((path, ctx) => {
            const problem = cachePathProblem(path);
            if (problem) ctx.addIssue({ code: "custom", message: `a cache path ${problem}` });
          }),
      )
      .min(1)
      .max(50),
    restore_keys: z.array(cacheKeyTemplate()).max(20).optional(),
  }),
);

/**
 * A pipeline's config (docs/api.md §5); frozen into each build as `config_snapshot`. Strict at every level: an
 * unknown key (`"on": "push"`, `runs`) is refused with its own path rather than silently dropped. The same schema
 * reads a pipeline of the repository's pipeline file (src/domain/projects/pipeline-file.ts): a step may be a plain
 * string, stored as `{name, run}`.
 */
export const pipelineConfigSchema = z.lazy(() =>
  z.strictObject({
    platform: z.enum(PLATFORMS),
    steps: z
      .array(
        z.union([
          z.strictObject({
            name: z.string().min(1).max(200),
            run: z
              .string()
              .min(1)
              .max(64 * 1024),
          }),
          z
            .string()
            .min(1)
            .max(64 * 1024)
            .transform((run) => ({ name: run.slice(0, STEP_NAME_FROM_RUN_CHARS), run })),
        ]),
      )
      .min(1)
      .max(100),
    artifacts: z.array(artifactItemSchema).max(100).optional(),
    env: z.record(z.string().regex(ENV_NAME, "not a valid environment variable name"), z.string().max(64 * 1024)).optional(),
    timeout_s: z
      .number()
      .int()
      .min(1)
      .max(7 * 86_400)
      .optional(),
    triggers: z.array(pipelineTriggerSchema).max(50).optional(),
    /** A new build of this pipeline and branch cancels its older queued or running ones (failure_reason superseded). */
    cancel_previous: z.boolean().optional(),
    /** Stored pipelines' schedules (the pipeline file has its own top-level list). */
    schedules: z.array(pipelineScheduleSchema).max(20).optional(),
    reports: pipelineReportsSchema.optional(),
    /** A file in the checkout whose text becomes the build's release notes for tester channels. */
    release_notes: z.string().min(1).max(1024).optional(),
    publish: publishListSchema.optional(),
    /** `runner_lost: N`: a build whose runner is lost mid-build is queued again, at most N times along its chain. */
    retry: z.strictObject({ runner_lost: z.number().int().min(0).max(MAX_RUNNER_LOST_RETRIES) }).optional(),
    /** Caches the runner restores before the first step and saves after a succeeded build (docs/caches.md). */
    cache: z.array(cacheEntrySchema).max(20).optional(),
    /** `persistent` (the default) reuses one workspace per project and pipeline on a runner; `fresh` clones anew. */
    workspace: z.enum(["persistent", "fresh"]).optional(),
  }),
);
export type PipelineConfig = z.infer<typeof pipelineConfigSchema>;

const projectName = () => z.string().trim().min(1).max(100);
const pipelineName = () => z.string().trim().min(1).max(100);

export const createPipelineSchema = z.lazy(() =>
  z.object({
    name: pipelineName(),
    config: pipelineConfigSchema,
  }),
);

export const patchProjectSchema = z.lazy(() =>
  z.strictObject({
    name: projectName().optional(),
    repo_url: repoUrlSchema().optional(),
    default_branch: branchSchema.optional(),
    config_path: configPathSchema().nullable().optional(),
  }),
);

/** A new config applies to builds queued after the change; queued ones keep their snapshot. */
export const patchPipelineSchema = z.lazy(() =>
  z.strictObject({
    name: pipelineName().optional(),
    config: pipelineConfigSchema.optional(),
  }),
);

export const sourceCredentialsSchema = z.lazy(() =>
  z.object({
    username: z.string().min(1).max(256).optional(),
    token: z.string().min(1).max(8192),
  }),
);

const base64 = () =>
  z
    .string()
    .min(1)
    .regex(/^[A-Za-z0-9+/]+={0,2}$/, "must be base64");

export const androidSigningSchema = z.lazy(() =>
  z.object({
    keystore_base64: base64(),
    keystore_password: z.string().min(1).max(1024),
    key_alias: z.string().min(1).max(256),
    key_password: z.string().min(1).max(1024),
  }),
);

export type SourceCredentials = z.infer<typeof sourceCredentialsSchema>;
export type AndroidSigning = z.infer<typeof androidSigningSchema>;
/** The sealed iOS document; the upload's schema and its checks live in domain/signing/signing.ts. */
export interface IosSigning {
  certificate_p12_base64: string;
  certificate_password: string;
  provisioning_profiles_base64: string[];
}

export function toProjectJson(p: ProjectRow) {
  return {
    id: p.id,
    name: p.name,
    repo_url: p.repoUrl,
    default_branch: p.defaultBranch,
    has_source_credentials: p.sourceCredentialsSealed !== null,
    has_android_signing: p.androidSigningSealed !== null,
    has_ios_signing: p.iosSigningSealed !== null,
    config_path: p.configPath,
    created_at: p.createdAt,
    updated_at: p.updatedAt,
  };
}

/**
 * A pipeline's config as a reader of this role may see it: `env` (often tokens and internal URLs set inline) only
 * for builders (docs/decisions.md "A pipeline's env: builders only").
 */
export function configForReader(config: PipelineConfig, showEnv: boolean): PipelineConfig {
  if (showEnv || config.env === undefined) return config;
  const { env: _hidden, ...rest } = config;
  return rest as PipelineConfig;
}

export function toPipelineJson(p: PipelineRow, configPath: string | null = null, showEnv = true) {
  return {
    id: p.id,
    project_id: p.projectId,
    name: p.name,
    config: configForReader(p.config as PipelineConfig, showEnv),
    source: p.source,
    file:
      configPath !== null && p.fileCommit !== null && p.fileConfig !== null
        ? { path: configPath, commit_sha: p.fileCommit, config: configForReader(p.fileConfig as PipelineConfig, showEnv) }
        : null,
    created_at: p.createdAt,
    updated_at: p.updatedAt,
  };
}

/** Names are unique among live projects, compared without regard to ASCII case. */
function projectNameTaken(name: string, exceptId: string | null) {
  return sql`EXISTS (SELECT 1 FROM projects AS other WHERE lower(other.name) = lower(${name}) AND other.deleted_at IS NULL
    AND other.id IS NOT ${exceptId})`;
}

function pipelineNameTaken(projectId: string, name: string, exceptId: string | null) {
  return sql`EXISTS (SELECT 1 FROM pipelines AS other WHERE other.project_id = ${projectId} AND lower(other.name) = lower(${name})
    AND other.deleted_at IS NULL AND other.id IS NOT ${exceptId})`;
}

/** A build of the project (or of one pipeline) that is not final yet keeps it from being deleted. */
function hasActiveBuild(column: "project_id" | "pipeline_id", id: string) {
  const statuses = sql.join(
    NON_FINAL_STATUSES.map((st) => sql`${st}`),
    sql`, `,
  );
  return sql`EXISTS (SELECT 1 FROM ${builds} WHERE ${sql.identifier(column)} = ${id} AND status IN (${statuses}))`;
}

function duplicate(what: string, name: string): ApiError {
  return new ApiError("already_exists", `a ${what} named "${name}" already exists`);
}

/**
 * The name check and the insert are one conditional statement (INSERT … SELECT … WHERE NOT EXISTS): SQLite runs it
 * under the single write lock, so two concurrent creates of one name cannot both land.
 */
export async function createProject(deps: DbDeps, actor: UserRow, input: z.infer<typeof createProjectSchema>): Promise<ProjectRow> {
  const now = deps.clock.now();
  const id = crypto.randomUUID();
  const [inserted] = await deps.db.batch([
    deps.db.run(sql`INSERT INTO projects (id, name, repo_url, default_branch, config_path, last_build_number, created_by, created_at, updated_at)
      SELECT ${id}, ${input.name}, ${input.repo_url}, ${input.default_branch}, ${input.config_path}, 0, ${actor.id}, ${now}, ${now}
      WHERE NOT ${projectNameTaken(input.name, null)}`),
    auditStatementWhen(
      deps,
      { action: "project.create", actor, targetType: "project", targetId: id, details: { name: input.name } },
      sql`changes() = 1`,
    ),
  ]);
  if (inserted.rowsAffected !== 1) throw duplicate("project", input.name);
  return getProject(deps, id);
}

export async function listProjects(deps: Pick<AppDeps, "db">): Promise<ProjectRow[]> {
  return deps.db.select().from(projects).where(isNull(projects.deletedAt)).orderBy(asc(projects.createdAt), asc(projects.name));
}

/** A live project; 404 for an unknown or deleted one. `includeDeleted` is for reading what old builds point at. */
export async function getProject(deps: Pick<AppDeps, "db">, id: string, options: { includeDeleted?: boolean } = {}): Promise<ProjectRow> {
  const row = await deps.db.select().from(projects).where(eq(projects.id, id)).get();
  if (!row || (row.deletedAt !== null && !options.includeDeleted)) throw new ApiError("not_found", "no such project");
  return row;
}

export async function updateProject(deps: DbDeps, actor: UserRow, projectId: string, input: z.infer<typeof patchProjectSchema>): Promise<ProjectRow> {
  const before = await getProject(deps, projectId);
  const name = input.name ?? before.name;
  const now = deps.clock.now();
  const changed = Object.keys(input).filter((k) => input[k as keyof typeof input] !== undefined);
  const [updated] = await deps.db.batch([
    deps.db
      .update(projects)
      .set({
        name,
        repoUrl: input.repo_url ?? before.repoUrl,
        defaultBranch: input.default_branch ?? before.defaultBranch,
        configPath: input.config_path === undefined ? before.configPath : input.config_path,
        updatedAt: now,
      })
      .where(and(eq(projects.id, projectId), isNull(projects.deletedAt), sql`NOT ${projectNameTaken(name, projectId)}`)),
    auditStatementWhen(
      deps,
      { action: "project.update", actor, targetType: "project", targetId: projectId, details: { fields: changed } },
      sql`changes() = 1`,
    ),
  ]);
  if (updated.rowsAffected !== 1) {
    await getProject(deps, projectId); // 404 when it was deleted meanwhile
    throw duplicate("project", name);
  }
  return getProject(deps, projectId);
}

/**
 * Soft delete: the row stays (builds, artifacts and logs keep naming it) but leaves every list and lookup; its
 * sealed credentials are wiped and its pipelines go with it. Refused with 409 project_busy while a build of it is
 * queued, assigned or running; the check is inside the UPDATE, so a build queued concurrently either lands first
 * (and the delete is refused) or finds the project gone.
 */
export async function deleteProject(deps: DbDeps, actor: UserRow, projectId: string): Promise<void> {
  await getProject(deps, projectId);
  const now = deps.clock.now();
  const [deleted] = await deps.db.batch([
    deps.db
      .update(projects)
      .set({
        deletedAt: now,
        updatedAt: now,
        sourceCredentialsSealed: null,
        androidSigningSealed: null,
        iosSigningSealed: null,
        iosSigningInfo: null,
        androidSigningInfo: null,
      })
      .where(and(eq(projects.id, projectId), isNull(projects.deletedAt), sql`NOT ${hasActiveBuild("project_id", projectId)}`)),
    auditStatementWhen(deps, { action: "project.delete", actor, targetType: "project", targetId: projectId }, sql`changes() = 1`),
    deps.db
      .update(pipelines)
      .set({ deletedAt: now, updatedAt: now })
      .where(
        and(eq(pipelines.projectId, projectId), isNull(pipelines.deletedAt), sql`(SELECT deleted_at FROM projects WHERE id = ${projectId}) = ${now}`),
      ),
  ]);
  if (deleted.rowsAffected !== 1) {
    await getProject(deps, projectId);
    throw new ApiError("project_busy", "a build of this project is queued, assigned or running; cancel it or wait for it to finish");
  }
}

export async function createPipeline(
  deps: DbDeps,
  actor: UserRow,
  projectId: string,
  input: z.infer<typeof createPipelineSchema>,
): Promise<PipelineRow> {
  await getProject(deps, projectId);
  const now = deps.clock.now();
  const id = crypto.randomUUID();
  const [inserted] = await deps.db.batch([
    deps.db.run(sql`INSERT INTO pipelines (id, project_id, name, config, created_at, updated_at)
      SELECT ${id}, ${projectId}, ${input.name}, ${JSON.stringify(input.config)}, ${now}, ${now}
      WHERE EXISTS (SELECT 1 FROM projects WHERE id = ${projectId} AND deleted_at IS NULL)
        AND NOT ${pipelineNameTaken(projectId, input.name, null)}`),
    auditStatementWhen(
      deps,
      { action: "pipeline.create", actor, targetType: "pipeline", targetId: id, details: { project_id: projectId, name: input.name } },
      sql`changes() = 1`,
    ),
  ]);
  if (inserted.rowsAffected !== 1) {
    await getProject(deps, projectId);
    throw duplicate("pipeline", input.name);
  }
  return getPipeline(deps, projectId, id);
}

export async function listPipelines(deps: Pick<AppDeps, "db">, projectId: string): Promise<PipelineRow[]> {
  await getProject(deps, projectId);
  return deps.db
    .select()
    .from(pipelines)
    .where(and(eq(pipelines.projectId, projectId), isNull(pipelines.deletedAt)))
    .orderBy(asc(pipelines.createdAt));
}

export async function getPipeline(
  deps: Pick<AppDeps, "db">,
  projectId: string,
  pipelineId: string,
  options: { includeDeleted?: boolean } = {},
): Promise<PipelineRow> {
  const row = await deps.db.select().from(pipelines).where(eq(pipelines.id, pipelineId)).get();
  if (!row || row.projectId !== projectId || (row.deletedAt !== null && !options.includeDeleted)) {
    throw new ApiError("not_found", "no such pipeline in this project");
  }
  return row;
}

export async function updatePipeline(
  deps: DbDeps,
  actor: UserRow,
  projectId: string,
  pipelineId: string,
  input: z.infer<typeof patchPipelineSchema>,
): Promise<PipelineRow> {
  await getProject(deps, projectId);
  const before = await getPipeline(deps, projectId, pipelineId);
  const name = input.name ?? before.name;
  const now = deps.clock.now();
  const changed = Object.keys(input).filter((k) => input[k as keyof typeof input] !== undefined);
  const [updated] = await deps.db.batch([
    deps.db
      .update(pipelines)
      .set({ name, config: input.config ?? before.config, updatedAt: now })
      .where(and(eq(pipelines.id, pipelineId), isNull(pipelines.deletedAt), sql`NOT ${pipelineNameTaken(projectId, name, pipelineId)}`)),
    auditStatementWhen(
      deps,
      { action: "pipeline.update", actor, targetType: "pipeline", targetId: pipelineId, details: { project_id: projectId, fields: changed } },
      sql`changes() = 1`,
    ),
  ]);
  if (updated.rowsAffected !== 1) {
    await getPipeline(deps, projectId, pipelineId);
    throw duplicate("pipeline", name);
  }
  return getPipeline(deps, projectId, pipelineId);
}

/** Soft delete, refused with 409 project_busy while a build of this pipeline is not final (as for projects). */
export async function deletePipeline(deps: DbDeps, actor: UserRow, projectId: string, pipelineId: string): Promise<void> {
  await getProject(deps, projectId);
  await getPipeline(deps, projectId, pipelineId);
  const now = deps.clock.now();
  const [deleted] = await deps.db.batch([
    deps.db
      .update(pipelines)
      .set({ deletedAt: now, updatedAt: now })
      .where(and(eq(pipelines.id, pipelineId), isNull(pipelines.deletedAt), sql`NOT ${hasActiveBuild("pipeline_id", pipelineId)}`)),
    auditStatementWhen(
      deps,
      { action: "pipeline.delete", actor, targetType: "pipeline", targetId: pipelineId, details: { project_id: projectId } },
      sql`changes() = 1`,
    ),
  ]);
  if (deleted.rowsAffected !== 1) {
    await getPipeline(deps, projectId, pipelineId);
    throw new ApiError("project_busy", "a build of this pipeline is queued, assigned or running; cancel it or wait for it to finish");
  }
}

type SealedColumn = "sourceCredentialsSealed";

/** Seals the source credentials; the answer carries only has_* flags (signing material: domain/signing/signing.ts). */
export async function storeProjectSecret(
  deps: Pick<AppDeps, "db" | "clock" | "secrets">,
  actor: UserRow,
  projectId: string,
  column: SealedColumn,
  value: SourceCredentials,
): Promise<ProjectRow> {
  await getProject(deps, projectId);
  const sealed = await deps.secrets.seal(JSON.stringify(value));
  const now = deps.clock.now();
  await deps.db.batch([
    deps.db
      .update(projects)
      .set({ [column]: sealed, updatedAt: now })
      .where(eq(projects.id, projectId)),
    auditStatement(deps, { action: `project.${column.replace("Sealed", "")}.set`, actor, targetType: "project", targetId: projectId }),
  ]);
  return getProject(deps, projectId);
}

async function openSealed<T>(deps: Pick<AppDeps, "secrets">, sealed: string | null): Promise<T | null> {
  if (sealed === null) return null;
  try {
    return JSON.parse(await deps.secrets.open(sealed)) as T;
  } catch {
    throw new ApiError("decryption_error", "stored credentials cannot be decrypted");
  }
}

/** The project's git credentials, as git and the runner's checkout use them. */
export async function openSourceCredentials(deps: Pick<AppDeps, "secrets">, project: ProjectRow): Promise<GitCredentials | null> {
  const creds = await openSealed<SourceCredentials>(deps, project.sourceCredentialsSealed);
  // Hosts ignore the user name for token auth, but git needs one; "x-access-token" is what GitHub documents.
  return creds ? { username: creds.username ?? "x-access-token", password: creds.token } : null;
}

export function openAndroidSigning(deps: Pick<AppDeps, "secrets">, project: ProjectRow): Promise<AndroidSigning | null> {
  return openSealed<AndroidSigning>(deps, project.androidSigningSealed);
}

/** The iOS document; one stored by the first version of the upload (a single profile) reads as a list of one. */
export async function openIosSigning(deps: Pick<AppDeps, "secrets">, project: ProjectRow): Promise<IosSigning | null> {
  const doc = await openSealed<IosSigning & { provisioning_profile_base64?: string }>(deps, project.iosSigningSealed);
  if (!doc) return null;
  const profiles = doc.provisioning_profiles_base64 ?? (doc.provisioning_profile_base64 ? [doc.provisioning_profile_base64] : []);
  return {
    certificate_p12_base64: doc.certificate_p12_base64,
    certificate_password: doc.certificate_password,
    provisioning_profiles_base64: profiles,
  };
}

/**
 * What identifies the project's log secrets without opening any: every sealed value starts with its own random IV
 * (src/domain/common/crypto.ts), so the IVs of the sealed columns and secret variables change whenever any secret
 * does. Costs one small query per log chunk instead of decrypting every secret (docs/decisions.md "Secret variables:
 * caps and masking set-up").
 */
export async function projectLogSecretsFingerprint(deps: Pick<AppDeps, "db">, project: ProjectRow): Promise<string> {
  // "v1." and 16 base64url characters: the 12-byte IV.
  const iv = (sealed: string | null | undefined) => (sealed ? sealed.slice(0, 19) : "-");
  const rows = await deps.db
    .select({ name: projectSecrets.name, iv: sql<string>`substr(${projectSecrets.valueSealed}, 1, 19)` })
    .from(projectSecrets)
    .where(eq(projectSecrets.projectId, project.id))
    .orderBy(asc(projectSecrets.name));
  return [
    project.id,
    iv(project.sourceCredentialsSealed),
    iv(project.androidSigningSealed),
    iv(project.iosSigningSealed),
    ...rows.map((r) => `${r.name}=${r.iv}`),
  ].join(" ");
}

/** Every secret of the project that must never appear in a stored log (docs/api.md §6), secret variables included. */
export async function projectLogSecrets(deps: Pick<AppDeps, "secrets" | "db">, project: ProjectRow): Promise<string[]> {
  const [source, android, ios, variables] = await Promise.all([
    openSealed<SourceCredentials>(deps, project.sourceCredentialsSealed),
    openAndroidSigning(deps, project),
    openIosSigning(deps, project),
    openSecrets(deps, project.id),
  ]);
  return [source?.token, android?.keystore_password, android?.key_password, ios?.certificate_password, ...Object.values(variables)].filter(
    (s): s is string => typeof s === "string" && s.length > 0,
  );
}

export interface NameDirectory {
  projects: Map<string, { id: string; name: string; deleted: boolean }>;
  pipelines: Map<string, { id: string; projectId: string; name: string; deleted: boolean }>;
}

/** Every project and pipeline name, deleted ones included: what lists of builds show beside each build. */
export async function nameDirectory(deps: Pick<AppDeps, "db">): Promise<NameDirectory> {
  const [p, pl] = await Promise.all([
    deps.db.select({ id: projects.id, name: projects.name, deletedAt: projects.deletedAt }).from(projects).orderBy(asc(projects.name)),
    deps.db
      .select({ id: pipelines.id, projectId: pipelines.projectId, name: pipelines.name, deletedAt: pipelines.deletedAt })
      .from(pipelines)
      .orderBy(asc(pipelines.name)),
  ]);
  return {
    projects: new Map(p.map((r) => [r.id, { id: r.id, name: r.name, deleted: r.deletedAt !== null }])),
    pipelines: new Map(pl.map((r) => [r.id, { id: r.id, projectId: r.projectId, name: r.name, deleted: r.deletedAt !== null }])),
  };
}
