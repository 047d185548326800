import { and, eq, inArray, isNull, sql } from "drizzle-orm";
import { pipelines } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { MAX_PIPELINE_FILE_BYTES, parsePipelineFile, type FileIssue, type ParsedPipelineFile, type PipelineFile } from "./pipeline-file.ts";
import { openSourceCredentials, type PipelineConfig, type PipelineRow, type ProjectRow } from "./projects.ts";

/** How long a trigger waits for the pipeline file (docs/pipelines.md). */
export const CONFIG_READ_TIMEOUT_MS = 20_000;

/**
 * What the project's pipeline file says at one commit:
 * - `stored`: no config path, or no file at that commit: the stored pipelines apply;
 * - `file`: a valid file, the only source of pipelines for builds of that commit;
 * - `invalid`: the file exists but does not parse or validate (issues with line and column);
 * - `unavailable`: git could not read it; `unreachable` when git never reached the repository at all (connect
 *   failure, time-out, no git on this host), when stored pipelines still build with their stored config.
 */
export type ConfigRead =
  | { kind: "stored"; configPath: string | null }
  | { kind: "file"; configPath: string; commitSha: string; file: PipelineFile }
  | { kind: "invalid"; configPath: string; commitSha: string; parsed: Extract<ParsedPipelineFile, { ok: false }> }
  | { kind: "unavailable"; configPath: string; unreachable: boolean; notAllowed: boolean; reason: string };

type ReadDeps = Pick<AppDeps, "git" | "secrets">;

/** Reads and parses the project's pipeline file at `commitSha` (never throws for git trouble: see ConfigRead). */
export async function readPipelineConfig(
  deps: ReadDeps,
  project: ProjectRow,
  commitSha: string,
  options: { timeoutMs?: number } = {},
): Promise<ConfigRead> {
  const configPath = project.configPath;
  if (configPath === null) return { kind: "stored", configPath: null };
  if (!deps.git.readFile) {
    return { kind: "unavailable", configPath, unreachable: true, notAllowed: false, reason: "this host has no git to read the repository with" };
  }
  const result = await deps.git.readFile(project.repoUrl, commitSha, configPath, {
    credentials: (await openSourceCredentials(deps, project)) ?? undefined,
    timeoutMs: options.timeoutMs ?? CONFIG_READ_TIMEOUT_MS,
    maxBytes: MAX_PIPELINE_FILE_BYTES,
  });
  if (!result.ok) {
    return {
      kind: "unavailable",
      configPath,
      unreachable: result.kind === "unreachable",
      notAllowed: result.kind === "not_allowed",
      reason: result.reason,
    };
  }
  if (result.content === null) return { kind: "stored", configPath };
  const parsed = parsePipelineFile(new TextDecoder().decode(result.content));
  return parsed.ok ? { kind: "file", configPath, commitSha, file: parsed.file } : { kind: "invalid", configPath, commitSha, parsed };
}

/** A manual trigger's answer to an unusable file: 422 with the issues located in it, or why it could not be read. */
export function manualTriggerError(read: Extract<ConfigRead, { kind: "invalid" | "unavailable" }>): ApiError {
  if (read.kind === "invalid") {
    return new ApiError(
      "invalid_pipeline_config",
      `${read.configPath} at ${read.commitSha.slice(0, 12)} is not a valid pipeline file`,
      read.parsed.issues,
    );
  }
  if (read.notAllowed) return new ApiError("source_not_allowed", `the repository cannot be contacted: ${read.reason}`);
  return new ApiError("config_unavailable", `${read.configPath} could not be read: ${read.reason}`);
}

/** The log lines of a build that fails at once for its pipeline file (what the commit status and notifications link to). */
export function invalidConfigLog(configPath: string, commitSha: string, issues: FileIssue[]): string {
  const lines = issues.map((i) => `  ${configPath}:${i.line}:${i.column}${i.path ? ` ${i.path}` : ""}: ${i.message}`);
  return `hangar: ${configPath} at ${commitSha.slice(0, 12)} is not a valid pipeline file:\n${lines.join("\n")}\n`;
}

export function unavailableConfigLog(read: Extract<ConfigRead, { kind: "unavailable" }>): string {
  return `hangar: ${read.configPath} could not be read: ${read.reason}\n`;
}

/** The first log line of a stored pipeline built with its stored config because the file could not be read. */
export function storedFallbackLog(read: Extract<ConfigRead, { kind: "unavailable" }>): string {
  return `hangar: ${read.configPath} could not be read (${read.reason}); building with the pipeline's stored config\n`;
}

/** The config a build of a pipeline named in an invalid file is given: it never runs (the build fails at once). */
export const UNUSABLE_CONFIG: PipelineConfig = { platform: "any", steps: [{ name: "invalid pipeline file", run: "exit 1" }] };

/**
 * The pipeline rows for names the file holds (docs/pipelines.md): a name without a live row gets one (`source:
 * repository`); a stored pipeline of the same name (case aside) is the same row. Each insert is one conditional
 * statement, so concurrent reads of the file cannot make two rows of one name. `remember` records the file's
 * definitions on the rows (what the UI shows): done for reads at the default branch's head.
 */
export async function ensureFilePipelines(
  deps: Pick<AppDeps, "db" | "clock">,
  projectId: string,
  definitions: Map<string, PipelineConfig>,
  commitSha: string | null,
  options: { remember: boolean },
): Promise<Map<string, PipelineRow>> {
  const names = [...definitions.keys()];
  if (names.length === 0) return new Map();
  const now = deps.clock.now();
  const statements = names.flatMap((name) => {
    const config = JSON.stringify(definitions.get(name));
    const insert = deps.db.run(sql`INSERT INTO pipelines (id, project_id, name, config, source, file_commit, file_config, created_at, updated_at)
      SELECT ${crypto.randomUUID()}, ${projectId}, ${name}, ${config}, 'repository', ${commitSha}, ${config}, ${now}, ${now}
      WHERE EXISTS (SELECT 1 FROM projects WHERE id = ${projectId} AND deleted_at IS NULL)
        AND NOT EXISTS (SELECT 1 FROM pipelines AS other WHERE other.project_id = ${projectId} AND lower(other.name) = lower(${name})
          AND other.deleted_at IS NULL)`);
    if (!options.remember) return [insert];
    // A repository row's `config` follows the file on the default branch; a stored row keeps its stored config.
    const remember = deps.db.run(sql`UPDATE pipelines SET file_commit = ${commitSha}, file_config = ${config},
        config = CASE WHEN source = 'repository' THEN ${config} ELSE config END, updated_at = ${now}
      WHERE project_id = ${projectId} AND lower(name) = lower(${name}) AND deleted_at IS NULL
        AND (file_commit IS NOT ${commitSha} OR file_config IS NOT ${config})`);
    return [insert, remember];
  });
  const [first, ...rest] = statements;
  await deps.db.batch([first!, ...rest]);
  const rows = await deps.db
    .select()
    .from(pipelines)
    .where(
      and(
        eq(pipelines.projectId, projectId),
        isNull(pipelines.deletedAt),
        inArray(
          sql`lower(${pipelines.name})`,
          names.map((n) => n.toLowerCase()),
        ),
      ),
    );
  const byLower = new Map(rows.map((r) => [r.name.toLowerCase(), r]));
  const out = new Map<string, PipelineRow>();
  for (const name of names) {
    const row = byLower.get(name.toLowerCase());
    if (row) out.set(name, row);
  }
  return out;
}

/** The file's pipelines as definitions keyed by name. */
export function fileDefinitions(file: PipelineFile): Map<string, PipelineConfig> {
  return new Map(Object.entries(file.pipelines));
}

/** The definition the file gives a pipeline row (names compare without regard to case, as rows do), else null. */
export function fileDefinitionFor(file: PipelineFile, pipeline: Pick<PipelineRow, "name">): { name: string; config: PipelineConfig } | null {
  const lower = pipeline.name.toLowerCase();
  for (const [name, config] of Object.entries(file.pipelines)) if (name.toLowerCase() === lower) return { name, config };
  return null;
}
