// The data directory on a Node host (CONTRACT §13): private to the daemon's user, with `daemon.url` beside the
// database so that `hangar login` finds a daemon listening on any port (CONTRACT §3).
import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";

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
 * Creates the data directory 0700, or tightens an existing one (and the files Hangar keeps in it) that an earlier
 * version created 0755/0644: emails, logs, the audit trail and the key file are the daemon user's alone.
 */
export function prepareDataDir(dataDir: string): void {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
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
