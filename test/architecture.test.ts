// The layering rules of docs/architecture.md that a reader cannot check at a glance: no import cycle anywhere in
// src/, and the reference runner reaching outside src/cli/runner/ only for the few pure modules it shares with
// the daemon (it is bundled alone into the standalone runner file).
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "./helpers/daemon.ts";

const SRC = join(PROJECT_ROOT, "src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(name) && !name.endsWith(".d.ts") ? [path] : [];
  });
}

/** Relative value imports of each file (type-only imports are erased and cannot make a cycle at run time). */
function importGraph(files: string[]): Map<string, string[]> {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const text = readFileSync(file, "utf8");
    const targets: string[] = [];
    for (const m of text.matchAll(/^(?:import|export)\s+(?!type\b)[^'";]*?from\s+["'](\.[^"']+)["']/gm)) {
      const target = resolve(dirname(file), m[1]!);
      const found = [target, `${target}.ts`, `${target}.tsx`, join(target, "index.ts")].find((c) => known.has(c));
      if (found) targets.push(found);
    }
    graph.set(file, targets);
  }
  return graph;
}

function cycles(graph: Map<string, string[]>): string[][] {
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const found: string[][] = [];
  const visit = (node: string) => {
    state.set(node, "open");
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === "open") found.push([...stack.slice(stack.indexOf(next)), next].map((f) => relative(SRC, f)));
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(node, "done");
  };
  for (const node of graph.keys()) if (!state.has(node)) visit(node);
  return found;
}

describe("architecture (docs/architecture.md)", () => {
  const files = sourceFiles(SRC);
  const graph = importGraph(files);

  it("finds the imports it checks (the parser is not blind)", () => {
    const edges = [...graph.values()].reduce((n, targets) => n + targets.length, 0);
    expect(files.length).toBeGreaterThan(100);
    expect(edges).toBeGreaterThan(files.length);
  });

  it("has no import cycle in src/", () => {
    expect(cycles(graph)).toEqual([]);
  });

  it("detects a cycle when there is one", () => {
    const a = join(SRC, "a.ts");
    const b = join(SRC, "b.ts");
    expect(
      cycles(
        new Map([
          [a, [b]],
          [b, [a]],
        ]),
      ),
    ).toEqual([["a.ts", "b.ts", "a.ts"]]);
  });

  it("keeps the runner to its own code and the pure modules it shares with the daemon", () => {
    const runnerDir = join(SRC, "cli", "runner");
    // Pure, Node-free modules both sides need: the wire protocol (src/protocol/), glob matching (artifacts), the
    // outbound guard and the address rules it decides with (the runner's clone is checked with the daemon's own rules), the
    // version string, and the option reader every `hangar` command uses.
    const shared = new Set([
      "protocol/runner.ts",
      "domain/common/glob.ts",
      "domain/common/cache-key.ts",
      "domain/common/outbound.ts",
      "domain/common/addresses.ts",
      "version.ts",
      "cli/options.ts",
    ]);
    const reached = new Set<string>();
    const walk = (file: string) => {
      for (const next of graph.get(file) ?? []) {
        const rel = relative(SRC, next);
        if (next.startsWith(runnerDir) || reached.has(rel)) continue;
        reached.add(rel);
        walk(next);
      }
    };
    for (const file of files.filter((f) => f.startsWith(runnerDir))) walk(file);
    expect([...reached].filter((f) => !shared.has(f)).sort()).toEqual([]);
  });

  it("answers address questions in one place: only src/domain/common/addresses.ts parses addresses (ipaddr.js)", () => {
    const parsing = files.filter((f) => /from\s+["']ipaddr\.js["']/.test(readFileSync(f, "utf8")));
    expect(parsing.map((f) => relative(SRC, f))).toEqual([join("domain", "common", "addresses.ts")]);
  });

  it("keeps the web UI off the database: pages render view models from domain functions", () => {
    const web = files.filter((f) => f.startsWith(join(SRC, "web")));
    const reaching = web.filter((f) => {
      const text = readFileSync(f, "utf8");
      // The schema's constants (role names, statuses) are plain values; the tables and the query builder are not.
      return /from\s+["']drizzle-orm/.test(text) || /from\s+["'][./]+db\/(schema\/index|client|embedded|fixed-sql)\.ts["']/.test(text);
    });
    expect(web.length).toBeGreaterThan(10);
    expect(reaching.map((f) => relative(SRC, f))).toEqual([]);
  });
});
