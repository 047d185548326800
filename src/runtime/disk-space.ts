import { statfs } from "node:fs/promises";

/** Free (available to this user) and total bytes of the file system holding `path` (AppDeps.diskSpace). */
export async function nodeDiskSpace(path: string): Promise<{ freeBytes: number; totalBytes: number }> {
  const s = await statfs(path);
  return { freeBytes: s.bavail * s.bsize, totalBytes: s.blocks * s.bsize };
}
