// A data directory that cannot be created or written stops every command at once (docs/decisions.md "An unusable
// data directory"): the real `hangar` process, which used to spin at full CPU on HANGAR_DATA_DIR=/proc/x, deaf to
// SIGTERM.
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { HANGAR_BIN, makeDataDir, PROJECT_ROOT } from "../helpers/daemon.ts";
import { removeDir } from "./runner-harness.ts";

const scratch = makeDataDir();
afterAll(() => removeDir(scratch));

/** Runs `hangar <args>`; SIGKILL after 30 s (a hang shows as a failed expectation, not a stuck run). */
function run(args: string[], env: Record<string, string>): Promise<{ code: number | null; stderr: string; ms: number }> {
  const started = performance.now();
  const proc = spawn(process.execPath, [HANGAR_BIN, ...args], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, HANGAR_HOST: "127.0.0.1", HANGAR_PORT: "0", ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  proc.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const killer = setTimeout(() => proc.kill("SIGKILL"), 30_000);
  return new Promise((resolve) =>
    proc.once("exit", (code) => {
      clearTimeout(killer);
      resolve({ code, stderr, ms: performance.now() - started });
    }),
  );
}

describe("an unusable data directory (real process)", { timeout: 120_000 }, () => {
  const file = join(scratch, "a-file");
  writeFileSync(file, "not a directory");
  const cases: Array<[string, string]> = [
    ["cannot be created (/proc/x)", "/proc/x"],
    ["exists but cannot be written (/proc)", "/proc"],
    ["is a file", file],
    ["lies under a file", join(file, "data")],
  ];
  for (const [what, dir] of cases) {
    it(`${what}: serve, migrate and setup-token exit 1 within 5 s naming it`, async () => {
      // One after another: on a shared machine three Node starts at once would measure the machine, not Hangar.
      // The time to start the CLI at all (`hangar --help`, measured now) is the machine's, not this rule's.
      const startup = (await run(["--help"], {})).ms;
      const results = [];
      for (const args of [["serve"], ["migrate"], ["setup-token"]]) results.push(await run(args, { HANGAR_DATA_DIR: dir }));
      for (const [i, r] of results.entries()) {
        const label = `${["serve", "migrate", "setup-token"][i]} with ${dir}`;
        expect(r.code, `${label}: ${r.stderr}`).toBe(1);
        expect(r.ms - startup, `${label} (CLI start ${Math.round(startup)} ms)`).toBeLessThan(5_000);
        expect(r.stderr, label).toContain(`data directory ${dir}`);
      }
    });
  }
});
