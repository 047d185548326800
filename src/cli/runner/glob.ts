// The artifact globs of a pipeline (`build/**/*.apk`, `out/*.{ipa,zip}`), matched against paths relative to the
// checkout. Node 20 has no fs.glob, and this small subset is all a pipeline needs.
import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";

const SPECIAL = /[*?[{]/;

function escapeRegExp(s: string): string {
  return s.replace(/[.+^$()|\\\]]/g, "\\$&");
}

/** Regular-expression source for one glob: `**` spans directories, `*` and `?` stay within one. */
function translate(glob: string): string {
  let re = "";
  for (let i = 0; i < glob.length; ) {
    const c = glob[i]!;
    if (c === "*") {
      if (glob[i + 1] === "*") {
        i += 2;
        if (glob[i] === "/") {
          re += "(?:.*/)?";
          i++;
        } else re += ".*";
      } else {
        re += "[^/]*";
        i++;
      }
    } else if (c === "?") {
      re += "[^/]";
      i++;
    } else if (c === "[" && glob.indexOf("]", i + 2) > 0) {
      const end = glob.indexOf("]", i + 2);
      let cls = glob.slice(i + 1, end).replace(/\\/g, "\\\\");
      if (cls.startsWith("!")) cls = `^${cls.slice(1)}`;
      re += `[${cls}]`;
      i = end + 1;
    } else if (c === "{" && glob.indexOf("}", i) > 0) {
      const end = glob.indexOf("}", i);
      re += `(?:${glob.slice(i + 1, end).split(",").map(translate).join("|")})`;
      i = end + 1;
    } else {
      re += escapeRegExp(c);
      i++;
    }
  }
  return re;
}

export function globToRegExp(glob: string): RegExp {
  return new RegExp(`^${translate(normalizeGlob(glob))}$`);
}

function normalizeGlob(glob: string): string {
  return glob.trim().replace(/^(\.\/)+/, "");
}

/** A glob that could reach outside the checkout is refused rather than resolved. */
export function isSafeGlob(glob: string): boolean {
  const g = normalizeGlob(glob);
  return g.length > 0 && !g.startsWith("/") && !g.split("/").includes("..");
}

/**
 * Regular files under `root` matching any glob, as paths relative to root, sorted. Walks only below each glob's
 * literal prefix, skips `.git` and never follows symbolic links (a link could point outside the checkout).
 */
export async function matchFiles(root: string, globs: string[]): Promise<string[]> {
  const found = new Set<string>();
  for (const glob of globs.filter(isSafeGlob).map(normalizeGlob)) {
    const re = globToRegExp(glob);
    const segments = glob.split("/");
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
      if (re.test(rel)) found.add(rel);
    });
  }
  return [...found].sort();
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
