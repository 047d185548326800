// What keeps a job from outliving its job (docs/runner-isolation.md): a cgroup v2 per job where the runner may
// create one (Linux), killed as a whole at the end; and with `--run-as`, every process of the build user ended,
// whatever its environment, session or process group, and what that user left in the shared temporary
// directories removed. The cookie sweep (sweep.ts) stays for the runner's own user, which cannot be swept whole.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { lstat, mkdir, readdir, readFile, rm, rmdir, writeFile } from "node:fs/promises";
import { join } from "node:path";

/** Where jobs get their cgroups, or why they cannot. */
export type CgroupSupport = { ok: true; base: string } | { ok: false; reason: string };

/** The cgroup v2 directory of this process, from /proc/self/mountinfo and /proc/self/cgroup (Linux only). */
async function ownCgroupDir(): Promise<string | { reason: string }> {
  if (process.platform !== "linux") return { reason: `cgroups are Linux only (this is ${process.platform})` };
  const mountinfo = await readFile("/proc/self/mountinfo", "utf8").catch(() => "");
  let mountPoint: string | null = null;
  let mountRoot = "/";
  for (const line of mountinfo.split("\n")) {
    // `id parent major:minor root mount-point options [optional…] - fstype source super-options`
    const [left, right] = line.split(" - ");
    if (!left || !right || !right.startsWith("cgroup2 ")) continue;
    const fields = left.split(" ");
    mountRoot = unescapeMount(fields[3] ?? "/");
    mountPoint = unescapeMount(fields[4] ?? "");
    break;
  }
  if (!mountPoint) return { reason: "no cgroup v2 hierarchy is mounted" };
  const own = (await readFile("/proc/self/cgroup", "utf8").catch(() => "")).split("\n").find((l) => l.startsWith("0::"));
  if (!own) return { reason: "this process is in no cgroup v2 group" };
  let path = own.slice(3).trim();
  // The mount may show a subtree only (a container): the process's path is then relative to that root.
  if (mountRoot !== "/" && path.startsWith(mountRoot)) path = path.slice(mountRoot.length);
  return join(mountPoint, path);
}

function unescapeMount(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(Number.parseInt(oct, 8)));
}

/**
 * Whether each job can run in a cgroup of its own: cgroup v2, a kernel with `cgroup.kill` (5.14+), and a group
 * this process may create children in (root, or a delegated subtree such as systemd's `Delegate=yes`).
 */
export async function detectCgroupSupport(): Promise<CgroupSupport> {
  const dir = await ownCgroupDir();
  if (typeof dir !== "string") return { ok: false, reason: dir.reason };
  if (!existsSync(join(dir, "cgroup.procs"))) return { ok: false, reason: `${dir} is not a cgroup directory` };
  const probe = join(dir, `hangar-probe-${randomBytes(4).toString("hex")}`);
  try {
    await mkdir(probe);
  } catch (err) {
    return { ok: false, reason: `${dir} is not writable (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})` };
  }
  const hasKill = existsSync(join(probe, "cgroup.kill"));
  await rmdir(probe).catch(() => undefined);
  if (!hasKill) return { ok: false, reason: "the kernel has no cgroup.kill (Linux 5.14 or later)" };
  return { ok: true, base: dir };
}

/** One job's cgroup: steps are moved in before they start; `kill()` ends everything in it and removes it. */
export class JobCgroup {
  private constructor(readonly path: string) {}

  static async create(base: string, jobKey: string): Promise<JobCgroup> {
    // The runner's pid in the name: other runner processes on the machine share the base, and one starting up
    // must tell the groups of live jobs (theirs) from those a dead runner left.
    const path = join(base, `hangar-job-${process.pid}-${jobKey}`);
    await mkdir(path);
    return new JobCgroup(path);
  }

  /**
   * Moves a process (and the children it starts from now on) into the job's cgroup. Asynchronous: a move took
   * ~10 ms of the kernel's on a busy machine (docs/benchmarks.md), which would otherwise stall the runner.
   */
  async add(pid: number): Promise<void> {
    await writeFile(join(this.path, "cgroup.procs"), `${pid}\n`);
  }

  /** Ends everything in the group and removes it; answers how many processes were in it. */
  kill(timeoutMs = 5000): Promise<number> {
    return killCgroup(this.path, timeoutMs);
  }
}

/**
 * SIGKILLs every process in a cgroup at once (no fork can outrun it), waits until it is empty, removes it. The
 * files are read and written synchronously: the kernel answers at once, and this is on every job's way to its
 * final report, where each promise call waits for the thread pool and an event-loop turn (docs/benchmarks.md).
 */
async function killCgroup(path: string, timeoutMs = 5000): Promise<number> {
  const attempt = <T>(call: () => T, otherwise: T): T => {
    try {
      return call();
    } catch {
      return otherwise;
    }
  };
  const procs = attempt(() => readFileSync(join(path, "cgroup.procs"), "utf8"), "");
  const count = procs.split("\n").filter(Boolean).length;
  attempt(() => writeFileSync(join(path, "cgroup.kill"), "1"), undefined);
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const events = attempt(() => readFileSync(join(path, "cgroup.events"), "utf8"), "populated 0");
    if (/^populated 0$/m.test(events)) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  attempt(() => rmdirSync(path), undefined);
  return count;
}

/**
 * Removes the cgroups of jobs that runners no longer running left (a crash), killing what is still in them. A group
 * whose runner process is alive is another runner's running job on this machine (they share the base): left alone.
 */
export async function removeStaleCgroups(base: string): Promise<number> {
  const entries = await readdir(base).catch(() => [] as string[]);
  let killed = 0;
  for (const name of entries) {
    if (!name.startsWith("hangar-job-")) continue;
    const owner = /^hangar-job-(\d+)-/.exec(name);
    if (owner && Number(owner[1]) !== process.pid && processAlive(Number(owner[1]))) continue;
    killed += await killCgroup(join(base, name));
  }
  return killed;
}

/** Whether a process with this pid exists (signal 0 checks without sending; EPERM: it exists, as another user). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Processes (not zombies) any of whose user ids (real, effective, saved, filesystem) is `uid`. */
export async function processesOfUser(uid: number): Promise<number[]> {
  if (process.platform === "linux") {
    const entries = await readdir("/proc").catch(() => [] as string[]);
    const found: number[] = [];
    await Promise.all(
      entries.map(async (name) => {
        if (!/^\d+$/.test(name)) return;
        const status = await readFile(`/proc/${name}/status`, "utf8").catch(() => "");
        const uids = /^Uid:\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)/m.exec(status);
        if (!uids || /^State:\s+Z/m.test(status)) return;
        if (uids.slice(1).some((u) => Number(u) === uid)) found.push(Number(name));
      }),
    );
    return found;
  }
  const out = await new Promise<string>((resolve) => {
    const ps = spawn("ps", ["-axo", "pid=,uid=,ruid=,svuid=,stat="], { stdio: ["ignore", "pipe", "ignore"] });
    let text = "";
    ps.stdout.on("data", (b: Buffer) => (text += b.toString()));
    ps.once("close", () => resolve(text));
    ps.once("error", () => resolve(""));
  });
  const found: number[] = [];
  for (const line of out.split("\n")) {
    const m = /^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)/.exec(line);
    if (!m || m[5]!.startsWith("Z")) continue;
    if ([m[2], m[3], m[4]].some((u) => Number(u) === uid)) found.push(Number(m[1]));
  }
  return found;
}

/** `kill(-1, SIGKILL)` from a process running as the user: the kernel signals every process it may, in one pass. */
function killAllAs(uid: number, gid: number): Promise<void> {
  return new Promise((resolve) => {
    // The shell's own `kill` builtin, so the signal comes from the process that has the user's ids; kill(-1)
    // spares the sender itself.
    const child = spawn("/bin/sh", ["-c", "kill -s KILL -- -1"], { uid, gid, stdio: "ignore", env: { PATH: "/usr/bin:/bin" }, cwd: "/" });
    child.once("error", () => resolve());
    child.once("exit", () => resolve());
  });
}

/**
 * Ends every process of the build user (`--run-as`): rounds of kill(-1) as that user until none is left (a
 * process forked during a round is caught by the next). Answers how many there were at the first look.
 */
export async function endUserProcesses(uid: number, gid: number, timeoutMs = 10_000): Promise<number> {
  let pids = await processesOfUser(uid);
  const first = pids.length;
  const deadline = Date.now() + timeoutMs;
  while (pids.length > 0 && Date.now() < deadline) {
    // Direct signals first (they need no new process), kill(-1) as the user for whatever forked meanwhile; a
    // process with another effective id (a set-user-id program the user started) is reached by the former.
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone already
      }
    }
    await killAllAs(uid, gid);
    // Killed processes take a moment to leave the process table: look again before another round of signals.
    const settle = Math.min(deadline, Date.now() + 250);
    do pids = await processesOfUser(uid);
    while (pids.length > 0 && Date.now() < settle && (await new Promise((r) => setTimeout(r, 2)), true));
  }
  if (pids.length > 0) throw new Error(`${pids.length} process(es) of uid ${uid} survived the sweep: ${pids.slice(0, 10).join(", ")}`);
  return first;
}

/** Shared temporary directories a step could leave files in for the next job of the same user. */
const SHARED_TMP_DIRS = ["/tmp", "/var/tmp", "/dev/shm"];

/**
 * Removes what the build user left at the top of the shared temporary directories (after its processes are
 * gone, so nothing races the removal). Symbolic links are removed, never followed.
 */
export async function removeUserTempFiles(uid: number, dirs: readonly string[] = SHARED_TMP_DIRS): Promise<number> {
  let removed = 0;
  for (const dir of dirs) {
    const entries = await readdir(dir).catch(() => [] as string[]);
    for (const name of entries) {
      const path = join(dir, name);
      const info = await lstat(path).catch(() => null);
      if (!info || info.uid !== uid) continue;
      await rm(path, { recursive: true, force: true }).catch(() => undefined);
      removed++;
    }
  }
  return removed;
}
