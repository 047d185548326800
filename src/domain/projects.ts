import { asc, eq } from "drizzle-orm";
import { z } from "zod";
import { PLATFORMS, TRIGGER_EVENTS } from "../db/schema/constants.ts";
import { pipelines, projects } from "../db/schema/index.ts";
import type { AppDeps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { auditStatement } from "./audit.ts";
import type { GitCredentials } from "./git.ts";
import { isValidBranchName } from "./git.ts";
import { openSecrets } from "./project-secrets.ts";
import type { UserRow } from "./users.ts";

export type ProjectRow = typeof projects.$inferSelect;
export type PipelineRow = typeof pipelines.$inferSelect;
type DbDeps = Pick<AppDeps, "db" | "clock">;

/**
 * Repository locations git may clone: http(s), ssh, git, file URLs, scp-like `user@host:path`, or an absolute
 * path. Nothing starting with `-` (option injection) and no whitespace or control characters.
 */
const REPO_URL = /^(?:(?:https?|ssh|git|file):\/\/[^\s]+|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s]+|\/[^\s]*)$/;

export const branchSchema = z.string().refine(isValidBranchName, "not a valid branch name");

export const createProjectSchema = z.object({
  name: z.string().trim().min(1).max(100),
  repo_url: z
    .string()
    .max(2048)
    // eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
    .refine((u) => REPO_URL.test(u) && !/[\x00-\x1f\x7f]/.test(u), "must be an http(s), ssh, git or file URL or an absolute path"),
  default_branch: branchSchema.default("main"),
});

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

const refGlob = z.string().min(1).max(255);

/** One entry of `config.triggers` (CONTRACT §11); what it means lives in domain/triggers.ts. */
export const pipelineTriggerSchema = z.object({
  event: z.enum(TRIGGER_EVENTS),
  branches: z.array(refGlob).max(100).optional(),
  tags: z.array(refGlob).max(100).optional(),
});

/** A pipeline's config (CONTRACT §5); frozen into each build as `config_snapshot`. */
export const pipelineConfigSchema = z.object({
  platform: z.enum(PLATFORMS),
  steps: z
    .array(z.object({ name: z.string().min(1).max(200), run: z.string().min(1).max(64 * 1024) }))
    .min(1)
    .max(100),
  artifacts: z.array(z.string().min(1).max(1024)).max(100).optional(),
  env: z
    .record(z.string().regex(ENV_NAME, "not a valid environment variable name"), z.string().max(64 * 1024))
    .optional(),
  timeout_s: z.number().int().min(1).max(7 * 86_400).optional(),
  triggers: z.array(pipelineTriggerSchema).max(50).optional(),
});
export type PipelineConfig = z.infer<typeof pipelineConfigSchema>;

export const createPipelineSchema = z.object({
  name: z.string().trim().min(1).max(100),
  config: pipelineConfigSchema,
});

export const sourceCredentialsSchema = z.object({
  username: z.string().min(1).max(256).optional(),
  token: z.string().min(1).max(8192),
});

const base64 = z.string().min(1).regex(/^[A-Za-z0-9+/]+={0,2}$/, "must be base64");

export const androidSigningSchema = z.object({
  keystore_base64: base64,
  keystore_password: z.string().min(1).max(1024),
  key_alias: z.string().min(1).max(256),
  key_password: z.string().min(1).max(1024),
});

export const iosSigningSchema = z.object({
  certificate_p12_base64: base64,
  certificate_password: z.string().max(1024),
  provisioning_profile_base64: base64,
});

export type SourceCredentials = z.infer<typeof sourceCredentialsSchema>;
export type AndroidSigning = z.infer<typeof androidSigningSchema>;
export type IosSigning = z.infer<typeof iosSigningSchema>;

export function toProjectJson(p: ProjectRow) {
  return {
    id: p.id,
    name: p.name,
    repo_url: p.repoUrl,
    default_branch: p.defaultBranch,
    has_source_credentials: p.sourceCredentialsSealed !== null,
    has_android_signing: p.androidSigningSealed !== null,
    has_ios_signing: p.iosSigningSealed !== null,
    created_at: p.createdAt,
    updated_at: p.updatedAt,
  };
}

export function toPipelineJson(p: PipelineRow) {
  return { id: p.id, project_id: p.projectId, name: p.name, config: p.config as PipelineConfig, created_at: p.createdAt, updated_at: p.updatedAt };
}

export async function createProject(deps: DbDeps, actor: UserRow, input: z.infer<typeof createProjectSchema>): Promise<ProjectRow> {
  const now = deps.clock.now();
  const row: ProjectRow = {
    id: crypto.randomUUID(),
    name: input.name,
    repoUrl: input.repo_url,
    defaultBranch: input.default_branch,
    sourceCredentialsSealed: null,
    androidSigningSealed: null,
    iosSigningSealed: null,
    protectedBranches: null,
    lastBuildNumber: 0,
    createdBy: actor.id,
    createdAt: now,
    updatedAt: now,
  };
  await deps.db.batch([
    deps.db.insert(projects).values(row),
    auditStatement(deps, { action: "project.create", actor, targetType: "project", targetId: row.id }),
  ]);
  return row;
}

export async function listProjects(deps: Pick<AppDeps, "db">): Promise<ProjectRow[]> {
  return deps.db.select().from(projects).orderBy(asc(projects.createdAt), asc(projects.name));
}

export async function getProject(deps: Pick<AppDeps, "db">, id: string): Promise<ProjectRow> {
  const row = await deps.db.select().from(projects).where(eq(projects.id, id)).get();
  if (!row) throw new ApiError(404, "not_found", "no such project");
  return row;
}

export async function createPipeline(
  deps: DbDeps,
  actor: UserRow,
  projectId: string,
  input: z.infer<typeof createPipelineSchema>,
): Promise<PipelineRow> {
  await getProject(deps, projectId);
  const now = deps.clock.now();
  const row: PipelineRow = { id: crypto.randomUUID(), projectId, name: input.name, config: input.config, createdAt: now, updatedAt: now };
  await deps.db.batch([
    deps.db.insert(pipelines).values(row),
    auditStatement(deps, { action: "pipeline.create", actor, targetType: "pipeline", targetId: row.id, details: { project_id: projectId } }),
  ]);
  return row;
}

export async function listPipelines(deps: Pick<AppDeps, "db">, projectId: string): Promise<PipelineRow[]> {
  await getProject(deps, projectId);
  return deps.db.select().from(pipelines).where(eq(pipelines.projectId, projectId)).orderBy(asc(pipelines.createdAt));
}

export async function getPipeline(deps: Pick<AppDeps, "db">, projectId: string, pipelineId: string): Promise<PipelineRow> {
  const row = await deps.db.select().from(pipelines).where(eq(pipelines.id, pipelineId)).get();
  if (!row || row.projectId !== projectId) throw new ApiError(404, "not_found", "no such pipeline in this project");
  return row;
}

type SealedColumn = "sourceCredentialsSealed" | "androidSigningSealed" | "iosSigningSealed";

/** Seals a credential document into one of the project's columns; the answer carries only has_* flags. */
export async function storeProjectSecret(
  deps: Pick<AppDeps, "db" | "clock" | "secrets">,
  actor: UserRow,
  projectId: string,
  column: SealedColumn,
  value: SourceCredentials | AndroidSigning | IosSigning,
): Promise<ProjectRow> {
  await getProject(deps, projectId);
  const sealed = await deps.secrets.seal(JSON.stringify(value));
  const now = deps.clock.now();
  await deps.db.batch([
    deps.db.update(projects).set({ [column]: sealed, updatedAt: now }).where(eq(projects.id, projectId)),
    auditStatement(deps, { action: `project.${column.replace("Sealed", "")}.set`, actor, targetType: "project", targetId: projectId }),
  ]);
  return getProject(deps, projectId);
}

async function openSealed<T>(deps: Pick<AppDeps, "secrets">, sealed: string | null): Promise<T | null> {
  if (sealed === null) return null;
  try {
    return JSON.parse(await deps.secrets.open(sealed)) as T;
  } catch {
    throw new ApiError(500, "decryption_error", "stored credentials cannot be decrypted");
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

export function openIosSigning(deps: Pick<AppDeps, "secrets">, project: ProjectRow): Promise<IosSigning | null> {
  return openSealed<IosSigning>(deps, project.iosSigningSealed);
}

/** Every secret of the project that must never appear in a stored log (CONTRACT §6), secret variables included. */
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
