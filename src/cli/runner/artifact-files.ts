// The files a pipeline's artifact globs (`build/**/*.apk`, `out/*.{ipa,zip}`) name, relative to the checkout.
// Matching is the daemon's linear-time matcher (src/domain/common/glob.ts, docs/api.md §9): the pipeline author and
// the repository control both the glob and the paths, so a backtracking matcher could stall the runner.
import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";
import { compileGlob, type Glob } from "../../domain/common/glob.ts";

const SPECIAL = /[*?[{\\]/;

function normalizeGlob(glob: string): string {
  return glob.trim().replace(/^(\.\/)+/, "");
}

/** A glob that could reach outside the checkout is refused rather than resolved. */
export function isSafeGlob(glob: string): boolean {
  const g = normalizeGlob(glob);
  return g.length > 0 && !g.startsWith("/") && !g.split("/").includes("..");
}

/** The compiled artifact glob (leading `./` dropped), or null for one outside the checkout or too large to use. */
export function compileArtifactGlob(glob: string): Glob | null {
  if (!isSafeGlob(glob)) return null;
  try {
    return compileGlob(normalizeGlob(glob));
  } catch {
    // RangeError: longer than 4096 characters or more than 256 brace alternatives.
    return null;
  }
}

export interface MatchedFiles {
  files: string[];
  /** Globs that were not used: outside the checkout, or too long / too many alternatives. */
  refused: string[];
}

/**
 * Regular files under `root` matching any glob, as paths relative to root, sorted. Walks only below each glob's
 * literal prefix, skips `.git` and never follows symbolic links (a link could point outside the checkout).
 */
export async function matchFiles(root: string, globs: string[]): Promise<MatchedFiles> {
  const found = new Set<string>();
  const refused: string[] = [];
  for (const raw of globs) {
    const compiled = compileArtifactGlob(raw);
    if (!compiled) {
      refused.push(raw);
      continue;
    }
    const segments = compiled.source.split("/");
    const literal: string[] = [];
    while (segments.length > 1 && !SPECIAL.test(segments[0]!)) literal.push(segments.shift()!);
    if (segments.length === 1 && !SPECIAL.test(segments[0]!)) {
      // No wildcard at all: one exact path.
      const rel = [...literal, segments[0]!].join("/");
      const st = await lstat(join(root, rel)).catch(() => null);
      if (st?.isFile()) found.add(rel);
      continue;
    }
    await walk(root, literal.join("/"), (rel) => {
      if (compiled.test(rel)) found.add(rel);
    });
  }
  return { files: [...found].sort(), refused };
}

async function walk(root: string, rel: string, visit: (rel: string) => void): Promise<void> {
  const entries = await readdir(join(root, rel), { withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    const childRel = rel ? `${rel}/${entry.name}` : entry.name;
    if (entry.isDirectory()) {
      if (entry.name === ".git") continue;
      await walk(root, childRel, visit);
    } else if (entry.isFile()) visit(childRel);
  }
}
