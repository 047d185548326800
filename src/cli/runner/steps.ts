// Child processes of a job: each runs detached, i.e. as the leader of its own process group, so a cancel or
// time-out reaches everything a step started (xcodebuild, gradle daemons, simulators), not just `sh`.
import { spawn } from "node:child_process";
import { constants } from "node:os";

/** Grace between SIGTERM and SIGKILL when a step is stopped. */
export const KILL_GRACE_MS = 10_000;

export interface ProcessResult {
  /** The exit code; 128 + signal number when a signal ended it (what a shell reports). */
  exitCode: number;
  signal: NodeJS.Signals | null;
  /** True when `signal` (the AbortSignal) stopped it. */
  stopped: boolean;
}

export interface RunOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  onOutput: (chunk: Buffer) => void;
  /** Aborting it sends SIGTERM to the process group, then SIGKILL after `killGraceMs`. */
  signal?: AbortSignal;
  killGraceMs?: number;
  /** Run as this user and group (`--run-as`; the runner is root then). */
  uid?: number;
  gid?: number;
  /**
   * Called with the pid before the process may start its work (the job's cgroup takes it in here); the process
   * reads one line from its standard input first, sent once this resolves. A rejection ends it unstarted.
   */
  beforeStart?: (pid: number) => Promise<void>;
  /**
   * The go is sent only once this resolves true as well (false: the process ends unstarted). A job starts its
   * first step's process while the checkout runs, so the cgroup move is done by the time the step may start.
   */
  startWhen?: Promise<boolean>;
}

/** Process groups still to clean up at the end of the job (background processes a step left behind). */
const groups = new Set<number>();

function signalGroup(pgid: number, sig: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, sig);
    return true;
  } catch {
    return false; // ESRCH: the whole group is gone
  }
}

/** True while any process of the group is alive. */
function groupAlive(pgid: number): boolean {
  return signalGroup(pgid, 0); // signal 0 only checks existence
}

/** Runs `file args` in its own process group and resolves when the leader exits. */
export function runProcess(file: string, args: string[], options: RunOptions): Promise<ProcessResult> {
  return new Promise((resolve) => {
    const child = spawn(file, args, {
      cwd: options.cwd,
      env: options.env,
      detached: true,
      stdio: [options.beforeStart ? "pipe" : "ignore", "pipe", "pipe"],
      ...(options.uid !== undefined ? { uid: options.uid, gid: options.gid } : {}),
    });
    const pgid = child.pid;
    let stopped = false;
    let killTimer: NodeJS.Timeout | null = null;
    const onAbort = () => {
      if (pgid === undefined) return;
      stopped = true;
      signalGroup(pgid, "SIGTERM");
      killTimer = setTimeout(() => signalGroup(pgid, "SIGKILL"), options.killGraceMs ?? KILL_GRACE_MS);
      killTimer.unref();
    };
    if (pgid !== undefined) groups.add(pgid);
    if (options.beforeStart && child.stdin) {
      const stdin = child.stdin;
      stdin.on("error", () => undefined); // the process may be gone already
      if (pgid === undefined) stdin.end();
      else
        options.beforeStart(pgid).then(
          async () => {
            const start = options.startWhen ? await options.startWhen : true;
            stdin.end(start ? "go\n" : undefined);
          },
          (err: unknown) => {
            options.onOutput(Buffer.from(`hangar: the step could not be started: ${(err as Error).message}\n`));
            stdin.end();
          },
        );
    }
    const stdout = child.stdout!;
    const stderr = child.stderr!;
    stdout.on("data", options.onOutput);
    stderr.on("data", options.onOutput);
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener("abort", onAbort, { once: true });

    let result: ProcessResult | null = null;
    let openPipes = 2;
    let grace: NodeJS.Timeout | null = null;
    const finish = () => {
      if (!result) return;
      if (grace) clearTimeout(grace);
      options.signal?.removeEventListener("abort", onAbort);
      resolve(result);
    };
    // The pipes may close before or after the exit event; count them from the start.
    const onClose = () => {
      if (--openPipes === 0) finish();
    };
    stdout.once("close", onClose);
    stderr.once("close", onClose);
    child.once("error", (err) => {
      options.onOutput(Buffer.from(`${file}: ${err.message}\n`));
      result = { exitCode: 127, signal: null, stopped };
      finish();
    });
    child.once("exit", (code, sig) => {
      const signum = sig ? (constants.signals[sig] ?? 15) : 0;
      result = { exitCode: code ?? 128 + signum, signal: sig, stopped };
      // A stopped step's group must be gone before the job moves on: keep the SIGKILL timer for stragglers.
      if (!stopped && killTimer) clearTimeout(killTimer);
      if (openPipes === 0) return finish();
      // Wait briefly for the pipes to drain; a background process holding them open must not stall the job.
      grace = setTimeout(finish, 1000);
    });
  });
}

/**
 * The outer shell: waits for the runner's go (one line on its standard input), starts the step, outlives a SIGTERM to the group (it waits on until the step is gone), then
 * ends the way the step ended: the same exit code, or the same signal (so a stopped step still reads SIGKILL).
 */
const STEP_WRAPPER =
  'IFS= read -r go || exit 125; exec </dev/null; sh -c "$1" & c=$!; trap : TERM INT; while :; do wait "$c"; s=$?; kill -0 "$c" 2>/dev/null || break; done; ' +
  'if [ "$s" -gt 128 ]; then trap - TERM INT; kill -s "$(kill -l "$s")" $$; fi; exit "$s"';

/**
 * One pipeline step: `sh -c <run>`, started by an outer `sh` that waits for it (never exec'ing into it). The step's parent is then that shell, whose environment is the step's own and
 * never held the runner's token: `/proc/$PPID/environ` shows nothing a step did not already have (docs/api.md §9).
 */
export function runStep(run: string, options: RunOptions): Promise<ProcessResult> {
  // The wrapper waits for a go on its standard input, so nothing of the step runs before `beforeStart` is done.
  return runProcess("sh", ["-c", STEP_WRAPPER, "hangar-step", run], { ...options, beforeStart: options.beforeStart ?? (async () => undefined) });
}

/** Kills whatever the job's processes left running (SIGTERM, then SIGKILL after a short grace). */
export async function killLeftovers(graceMs = 2000): Promise<void> {
  const alive = [...groups].filter(groupAlive);
  groups.clear();
  if (alive.length === 0) return;
  for (const pgid of alive) signalGroup(pgid, "SIGTERM");
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline && alive.some(groupAlive)) await new Promise((r) => setTimeout(r, 100));
  for (const pgid of alive) if (groupAlive(pgid)) signalGroup(pgid, "SIGKILL");
}
