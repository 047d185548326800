// The end-of-job sweep (docs/api.md §9): every step runs with a per-job cookie in its environment, and when the job
// ends every process of the runner's user (or the --run-as user) that still carries the cookie is killed: also
// those that left the step's process group (`setsid`, a double fork, `nohup … &`), which a process-group kill
// misses. Jenkins' ProcessTreeKiller does the same with BUILD_ID. The environment a process was started with is
// read from /proc/<pid>/environ on Linux and from `ps -E` (the kernel's KERN_PROCARGS2) on macOS.
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";

export const COOKIE_VAR = "HANGAR_JOB_COOKIE";

/** A fresh cookie: 128 random bits, so no unrelated process can carry it by accident. */
export function newJobCookie(): string {
  return randomBytes(16).toString("hex");
}

/** Processes (pids) whose start-up environment holds `HANGAR_JOB_COOKIE=<cookie>`, owned by one of `uids`. */
export async function findCookieProcesses(cookie: string, uids: ReadonlySet<number>): Promise<number[]> {
  if (process.platform === "linux") return findOnLinux(cookie, uids);
  return findWithPs(cookie, uids);
}

/**
 * Synchronous reads: /proc answers from memory, and the promise API costs a thread-pool round trip per call, which
 * made a scan of ~110 processes 30–200 ms on a busy machine, against 3–30 ms so (docs/benchmarks.md). The owner is
 * looked at only for the processes that carry the cookie.
 */
function findOnLinux(cookie: string, uids: ReadonlySet<number>): number[] {
  // Entries are NUL-separated: a whole entry is `NAME=value\0` at the start or `\0NAME=value\0` further on.
  const entry = Buffer.from(`${COOKIE_VAR}=${cookie}\0`);
  const inside = Buffer.concat([Buffer.from([0]), entry]);
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  const found: number[] = [];
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    if (pid === process.pid) continue;
    try {
      const environ = readFileSync(`/proc/${name}/environ`);
      if (environ.indexOf(entry) !== 0 && !environ.includes(inside)) continue;
      if (uids.has(statSync(`/proc/${name}`).uid)) found.push(pid);
    } catch {
      // Gone meanwhile, or not ours to read: either way nothing to kill.
    }
  }
  return found;
}

/** macOS and other BSDs: `ps -E` prints each process's environment after its command. */
async function findWithPs(cookie: string, uids: ReadonlySet<number>): Promise<number[]> {
  const out = await new Promise<string>((resolve) => {
    execFile("ps", ["-axE", "-ww", "-o", "pid=,uid=,command="], { maxBuffer: 256 * 1024 * 1024 }, (err, stdout) => resolve(err ? "" : stdout));
  });
  const needle = `${COOKIE_VAR}=${cookie}`;
  const found: number[] = [];
  for (const line of out.split("\n")) {
    const m = /^\s*(\d+)\s+(\d+)\s(.*)$/.exec(line);
    if (!m) continue;
    const pid = Number(m[1]);
    // A whole word: the variable ends at a space or the end of the line.
    const rest = m[3]!;
    const at = rest.indexOf(needle);
    if (pid === process.pid || !uids.has(Number(m[2])) || at < 0) continue;
    const after = rest[at + needle.length];
    if (after === undefined || after === " ") found.push(pid);
  }
  return found;
}

function signal(pids: number[], sig: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, sig);
    } catch {
      // ESRCH: already gone
    }
  }
}

export interface SweepResult {
  /** Distinct processes found carrying the cookie. */
  killed: number;
  rounds: number;
}

/**
 * Ends every process carrying the cookie: SIGTERM first and up to `graceMs` to exit, then rounds of SIGSTOP (so a
 * process cannot fork a replacement while its siblings die) and SIGKILL until a scan finds none left.
 */
export async function sweepJobProcesses(cookie: string, uids: ReadonlySet<number>, graceMs = 2000): Promise<SweepResult> {
  const seen = new Set<number>();
  let pids = await findCookieProcesses(cookie, uids);
  if (pids.length === 0) return { killed: 0, rounds: 0 };
  for (const pid of pids) seen.add(pid);
  signal(pids, "SIGTERM");
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    pids = await findCookieProcesses(cookie, uids);
    for (const pid of pids) seen.add(pid);
    if (pids.length === 0) return { killed: seen.size, rounds: 1 };
  }
  let rounds = 1;
  for (; rounds < 100 && pids.length > 0; rounds++) {
    signal(pids, "SIGSTOP");
    signal(pids, "SIGKILL");
    // Killed processes leave /proc (or become zombies, whose environ reads empty) almost at once.
    await new Promise((r) => setTimeout(r, 20));
    pids = await findCookieProcesses(cookie, uids);
    for (const pid of pids) seen.add(pid);
  }
  return { killed: seen.size, rounds };
}
