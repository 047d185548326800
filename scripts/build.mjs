// Bundles the CLI (daemon, setup-token, migrate, runner) into dist/hangar.cjs for plain Node.
// Runs on `npm install` / `npm ci` (prepare), so a fresh clone needs no build step; bin/hangar.mjs uses the
// bundle only while it is newer than every source file, and runs the sources through tsx otherwise.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
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
// never reads `z.locales`, so the bundle gets just `en`. Less code for V8 to read at every start (docs/benchmarks.md).
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
 * dist/hangar-runner.mjs: the standalone runner the daemon serves at GET /runner/hangar-runner.mjs (docs/api.md §9).
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
    banner: {
      js: '#!/usr/bin/env node\n// hangar-runner: the Hangar reference build runner, standalone (Node 20+). `node hangar-runner.mjs --help`.\nimport { createRequire as __hangarCreateRequire } from "node:module"; const require = __hangarCreateRequire(import.meta.url);',
    },
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

// The CLI bundles its dependencies too (docs/benchmarks.md): resolving and loading ~540 files of node_modules was most of
// the daemon's start time and a good part of its idle memory. Left external: the native half of the `libsql`
// driver (a .node binary chosen per platform at run time), `@libsql/client` (loaded only for a libSQL server URL) and tsx
// (bin/hangar.mjs's fallback).
//
// One CommonJS file, dist/hangar.cjs, that bin/hangar.mjs compiles itself with node:vm and a V8 code cache
// (dist/hangar.cjs.v8cache, written by the daemon shortly after its first start; see bin/hangar.mjs): Node 20
// has no compile cache for ES modules, and compiling ~1.2 MB of JavaScript, then each function again on its
// first call, was the largest part of a start. With the cache V8 deserialises the bytecode the last start
// compiled instead. Lazily imported modules of ours (the runner, the daemon, the commands' modules) are still
// evaluated only when imported. Dynamic import() cannot run inside a vm script (Node 20 wants
// --experimental-vm-modules for it), so every import() becomes a require() (`dynamic-import: false`), and the
// big libraries loaded only on first use (below) live in dist/vendor/ as one CommonJS file each, required then.
// import.meta.url has no meaning in CommonJS: it is this file's URL, given by the banner.
const LAZY_VENDOR = ["undici", "arctic", "jose", "fast-xml-parser", "aws4fetch"];
const lazyVendor = {
  name: "lazy-vendor",
  setup(build) {
    const filter = new RegExp(`^(${LAZY_VENDOR.join("|")})$`);
    build.onResolve({ filter }, (args) => ({ path: `./vendor/${args.path}.cjs`, external: true }));
  },
};
// The `libsql` driver's JavaScript is bundled (its native binary is still required from node_modules at run
// time, by the name it computes), with @neon-rs/load replaced: see scripts/neon-load-shim.cjs.
const neonLoadShim = {
  name: "neon-load-shim",
  setup(build) {
    build.onResolve({ filter: /^@neon-rs\/load$/ }, () => ({ path: `${root}scripts/neon-load-shim.cjs` }));
  },
};
rmSync(`${root}dist`, { recursive: true, force: true });
await esbuild.build({
  absWorkingDir: root,
  entryPoints: Object.fromEntries(LAZY_VENDOR.map((name) => [name, name])),
  outdir: "dist/vendor",
  outExtension: { ".js": ".cjs" },
  bundle: true,
  platform: "node",
  target: "node20",
  format: "cjs",
  supported: { "dynamic-import": false },
  minifyWhitespace: true,
  minifySyntax: true,
  legalComments: "inline",
  logLevel: "warning",
});
await esbuild.build({
  absWorkingDir: root,
  entryPoints: ["src/cli/main.ts"],
  outfile: "dist/hangar.cjs",
  bundle: true,
  platform: "node",
  target: "node20",
  format: "cjs",
  external: ["@libsql/client", "tsx", "tsx/*"],
  supported: { "dynamic-import": false },
  define: { "import.meta.url": "__hangarModuleUrl" },
  // The file is the function Node wraps every CommonJS module in, written out: bin/hangar.mjs compiles it as
  // read (no 1.2 MB string concatenated and copied at every start) and calls it with Node's own arguments.
  banner: {
    js: '(function (exports, require, module, __filename, __dirname) { "use strict"; const __hangarModuleUrl = require("node:url").pathToFileURL(__filename).href;',
  },
  footer: { js: "})" },
  // Whitespace and syntax minified, names kept: a third less source for V8 to read and pre-parse at start, stack
  // traces still name every function (and the linked source map points at the TypeScript).
  plugins: [englishOnlyZod, lazyVendor, neonLoadShim],
  minifyWhitespace: true,
  minifySyntax: true,
  // ASCII only (esbuild escapes the rest), so bin/hangar.mjs can read it as Latin-1: no UTF-8 decoding at start.
  charset: "ascii",
  sourcemap: "linked",
  logLevel: "warning",
});
{
  const { readFileSync } = await import("node:fs");
  const { isAscii } = await import("node:buffer");
  const out = readFileSync(`${root}dist/hangar.cjs`);
  // Both would fail only at run time, on the code path that reaches them.
  if (!isAscii(out)) throw new Error("dist/hangar.cjs is not ASCII (bin/hangar.mjs reads it as Latin-1)");
  if (/\bimport\(/.test(out.toString("latin1"))) throw new Error("dist/hangar.cjs still calls import(), which a vm script cannot");
}
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

/**
 * dist/hangar.cjs.v8cache for the first start after an install. bin/hangar.mjs writes it from a running daemon
 * (a second after its start) when there is none; without this, that first start after `npm install` compiled the
 * whole bundle: about 10 ms slower and 2.5 MiB more resident for as long as it ran (docs/benchmarks.md). So the build starts
 * one `hangar serve` on a throwaway data directory and a loopback port, waits for the cache, and stops it. None of
 * the caller's HANGAR_* settings reach it (a HANGAR_DATABASE_URL must never see this daemon). Best effort: a
 * machine where it cannot start still gets a working build, and its first start writes the cache as before.
 */
async function warmCodeCache() {
  const cache = `${root}dist/hangar.cjs.v8cache`;
  const dataDir = mkdtempSync(join(tmpdir(), "hangar-build-"));
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("HANGAR_")));
  Object.assign(env, { HANGAR_DATA_DIR: dataDir, HANGAR_HOST: "127.0.0.1", HANGAR_PORT: "0", HANGAR_LOG_REQUESTS: "0" });
  const daemon = spawn(process.execPath, [`${root}bin/hangar.mjs`, "serve"], { cwd: root, env, stdio: "ignore" });
  const stop = () => daemon.kill("SIGTERM");
  process.once("exit", stop);
  const exited = new Promise((resolve) => daemon.once("exit", resolve));
  try {
    const deadline = Date.now() + 15_000;
    while (!existsSync(cache) && daemon.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  } finally {
    stop();
    await exited;
    process.off("exit", stop);
    rmSync(dataDir, { recursive: true, force: true });
  }
  if (!existsSync(cache)) process.stderr.write("hangar build: no V8 code cache written (the first `hangar serve` will write it)\n");
}
await warmCodeCache();
