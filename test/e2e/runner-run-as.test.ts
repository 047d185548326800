// `--run-as USER` (docs/api.md §9, docs/runner-isolation.md) on Linux: a runner started as root runs each step as
// another OS user, who cannot read the runner's token file, its work root, another runner's work root or the
// runner's own /proc/<pid>/environ; what the step leaves running as that user is still ended with the job.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPipeline, createProject, makeGitRepo, queueBuild, registerRunner, type GitRepo } from "../helpers/builds.ts";
import { HANGAR_BIN, PROJECT_ROOT } from "../helpers/daemon.ts";
import { getLog, removeDir, startReadyDaemon, startRunner, stopRunner, waitFor, waitForFinal, type ReadyDaemon } from "./runner-harness.ts";

const STEP_USER = "hangar-runas-test";

/** Why this machine cannot run these tests, or null: they need Linux, root and useradd (never skipped silently). */
function cannotRun(): string | null {
  if (process.platform !== "linux")
    return `--run-as tests need Linux (this is ${process.platform}); macOS is covered by docs/runner-isolation.md only`;
  if (process.getuid?.() !== 0) return "--run-as tests need root (the runner must be root to run steps as another user): run the suite as root";
  if (spawnSync("useradd", ["--help"]).error) return "--run-as tests need useradd to create the step user: apt-get install -y passwd";
  return null;
}

let d: ReadyDaemon;
let repo: GitRepo;
let scratch: string;
let createdUser = false;
let stepUid = -1;

function userExists(name: string): boolean {
  return spawnSync("id", ["-u", name]).status === 0;
}

beforeAll(async () => {
  if (cannotRun()) return;
  if (!userExists(STEP_USER)) {
    const made = spawnSync("useradd", ["--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/bin/sh", STEP_USER], {
      encoding: "utf8",
    });
    // 9: created meanwhile by a parallel run; anything else is a real failure.
    if (made.status !== 0 && made.status !== 9) throw new Error(`useradd ${STEP_USER}: ${made.stderr}`);
    createdUser = made.status === 0;
  }
  stepUid = Number(execFileSync("id", ["-u", STEP_USER], { encoding: "utf8" }).trim());
  d = await startReadyDaemon();
  repo = makeGitRepo({ "README.md": "run as another user\n" });
  scratch = mkdtempSync(join(tmpdir(), "hangar-runas-"));
  // The step user must be able to traverse down to its job directory (mkdtemp makes 0700 directories).
  chmodSync(scratch, 0o711);
}, 60_000);

afterAll(async () => {
  await d?.daemon.stop();
  repo?.remove();
  if (scratch) removeDir(scratch);
  if (createdUser) spawnSync("userdel", [STEP_USER]);
});

function alive(pid: number): boolean {
  try {
    return !/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

function uidOf(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("Uid:"))!;
  return Number(line.split(/\s+/)[1]);
}

describe("--run-as USER, end to end (Linux, as root)", () => {
  it("can run here (Linux, root, useradd)", () => {
    expect(cannotRun(), "see the message").toBeNull();
  });

  it("runs steps as the user, who cannot read the token file, the work roots or the runner's environment; its leftovers are ended", async () => {
    if (cannotRun()) throw new Error(cannotRun()!);
    // Another runner's work root on this machine (made private by a first run of that runner).
    const other = await registerRunner(d.api, d.ownerToken, { platforms: ["android"] });
    const otherRoot = join(scratch, "other-runner");
    const first = startRunner(d.daemon.url, other, ["--once"], otherRoot, { HANGAR_RUNNER_ONCE_WAIT_S: "1" });
    await first.exited;
    writeFileSync(join(otherRoot, "left-by-another-job.txt"), "private\n", { mode: 0o644 });

    const runner = await registerRunner(d.api, d.ownerToken, { platforms: ["android"] });
    const tokenFile = join(scratch, "runner.token");
    writeFileSync(tokenFile, `${runner.token}\n`, { mode: 0o600 });
    const workRoot = join(scratch, "work");
    // Where the step can leave the pid of what it starts with setsid (world-writable like /tmp).
    const drop = join(scratch, "drop");
    mkdirSync(drop);
    chmodSync(drop, 0o1777);
    // The token also goes in through the environment here, so the runner's /proc/<pid>/environ holds it.
    const r = startRunner(
      d.daemon.url,
      { id: runner.id, token: runner.token },
      ["--token-file", tokenFile, "--run-as", STEP_USER, "--once"],
      workRoot,
      {
        HANGAR_RUNNER_ONCE_WAIT_S: "30",
      },
    );
    try {
      const runnerPid = r.proc.pid!;
      await waitFor("the runner's work root", () => existsSync(workRoot), 20_000);
      const probe = (path: string, how: "cat" | "ls") =>
        `if ${how} ${path} >/dev/null 2>&1; then echo "OPENED ${path}"; else echo "DENIED ${path}"; fi`;
      const project = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
      const pipeline = await createPipeline(d.api, d.ownerToken, project.id, {
        platform: "android",
        steps: [
          { name: "who", run: 'echo "uid=$(id -u) user=$USER home=$HOME"; touch made-by-step && stat -c "owner=%u" made-by-step' },
          {
            name: "probe",
            run: [
              probe(tokenFile, "cat"),
              probe(join(workRoot, "active-job"), "cat"),
              probe(`/proc/${runnerPid}/environ`, "cat"),
              probe(workRoot, "ls"),
              probe(otherRoot, "ls"),
              probe(join(otherRoot, "left-by-another-job.txt"), "cat"),
              // The work root is 0711: a name known in advance can be looked up (the job directory must be
              // reachable), so the denials above are about permission, not absence.
              `test -f ${join(workRoot, "active-job")} && echo "EXISTS active-job"`,
            ].join("; "),
          },
          { name: "escape", run: `setsid sh -c 'echo $$ > ${drop}/leftover.pid; exec sleep 300' > /dev/null 2>&1 & sleep 0.5; echo started` },
        ],
      });
      const build = await queueBuild(d.api, d.ownerToken, project.id, pipeline.id, { commit_sha: repo.shas.main });
      const code = await r.exited;
      const log = await getLog(d, build.id);
      expect(code, `${r.stderr()}\n${log}`).toBe(0);
      expect((await waitForFinal(d, build.id)).status).toBe("succeeded");

      expect(log).toContain(`uid=${stepUid} user=${STEP_USER} home=/nonexistent`);
      expect(log).toContain(`owner=${stepUid}`);
      for (const path of [
        tokenFile,
        join(workRoot, "active-job"),
        `/proc/${runnerPid}/environ`,
        workRoot,
        otherRoot,
        join(otherRoot, "left-by-another-job.txt"),
      ]) {
        expect(log).toContain(`DENIED ${path}`);
      }
      expect(log).not.toMatch(/^OPENED/m);
      expect(log).toMatch(/^EXISTS active-job$/m);
      expect(existsSync(join(otherRoot, "left-by-another-job.txt"))).toBe(true);
      expect(log).not.toContain(runner.token);

      // What the step left running (as the step user, in a session of its own) is gone with the job.
      const pid = Number(readFileSync(join(drop, "leftover.pid"), "utf8").trim());
      expect(statSync(join(drop, "leftover.pid")).uid).toBe(stepUid);
      expect(pid).toBeGreaterThan(1);
      await waitFor("the step user's setsid leftover to be gone", () => !alive(pid) || undefined, 10_000).catch(() => {
        throw new Error(`pid ${pid} (uid ${alive(pid) ? uidOf(pid) : "?"}) still alive after the job`);
      });
      expect(log).toMatch(/hangar: ended \d+ process\(es\) the job left running/);
      expect(readdirSync(workRoot).filter((n) => n.startsWith("build-"))).toEqual([]);
    } finally {
      await stopRunner(r);
    }
  }, 180_000);

  it("refuses --run-as for root itself, an unknown user, and a name that is no user name (exit 2)", async () => {
    if (cannotRun()) throw new Error(cannotRun()!);
    // Three CLI starts at once: on a loaded machine each can take many seconds through tsx.
    const run = (user: string, extra: string[] = []) =>
      new Promise<{ status: number | null; stderr: string }>((resolve) => {
        const proc = spawn(process.execPath, [HANGAR_BIN, "runner", "--url", "http://127.0.0.1:9", "--id", "r", "--run-as", user, ...extra], {
          cwd: PROJECT_ROOT,
          env: { ...process.env, HANGAR_RUNNER_TOKEN: "hgr_x" },
          stdio: ["ignore", "ignore", "pipe"],
        });
        let stderr = "";
        proc.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
        proc.once("exit", (status) => resolve({ status, stderr }));
      });
    const [root, unknown, hostile, onCommandLine] = await Promise.all([
      run("root"),
      run("no-such-user-hangar"),
      run("../etc"),
      // The build user could read the token on the runner's command line (/proc/<pid>/cmdline is world-readable).
      run(STEP_USER, ["--token", "hgr_on_the_command_line"]),
    ]);
    expect(onCommandLine.status).toBe(2);
    expect(onCommandLine.stderr).toContain("--run-as: give the token with --token-file");
    expect(root.status).toBe(2);
    expect(root.stderr).toContain("--run-as: the user must not be root");
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain("--run-as: no such user no-such-user-hangar");
    expect(hostile.status).toBe(2);
    expect(hostile.stderr).toContain("is not a user name");
  }, 180_000);
});
