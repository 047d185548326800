// The runner's work root (docs/api.md §9): private to the runner's user, and cleaned of whatever a crash left behind
// (job directories with checkouts and signing files, processes of the job that was running) when it starts.
import { writeFileSync } from "node:fs";
import { chmod, lstat, mkdir, readdir, readFile, rm } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import type { Logger } from "./log.ts";
import { sweepJobProcesses } from "./sweep.ts";

/** Job directories are `build-<number>-<random>`; nothing else in the work root is the runner's to delete. */
export const JOB_DIR_PREFIX = "build-";
/** Spare repositories made between jobs (checkout.ts); removed at start like job directories, but not counted. */
export const SPARE_REPO_PREFIX = "spare-repo-";
/** The cookie of the job running now, so a restart after a crash can sweep its processes. */
const ACTIVE_JOB_FILE = "active-job";

/** A private directory of the runner's user: `~/.hangar-runner/<runner id>` (not a shared, guessable /tmp path). */
export function defaultWorkRoot(runnerId: string): string {
  return join(homedir(), ".hangar-runner", runnerId.replace(/[^\w.-]/g, "_"));
}

export class WorkRootError extends Error {}

/**
 * Creates the work root (0700) or checks an existing one: a real directory (not a symbolic link) owned by the
 * runner's user. Its mode is set to 0700, or 0711 when steps run as another user (they need to traverse it to
 * reach their own job directory, never to list it).
 */
export async function prepareWorkRoot(dir: string, options: { runAs?: boolean } = {}): Promise<void> {
  const mode = options.runAs ? 0o711 : 0o700;
  // The parents are the user's to choose; only the last component is made private here.
  await mkdir(dir, { recursive: true, mode });
  const info = await lstat(dir);
  if (!info.isDirectory() || info.isSymbolicLink()) throw new WorkRootError(`${dir} is not a directory`);
  const uid = process.getuid?.();
  if (uid !== undefined && info.uid !== uid) {
    throw new WorkRootError(`${dir} belongs to another user (uid ${info.uid}); the work root must be the runner's own`);
  }
  if ((info.mode & 0o777) !== mode) await chmod(dir, mode);
}

/**
 * Removes what an earlier run left: every job directory (checkouts, `secrets/` with signing files) and, when the
 * runner died mid-job, the processes carrying that job's cookie.
 */
export async function cleanWorkRoot(dir: string, log: Logger, uids: ReadonlySet<number>): Promise<void> {
  const cookie = await readFile(join(dir, ACTIVE_JOB_FILE), "utf8").catch(() => null);
  if (cookie && /^[0-9a-f]{32}$/.test(cookie.trim())) {
    const swept = await sweepJobProcesses(cookie.trim(), uids);
    if (swept.killed > 0) log.warn(`ended ${swept.killed} process(es) left running by the job of an earlier run`);
  }
  await rm(join(dir, ACTIVE_JOB_FILE), { force: true });
  const entries = await readdir(dir).catch(() => [] as string[]);
  let removed = 0;
  for (const name of entries) {
    if (name.startsWith(SPARE_REPO_PREFIX)) await rm(join(dir, name), { recursive: true, force: true });
    if (!name.startsWith(JOB_DIR_PREFIX)) continue;
    await rm(join(dir, name), { recursive: true, force: true });
    removed++;
  }
  if (removed > 0) log.warn(`removed ${removed} job director${removed === 1 ? "y" : "ies"} (and any signing files) left by an earlier run`);
}

/** Synchronous: it is on every job's way to its first step (docs/benchmarks.md, the runner's overhead). */
export function markActiveJob(dir: string, cookie: string): void {
  writeFileSync(join(dir, ACTIVE_JOB_FILE), cookie, { mode: 0o600 });
}

export async function clearActiveJob(dir: string): Promise<void> {
  await rm(join(dir, ACTIVE_JOB_FILE), { force: true });
}
