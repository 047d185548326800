// Cache key templates (docs/api.md §16, docs/caches.md): literal text with placeholders `{{ hash "GLOB" ... }}`,
// `{{ branch }}`, `{{ platform }}`, `{{ os }}`, `{{ arch }}`, `{{ pipeline }}`. Parsed here, without Node, so the
// daemon refuses a bad template when it validates a pipeline and the runner fills in the same grammar.

export type KeyPart =
  | { kind: "text"; text: string }
  | { kind: "hash"; globs: string[] }
  | { kind: "var"; name: "branch" | "platform" | "os" | "arch" | "pipeline" };

const VARIABLES = new Set(["branch", "platform", "os", "arch", "pipeline"]);

export type ParsedKey = { ok: true; parts: KeyPart[] } | { ok: false; message: string };

/** Splits a template into text and placeholders; an unknown or malformed placeholder is an error naming it. */
export function parseKeyTemplate(template: string): ParsedKey {
  const parts: KeyPart[] = [];
  let rest = template;
  for (;;) {
    const open = rest.indexOf("{{");
    if (open < 0) {
      if (rest.includes("}}")) return { ok: false, message: "a `}}` without its `{{`" };
      if (rest) parts.push({ kind: "text", text: rest });
      return { ok: true, parts };
    }
    if (open > 0) {
      const text = rest.slice(0, open);
      if (text.includes("}}")) return { ok: false, message: "a `}}` without its `{{`" };
      parts.push({ kind: "text", text });
    }
    const close = rest.indexOf("}}", open + 2);
    if (close < 0) return { ok: false, message: "a `{{` without its `}}`" };
    const inner = rest.slice(open + 2, close).trim();
    rest = rest.slice(close + 2);
    if (VARIABLES.has(inner)) {
      parts.push({ kind: "var", name: inner as "branch" });
      continue;
    }
    const hash = /^hash((?:\s+"[^"]*")+)$/.exec(inner);
    if (hash) {
      const globs = [...hash[1]!.matchAll(/"([^"]*)"/g)].map((m) => m[1]!);
      if (globs.some((g) => g.trim() === "")) return { ok: false, message: "`hash` takes non-empty quoted globs" };
      parts.push({ kind: "hash", globs });
      continue;
    }
    return { ok: false, message: `unknown placeholder {{ ${inner.slice(0, 60)} }} (known: hash "GLOB", branch, platform, os, arch, pipeline)` };
  }
}

/**
 * A cache path is relative to the workspace or starts with `~/` (the job's home); never absolute, never with a
 * `..` component (it could reach the runner's own files).
 */
export function cachePathProblem(path: string): string | null {
  const rel = path.startsWith("~/") ? path.slice(2) : path;
  if (rel.trim() === "" || rel === ".") return "names the whole workspace or home";
  if (rel.startsWith("/") || path.startsWith("~") !== path.startsWith("~/")) return "must be relative to the workspace or start with ~/";
  if (rel.split("/").includes("..")) return "must not contain a .. component";
  if (rel.includes("\0")) return "must not contain a NUL character";
  return null;
}
