// Disk use (docs/decisions.md, Retention): the data directory's file system, the database, artifacts and logs.
import { sql } from "drizzle-orm";
import type { AppDeps } from "../../deps.ts";

/** Below this share of free space the UI shows a banner and the preflight's free-space check fails. */
export const LOW_FREE_SPACE_RATIO = 0.1;

export interface DataDirSpace {
  free_bytes: number;
  total_bytes: number;
}

/** The data directory's file system, or null where the host cannot tell (Workers: no data directory). */
export async function dataDirSpace(deps: Pick<AppDeps, "config" | "diskSpace">): Promise<DataDirSpace | null> {
  if (!deps.diskSpace) return null;
  const s = await deps.diskSpace(deps.config.dataDir);
  return { free_bytes: s.freeBytes, total_bytes: s.totalBytes };
}

export function isLowOnSpace(space: DataDirSpace | null): boolean {
  return space !== null && space.total_bytes > 0 && space.free_bytes / space.total_bytes < LOW_FREE_SPACE_RATIO;
}

export interface DiskUsage {
  data_dir: DataDirSpace | null;
  database_bytes: number;
  artifacts_bytes: number;
  logs_bytes: number;
  projects: Array<{ project_id: string; artifacts_bytes: number; logs_bytes: number }>;
}

/**
 * GET /v1/settings/disk. Artifacts count the stored bytes of available ones (and of expired ones whose removal is
 * still owed); logs the stored chunks; the database its pages (deleted logs free pages that SQLite reuses).
 */
export async function diskUsage(deps: Pick<AppDeps, "db" | "config" | "diskSpace">): Promise<DiskUsage> {
  const [database] = await deps.db.all<{ bytes: number }>(sql`SELECT page_count * page_size AS bytes FROM pragma_page_count(), pragma_page_size()`);
  const artifactRows = await deps.db.all<{ project_id: string; bytes: number }>(sql`
    SELECT b.project_id, SUM(a.size_bytes) AS bytes FROM artifacts a JOIN builds b ON b.id = a.build_id
    WHERE a.status = 'available' OR (a.status = 'expired' AND a.storage_removed_at IS NULL)
    GROUP BY b.project_id`);
  const logRows = await deps.db.all<{ project_id: string; bytes: number }>(sql`
    SELECT b.project_id, SUM(length(c.content)) AS bytes FROM build_log_chunks c JOIN builds b ON b.id = c.build_id
    GROUP BY b.project_id`);
  const byProject = new Map<string, { project_id: string; artifacts_bytes: number; logs_bytes: number }>();
  const entry = (id: string) => {
    let e = byProject.get(id);
    if (!e) byProject.set(id, (e = { project_id: id, artifacts_bytes: 0, logs_bytes: 0 }));
    return e;
  };
  for (const r of artifactRows) entry(r.project_id).artifacts_bytes = Number(r.bytes);
  for (const r of logRows) entry(r.project_id).logs_bytes = Number(r.bytes);
  const projects = [...byProject.values()].sort(
    (a, b) => b.artifacts_bytes + b.logs_bytes - (a.artifacts_bytes + a.logs_bytes) || a.project_id.localeCompare(b.project_id),
  );
  return {
    data_dir: await dataDirSpace(deps),
    database_bytes: Number(database?.bytes ?? 0),
    artifacts_bytes: projects.reduce((n, p) => n + p.artifacts_bytes, 0),
    logs_bytes: projects.reduce((n, p) => n + p.logs_bytes, 0),
    projects,
  };
}
