// Bundles the CLI (daemon, setup-token, migrate, runner) into dist/hangar.mjs for plain Node.
// Runs on `npm install` / `npm ci` (prepare), so a fresh clone needs no build step; bin/hangar.mjs uses the
// bundle only while it is newer than every source file, and runs the sources through tsx otherwise.
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
// Two entries: the CLI, and src/index.ts for developers embedding the handler set in their own Node server.
await esbuild.build({
  absWorkingDir: root,
  entryPoints: { hangar: "src/cli/main.ts", index: "src/index.ts" },
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
