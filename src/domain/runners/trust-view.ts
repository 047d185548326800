// What the Runners and project pages say about trust (docs/runner-isolation.md): which runners take which builds,
// and what is missing for a project's builds to start.
import { and, asc, eq, isNull } from "drizzle-orm";
import { pipelines, projects, projectSecrets, runners, webhooks } from "../../db/schema/index.ts";
import type { BuildTrust, RunnerTrust } from "../../db/schema/constants.ts";
import type { AppDeps } from "../../deps.ts";
import { effectiveTriggers } from "../events/triggers.ts";
import type { PipelineConfig } from "../projects/projects.ts";

/** The builds a runner of this trust takes, as the claim matches them. */
export const TAKES: Record<RunnerTrust, readonly BuildTrust[]> = {
  protected: ["protected", "open"],
  open: ["open", "fork"],
};

export interface RunnerByTrust {
  id: string;
  name: string | null;
  status: string;
}

export interface ProjectRunnersView {
  /** Signing material or a secret variable is set: builds of protected refs are `protected` builds. */
  holdsCredentials: boolean;
  protectedRunners: RunnerByTrust[];
  openRunners: RunnerByTrust[];
  /** A webhook of the project feeds a pipeline that builds pull requests, fork ones included. */
  receivesPullRequests: boolean;
}

/** The project page's "Runners for these builds": read by domain queries, rendered by the page. */
export async function projectRunnersView(deps: Pick<AppDeps, "db">, projectId: string): Promise<ProjectRunnersView> {
  const [project, secret, all, hook, projectPipelines] = await Promise.all([
    deps.db
      .select({ android: projects.androidSigningSealed, ios: projects.iosSigningSealed, defaultBranch: projects.defaultBranch })
      .from(projects)
      .where(eq(projects.id, projectId))
      .get(),
    deps.db.select({ name: projectSecrets.name }).from(projectSecrets).where(eq(projectSecrets.projectId, projectId)).limit(1).get(),
    deps.db
      .select({ id: runners.id, name: runners.name, status: runners.status, trust: runners.trust })
      .from(runners)
      .orderBy(asc(runners.createdAt), asc(runners.id)),
    deps.db.select({ id: webhooks.id }).from(webhooks).where(eq(webhooks.projectId, projectId)).limit(1).get(),
    deps.db
      .select({ config: pipelines.config })
      .from(pipelines)
      .where(and(eq(pipelines.projectId, projectId), isNull(pipelines.deletedAt))),
  ]);
  const defaultBranch = project?.defaultBranch ?? "main";
  const buildsPulls = projectPipelines.some((p) =>
    effectiveTriggers(p.config as PipelineConfig, defaultBranch).some((t) => t.event === "pull_request"),
  );
  const pick = (trust: RunnerTrust) => all.filter((r) => r.trust === trust).map(({ id, name, status }) => ({ id, name, status }));
  return {
    holdsCredentials: project !== undefined && (project.android !== null || project.ios !== null || secret !== undefined),
    protectedRunners: pick("protected"),
    openRunners: pick("open"),
    receivesPullRequests: hook !== undefined && buildsPulls,
  };
}
