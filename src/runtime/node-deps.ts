import type { HttpBindings } from "@hono/node-server";
import { chmodSync, closeSync, existsSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, rmSync, statSync, writeSync } from "node:fs";
import { join } from "node:path";
import type { Context } from "hono";
import type { HangarConfig } from "../config.ts";
import { openDb, type OpenedDb } from "../db/client.ts";
import { migrateDb } from "../db/migrate.ts";
import { systemClock, type AppDeps, type IncrementalHash, type Logger } from "../deps.ts";
import { base64UrlToBytes, bytesToBase64Url, createSecretBox, randomBytes } from "../domain/common/crypto.ts";
import { loadInstance } from "../domain/setup/instance.ts";
import { openNodeArtifactStore } from "../storage/node-stores.ts";
import { JobSignal } from "../domain/builds/job-signal.ts";
import { readQueueVersion } from "../domain/builds/scheduler.ts";
import { describeError } from "../errors.ts";
import { createNodeGitClient } from "./git.ts";
import { createNodeOutbound } from "./outbound.ts";
import { createNodeMailSender } from "./mail.ts";
import { checkWritableDir } from "./writable-dir.ts";
import { nodeProcessMetrics } from "./process-metrics.ts";
import { nodeDiskSpace } from "./disk-space.ts";
import { nodeRunnerBundle } from "./runner-bundle.ts";
import { socketOwnerUid, type SocketEnds } from "./socket-owner.ts";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";

/**
 * Log lines gathered during one turn of the event loop and written to stderr together at its end (one write
 * instead of one per request under load), and at once when 64 KiB are waiting or the process exits.
 */
let pendingLog = "";
let flushScheduled = false;
function flushLog(): void {
  flushScheduled = false;
  if (pendingLog === "") return;
  const out = pendingLog;
  pendingLog = "";
  process.stderr.write(out);
}
process.once("exit", () => {
  if (pendingLog === "") return;
  // Synchronous: nothing asynchronous runs any more once `exit` is emitted.
  writeSync(2, pendingLog);
  pendingLog = "";
});

export const stderrLogger: Logger = (record) => {
  pendingLog += `${JSON.stringify(record)}\n`;
  if (pendingLog.length >= 64 * 1024) flushLog();
  else if (!flushScheduled) {
    flushScheduled = true;
    setImmediate(flushLog);
  }
};

/** node:crypto's MD5, fed chunk by chunk (App Store Connect's upload checksum). */
export function nodeMd5(): IncrementalHash {
  const hash = createHash("md5");
  return { update: (data) => void hash.update(data), digestHex: () => hash.digest("hex") };
}

/** The socket's peer address from @hono/node-server's bindings (the daemon and embedders alike). */
export function nodePeerAddress(c: Context): string | undefined {
  const env = c.env as Partial<HttpBindings> | undefined;
  return env?.incoming?.socket?.remoteAddress;
}

/** The connection's two ends from the bindings' socket (this daemon's listener and @hono/node-server's alike). */
export function nodeSocketEnds(c: Context): SocketEnds | undefined {
  const socket = (c.env as Partial<HttpBindings> | undefined)?.incoming?.socket;
  if (!socket?.localAddress || !socket.remoteAddress || !socket.localPort || !socket.remotePort) return undefined;
  return { localAddress: socket.localAddress, localPort: socket.localPort, remoteAddress: socket.remoteAddress, remotePort: socket.remotePort };
}

/** The uid of an OS user name (`id -u`, the same on Linux and macOS). */
function uidOfUser(name: string): number {
  try {
    return Number(execFileSync("id", ["-u", "--", name], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"], timeout: 5_000 }).trim());
  } catch {
    throw new Error(`HANGAR_LOCAL_LOGIN_USERS names ${JSON.stringify(name)}, which is not a user of this machine`);
  }
}

/**
 * AppDeps.isLocalUserSocket for a Node host: the client's end of the socket is owned by this process's user or one
 * of `users` (docs/decisions.md "Local login: the socket's owner"). Names are resolved once, at start.
 */
export function nodeLocalUserSocket(users: readonly string[]): (c: Context) => Promise<boolean> {
  const uids = new Set<number>(users.map(uidOfUser));
  const own = process.getuid?.();
  if (own !== undefined) uids.add(own);
  return async (c) => {
    const ends = nodeSocketEnds(c);
    if (!ends) return false;
    const uid = await socketOwnerUid(ends);
    return uid !== null && uids.has(uid);
  };
}

/**
 * Reads `master.key` from the data directory, creating it (32 random bytes, mode 0600) on first start.
 * `wx` makes creation atomic, so two daemons starting together agree on one key.
 */
export function loadOrCreateMasterKey(dataDir: string): Uint8Array {
  mkdirSync(dataDir, { recursive: true });
  const path = join(dataDir, "master.key");
  // Every start after the first finds the key: it is only made (a temp file, a random key, an fsync, a link,
  // an unlink: a few ms of each start, docs/benchmarks.md) when it is not there yet.
  if (!existsSync(path)) createMasterKey(dataDir, path);
  // A key readable by others is tightened rather than trusted as is.
  if ((statSync(path).mode & 0o077) !== 0) chmodSync(path, 0o600);
  const key = base64UrlToBytes(readFileSync(path, "utf8").trim());
  if (key.length !== 32) throw new Error(`${path} does not hold a 32-byte key`);
  return key;
}

function createMasterKey(dataDir: string, path: string): void {
  // Written whole to a private temp file, fsynced, then linked into place: link() fails if the key exists, so
  // two daemons starting together agree on one key, and a crash never leaves an empty or partial master.key.
  const temp = join(dataDir, `.master.key.${process.pid}.${Date.now()}.tmp`);
  try {
    const fd = openSync(temp, "wx", 0o600);
    try {
      writeSync(fd, `${bytesToBase64Url(randomBytes(32))}\n`);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    linkSync(temp, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  } finally {
    rmSync(temp, { force: true });
  }
}

export interface NodeRuntime {
  deps: AppDeps;
  opened: OpenedDb;
  close(): void;
}

/** Opens the database (migrated), the key file and the rest of AppDeps for a Node host. */
export async function createNodeDeps(config: HangarConfig, overrides: Partial<AppDeps> = {}): Promise<NodeRuntime> {
  const opened = await openDb(config.databaseUrl, config.databaseAuthToken, {
    synchronous: config.dbSynchronous,
    checkpointEveryMs: config.dbCheckpointMs,
    // A benchmark's switch, not a setting (docs/benchmarks.md "Embedded driver against @libsql/client").
    fileDriver: process.env.HANGAR_BENCH_FILE_DRIVER === "libsql-client" ? "libsql-client" : "embedded",
  });
  const outbound = createNodeOutbound(config.outboundAllow);
  try {
    await migrateDb(opened.db);
    const secrets = await createSecretBox(loadOrCreateMasterKey(config.dataDir));
    const deps: AppDeps = {
      db: opened.db,
      clock: systemClock,
      config,
      secrets,
      getPeerAddress: nodePeerAddress,
      isLocalUserSocket: nodeLocalUserSocket(config.localLoginUsers),
      log: stderrLogger,
      checkWritableDir,
      fetch: outbound.fetch,
      checkDestination: async (url) => ({ listed: (await outbound.resolve(url)).listed }),
      git: createNodeGitClient({ allow: config.outboundAllow }),
      sendMail: createNodeMailSender(outbound.resolve),
      // One loop per daemon reads the queue version while claims wait: builds queued through other daemons
      // sharing the database wake this daemon's long-polls (docs/api.md §8).
      jobSignal: new JobSignal({
        readVersion: () => readQueueVersion(opened.db),
        onError: (err) =>
          stderrLogger({ time: new Date().toISOString(), level: "warn", msg: "queue version read failed", error: describeError(err) }),
      }),
      openArtifactStore: (target) => openNodeArtifactStore(target, outbound.streamingFetch, deps.clock),
      uploadFetch: outbound.streamingFetch,
      md5: nodeMd5,
      processMetrics: nodeProcessMetrics,
      diskSpace: nodeDiskSpace,
      runnerBundle: nodeRunnerBundle(),
      ...overrides,
    };
    await loadInstance(deps);
    return {
      deps,
      opened,
      close: () => {
        opened.close();
        void outbound.close();
      },
    };
  } catch (err) {
    opened.close();
    void outbound.close();
    throw err;
  }
}
