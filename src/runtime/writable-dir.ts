import { randomUUID } from "node:crypto";
import { mkdir, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";

/**
 * Whether `path` is a directory this process can write to, creating it first when missing (the local store
 * would create it on the first upload anyway). Writes and removes a probe file rather than trusting mode bits:
 * ACLs, read-only mounts and root all make `access(W_OK)` unreliable.
 */
export async function checkWritableDir(path: string): Promise<boolean> {
  try {
    await mkdir(path, { recursive: true });
    if (!(await stat(path)).isDirectory()) return false;
    const probe = join(path, `.hangar-write-probe-${randomUUID()}`);
    await writeFile(probe, "", { flag: "wx" });
    await rm(probe, { force: true });
    return true;
  } catch {
    return false;
  }
}
