// Persistent workspaces (docs/api.md §16, docs/caches.md): one directory per project, pipeline and trust class under
// the work root's `workspaces/`, reused by later builds, and a lock file beside it so no two jobs (of this runner or
// of another runner process sharing the root) ever work in it at once. A lock whose process is gone is taken over.
import { randomBytes } from "node:crypto";
import { link, mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { processAlive } from "./isolation.ts";

export const WORKSPACES_DIR = "workspaces";

/** The stable directory of a project's pipeline; open and fork builds never share one with protected builds. */
export function workspaceDir(workRoot: string, projectId: string, pipelineId: string, trust: "protected" | "open"): string {
  const safe = (s: string) => s.replace(/[^\w.-]/g, "_") || "_";
  return join(workRoot, WORKSPACES_DIR, `${safe(projectId)}-${safe(pipelineId)}-${trust}`);
}

/** Locks this process holds now: one of ours not in here was left by a job that ended without releasing it. */
const heldHere = new Set<string>();

/** Another process with this pid exists (this process's own locks are told apart by `heldHere`). */
function alive(pid: number): boolean {
  return pid !== process.pid && processAlive(pid);
}

/** The lock's holder as written: `<pid> <host>`; null when unreadable. */
async function holder(file: string): Promise<{ pid: number; host: string } | null> {
  const text = await readFile(file, "utf8").catch(() => null);
  const m = text ? /^(\d+) (.*)$/.exec(text.trim()) : null;
  return m ? { pid: Number(m[1]), host: m[2]! } : null;
}

export class WorkspaceLock {
  private constructor(readonly file: string) {}

  /**
   * Takes the lock of `dir` (`<dir>.lock`, made with O_EXCL); null when a live process holds it. A holder on this
   * host whose process is gone is stale: the lock is moved aside with one atomic rename (of two runners racing
   * for it, one wins), checked to be that same stale lock, and made anew.
   */
  static async acquire(dir: string): Promise<WorkspaceLock | null> {
    const file = `${dir}.lock`;
    await mkdir(join(dir, ".."), { recursive: true, mode: 0o700 });
    const mine = `${process.pid} ${hostname()}`;
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        await writeFile(file, mine, { flag: "wx", mode: 0o600 });
        heldHere.add(file);
        return new WorkspaceLock(file);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      }
      const held = await holder(file);
      if (heldHere.has(file)) return null;
      if (held && (held.host !== hostname() || alive(held.pid))) return null;
      // An empty lock is one being written right now, unless it is old (its writer died between create and write).
      const age = Date.now() - ((await stat(file).catch(() => null))?.mtimeMs ?? 0);
      if (!held && age < 10_000) return null;
      const aside = `${file}.${randomBytes(6).toString("hex")}`;
      try {
        await rename(file, aside);
      } catch {
        continue; // another runner moved it first
      }
      const moved = await holder(aside);
      if (moved && (moved.host !== hostname() || alive(moved.pid))) {
        // Between our read and the rename a live runner took the lock: give it back (link fails if taken again).
        await link(aside, file).catch(() => undefined);
        await rm(aside, { force: true });
        return null;
      }
      await rm(aside, { force: true });
    }
    return null;
  }

  async release(): Promise<void> {
    heldHere.delete(this.file);
    const held = await holder(this.file);
    if (held?.pid === process.pid) await rm(this.file, { force: true });
  }
}
