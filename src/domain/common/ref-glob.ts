/**
 * Branch and tag globs of `config.triggers` and notification filters (docs/api.md §11): `*` matches within one
 * `/`-separated segment, `**` across segments, `?` one character of a segment; everything else is literal.
 * Matching simulates the pattern as an NFA over a set of positions (Thompson's construction), so its time is
 * O(name × pattern) whatever the input: no backtracking, no regular expression a hostile pattern can blow up.
 */
type Token = { kind: "lit"; ch: string } | { kind: "any" } | { kind: "star" } | { kind: "globstar" };

export const MAX_REF_GLOB_LENGTH = 255;

function tokenize(pattern: string): Token[] {
  const tokens: Token[] = [];
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i]!;
    if (ch === "*") {
      if (pattern[i + 1] === "*") {
        while (pattern[i + 1] === "*") i++;
        tokens.push({ kind: "globstar" });
      } else tokens.push({ kind: "star" });
    } else if (ch === "?") tokens.push({ kind: "any" });
    else tokens.push({ kind: "lit", ch });
  }
  return tokens;
}

/** Whether `name` (a branch or tag name such as `release/1.2`) matches `pattern`. */
export function matchRefGlob(pattern: string, name: string): boolean {
  const tokens = tokenize(pattern);
  const m = tokens.length;
  let current = new Uint8Array(m + 1);
  let next = new Uint8Array(m + 1);
  // A star may match nothing: reaching its position also reaches the one after it.
  const close = (set: Uint8Array) => {
    for (let i = 0; i < m; i++) {
      const t = tokens[i]!;
      if (set[i] && (t.kind === "star" || t.kind === "globstar")) set[i + 1] = 1;
    }
  };
  current[0] = 1;
  close(current);
  for (const ch of name) {
    next.fill(0);
    let alive = false;
    for (let i = 0; i < m; i++) {
      if (!current[i]) continue;
      const t = tokens[i]!;
      let to = -1;
      if (t.kind === "lit") to = t.ch === ch ? i + 1 : -1;
      else if (t.kind === "any") to = ch !== "/" ? i + 1 : -1;
      else if (t.kind === "star") to = ch !== "/" ? i : -1;
      else to = i;
      if (to >= 0) {
        next[to] = 1;
        alive = true;
      }
    }
    if (!alive) return false;
    close(next);
    [current, next] = [next, current];
  }
  return current[m] === 1;
}

export function matchesAnyRefGlob(patterns: readonly string[], name: string): boolean {
  return patterns.some((p) => matchRefGlob(p, name));
}
