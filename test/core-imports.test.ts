import { existsSync, readFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "./helpers/daemon.ts";
import { buildWorker } from "./helpers/workerd.ts";

const SRC = join(PROJECT_ROOT, "src");

/** Packages that only run on Node (or pull in a native driver); their web variants are allowed. */
const NODE_ONLY_PACKAGES = [
  /^@libsql\/client(?!\/web$)(\/|$)/,
  /^drizzle-orm\/libsql(?!\/web$)(\/|$)/,
  /^@hono\/node-server(\/|$)/,
  /^tsx(\/|$)/,
  /^libsql(\/|$)/,
];

const NODE_GLOBALS = new Set(["process", "Buffer", "__dirname", "__filename", "require"]);

function isNodeBuiltin(specifier: string): boolean {
  return specifier.startsWith("node:") || builtinModules.includes(specifier) || builtinModules.includes(specifier.split("/")[0]!);
}

function resolveLocal(from: string, specifier: string): string {
  const base = resolve(dirname(from), specifier);
  for (const candidate of [base, `${base}.ts`, `${base}.tsx`, join(base, "index.ts")]) {
    if (existsSync(candidate) && /\.tsx?$/.test(candidate)) return candidate;
  }
  throw new Error(`cannot resolve ${specifier} from ${from}`);
}

interface Finding {
  file: string;
  problem: string;
}

/** Imports that survive compilation: `import type` and `export type` are erased, everything else loads. */
function valueImports(source: ts.SourceFile): string[] {
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      if (!node.importClause?.isTypeOnly) found.push(node.moduleSpecifier.text);
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      if (!node.isTypeOnly) found.push(node.moduleSpecifier.text);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [arg] = node.arguments;
      found.push(arg && ts.isStringLiteral(arg) ? arg.text : "<dynamic import of a computed name>");
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Free uses of Node's globals (`process.env`, `Buffer.from`, ...), not property names that happen to match. */
function nodeGlobalUses(source: ts.SourceFile): string[] {
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isIdentifier(node) && NODE_GLOBALS.has(node.text)) {
      const parent = node.parent;
      const isPropertyName =
        (ts.isPropertyAccessExpression(parent) && parent.name === node) ||
        (ts.isPropertyAssignment(parent) && parent.name === node) ||
        ts.isPropertySignature(parent) ||
        ts.isMethodDeclaration(parent) ||
        ts.isBindingElement(parent) ||
        ts.isParameter(parent) ||
        ts.isVariableDeclaration(parent);
      if (!isPropertyName) found.push(node.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Walks the import graph from `entry` inside src/ and reports anything that would not run on Workers. */
function auditGraph(entry: string): { files: string[]; findings: Finding[] } {
  const seen = new Set<string>();
  const findings: Finding[] = [];
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.ES2022, true);
    const rel = relative(PROJECT_ROOT, file);
    for (const specifier of valueImports(source)) {
      if (specifier.startsWith(".")) {
        const target = resolveLocal(file, specifier);
        if (!target.startsWith(SRC)) findings.push({ file: rel, problem: `imports ${specifier} outside src/` });
        queue.push(target);
      } else if (isNodeBuiltin(specifier)) {
        findings.push({ file: rel, problem: `imports the Node builtin ${specifier}` });
      } else if (NODE_ONLY_PACKAGES.some((p) => p.test(specifier))) {
        findings.push({ file: rel, problem: `imports the Node-only package ${specifier}` });
      } else if (specifier.startsWith("<")) {
        findings.push({ file: rel, problem: specifier });
      }
    }
    for (const name of nodeGlobalUses(source)) findings.push({ file: rel, problem: `uses the Node global ${name}` });
  }
  return { files: [...seen].map((f) => relative(PROJECT_ROOT, f)).sort(), findings };
}

describe("the core's import graph", () => {
  it("src/app.ts reaches no Node builtin, no Node-only package and no Node global", () => {
    const { files, findings } = auditGraph(join(SRC, "app.ts"));
    expect(findings).toEqual([]);
    // The walk really covers the handler set.
    for (const f of [
      "src/app.ts",
      "src/domain/setup/setup.ts",
      "src/domain/auth/users.ts",
      "src/http/routes/setup.ts",
      "src/http/middleware/loopback.ts",
    ]) {
      expect(files).toContain(f);
    }
    expect(files.some((f) => f.startsWith("src/runtime/") || f.startsWith("src/cli/"))).toBe(false);
  });

  it("src/runtime/worker.ts reaches only web-standard modules and uses the web libSQL client", () => {
    const { files, findings } = auditGraph(join(SRC, "runtime", "worker.ts"));
    expect(findings).toEqual([]);
    expect(files).toContain("src/app.ts");
    expect(files).toContain("src/runtime/worker-db.ts");
    expect(files).toContain("src/db/busy.ts");
    const importsOf = (file: string) =>
      valueImports(ts.createSourceFile(file, readFileSync(join(SRC, "runtime", file), "utf8"), ts.ScriptTarget.ES2022));
    expect(importsOf("worker.ts")).toContain("drizzle-orm/libsql/web");
    expect(importsOf("worker-db.ts")).toContain("@libsql/client/web");
  });

  it("catches Node-only imports where they are (the Node shell), so the checks above can fail", () => {
    const node = auditGraph(join(SRC, "runtime", "node.ts"));
    const problems = node.findings.map((f) => f.problem);
    expect(problems).toContain("imports the Node builtin node:fs");
    expect(problems.some((p) => p.includes("@libsql/client"))).toBe(true);
    expect(problems).toContain("imports the Node-only package libsql");
    expect(node.findings.some((f) => f.problem === "uses the Node global process")).toBe(true);
  });

  it("bundles the Workers entry for a browser-like platform (workerd conditions) without a Node module", async () => {
    const result = await buildWorker();
    expect(result.errors).toEqual([]);
    const inputs = Object.keys(result.metafile.inputs);
    expect(inputs.some((i) => i.includes("@libsql/hrana-client"))).toBe(true);
    expect(inputs.filter((i) => i.startsWith("node:") || i.includes("@libsql/client/lib-esm/node") || i.includes("libsql/lib-esm/sqlite3"))).toEqual(
      [],
    );
    expect(result.outputFiles[0]!.contents.length).toBeGreaterThan(0);
  }, 60_000);

  it("answers 500 internal_error, without details, while the Worker's bindings are incomplete", async () => {
    const worker = (await import("../src/runtime/worker.ts")).default;
    const ctx = { waitUntil: () => {}, passThroughOnException: () => {}, props: {} };
    for (const env of [
      {},
      { HANGAR_DATABASE_URL: "libsql://db.example.com" },
      { HANGAR_DATABASE_URL: "libsql://db.example.com", HANGAR_MASTER_KEY: "c2hvcnQ" },
    ]) {
      const res = await worker.fetch(new Request("https://hangar.example.com/healthz"), env, ctx);
      expect(res.status).toBe(500);
      expect(await res.json()).toEqual({ code: "internal_error", message: "the service is not configured" });
    }
  });
});
