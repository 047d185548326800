// Token options of the CLI (docs/api.md §3): a token from the command line whatever its first character, from a
// file, or from the environment; against a real daemon process.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../helpers/daemon.ts";
import { removeDir, startReadyDaemon, type ReadyDaemon } from "./runner-harness.ts";

let d: ReadyDaemon;
let scratch: string;

beforeAll(async () => {
  d = await startReadyDaemon();
  scratch = mkdtempSync(join(tmpdir(), "hangar-cli-tokens-"));
});

afterAll(async () => {
  await d?.daemon.stop("SIGKILL");
  if (d) removeDir(d.dataDir);
  if (scratch) removeDir(scratch);
});

const NO_ENV = { HANGAR_URL: "", HANGAR_RUNNER_ID: "", HANGAR_RUNNER_TOKEN: "", HANGAR_SESSION_TOKEN: "" };

describe("runner register --session / --session-file", () => {
  it("sends a session that starts with '-' to the daemon instead of refusing it as an option", async () => {
    const r = await runCli(["runner", "register", "--url", d.daemon.url, "--session", "-abc-not-a-session"], NO_ENV);
    // 1 = the daemon answered 401; a usage error would be exit 2.
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("401");
  });

  it("reads the session from --session-file (trailing newline ignored) and registers", async () => {
    const file = join(scratch, "session");
    writeFileSync(file, `${d.ownerToken}\n`, { mode: 0o600 });
    const r = await runCli(["runner", "register", "--url", d.daemon.url, "--session-file", file, "--name", "from-file"], NO_ENV);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^HANGAR_RUNNER_ID=\S+\nHANGAR_RUNNER_TOKEN=\S+\n$/);
  });

  it("reads the session from HANGAR_SESSION_TOKEN", async () => {
    const r = await runCli(["runner", "register", "--url", d.daemon.url], { ...NO_ENV, HANGAR_SESSION_TOKEN: d.ownerToken });
    expect(r.code).toBe(0);
  });

  it("refuses --session with --session-file, an empty or missing file, with exit 2", async () => {
    const empty = join(scratch, "empty");
    writeFileSync(empty, "\n");
    const [both, emptyFile, missing] = await Promise.all([
      runCli(["runner", "register", "--url", d.daemon.url, "--session", "x", "--session-file", empty], NO_ENV),
      runCli(["runner", "register", "--url", d.daemon.url, "--session-file", empty], NO_ENV),
      runCli(["runner", "register", "--url", d.daemon.url, "--session-file", join(scratch, "nope")], NO_ENV),
    ]);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain("not both");
    expect(emptyFile.code).toBe(2);
    expect(emptyFile.stderr).toContain("is empty");
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("ENOENT");
  });
});

describe("runner --token / --token-file", () => {
  it("passes a token starting with '-' (command line) and one from --token-file to the daemon", async () => {
    const file = join(scratch, "runner-token");
    writeFileSync(file, "-from-a-file\n", { mode: 0o600 });
    const env = { ...NO_ENV, HANGAR_RUNNER_ONCE_WAIT_S: "1" };
    const [dash, fromFile] = await Promise.all([
      runCli(["runner", "--url", d.daemon.url, "--id", "r1", "--token", "-dash", "--once"], env),
      runCli(["runner", "--url", d.daemon.url, "--id", "r1", "--token-file", file, "--once"], env),
    ]);
    // The daemon refused the unknown token (exit 1, its code in the message), not the option parser (exit 2).
    for (const r of [dash, fromFile]) {
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/401|invalid_runner_token/);
    }
  });
});
