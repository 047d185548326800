import { and, desc, eq, inArray } from "drizzle-orm";
import { builds, pipelineBadges } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { auditStatement } from "../common/audit.ts";
import { randomToken, sha256Hex } from "../common/crypto.ts";
import type { UserRow } from "../auth/users.ts";
import { getPipeline, getProject } from "./projects.ts";

export type BadgeStatus = "passing" | "failing" | "unknown";

/**
 * A new public badge URL for a pipeline (docs/pipelines.md): the token is shown once and only its hash is kept;
 * asking again replaces the earlier token (which then answers 404).
 */
export async function createBadge(
  deps: Pick<AppDeps, "db" | "clock">,
  actor: UserRow,
  projectId: string,
  pipelineId: string,
  base: string,
): Promise<{ url: string }> {
  await getProject(deps, projectId);
  await getPipeline(deps, projectId, pipelineId);
  const token = randomToken();
  const tokenHash = await sha256Hex(token);
  const now = deps.clock.now();
  await deps.db.batch([
    deps.db
      .insert(pipelineBadges)
      .values({ pipelineId, projectId, tokenHash, createdAt: now })
      .onConflictDoUpdate({ target: pipelineBadges.pipelineId, set: { tokenHash, createdAt: now } }),
    auditStatement(deps, {
      action: "pipeline.badge.create",
      actor,
      targetType: "pipeline",
      targetId: pipelineId,
      details: { project_id: projectId },
    }),
  ]);
  return { url: `${base}/badge/${token}.svg` };
}

export async function revokeBadge(deps: Pick<AppDeps, "db" | "clock">, actor: UserRow, projectId: string, pipelineId: string): Promise<void> {
  await getProject(deps, projectId);
  await getPipeline(deps, projectId, pipelineId, { includeDeleted: true });
  const [deleted] = await deps.db.batch([
    deps.db.delete(pipelineBadges).where(eq(pipelineBadges.pipelineId, pipelineId)),
    auditStatement(deps, {
      action: "pipeline.badge.revoke",
      actor,
      targetType: "pipeline",
      targetId: pipelineId,
      details: { project_id: projectId },
    }),
  ]);
  if (deleted.rowsAffected !== 1) throw new ApiError("not_found", "this pipeline has no badge");
}

/**
 * The badge's state for a branch (the project's default branch when none is given): the latest succeeded, failed
 * or timed-out build of that pipeline and branch; canceled and expired builds are skipped. 404 for an unknown token.
 */
export async function badgeStatus(
  deps: Pick<AppDeps, "db">,
  token: string,
  branch: string | undefined,
): Promise<{ status: BadgeStatus; label: string }> {
  const badge = await deps.db
    .select()
    .from(pipelineBadges)
    .where(eq(pipelineBadges.tokenHash, await sha256Hex(token)))
    .get();
  if (!badge) throw new ApiError("not_found", "no such badge");
  const project = await getProject(deps, badge.projectId).catch(() => null);
  const pipeline = await getPipeline(deps, badge.projectId, badge.pipelineId).catch(() => null);
  if (!project || !pipeline) throw new ApiError("not_found", "no such badge");
  const latest = await deps.db
    .select({ status: builds.status })
    .from(builds)
    .where(
      and(
        eq(builds.pipelineId, pipeline.id),
        eq(builds.branch, branch ?? project.defaultBranch),
        inArray(builds.status, ["succeeded", "failed", "timed_out"]),
      ),
    )
    .orderBy(desc(builds.buildNumber))
    .limit(1)
    .get();
  const status: BadgeStatus = !latest ? "unknown" : latest.status === "succeeded" ? "passing" : "failing";
  return { status, label: pipeline.name };
}

function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (ch) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;", "'": "&apos;" })[ch]!);
}

const COLORS: Record<BadgeStatus, string> = { passing: "#2e7d32", failing: "#c62828", unknown: "#757575" };

/** A flat two-part badge ("label | status"); widths estimated at 7 px per character of Verdana 11. */
export function badgeSvg(label: string, status: BadgeStatus): string {
  const shown = label.length > 40 ? `${label.slice(0, 39)}…` : label;
  const left = 10 + [...shown].length * 7;
  const right = 10 + status.length * 7;
  const width = left + right;
  const l = escapeXml(shown);
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="20" role="img" aria-label="${l}: ${status}">` +
    `<title>${l}: ${status}</title>` +
    `<rect width="${left}" height="20" fill="#555"/><rect x="${left}" width="${right}" height="20" fill="${COLORS[status]}"/>` +
    `<g fill="#fff" text-anchor="middle" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11">` +
    `<text x="${left / 2}" y="14">${l}</text><text x="${left + right / 2}" y="14">${status}</text></g></svg>`
  );
}
