import type { z } from "zod";
import type { ForgeRequest } from "./forges/index.ts";
import type { PipelineConfig, pipelineTriggerSchema } from "../projects/projects.ts";
import { matchesAnyRefGlob } from "../common/ref-glob.ts";

export type PipelineTrigger = z.infer<typeof pipelineTriggerSchema>;

/**
 * A pipeline's effective triggers (docs/api.md §11): absent means pushes to the project's default branch; an empty
 * list means no webhook builds at all.
 */
export function effectiveTriggers(config: Pick<PipelineConfig, "triggers">, defaultBranch: string): PipelineTrigger[] {
  return config.triggers ?? [{ event: "push", branches: [defaultBranch] }];
}

/**
 * Whether one trigger matches one ref change. Pushes match `branches` against the branch, tags match `tags`
 * against the tag name, pull requests match `branches` against the PR's base branch; a trigger without the
 * list matches every branch or tag.
 */
export function triggerMatches(trigger: PipelineTrigger, request: ForgeRequest): boolean {
  if (trigger.event !== request.event) return false;
  if (request.event === "tag") return trigger.tags === undefined || matchesAnyRefGlob(trigger.tags, request.branch);
  const name = request.event === "pull_request" ? (request.baseBranch ?? "") : request.branch;
  return trigger.branches === undefined || matchesAnyRefGlob(trigger.branches, name);
}

export function pipelineWantsBuild(config: Pick<PipelineConfig, "triggers">, defaultBranch: string, request: ForgeRequest): boolean {
  return effectiveTriggers(config, defaultBranch).some((t) => triggerMatches(t, request));
}

const SKIP = /\[(?:skip ci|ci skip)\]/i;

/** The skip rules that apply before any pipeline is looked at: a deleted ref, or `[skip ci]` in the head commit. */
export function skipReason(request: ForgeRequest): string | null {
  if (request.commitSha === null) return request.event === "pull_request" ? "pull request without a head commit" : "ref deleted";
  if (request.message && SKIP.test(request.message)) return "[skip ci] in the head commit message";
  return null;
}
