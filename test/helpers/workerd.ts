// The Workers entry as wrangler deploys it, for the workerd test and bench:workerd.
import { build } from "esbuild";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { PROJECT_ROOT } from "./daemon.ts";

/** wrangler.example.toml's compatibility date and flags: the test runs the Worker as that file deploys it. */
export function wranglerSettings(): { compatibilityDate: string; compatibilityFlags: string[] } {
  const toml = readFileSync(join(PROJECT_ROOT, "wrangler.example.toml"), "utf8");
  const date = /^compatibility_date\s*=\s*"([\d-]+)"/m.exec(toml)?.[1];
  const flags = /^compatibility_flags\s*=\s*\[([^\]]*)\]/m.exec(toml)?.[1];
  if (!date || flags === undefined) throw new Error("wrangler.example.toml lost compatibility_date or compatibility_flags");
  return { compatibilityDate: date, compatibilityFlags: [...flags.matchAll(/"([^"]+)"/g)].map((m) => m[1]!) };
}

/** The Worker's bundle as wrangler builds it: one ES module, workerd's export conditions, nothing from Node. */
export function buildWorker() {
  return build({
    entryPoints: [join(PROJECT_ROOT, "src", "runtime", "worker.ts")],
    bundle: true,
    write: false,
    format: "esm",
    platform: "browser",
    conditions: ["workerd", "worker", "browser"],
    target: "es2022",
    metafile: true,
    logLevel: "silent",
  });
}

/** The bundle's text. */
export async function bundleWorker(): Promise<string> {
  return (await buildWorker()).outputFiles[0]!.text;
}
