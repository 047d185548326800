#!/usr/bin/env node
// `npx hangar` and `npm start`. Uses dist/hangar.mjs (built by `npm install` through the prepare script) when it
// is newer than every source file: plain Node starts faster and uses less memory. Otherwise (a source edited
// since, or no bundle) it runs the TypeScript sources through tsx, so there is never a manual build step.
import { readdirSync, statSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const bundle = `${root}dist/hangar.mjs`;

function newestSourceMtime(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    newest = Math.max(newest, entry.isDirectory() ? newestSourceMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

function bundleIsFresh() {
  if (process.env.HANGAR_FROM_SOURCE === "1") return false;
  try {
    return statSync(bundle).mtimeMs >= newestSourceMtime(`${root}src`);
  } catch {
    return false;
  }
}

let main;
if (bundleIsFresh()) {
  ({ main } = await import(bundle));
} else {
  const { register } = await import("tsx/esm/api");
  register();
  ({ main } = await import("../src/cli/main.ts"));
}
const code = await main(process.argv.slice(2));
if (typeof code === "number") process.exitCode = code;
