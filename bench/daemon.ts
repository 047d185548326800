// What the benchmarks share to drive the real daemon: run a CLI command, start `hangar serve` and wait for its
// listening line, stop a process. BENCH_ROOT points at another checkout (the "before" figures) where a bench
// supports it.
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const BENCH_ROOT = process.env.BENCH_ROOT ?? fileURLToPath(new URL("..", import.meta.url));
export const HANGAR_BIN = join(BENCH_ROOT, "bin", "hangar.mjs");
/**
 * BENCH_COMPARE_ROOT: a second checkout (another HTTP adapter, an older commit) whose daemon bench:http and
 * bench:claim load in the same run as this one's, interleaved, on the same database (docs/benchmarks.md).
 */
export const COMPARE_ROOT = process.env.BENCH_COMPARE_ROOT;

/** `hangar <args>`: its trimmed stdout; a non-zero exit rejects. */
export function runCli(args: string[], env: Record<string, string>, stderr: "inherit" | "ignore" = "inherit"): Promise<string> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [HANGAR_BIN, ...args], {
      cwd: BENCH_ROOT,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", stderr],
    });
    let out = "";
    proc.stdout.on("data", (d: Buffer) => (out += d.toString()));
    proc.once("exit", (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`hangar ${args.join(" ")} exited with ${code}`))));
  });
}

export interface Daemon {
  url: string;
  proc: ChildProcess;
  /** The last `stderrTail` characters the daemon wrote to stderr ("" when stderr is not kept). */
  stderr: () => string;
}

/**
 * `hangar serve` with `env` over the caller's environment, resolved with its URL once it prints the listening line.
 * `stderrTail` keeps that many characters of its stderr for error messages (0: stderr goes to `stderrMode`).
 */
export function startDaemon(
  env: Record<string, string>,
  options: { stderrTail?: number; stderrMode?: "inherit" | "ignore"; root?: string } = {},
): Promise<Daemon> {
  const tail = options.stderrTail ?? 0;
  const root = options.root ?? BENCH_ROOT;
  const proc = spawn(process.execPath, [join(root, "bin", "hangar.mjs"), "serve"], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", tail > 0 ? "pipe" : (options.stderrMode ?? "ignore")],
  });
  let stderr = "";
  if (tail > 0) proc.stderr!.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-tail)));
  return new Promise((resolve, reject) => {
    let out = "";
    proc.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const m = /hangar listening on (http:\/\/\S+)/.exec(out);
      if (m?.[1]) resolve({ url: m[1], proc, stderr: () => stderr });
    });
    proc.once("exit", (code) => reject(new Error(`daemon exited with ${code}${stderr ? `: ${stderr}` : ""}`)));
  });
}

/** SIGTERM, resolved when the process has exited (at once if it already has). */
export function stopProcess(proc: ChildProcess | undefined): Promise<void> {
  if (!proc || proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    proc.once("exit", () => resolve());
    proc.kill("SIGTERM");
  });
}

/**
 * CPU time (user + system, ms) a process has used so far, from /proc (Linux). Per request, it is a figure the
 * machine's other load hardly changes, unlike a rate: the benchmarks print it beside the rates.
 */
export function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // utime and stime are fields 14 and 15 of the whole line (11 and 12 after the command), in clock ticks (100/s).
  return (Number(fields[11]) + Number(fields[12])) * 10;
}
