// Disk care (docs/api.md §16, docs/caches.md): the free bytes of the file system holding the work root, sent with
// every heartbeat. Below --min-free-gb the runner first evicts cache entries, then stops claiming (still online,
// still heartbeating, `low_disk: true`) until space is back.
import { statfs } from "node:fs/promises";
import type { CacheStore } from "./cache-store.ts";
import type { DiskReport } from "../../protocol/runner.ts";
import type { Logger } from "./log.ts";

export const GIB = 2 ** 30;

export class DiskCare {
  private low = false;

  constructor(
    private readonly dir: string,
    private readonly minFreeBytes: number,
    private readonly store: CacheStore | null,
    private readonly log: Logger,
  ) {}

  private async freeBytes(): Promise<number> {
    const fs = await statfs(this.dir);
    // bavail: what an unprivileged user may still write (root's reserve left out).
    return Number(fs.bavail) * Number(fs.bsize);
  }

  /** Measures, evicts cache entries when below the floor, and answers what the heartbeat reports. */
  async check(): Promise<DiskReport | null> {
    let free: number;
    try {
      free = await this.freeBytes();
    } catch (err) {
      this.log.warn(`free disk space of ${this.dir} unknown: ${(err as Error).message}`);
      return null;
    }
    if (free < this.minFreeBytes && this.store) {
      const total = await this.store.totalBytes();
      const freed = total > 0 ? await this.store.evict(Math.max(0, total - (this.minFreeBytes - free))) : 0;
      if (freed > 0) {
        this.log.warn(`low disk: evicted ${(freed / GIB).toFixed(2)} GiB of cache entries`);
        free = await this.freeBytes().catch(() => free);
      }
    }
    const low = free < this.minFreeBytes;
    if (low !== this.low) {
      if (low)
        this.log.warn(
          `low disk: ${(free / GIB).toFixed(2)} GiB free under ${this.dir}, below --min-free-gb ${(this.minFreeBytes / GIB).toFixed(2)}: no new jobs until space is back`,
        );
      else this.log.info(`disk space is back (${(free / GIB).toFixed(2)} GiB free): claiming jobs again`);
      this.low = low;
    }
    return { free_disk_bytes: free, low_disk: low };
  }
}
