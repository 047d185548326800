// Bundles the CLI (daemon, setup-token, migrate, runner) into dist/hangar.mjs for plain Node.
// Runs on `npm install` / `npm ci` (prepare), so a fresh clone needs no build step; bin/hangar.mjs uses the
// bundle only while it is newer than every source file, and runs the sources through tsx otherwise.
import { renameSync, rmSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
let esbuild;
try {
  esbuild = await import("esbuild");
} catch {
  // A production install without devDependencies: bin/hangar.mjs falls back to tsx.
  process.stderr.write("hangar build: esbuild not installed, skipping the bundle (the CLI runs through tsx)\n");
  process.exit(0);
}
// zod ships every message locale (a third of its code) behind `z.locales`; Hangar answers in English only and
// never reads `z.locales`, so the bundle gets just `en`. Less code for V8 to read at every start (issue 16).
const englishOnlyZod = {
  name: "zod-english-only",
  setup(build) {
    build.onLoad({ filter: /[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/ }, () => ({
      contents: 'export { default as en } from "./en.js";',
      resolveDir: `${root}node_modules/zod/v4/locales`,
    }));
  },
};
/**
 * dist/hangar-runner.mjs: the standalone runner the daemon serves at GET /runner/hangar-runner.mjs (CONTRACT §9).
 * One file, every dependency inlined (zod/mini, its only one), nothing external but Node's own modules, so it runs
 * with `node hangar-runner.mjs` in an empty directory. Written beside its final name and renamed into place, so
 * a daemon serving it never reads half a file.
 */
async function buildRunnerBundle() {
  const target = `${root}dist/hangar-runner.mjs`;
  const temp = `${target}.${process.pid}.tmp`;
  await esbuild.build({
    absWorkingDir: root,
    entryPoints: ["src/cli/runner/standalone.ts"],
    outfile: temp,
    bundle: true,
    platform: "node",
    target: "node20",
    format: "esm",
    // Not minified: whoever runs it (as root, with --run-as) can read what it does.
    plugins: [englishOnlyZod],
    banner: { js: '#!/usr/bin/env node\n// hangar-runner: the Hangar reference build runner, standalone (Node 20+). `node hangar-runner.mjs --help`.\nimport { createRequire as __hangarCreateRequire } from "node:module"; const require = __hangarCreateRequire(import.meta.url);' },
    legalComments: "inline",
    logLevel: "warning",
  });
  renameSync(temp, target);
}

// `node scripts/build.mjs --runner`: only the standalone runner, leaving the rest of dist/ alone (tests that
// serve a fresh one while other daemons run from dist/ use it).
if (process.argv.includes("--runner")) {
  await buildRunnerBundle();
  process.exit(0);
}

// The CLI bundles its dependencies too (issue 16): resolving and loading ~540 files of node_modules was most of
// the daemon's start time and a good part of its idle memory. Left external: the native `libsql` driver (a
// .node binary chosen per platform at run time), `@libsql/client` (loaded only for a libSQL server URL) and tsx
// (bin/hangar.mjs's fallback). Splitting puts what the CLI imports lazily (the runner, the daemon, commands'
// modules) in chunks of their own, so `hangar runner` does not load the daemon nor `serve` the runner.
// CommonJS dependencies inside an ES module bundle still call require() for Node builtins: the banner gives
// them one.
rmSync(`${root}dist`, { recursive: true, force: true });
await esbuild.build({
  absWorkingDir: root,
  entryPoints: { hangar: "src/cli/main.ts" },
  outdir: "dist",
  outExtension: { ".js": ".mjs" },
  chunkNames: "chunks/[name]-[hash]",
  bundle: true,
  splitting: true,
  platform: "node",
  target: "node20",
  format: "esm",
  external: ["libsql", "@libsql/client", "tsx", "tsx/*"],
  // Whitespace and syntax minified, names kept: a third less source for V8 to read and pre-parse at start, stack
  // traces still name every function (and the linked source map points at the TypeScript).
  plugins: [englishOnlyZod],
  minifyWhitespace: true,
  minifySyntax: true,
  banner: { js: 'import { createRequire as __hangarCreateRequire } from "node:module"; const require = __hangarCreateRequire(import.meta.url);' },
  sourcemap: "linked",
  logLevel: "warning",
});
await buildRunnerBundle();
// src/index.ts for developers embedding the handler set in their own Node server: their own node_modules
// provide the dependencies (one copy of Hono for their app and ours).
await esbuild.build({
  absWorkingDir: root,
  entryPoints: { index: "src/index.ts" },
  outdir: "dist",
  outExtension: { ".js": ".mjs" },
  bundle: true,
  platform: "node",
  target: "node20",
  format: "esm",
  packages: "external",
  sourcemap: "linked",
  logLevel: "warning",
});
