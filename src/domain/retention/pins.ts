import { eq } from "drizzle-orm";
import { builds } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { auditStatement } from "../common/audit.ts";
import type { UserRow } from "../auth/users.ts";
import { getBuild, type BuildRow } from "../builds/builds.ts";

/**
 * POST/DELETE /v1/builds/{id}/pin: a pinned build keeps its artifacts and log whatever the retention policies say.
 * A pass deleting concurrently re-checks `pinned` in the statement that deletes, so a pin that lands first wins.
 */
export async function setBuildPinned(deps: Pick<AppDeps, "db" | "clock">, actor: UserRow, buildId: string, pinned: boolean): Promise<BuildRow> {
  const build = await getBuild(deps, buildId);
  if (build.pinned === pinned) return build;
  const [rows] = await deps.db.batch([
    deps.db.update(builds).set({ pinned }).where(eq(builds.id, build.id)).returning(),
    auditStatement(deps, { action: pinned ? "build.pinned" : "build.unpinned", actor, targetType: "build", targetId: build.id }),
  ]);
  return rows[0] ?? build;
}
