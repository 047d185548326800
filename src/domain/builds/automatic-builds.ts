import { and, asc, eq, isNull } from "drizzle-orm";
import { pipelines } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import {
  ensureFilePipelines,
  invalidConfigLog,
  storedFallbackLog,
  unavailableConfigLog,
  UNUSABLE_CONFIG,
  type ConfigRead,
} from "../projects/pipeline-source.ts";
import type { PipelineConfig, PipelineRow, ProjectRow } from "../projects/projects.ts";
import type { BuildPlan } from "./builds.ts";

/** What an automatic trigger (a webhook's ref change, a schedule) says about the builds it makes. */
export interface AutomaticTrigger {
  triggerType: "webhook" | "schedule";
  triggerActor: string | null;
  triggerEvent: string;
  triggerRef: string | null;
  commitSha: string;
  branch: string;
  fromFork: boolean;
  /** Whether a pipeline of this name and config wants a build (a webhook: its triggers; a schedule: its name). */
  wants: (name: string, config: Pick<PipelineConfig, "triggers">) => boolean;
  /** Whether this read is of the default branch's head (the file's definitions are then remembered on the rows). */
  atDefaultHead: boolean;
}

/**
 * The builds an automatic trigger makes at one commit (docs/pipelines.md). A valid file: one build per pipeline of
 * the file that wants it, with the file's definition. No file: the stored pipelines. An invalid file: one build per
 * pipeline it names that wants one (or one of a pipeline named after the file when it names none), failing at once
 * with the issues in its log, so the commit status and notifications reach the author. An unreadable file: the
 * same failure, except that stored pipelines build with their stored config when the repository could not be
 * reached at all.
 */
export async function plansForAutomaticTrigger(
  deps: Pick<AppDeps, "db" | "clock">,
  project: ProjectRow,
  read: ConfigRead,
  trigger: AutomaticTrigger,
): Promise<BuildPlan[]> {
  const plan = (pipeline: PipelineRow, config: PipelineConfig, extra: Pick<BuildPlan, "failure" | "logPreamble">): BuildPlan => ({
    project,
    pipeline,
    config,
    triggerType: trigger.triggerType,
    triggerActor: trigger.triggerActor,
    triggerEvent: trigger.triggerEvent,
    triggerRef: trigger.triggerRef,
    rerunOf: null,
    fromFork: trigger.fromFork,
    commitSha: trigger.commitSha,
    branch: trigger.branch,
    ...extra,
  });
  const ok = { failure: null, logPreamble: null };

  if (read.kind === "file") {
    const wanted = new Map(Object.entries(read.file.pipelines).filter(([name, config]) => trigger.wants(name, config)));
    if (trigger.atDefaultHead) {
      await ensureFilePipelines(deps, project.id, new Map(Object.entries(read.file.pipelines)), read.commitSha, { remember: true });
    }
    const rows = await ensureFilePipelines(deps, project.id, wanted, read.commitSha, { remember: false });
    return [...wanted].flatMap(([name, config]) => {
      const row = rows.get(name);
      return row ? [plan(row, config, ok)] : [];
    });
  }

  if (read.kind === "stored") {
    const stored = (await livePipelines(deps, project.id)).filter((p) => p.source === "stored");
    return stored.filter((p) => trigger.wants(p.name, p.config as PipelineConfig)).map((p) => plan(p, p.config as PipelineConfig, ok));
  }

  if (read.kind === "invalid") {
    const failure = {
      failure: { reason: "invalid_config" as const },
      logPreamble: invalidConfigLog(read.configPath, read.commitSha, read.parsed.issues),
    };
    const named = read.parsed.names.filter((name) => {
      const triggers = read.parsed.triggersOf(name);
      return trigger.wants(name, { triggers: triggers === "unreadable" ? undefined : triggers });
    });
    const names = read.parsed.names.length === 0 ? [read.configPath] : named;
    const rows = await ensureFilePipelines(deps, project.id, new Map(names.map((n) => [n, UNUSABLE_CONFIG])), read.commitSha, { remember: false });
    return names.flatMap((name) => {
      const row = rows.get(name);
      return row ? [plan(row, UNUSABLE_CONFIG, failure)] : [];
    });
  }

  if (read.kind !== "unavailable") return [];
  const candidates = (await livePipelines(deps, project.id)).filter((p) => trigger.wants(p.name, p.config as PipelineConfig));
  const failed = { failure: { reason: "config_unavailable" as const }, logPreamble: unavailableConfigLog(read) };
  if (candidates.length === 0) {
    const rows = await ensureFilePipelines(deps, project.id, new Map([[read.configPath, UNUSABLE_CONFIG]]), null, { remember: false });
    const row = rows.get(read.configPath);
    return row ? [plan(row, UNUSABLE_CONFIG, failed)] : [];
  }
  return candidates.map((p) =>
    read.unreachable && p.source === "stored"
      ? plan(p, p.config as PipelineConfig, { failure: null, logPreamble: storedFallbackLog(read) })
      : plan(p, p.config as PipelineConfig, failed),
  );
}

async function livePipelines(deps: Pick<AppDeps, "db">, projectId: string): Promise<PipelineRow[]> {
  return deps.db
    .select()
    .from(pipelines)
    .where(and(eq(pipelines.projectId, projectId), isNull(pipelines.deletedAt)))
    .orderBy(asc(pipelines.createdAt));
}
