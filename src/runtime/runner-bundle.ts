// The Node host's side of GET /runner/hangar-runner.mjs: the file `npm install` builds into dist/ (the prepare
// script, scripts/build.mjs) read from disk, so the core never touches node:fs (it must bundle for Workers).
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { RunnerBundle } from "../deps.ts";

/**
 * This installation's root: the nearest directory above this module with hangar's package.json. The module runs
 * from src/runtime/ (through tsx), from dist/ (the CLI bundle, dist/hangar.cjs), or from an embedder's
 * node_modules/hangar/dist/.
 */
export function hangarPackageRoot(from = fileURLToPath(import.meta.url)): string | undefined {
  let dir = dirname(from);
  for (let i = 0; i < 5; i++) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name?: unknown };
      if (pkg.name === "hangar") return dir;
    } catch {
      // no (readable) package.json here: go up
    }
    const up = dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  return undefined;
}

/** Where the prepare script writes the standalone runner. */
export function defaultRunnerBundlePath(): string | undefined {
  const root = hangarPackageRoot();
  return root === undefined ? undefined : join(root, "dist", "hangar-runner.mjs");
}

/**
 * Reads the bundle at `path` (null while it is not there), re-reading only when its size, modification time or
 * inode changed: a rebuild (written whole and renamed into place) is served at once, and an unchanged file
 * costs one stat() per request instead of a read and a hash of ~800 KB.
 */
export function nodeRunnerBundle(path = defaultRunnerBundlePath()): () => Promise<RunnerBundle | null> {
  let cached: { key: string; bundle: RunnerBundle } | undefined;
  return async () => {
    if (path === undefined) return null;
    const st = await stat(path).catch(() => null);
    if (!st?.isFile()) return null;
    const key = `${st.ino}:${st.size}:${st.mtimeMs}`;
    if (cached?.key === key) return cached.bundle;
    let file: Buffer;
    try {
      file = await readFile(path);
    } catch {
      return null; // removed between the stat and the read
    }
    // A copy in an ArrayBuffer of its own (Node's Buffer may sit in a shared pool).
    const bytes = new Uint8Array(file.byteLength);
    bytes.set(file);
    const etag = `"${createHash("sha256").update(bytes).digest("base64url").slice(0, 32)}"`;
    const bundle = { bytes, etag, modifiedAt: Math.floor(st.mtimeMs / 1000) };
    cached = { key, bundle };
    return bundle;
  };
}
