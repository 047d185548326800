// The standalone runner: the entry of dist/hangar-runner.mjs, one file with every dependency inlined that the
// daemon serves at GET /runner/hangar-runner.mjs (docs/api.md §9), so a second machine needs Node 20+ and nothing
// else: `curl -fsSLO <daemon>/runner/hangar-runner.mjs && node hangar-runner.mjs register …`.
import { HANGAR_VERSION } from "../../version.ts";
import { runnerMain } from "./main.ts";

const PROGRAM = "node hangar-runner.mjs";
const major = Number(process.versions.node.split(".")[0]);
if (major < 20) {
  process.stderr.write(`hangar-runner: Node 20 or later is needed (this is ${process.version})\n`);
  process.exitCode = 1;
} else if (process.argv[2] === "--version" || process.argv[2] === "-V") {
  process.stdout.write(`hangar-runner ${HANGAR_VERSION}\n`);
} else {
  process.exitCode = await runnerMain(process.argv.slice(2), PROGRAM);
}
