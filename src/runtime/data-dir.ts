// The data directory on a Node host (docs/api.md §13): private to the daemon's user, with `daemon.url` beside the
// database so that `hangar login` finds a daemon listening on any port (docs/api.md §3).
import { chmodSync, closeSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

/** The data directory cannot be created or written: every command stops with this message (exit 1). */
export class DataDirError extends Error {
  override name = "DataDirError";
}

/**
 * Creates `dir` one missing level at a time (mode 0700). Node's `mkdirSync(…, {recursive: true})` never returns
 * on some paths (under /proc it spun at full CPU, deaf to SIGTERM), so each level is made with a plain mkdir and
 * any failure is reported with the path it concerns.
 */
function createDirectory(dir: string): void {
  const missing: string[] = [];
  let at = resolve(dir);
  for (;;) {
    let st;
    try {
      st = statSync(at);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== "ENOENT") throw new DataDirError(`the data directory ${dir} cannot be created: ${at} is not reachable (${code ?? "error"})`);
      missing.push(at);
      const parent = dirname(at);
      if (parent === at) break;
      at = parent;
      continue;
    }
    if (!st.isDirectory()) throw new DataDirError(`the data directory ${dir} cannot be created: ${at} is not a directory`);
    break;
  }
  for (const path of missing.reverse()) {
    try {
      mkdirSync(path, { mode: 0o700 });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "EEXIST" && statSync(path).isDirectory()) continue;
      throw new DataDirError(`the data directory ${dir} cannot be created: mkdir ${path} failed (${code ?? "error"})`);
    }
  }
}

/** Writes and removes a probe file: mode bits alone cannot tell (ACLs, read-only mounts, /proc, root). */
function assertWritable(dir: string): void {
  const probe = join(dir, `.hangar-write-probe-${process.pid}`);
  try {
    closeSync(openSync(probe, "w", 0o600));
    unlinkSync(probe);
  } catch (err) {
    throw new DataDirError(`the data directory ${dir} is not writable (${(err as NodeJS.ErrnoException).code ?? "error"})`);
  }
}

export const DAEMON_URL_FILE = "daemon.url";

/** Files the daemon keeps in the data directory; a copy from an older version may be world-readable. */
const PRIVATE_FILES = ["hangar.db", "hangar.db-wal", "hangar.db-shm", "master.key", DAEMON_URL_FILE];

/** Tightens a path we own to `mode` when others can reach it; a path owned by someone else is left alone. */
function tighten(path: string, mode: number): void {
  let st;
  try {
    st = statSync(path);
  } catch {
    return;
  }
  if ((st.mode & 0o077) === 0) return;
  if (typeof process.getuid === "function" && st.uid !== process.getuid()) return;
  chmodSync(path, mode);
}

/**
 * Creates the data directory 0700 (DataDirError when it cannot be created or written), or tightens an existing one (and the files Hangar keeps in it) that an earlier
 * version created 0755/0644: emails, logs, the audit trail and the key file are the daemon user's alone.
 */
export function prepareDataDir(dataDir: string): void {
  createDirectory(dataDir);
  assertWritable(dataDir);
  tighten(dataDir, 0o700);
  for (const name of PRIVATE_FILES) tighten(join(dataDir, name), 0o600);
}

/** The URL a local client uses: a wildcard bind is reached through loopback. */
export function localDaemonUrl(listenUrl: string): string {
  const url = new URL(listenUrl);
  if (url.hostname === "0.0.0.0") url.hostname = "127.0.0.1";
  else if (url.hostname === "[::]") url.hostname = "[::1]";
  return url.origin;
}

/** Writes `daemon.url` (0600) whole: a temp file renamed into place, so a reader never sees half a URL. */
export function writeDaemonUrl(dataDir: string, listenUrl: string): string {
  const url = localDaemonUrl(listenUrl);
  const temp = join(dataDir, `.${DAEMON_URL_FILE}.${process.pid}.tmp`);
  writeFileSync(temp, `${url}\n`, { mode: 0o600 });
  renameSync(temp, join(dataDir, DAEMON_URL_FILE));
  return url;
}

/** Removes `daemon.url` on exit, unless another daemon on this data directory has written its own since. */
export function removeDaemonUrl(dataDir: string, url: string): void {
  if (readDaemonUrl(dataDir) === url) rmSync(join(dataDir, DAEMON_URL_FILE), { force: true });
}

/** The running daemon's URL, or null when none has written one. */
export function readDaemonUrl(dataDir: string): string | null {
  try {
    const text = readFileSync(join(dataDir, DAEMON_URL_FILE), "utf8").trim();
    return /^http:\/\/[^\s/]+$/.test(text) ? text : null;
  } catch {
    return null;
  }
}
