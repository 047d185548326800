import { z } from "zod";
import type { AppDeps } from "../../deps.ts";
import { MAX_PIPELINE_FILE_BYTES, parsePipelineFile, type FileIssue } from "./pipeline-file.ts";
import { getProject } from "./projects.ts";

export const validatePipelineConfigSchema = z.lazy(() => z.strictObject({ content: z.string().max(MAX_PIPELINE_FILE_BYTES) }));

/** The "validate" box (docs/pipelines.md): a pasted pipeline file checked as a trigger would check it; 200 either way. */
export async function validatePipelineContent(
  deps: Pick<AppDeps, "db">,
  projectId: string,
  content: string,
): Promise<{ ok: boolean; issues: FileIssue[]; pipelines: string[] }> {
  await getProject(deps, projectId);
  const parsed = parsePipelineFile(content);
  return parsed.ok ? { ok: true, issues: [], pipelines: parsed.names } : { ok: false, issues: parsed.issues, pipelines: parsed.names };
}
