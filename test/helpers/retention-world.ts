// Final builds with real artifacts (uploaded through the runner API) and real logs, for the retention tests.
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { builds, pipelines, projects } from "../../src/db/schema/index.ts";
import type { BuildStatus } from "../../src/db/schema/constants.ts";
import type { TestApp } from "./app.ts";
import { insertRunner, uploadArtifact, type Runner } from "./artifact-world.ts";
import { appendLog } from "./builds.ts";
import { completeLocalSetup } from "./factories.ts";

export const DAY = 86_400;

/** A world of final builds with real artifacts (uploaded through the runner API) and real logs. */
export interface World {
  ownerToken: string;
  ownerId: string;
  runner: Runner;
  projectId: string;
  pipelineIds: string[];
}

export async function makeWorld(t: TestApp): Promise<World> {
  const { ownerToken, owner } = await completeLocalSetup(t);
  const runner = await insertRunner(t, owner.id);
  const projectId = await insertProject(t);
  const pipelineIds = [await insertPipeline(t, projectId, "ios"), await insertPipeline(t, projectId, "android")];
  return { ownerToken, ownerId: owner.id, runner, projectId, pipelineIds };
}

export async function insertProject(t: TestApp): Promise<string> {
  const id = crypto.randomUUID();
  const now = t.clock.now();
  await t.deps.db
    .insert(projects)
    .values({ id, name: `app-${id.slice(0, 6)}`, repoUrl: "https://git.example.com/app.git", defaultBranch: "main", createdAt: now, updatedAt: now });
  return id;
}

export async function insertPipeline(t: TestApp, projectId: string, name: string): Promise<string> {
  const id = crypto.randomUUID();
  const now = t.clock.now();
  await t.deps.db
    .insert(pipelines)
    .values({ id, projectId, name, config: { platform: "any", steps: [{ name: "b", run: "true" }] }, createdAt: now, updatedAt: now });
  return id;
}

let buildNumber = 0;

/** A build number no other build of these tests has. */
export const nextBuildNumber = () => ++buildNumber;

/**
 * A build on `branch` that ran on the world's runner, uploaded `files` artifacts and `log` text through the runner
 * API, then ended `status` at `finishedAt` (the clock is moved there and back).
 */
export async function madeBuild(
  t: TestApp,
  w: World,
  o: {
    pipelineId?: string;
    projectId?: string;
    branch?: string;
    finishedAt: number;
    status?: BuildStatus;
    files?: number;
    log?: string;
    size?: number;
  },
): Promise<{ id: string; artifactIds: string[] }> {
  const id = crypto.randomUUID();
  const now = t.clock.now();
  await t.deps.db.insert(builds).values({
    id,
    projectId: o.projectId ?? w.projectId,
    pipelineId: o.pipelineId ?? w.pipelineIds[0]!,
    buildNumber: ++buildNumber,
    status: "running",
    platform: "any",
    triggerType: "manual",
    commitSha: "0123456789abcdef0123456789abcdef01234567",
    branch: o.branch ?? "main",
    configSnapshot: { platform: "any", steps: [{ name: "build", run: "true" }] },
    timeoutS: 3600,
    runnerId: w.runner.id,
    stepResults: [{ name: "build", status: "succeeded", exit_code: 0 }],
    queuedAt: now,
    startedAt: now,
    createdAt: now,
    updatedAt: now,
  });
  const jobPath = `/v1/runners/${w.runner.id}/jobs/${id}/artifacts`;
  const artifactIds: string[] = [];
  for (let i = 0; i < (o.files ?? 1); i++) {
    const bytes = new Uint8Array(o.size ?? 1000 + i).fill(7);
    const a = await uploadArtifact(
      t,
      { ownerToken: w.ownerToken, projectId: w.projectId, pipelineId: o.pipelineId ?? w.pipelineIds[0]!, runner: w.runner, buildId: id, jobPath },
      `app-${i}.apk`,
      bytes,
    );
    artifactIds.push(a.id);
  }
  if (o.log !== undefined) {
    const r = await appendLog(t, w.runner, id, 0, o.log);
    if (r.status !== 200) throw new Error(`log: ${r.status} ${r.text}`);
  }
  const status = o.status ?? "succeeded";
  const final = !["queued", "scheduled", "assigned", "running"].includes(status);
  await t.deps.db
    .update(builds)
    .set({ status, finishedAt: final ? o.finishedAt : null, updatedAt: o.finishedAt })
    .where(eq(builds.id, id));
  return { id, artifactIds };
}

export function artifactFile(t: TestApp, buildId: string, artifactId: string): string {
  return join(t.dataDir, "artifacts", buildId, artifactId);
}
