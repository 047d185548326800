// Shared parts of the runner end-to-end tests: a ready daemon, the real `hangar runner` process, a git
// smart-HTTP server with Basic auth (git http-backend as CGI), and small waiting helpers.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer as createHttpServer, type Server } from "node:http";
import { createServer as createNetServer, type AddressInfo } from "node:net";
import { daemonCaller, type Caller } from "../helpers/builds.ts";
import { HANGAR_BIN, PROJECT_ROOT, http, makeDataDir, runCli, startDaemon, type Daemon } from "../helpers/daemon.ts";

export interface ReadyDaemon {
  daemon: Daemon;
  dataDir: string;
  env: Record<string, string>;
  api: Caller;
  ownerToken: string;
}

/** A daemon on a fresh data directory, taken through local setup to `ready`, with the owner signed in. */
export async function startReadyDaemon(extraEnv: Record<string, string> = {}): Promise<ReadyDaemon> {
  const dataDir = makeDataDir();
  const env = { HANGAR_DATA_DIR: dataDir, ...extraEnv };
  const daemon = await startDaemon(env);
  const made = await runCli(["setup-token"], env);
  if (made.code !== 0) throw new Error(`setup-token: ${made.stderr}`);
  const verified = await http(daemon.url, "POST", "/v1/setup/bootstrap-token/verify", { body: { token: made.stdout.trim() } });
  const setup = verified.body.session_token as string;
  const owner = await http(daemon.url, "POST", "/v1/setup/local-owner/create", { token: setup, body: { email: "owner@example.com" } });
  if (owner.status !== 200) throw new Error(`local-owner/create: ${owner.status}`);
  await http(daemon.url, "POST", "/v1/setup/complete", { token: setup });
  const login = await http(daemon.url, "POST", "/v1/auth/local/login", { body: {} });
  if (login.status !== 200) throw new Error(`login: ${login.status}`);
  return { daemon, dataDir, env, api: daemonCaller(daemon.url), ownerToken: login.body.session_token };
}

export interface RunnerProcess {
  proc: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the exit code (or 128 + n for a signal). */
  exited: Promise<number>;
}

/** Spawns the real `hangar runner`; credentials go in through the environment, as the help recommends. */
export function startRunner(
  url: string,
  runner: { id: string; token: string },
  args: string[],
  workdir: string,
  env: Record<string, string> = {},
): RunnerProcess {
  const proc = spawn(process.execPath, [HANGAR_BIN, "runner", "--workdir", workdir, ...args], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, HANGAR_URL: url, HANGAR_RUNNER_ID: runner.id, HANGAR_RUNNER_TOKEN: runner.token, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  proc.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  proc.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number>((resolve) => proc.once("exit", (code, sig) => resolve(code ?? (sig ? 128 : 1))));
  return { proc, stdout: () => out, stderr: () => err, exited };
}

export async function stopRunner(r: RunnerProcess | undefined): Promise<void> {
  if (!r || r.proc.exitCode !== null || r.proc.signalCode !== null) return;
  r.proc.kill("SIGKILL");
  await r.exited;
}

/** Polls `check` until it returns a value other than undefined/false, or fails after `timeoutMs`. */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON shapes are asserted by the tests
export async function getBuild(d: ReadyDaemon, buildId: string): Promise<any> {
  const r = await d.api.call("GET", `/v1/builds/${buildId}`, { token: d.ownerToken });
  if (r.status !== 200) throw new Error(`GET build: ${r.status} ${r.text}`);
  return r.body;
}

export async function getLog(d: ReadyDaemon, buildId: string): Promise<string> {
  const r = await d.api.call("GET", `/v1/builds/${buildId}/logs`, { token: d.ownerToken });
  if (r.status !== 200) throw new Error(`GET logs: ${r.status} ${r.text}`);
  return r.text;
}

const FINAL = ["succeeded", "failed", "canceled", "timed_out", "expired"];

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON shapes are asserted by the tests
export async function waitForFinal(d: ReadyDaemon, buildId: string, timeoutMs = 30_000): Promise<any> {
  return waitFor(
    `build ${buildId} to finish`,
    async () => {
      const b = await getBuild(d, buildId);
      return FINAL.includes(b.status) ? b : undefined;
    },
    timeoutMs,
  );
}

/**
 * A free loopback port, so a restarted daemon can come back on the same URL. It is taken below Linux's ephemeral
 * range (32768–60999): while the daemon is down, the port is then never handed to another test's server on port 0
 * or to an outgoing connection, which would answer the runner in the daemon's place.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    const server = createNetServer();
    const bound = await new Promise<boolean>((resolve) => {
      server.once("error", () => resolve(false));
      server.listen(port, "127.0.0.1", () => resolve(true));
    });
    if (!bound) continue;
    await new Promise((resolve) => server.close(resolve));
    return port;
  }
}

export interface GitHttpServer {
  url: string;
  /** Requests that came without (or with wrong) credentials, and with the right ones. */
  unauthorized: number;
  authorized: number;
  /** Command lines of local processes that contained the password while a request was being served. */
  leakedCommandLines: string[];
  close(): Promise<void>;
}

/** The command lines of every process we can read (Linux /proc); empty elsewhere. */
function commandLines(): string[] {
  if (!existsSync("/proc/self/cmdline")) return [];
  const lines: string[] = [];
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      lines.push(readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " "));
    } catch {
      // the process ended meanwhile
    }
  }
  return lines;
}

/**
 * Serves the repositories under `root` over git's smart-HTTP protocol (`git http-backend` as CGI), requiring
 * HTTP Basic auth with `username:password`. While serving, it looks for the password in every process's command
 * line, which is where a careless runner would leak it.
 */
export async function startGitHttpServer(root: string, username: string, password: string): Promise<GitHttpServer> {
  const expected = `Basic ${Buffer.from(`${username}:${password}`).toString("base64")}`;
  const state = { unauthorized: 0, authorized: 0, leakedCommandLines: [] as string[] };
  const server: Server = createHttpServer((req, res) => {
    if (req.headers.authorization !== expected) {
      state.unauthorized++;
      res.writeHead(401, { "WWW-Authenticate": 'Basic realm="hangar-test"', "content-type": "text/plain" });
      res.end("authentication required\n");
      req.resume();
      return;
    }
    state.authorized++;
    for (const line of commandLines()) if (line.includes(password)) state.leakedCommandLines.push(line);
    const url = new URL(req.url ?? "/", "http://localhost");
    const cgi = spawn("git", ["http-backend"], {
      env: {
        PATH: process.env.PATH,
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: "1",
        REQUEST_METHOD: req.method ?? "GET",
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: req.headers["content-type"] ?? "",
        ...(req.headers["content-length"] ? { CONTENT_LENGTH: req.headers["content-length"] } : {}),
        HTTP_CONTENT_ENCODING: req.headers["content-encoding"] ?? "",
        HTTP_GIT_PROTOCOL: (req.headers["git-protocol"] as string | undefined) ?? "",
        REMOTE_USER: username,
        REMOTE_ADDR: "127.0.0.1",
        SERVER_PROTOCOL: "HTTP/1.1",
      },
      stdio: ["pipe", "pipe", "inherit"],
    });
    req.pipe(cgi.stdin);
    // CGI answer: header lines, a blank line, then the body.
    let head = Buffer.alloc(0);
    let headersDone = false;
    cgi.stdout.on("data", (chunk: Buffer) => {
      if (headersDone) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const crlf = head.indexOf("\r\n\r\n");
      const lf = head.indexOf("\n\n");
      const end = crlf >= 0 && (lf < 0 || crlf < lf) ? crlf : lf;
      if (end < 0) return;
      const sep = end === crlf ? 4 : 2;
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of head.subarray(0, end).toString().split(/\r?\n/)) {
        const i = line.indexOf(":");
        if (i < 0) continue;
        const name = line.slice(0, i).trim();
        const value = line.slice(i + 1).trim();
        if (name.toLowerCase() === "status") status = Number.parseInt(value, 10);
        else headers[name] = value;
      }
      res.writeHead(status, headers);
      headersDone = true;
      res.write(head.subarray(end + sep));
    });
    cgi.stdout.on("end", () => {
      if (!headersDone) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get unauthorized() {
      return state.unauthorized;
    },
    get authorized() {
      return state.authorized;
    },
    get leakedCommandLines() {
      return state.leakedCommandLines;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export function removeDir(path: string): void {
  rmSync(path, { recursive: true, force: true });
}
