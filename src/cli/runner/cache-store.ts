// The runner-local cache store (docs/caches.md): one tar archive per entry, per project and trust class, capped in
// bytes with least-recently-used eviction. An entry is `<sha256(key)>.tar` plus `<sha256(key)>.json` (its key, size
// and checksum); both are written to a temporary file first and renamed into place, the archive first, so a runner
// killed at any moment leaves either a whole entry or none (a lone archive is never read and is swept away).
import { createHash, randomBytes } from "node:crypto";
import { mkdir, readdir, readFile, rename, rm, stat, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";

export interface StoredEntry {
  key: string;
  file: string;
  size_bytes: number;
  sha256: string;
}

interface EntryMeta {
  key: string;
  size_bytes: number;
  sha256: string;
  created_at: number;
}

const TMP_DIR = "tmp";
/** A temporary file older than this belongs to a runner that died while writing it. */
const STALE_TMP_MS = 6 * 3600_000;

function keyName(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

/** A directory name for a project and trust class (ids are the daemon's; anything odd is replaced). */
export function scopeDir(projectId: string, trust: "protected" | "open"): string {
  return join(projectId.replace(/[^\w.-]/g, "_") || "_", trust);
}

export class CacheStore {
  constructor(
    readonly dir: string,
    readonly maxBytes: number,
  ) {}

  /** A fresh temporary path in the store's own directory (same file system: the final rename is atomic). */
  async tempFile(): Promise<string> {
    await mkdir(join(this.dir, TMP_DIR), { recursive: true, mode: 0o700 });
    return join(this.dir, TMP_DIR, `${Date.now()}-${randomBytes(8).toString("hex")}.part`);
  }

  private async metaOf(scope: string, name: string): Promise<EntryMeta | null> {
    try {
      const meta = JSON.parse(await readFile(join(this.dir, scope, `${name}.json`), "utf8")) as EntryMeta;
      const info = await stat(join(this.dir, scope, `${name}.tar`));
      // A size that does not match is a damaged entry: never restored.
      return typeof meta.key === "string" && info.size === meta.size_bytes ? meta : null;
    } catch {
      return null;
    }
  }

  /** The exact key's entry, else the newest whose key starts with one of `restoreKeys`, in order. */
  async find(scope: string, key: string, restoreKeys: string[]): Promise<StoredEntry | null> {
    const exact = await this.metaOf(scope, keyName(key));
    if (exact && exact.key === key) return this.use(scope, keyName(key), exact);
    if (restoreKeys.length === 0) return null;
    const names = (await readdir(join(this.dir, scope)).catch(() => [] as string[])).filter((n) => n.endsWith(".json"));
    const metas: Array<{ name: string; meta: EntryMeta }> = [];
    for (const file of names) {
      const name = file.slice(0, -".json".length);
      const meta = await this.metaOf(scope, name);
      if (meta) metas.push({ name, meta });
    }
    for (const prefix of restoreKeys) {
      const best = metas.filter((m) => m.meta.key.startsWith(prefix)).sort((a, b) => b.meta.created_at - a.meta.created_at)[0];
      if (best) return this.use(scope, best.name, best.meta);
    }
    return null;
  }

  /** Marks an entry used now (its meta file's time is the LRU clock) and answers it. */
  private async use(scope: string, name: string, meta: EntryMeta): Promise<StoredEntry> {
    const now = new Date();
    await utimes(join(this.dir, scope, `${name}.json`), now, now).catch(() => undefined);
    return { key: meta.key, file: join(this.dir, scope, `${name}.tar`), size_bytes: meta.size_bytes, sha256: meta.sha256 };
  }

  /** Moves a finished archive (a `tempFile()`) into the store under `key`, then evicts down to the cap. */
  async put(scope: string, key: string, archive: string, sizeBytes: number, sha256: string): Promise<void> {
    const name = keyName(key);
    await mkdir(join(this.dir, scope), { recursive: true, mode: 0o700 });
    const meta: EntryMeta = { key, size_bytes: sizeBytes, sha256, created_at: Date.now() };
    const metaTmp = await this.tempFile();
    await writeFile(metaTmp, JSON.stringify(meta), { mode: 0o600 });
    // The old meta goes first: between the two renames the entry is absent, never an old meta over a new archive.
    await rm(join(this.dir, scope, `${name}.json`), { force: true });
    await rename(archive, join(this.dir, scope, `${name}.tar`));
    await rename(metaTmp, join(this.dir, scope, `${name}.json`));
    await this.evict(this.maxBytes);
  }

  /** Every whole entry of the store, least recently used first. */
  private async entries(): Promise<Array<{ scope: string; name: string; size: number; usedAt: number }>> {
    const out: Array<{ scope: string; name: string; size: number; usedAt: number }> = [];
    for (const project of await readdir(this.dir).catch(() => [] as string[])) {
      if (project === TMP_DIR) continue;
      for (const trust of await readdir(join(this.dir, project)).catch(() => [] as string[])) {
        const scope = join(project, trust);
        const files = await readdir(join(this.dir, scope)).catch(() => [] as string[]);
        const metas = new Set(files.filter((f) => f.endsWith(".json")).map((f) => f.slice(0, -5)));
        for (const file of files) {
          if (!file.endsWith(".tar")) continue;
          const name = file.slice(0, -4);
          const tar = await stat(join(this.dir, scope, file)).catch(() => null);
          if (!tar) continue;
          const meta = metas.has(name) ? await stat(join(this.dir, scope, `${name}.json`)).catch(() => null) : null;
          // An archive without its meta is the trace of an interrupted write or eviction: first to go.
          out.push({ scope, name, size: tar.size, usedAt: meta ? meta.mtimeMs : 0 });
        }
      }
    }
    return out.sort((a, b) => a.usedAt - b.usedAt);
  }

  async totalBytes(): Promise<number> {
    return (await this.entries()).reduce((sum, e) => sum + e.size, 0);
  }

  /** Removes least recently used entries until the store holds at most `targetBytes`; answers the bytes freed. */
  async evict(targetBytes: number): Promise<number> {
    await this.sweepTemp();
    const entries = await this.entries();
    let total = entries.reduce((sum, e) => sum + e.size, 0);
    let freed = 0;
    for (const entry of entries) {
      if (total <= targetBytes) break;
      // The meta first: an archive without it is never restored.
      await rm(join(this.dir, entry.scope, `${entry.name}.json`), { force: true });
      await rm(join(this.dir, entry.scope, `${entry.name}.tar`), { force: true });
      total -= entry.size;
      freed += entry.size;
    }
    return freed;
  }

  /** Temporary files a killed runner left (older than a few hours: another runner sharing the store may be writing). */
  private async sweepTemp(): Promise<void> {
    const dir = join(this.dir, TMP_DIR);
    for (const name of await readdir(dir).catch(() => [] as string[])) {
      const info = await stat(join(dir, name)).catch(() => null);
      if (info && Date.now() - info.mtimeMs > STALE_TMP_MS) await rm(join(dir, name), { force: true });
    }
  }
}
