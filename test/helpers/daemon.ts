import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const PROJECT_ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const HANGAR_BIN = join(PROJECT_ROOT, "bin", "hangar.mjs");

export function makeDataDir(): string {
  return mkdtempSync(join(tmpdir(), "hangar-e2e-"));
}

export interface Daemon {
  url: string;
  port: number;
  proc: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Sends a signal and waits for the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts the real `hangar serve` on 127.0.0.1 with a free port and waits for the listening line. */
export async function startDaemon(env: Record<string, string>, timeoutMs = 60_000): Promise<Daemon> {
  const proc = spawn(process.execPath, [HANGAR_BIN, "serve"], {
    cwd: PROJECT_ROOT,
    // Loopback allowed for the outbound guard: the tests' OIDC providers, S3 and git servers are on 127.0.0.1. No build
    // is held for a warm runner (HANGAR_AFFINITY_WAIT_MS) unless a test asks: test/http/affinity.test.ts covers it.
    env: {
      ...process.env,
      HANGAR_HOST: "127.0.0.1",
      HANGAR_PORT: "0",
      HANGAR_OUTBOUND_ALLOW: "127.0.0.1/32,::1/128",
      HANGAR_AFFINITY_WAIT_MS: "0",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  proc.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  proc.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`daemon did not start in time:\n${out}\n${err}`)), timeoutMs);
    const check = () => {
      const m = /hangar listening on (http:\/\/\S+)/.exec(out);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    proc.stdout!.on("data", check);
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`daemon exited with ${code}:\n${out}\n${err}`));
    });
  });
  return {
    url,
    port: Number(new URL(url).port),
    proc,
    stdout: () => out,
    stderr: () => err,
    async stop(signal: NodeJS.Signals = "SIGTERM") {
      if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
      proc.kill(signal);
      return exited;
    },
  };
}

/** Runs a `hangar` CLI command to completion. */
export async function runCli(
  args: string[],
  env: Record<string, string>,
  timeoutMs = 30_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = spawn(process.execPath, [HANGAR_BIN, ...args], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  proc.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  proc.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill("SIGKILL");
      reject(new Error(`hangar ${args.join(" ")} timed out`));
    }, timeoutMs);
    proc.once("exit", (c) => {
      clearTimeout(timer);
      resolve(c);
    });
  });
  return { code, stdout, stderr };
}

/** fetch with a JSON body and Bearer token, answering status and parsed JSON. */
export async function http(
  base: string,
  method: string,
  path: string,
  options: { body?: unknown; token?: string; headers?: Record<string, string> } = {},
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- test assertions read arbitrary JSON shapes
): Promise<{ status: number; body: any; headers: Headers }> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(base + path, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) });
  const text = await res.text();
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = text;
  }
  return { status: res.status, body, headers: res.headers };
}
