import { and, eq, isNull, sql } from "drizzle-orm";
import { Cron } from "croner";
import { pipelines, pipelineSchedules, projects } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { describeError } from "../../errors.ts";
import { assertRepoAllowed, resolveBranch } from "../projects/git.ts";
import { ensureFilePipelines, readPipelineConfig, type ConfigRead } from "../projects/pipeline-source.ts";
import { openSourceCredentials, type PipelineConfig, type ProjectRow } from "../projects/projects.ts";
import { plansForAutomaticTrigger } from "./automatic-builds.ts";
import { buildCreationStatements, refreshRunnersOf, runnersHolding } from "./builds.ts";

/** The file's schedules are read again at least this often (and at each push to the default branch). */
export const SCHEDULE_REREAD_S = 3600;
/** After downtime, only the most recent missed run within this window is made (docs/pipelines.md). */
export const MISSED_RUN_WINDOW_S = 3600;

/** One schedule, wherever it was written: the pipeline file on the default branch or a stored config. */
export interface ScheduleEntry {
  projectId: string;
  pipelineId: string;
  origin: "file" | "stored";
  cron: string;
  timezone: string;
  branch: string | null;
  /** Runs due at or before this moment are never made (a schedule does not fire for times before it existed). */
  since: number;
}

type Deps = Pick<AppDeps, "db" | "clock" | "config" | "secrets" | "git" | "jobSignal" | "log">;

function scheduleKey(s: Pick<ScheduleEntry, "cron" | "timezone" | "branch">): string {
  return `${s.cron}|${s.timezone}|${s.branch ?? ""}`;
}

/** The latest time the schedule was due at or before `now` (epoch seconds), else null. */
export function latestDue(s: Pick<ScheduleEntry, "cron" | "timezone">, now: number): number | null {
  const [previous] = new Cron(s.cron, { timezone: s.timezone, paused: true }).previousRuns(1, new Date((now + 1) * 1000));
  return previous ? Math.floor(previous.getTime() / 1000) : null;
}

/** The next time the schedule is due after `now` (epoch seconds), for the UI. */
export function nextDue(s: Pick<ScheduleEntry, "cron" | "timezone">, now: number): number | null {
  const next = new Cron(s.cron, { timezone: s.timezone, paused: true }).nextRun(new Date(now * 1000));
  return next ? Math.floor(next.getTime() / 1000) : null;
}

/**
 * Records what the pipeline file on the default branch says about schedules: a valid file replaces the project's
 * file schedules (rows of an unchanged schedule are kept, with their creation time); no file removes them; a file
 * that cannot be read or is invalid leaves them as they were.
 */
export async function refreshSchedulesFromRead(deps: Pick<AppDeps, "db" | "clock">, project: ProjectRow, read: ConfigRead): Promise<void> {
  const now = deps.clock.now();
  const stamp = deps.db.update(projects).set({ schedulesReadAt: now }).where(eq(projects.id, project.id));
  if (read.kind === "invalid" || read.kind === "unavailable") {
    await deps.db.batch([stamp]);
    return;
  }
  const wanted: Array<{ id: string; pipelineId: string; cron: string; timezone: string; branch: string | null }> = [];
  if (read.kind === "file") {
    const rows = await ensureFilePipelines(deps, project.id, new Map(Object.entries(read.file.pipelines)), read.commitSha, { remember: true });
    const add = (name: string, s: { cron: string; timezone?: string; branch?: string }) => {
      const row = rows.get(name) ?? [...rows].find(([n]) => n.toLowerCase() === name.toLowerCase())?.[1];
      if (!row) return;
      const entry = { pipelineId: row.id, cron: s.cron, timezone: s.timezone ?? "UTC", branch: s.branch ?? null };
      wanted.push({ id: `${row.id}|${scheduleKey(entry)}`, ...entry });
    };
    for (const s of read.file.schedules ?? []) add(s.pipeline, s);
    for (const [name, config] of Object.entries(read.file.pipelines)) for (const s of config.schedules ?? []) add(name, s);
  }
  const ids = JSON.stringify(wanted.map((w) => w.id));
  await deps.db.batch([
    deps.db.run(
      sql`DELETE FROM pipeline_schedules WHERE project_id = ${project.id} AND origin = 'file' AND id NOT IN (SELECT value FROM json_each(${ids}))`,
    ),
    ...wanted.map((w) =>
      deps.db.run(sql`INSERT OR IGNORE INTO pipeline_schedules (id, project_id, pipeline_id, origin, cron, timezone, branch, created_at, updated_at)
        VALUES (${w.id}, ${project.id}, ${w.pipelineId}, 'file', ${w.cron}, ${w.timezone}, ${w.branch}, ${now}, ${now})`),
    ),
    stamp,
  ]);
}

/** Reads the pipeline file at the default branch's head and records its pipelines and schedules. Git trouble is quiet. */
export async function refreshFromDefaultBranch(
  deps: Pick<AppDeps, "db" | "clock" | "config" | "secrets" | "git">,
  project: ProjectRow,
): Promise<ConfigRead | null> {
  if (project.configPath === null) {
    await refreshSchedulesFromRead(deps, project, { kind: "stored", configPath: null });
    return null;
  }
  try {
    await assertRepoAllowed(deps, project.repoUrl);
    const head = await resolveBranch(deps, project.repoUrl, project.defaultBranch, (await openSourceCredentials(deps, project)) ?? undefined);
    const read = await readPipelineConfig(deps, project, head);
    await refreshSchedulesFromRead(deps, project, read);
    return read;
  } catch {
    // Unreachable or refused: tried again in an hour (or at the next push), not at every maintenance pass.
    await deps.db.update(projects).set({ schedulesReadAt: deps.clock.now() }).where(eq(projects.id, project.id));
    return null;
  }
}

/** Every schedule of a project: the file's (as last read) and those of stored pipelines the file does not define. */
export async function projectSchedules(deps: Pick<AppDeps, "db">, projectId: string): Promise<ScheduleEntry[]> {
  const fileRows = await deps.db.select().from(pipelineSchedules).where(eq(pipelineSchedules.projectId, projectId));
  const stored = await deps.db
    .select()
    .from(pipelines)
    .where(and(eq(pipelines.projectId, projectId), isNull(pipelines.deletedAt), eq(pipelines.source, "stored"), isNull(pipelines.fileCommit)));
  return [
    ...fileRows.map((r) => ({
      projectId,
      pipelineId: r.pipelineId,
      origin: "file" as const,
      cron: r.cron,
      timezone: r.timezone,
      branch: r.branch,
      since: r.createdAt,
    })),
    ...stored.flatMap((p) =>
      ((p.config as PipelineConfig).schedules ?? []).map((s) => ({
        projectId,
        pipelineId: p.id,
        origin: "stored" as const,
        cron: s.cron,
        timezone: s.timezone ?? "UTC",
        branch: s.branch ?? null,
        since: p.updatedAt,
      })),
    ),
  ];
}

/**
 * One pass of the scheduler (run by the maintenance timer): re-reads stale files, then makes each schedule's most
 * recent due run if it is within the last hour and not made yet. The `schedule_runs` primary key is the claim:
 * daemons sharing the database race on one INSERT, and only the one that lands makes the build.
 */
export async function runSchedules(deps: Deps): Promise<{ made: number }> {
  const now = deps.clock.now();
  const live = await deps.db.select().from(projects).where(isNull(projects.deletedAt));
  let made = 0;
  for (const project of live) {
    if (project.configPath !== null && (project.schedulesReadAt === null || project.schedulesReadAt <= now - SCHEDULE_REREAD_S)) {
      await refreshFromDefaultBranch(deps, project);
    }
    for (const schedule of await projectSchedules(deps, project.id)) {
      const due = latestDue(schedule, now);
      if (due === null || due <= now - MISSED_RUN_WINDOW_S || due <= schedule.since) continue;
      const [claim] = await deps.db.batch([
        deps.db.run(sql`INSERT OR IGNORE INTO schedule_runs (project_id, pipeline_id, schedule_key, due_at, created_at)
          VALUES (${project.id}, ${schedule.pipelineId}, ${scheduleKey(schedule)}, ${due}, ${now})`),
      ]);
      if (claim.rowsAffected !== 1) continue;
      try {
        if (await makeScheduledBuild(deps, project, schedule, due)) made++;
      } catch (err) {
        deps.log({
          time: new Date().toISOString(),
          level: "error",
          msg: "scheduled build failed",
          project_id: project.id,
          error: describeError(err),
        });
      }
    }
  }
  return { made };
}

async function makeScheduledBuild(deps: Deps, project: ProjectRow, schedule: ScheduleEntry, due: number): Promise<boolean> {
  const pipeline = await deps.db
    .select()
    .from(pipelines)
    .where(and(eq(pipelines.id, schedule.pipelineId), isNull(pipelines.deletedAt)))
    .get();
  if (!pipeline) return false;
  const branch = schedule.branch ?? project.defaultBranch;
  await assertRepoAllowed(deps, project.repoUrl);
  const commitSha = await resolveBranch(deps, project.repoUrl, branch, (await openSourceCredentials(deps, project)) ?? undefined);
  const read = await readPipelineConfig(deps, project, commitSha);
  const plans = await plansForAutomaticTrigger(deps, project, read, {
    triggerType: "schedule",
    triggerActor: null,
    triggerEvent: "schedule",
    triggerRef: `refs/heads/${branch}`,
    commitSha,
    branch,
    fromFork: false,
    wants: (name) => name.toLowerCase() === pipeline.name.toLowerCase(),
    atDefaultHead: false,
  });
  const plan = plans.find((p) => p.pipeline.id === pipeline.id) ?? plans[0];
  if (!plan) return false;
  const id = crypto.randomUUID();
  const now = deps.clock.now();
  const holding = plan.config.cancel_previous ? await runnersHolding(deps, plan.pipeline.id, branch) : [];
  const [first, ...rest] = buildCreationStatements(deps, plan, id, now);
  await deps.db.batch([
    first!,
    ...rest,
    deps.db.run(sql`UPDATE schedule_runs SET build_id = ${id} WHERE pipeline_id = ${schedule.pipelineId}
      AND schedule_key = ${scheduleKey(schedule)} AND due_at = ${due} AND EXISTS (SELECT 1 FROM builds WHERE id = ${id})`),
  ]);
  await refreshRunnersOf(deps, holding);
  deps.jobSignal.notify();
  return true;
}

/** For the UI: each schedule of the project with its pipeline and next run. */
export async function schedulesWithNextRun(deps: Pick<AppDeps, "db" | "clock">, projectId: string) {
  const now = deps.clock.now();
  return (await projectSchedules(deps, projectId)).map((s) => ({ ...s, nextRunAt: nextDue(s, now) }));
}
