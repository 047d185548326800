// What the benchmarks share to drive the real daemon: run a CLI command, start `hangar serve` and wait for its
// listening line, stop a process. BENCH_ROOT points at another checkout (the "before" figures) where a bench
// supports it.
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const BENCH_ROOT = process.env.BENCH_ROOT ?? fileURLToPath(new URL("..", import.meta.url));
export const HANGAR_BIN = join(BENCH_ROOT, "bin", "hangar.mjs");

/** `hangar <args>`: its trimmed stdout; a non-zero exit rejects. */
export function runCli(args: string[], env: Record<string, string>, stderr: "inherit" | "ignore" = "inherit"): Promise<string> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [HANGAR_BIN, ...args], { cwd: BENCH_ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", stderr] });
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
export function startDaemon(env: Record<string, string>, options: { stderrTail?: number; stderrMode?: "inherit" | "ignore" } = {}): Promise<Daemon> {
  const tail = options.stderrTail ?? 0;
  const proc = spawn(process.execPath, [HANGAR_BIN, "serve"], {
    cwd: BENCH_ROOT,
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
