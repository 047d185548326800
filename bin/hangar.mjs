#!/usr/bin/env node
// `npx hangar` and `npm start`. Uses dist/hangar.cjs (built by `npm install` through the prepare script) when it
// is newer than every source file: plain Node starts faster and uses less memory. Otherwise (a source edited
// since, or no bundle) it runs the TypeScript sources through tsx, so there is never a manual build step.
import { chmodSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import v8 from "node:v8";
import vm from "node:vm";
// The other built-in modules a daemon's start loads, loaded before the V8 flag below is set (see tuneV8).
import "node:child_process";
import "node:cluster";
import "node:crypto";
import "node:dns";
import "node:fs/promises";
import "node:http";
import "node:os";
import util from "node:util";

/**
 * V8 grows its young generation (the two "semi-spaces" new objects are made in) from 1 MiB towards 16 MiB each
 * whenever many objects survive a collection, which every start does (a module's objects live for good), and never
 * gives it back: an idle daemon kept 5-7 MiB of it, one that had served a load test about 30 MiB. Hangar's requests
 * make short-lived garbage, which a 1 MiB semi-space collects as cheaply (bench:http and bench:claim unchanged), so
 * the daemon keeps it at 1 MiB: idle RSS 3 MiB lower, after bench:http's load 81 MiB instead of 105 (docs/benchmarks.md,
 * docs/benchmarks.md). `--max-semi-space-size` would say so on Node's command line, which `node bin/hangar.mjs` does
 * not have; the growth factor is read at each growth, so setting it here works.
 *
 * Any V8 flag set at run time changes the hash V8 checks code caches against, and V8 then refuses the cache Node
 * ships for its own modules: each built-in module loaded afterwards is compiled from source (about 8 ms more per
 * start). Hence the imports above, and the two lazily loaded parts touched below, before the flag. It is set for
 * every command: dist/hangar.cjs.v8cache carries the hash too, and fits every command only so.
 */
function tuneV8() {
  void globalThis.crypto.subtle; // Web Crypto's modules (the daemon's session and secret code uses it)
  void util.parseArgs; // the CLI's option parser
  v8.setFlagsFromString("--semi-space-growth-factor=1");
}
tuneV8();

const root = fileURLToPath(new URL("..", import.meta.url));
const bundle = `${root}dist/hangar.cjs`;
const codeCache = `${bundle}.v8cache`;

function newestSourceMtime(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    newest = Math.max(newest, entry.isDirectory() ? newestSourceMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/** The bundle's stat when it is newer than every source file, else undefined (run the sources). */
function freshBundle() {
  if (process.env.HANGAR_FROM_SOURCE === "1") return undefined;
  try {
    const st = statSync(bundle);
    return st.mtimeMs >= newestSourceMtime(`${root}src`) ? st : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Loads dist/hangar.cjs the way Node loads any CommonJS file (same wrapper, same require), but compiles it
 * with the V8 code cache beside it: Node 20 keeps no compile cache of its own, and compiling the bundle was the
 * largest part of a daemon start (docs/benchmarks.md). V8 checks the cache against this source, its own version and its
 * flags, and rejects a cache that does not match (the bundle is then compiled as usual), so a stale or foreign
 * cache costs one ordinary start and nothing else. V8 compares the source by its length only, so the cache file
 * also names the bundle's size and mtime in a first line, and one made for another bundle (dist/hangar.cjs
 * rebuilt or edited in place) is not offered at all. The source is ASCII (the build checks), read as Latin-1.
 */
function loadBundle(st) {
  const stamp = cacheStamp(st);
  const { script, cacheAccepted } = compileBundle(stamp);
  const module = { exports: {} };
  script.runInThisContext().call(module.exports, module.exports, createRequire(bundle), module, bundle, `${root}dist`);
  // The script is kept only while a cache is still to be written (it holds no reference to the old one).
  return { main: module.exports.main, script: cacheAccepted ? undefined : script, stamp };
}

/**
 * The compiled bundle, and whether V8 took the cache. Its own function so that nothing refers to the cache's bytes
 * (1.2 MiB) once it returns: they are then freed by the first young-generation collection of the bundle's start,
 * where a reference alive until the start was over had them promoted and kept until a full collection.
 */
function compileBundle(stamp) {
  let cachedData;
  try {
    const file = readFileSync(codeCache);
    if (file.latin1Slice(0, STAMP_BYTES) === stamp) cachedData = file.subarray(STAMP_BYTES);
  } catch {
    // none yet: the daemon writes one (see writeCodeCache)
  }
  // The bundle is the module wrapper function itself (scripts/build.mjs writes it so).
  const script = new vm.Script(readFileSync(bundle, "latin1"), { filename: bundle, cachedData });
  return { script, cacheAccepted: cachedData !== undefined && !script.cachedDataRejected };
}

/**
 * Which bundle a cache belongs to (V8 itself only checks the source's length): one line, padded to 64 bytes so
 * the cache data after it stays 8-byte aligned (V8 copies unaligned data first).
 */
const STAMP_BYTES = 64;
function cacheStamp(st) {
  return `hangar.cjs ${st.size} ${st.mtimeMs}`.slice(0, STAMP_BYTES - 1).padEnd(STAMP_BYTES - 1) + "\n";
}

/**
 * The cache holds the bytecode of every function compiled so far, so it is taken from a running daemon once its
 * start is over (what the next start will compile again), off the start path, and only when the one it started
 * with was missing or rejected. Written beside the bundle under a temporary name and renamed into place (daemons
 * starting together never read half a file); a read-only installation simply keeps starting without one.
 */
function writeCodeCache({ script, stamp }) {
  const timer = setTimeout(() => {
    const temp = `${codeCache}.${process.pid}.tmp`;
    try {
      writeFileSync(temp, Buffer.concat([Buffer.from(stamp, "latin1"), script.createCachedData()]));
      // As readable as the bundle it belongs to (the daemon's umask is 077): bytecode of the source, no data.
      chmodSync(temp, 0o644);
      renameSync(temp, codeCache);
    } catch {
      rmSync(temp, { force: true });
    }
  }, 1000);
  timer.unref();
}

let main;
let loaded;
const st = freshBundle();
if (st) {
  loaded = loadBundle(st);
  main = loaded.main;
} else {
  const { register } = await import("tsx/esm/api");
  // This checkout's tsconfig, wherever the command runs from: tsx would otherwise look in the working directory,
  // and without its `jsxImportSource` every page of the UI fails (React is not defined).
  register({ tsconfig: `${root}tsconfig.json` });
  ({ main } = await import("../src/cli/main.ts"));
}
const command = process.argv[2];
const code = await main(process.argv.slice(2));
if (typeof code === "number") process.exitCode = code;
// Only `serve` writes the cache: its start is the one worth caching, and a cache taken after another command
// would hold that command's functions instead of the daemon's.
else if (command === "serve" && loaded?.script) writeCodeCache(loaded);
