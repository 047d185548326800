// Local-disk artifact store (Node only). Uploads stream to a temporary file beside the target, are checked
// (size, limit, SHA-256), fsync'ed, then renamed into place, so a reader never sees a half-written artifact
// and a crash leaves at worst a `.part-*` file that `remove` cleans up.
import { createHash, randomBytes } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdir, open, readdir, rename, rm, rmdir, stat, type FileHandle } from "node:fs/promises";
import { basename, dirname, resolve, sep } from "node:path";
import { pipeline } from "node:stream/promises";
import v8 from "node:v8";
import vm from "node:vm";
import { UploadRejectedError, type ArtifactStore, type ByteRange, type WriteOptions } from "./types.ts";

/** Read size per pull: large enough that per-chunk overhead is small, small enough that memory stays flat. */
const READ_CHUNK = 512 * 1024;
/** Bytes queued towards the disk before the upload stops reading from the socket. */
const WRITE_HIGH_WATER_MARK = 512 * 1024;
/** How many streamed bytes between two young-generation collections (see collectTransferGarbage). */
const GC_EVERY_BYTES = 4 * 1024 * 1024;

/**
 * Streaming allocates a fresh buffer per socket read or file chunk while creating almost no JS objects, so V8's
 * young generation fills slowly and the dead buffers pile up until the external-memory limit (about 64 MiB)
 * forces a collection: that pile is most of a transfer's RSS. A minor collection every 4 MiB (about 80 µs
 * each) frees them early and keeps a transfer's footprint to a few MiB. `gc` is taken from a fresh context
 * with --expose-gc set at run time, so the main context's globals stay as they were; without it, nothing.
 * Made on the first transfer that needs one, not at import: a new V8 context costs every daemon start a few
 * milliseconds and about a MiB of heap, and most starts serve no artifact at all (docs/benchmarks.md).
 */
let minorGc: (() => void) | null | undefined;
function makeMinorGc(): (() => void) | null {
  try {
    v8.setFlagsFromString("--expose-gc");
    const gc = vm.runInNewContext("gc") as (options?: { type: "minor" | "major" }) => void;
    return () => gc({ type: "minor" });
  } catch {
    return null;
  }
}

let bytesSinceGc = 0;
function collectTransferGarbage(bytes: number): void {
  bytesSinceGc += bytes;
  if (bytesSinceGc < GC_EVERY_BYTES) return;
  bytesSinceGc = 0;
  minorGc ??= makeMinorGc();
  minorGc?.();
}

export function createLocalDiskStore(baseDir: string): ArtifactStore {
  const root = resolve(baseDir);

  /** Keys are ours, but a key that escapes the base directory is refused all the same. */
  const pathOf = (key: string): string => {
    const full = resolve(root, key);
    if (!full.startsWith(root + sep)) throw new Error("artifact key escapes the storage directory");
    return full;
  };

  return {
    kind: "local",

    async writeStream(key, body, options) {
      const target = pathOf(key);
      // The pid in the name tells removePartialUploads whether the writer is still alive.
      const temp = `${target}.part-${process.pid}-${randomBytes(6).toString("hex")}`;
      // The temp file is created before the body is read: remove() of the build's last other artifact may
      // rmdir the (then empty) directory between mkdir and the open, in which case both are done again.
      for (let attempt = 1; ; attempt++) {
        await mkdir(dirname(target), { recursive: true });
        try {
          await (await open(temp, "wx", 0o640)).close();
          break;
        } catch (err) {
          if (attempt >= 3 || (err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
        }
      }
      try {
        const digest = await copyChecked(body, temp, options);
        // Durable before it is visible: the data, then the rename, then the directory entry.
        await syncFile(temp);
        await rename(temp, target);
        await syncDirectory(dirname(target));
        return { sha256: digest };
      } catch (err) {
        await rm(temp, { force: true });
        throw err;
      }
    },

    async head(key) {
      try {
        const info = await stat(pathOf(key));
        return info.isFile() ? { sizeBytes: info.size } : null;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
        throw err;
      }
    },

    async read(key, range) {
      return fileStream(pathOf(key), range);
    },

    async readRange(key, range) {
      const handle = await open(pathOf(key), "r");
      try {
        const out = new Uint8Array(range.end - range.start + 1);
        let filled = 0;
        while (filled < out.length) {
          const { bytesRead } = await handle.read(out, filled, out.length - filled, range.start + filled);
          if (bytesRead === 0) break;
          filled += bytesRead;
        }
        return out.subarray(0, filled);
      } finally {
        await handle.close();
      }
    },

    async remove(key) {
      const target = pathOf(key);
      await rm(target, { force: true });
      // Leftovers of uploads that died mid-way (a crash skips the cleanup in writeStream).
      const prefix = `${basename(target)}.part-`;
      const siblings = await readdir(dirname(target)).catch(() => [] as string[]);
      await Promise.all(siblings.filter((n) => n.startsWith(prefix)).map((n) => rm(`${dirname(target)}/${n}`, { force: true })));
      // The build's directory goes once empty (rmdir refuses a non-empty one); the store root itself never.
      if (dirname(target) !== root) await rmdir(dirname(target)).catch(() => undefined);
    },
  };
}

/** Whether a process with this pid runs on this machine (EPERM: it does, as another user). */
function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Removes the `.part-*` files that uploads of a crashed daemon left under `baseDir` (docs/api.md §7): run at start.
 * A file whose writer (the pid in its name) still runs belongs to another daemon on the same directory and stays.
 * Answers the number of files removed. Call it before this process accepts uploads.
 */
export async function removePartialUploads(baseDir: string): Promise<number> {
  const root = resolve(baseDir);
  let removed = 0;
  const walk = async (dir: string, depth: number): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    for (const entry of entries) {
      const path = `${dir}${sep}${entry.name}`;
      if (entry.isDirectory()) {
        // Keys are <build>/<artifact>/<file> at most: no need to descend further.
        if (depth < 4) await walk(path, depth + 1);
        continue;
      }
      const match = /\.part-(?:(\d+)-)?[0-9a-f]+$/.exec(entry.name);
      if (!match || !entry.isFile()) continue;
      const pid = match[1] === undefined ? undefined : Number(match[1]);
      // Our own pid is a crashed predecessor's (a container restarts with the same pid): this runs before we upload.
      if (pid !== undefined && pid !== process.pid && processAlive(pid)) continue;
      await rm(path, { force: true });
      removed++;
    }
  };
  await walk(root, 0);
  return removed;
}

/**
 * Streams the body into the file through a write stream (which batches queued chunks into one writev), counting
 * and hashing on the way; stops at the first byte past a limit. Backpressure holds memory to about one
 * high-water mark whatever the size.
 */
async function copyChecked(body: AsyncIterable<Uint8Array>, path: string, options: WriteOptions): Promise<string> {
  const hash = createHash("sha256");
  let received = 0;
  async function* checked(source: AsyncIterable<Uint8Array>) {
    for await (const chunk of source) {
      received += chunk.byteLength;
      if (received > options.maxBytes) {
        throw new UploadRejectedError("upload_too_large", `the body exceeds the upload limit of ${options.maxBytes} bytes`);
      }
      if (received > options.expectedSize) {
        throw new UploadRejectedError("size_mismatch", `the body is longer than the declared ${options.expectedSize} bytes`);
      }
      hash.update(chunk);
      collectTransferGarbage(chunk.byteLength);
      yield chunk;
    }
  }
  // The caller created the (uniquely named) file already, so it is opened for writing, not created.
  await pipeline(body, checked, createWriteStream(path, { flags: "w", mode: 0o640, highWaterMark: WRITE_HIGH_WATER_MARK }));
  if (received !== options.expectedSize) {
    throw new UploadRejectedError("size_mismatch", `the body has ${received} bytes, ${options.expectedSize} were declared`);
  }
  const digest = hash.digest("hex");
  if (options.sha256 !== undefined && digest !== options.sha256.toLowerCase()) {
    throw new UploadRejectedError("checksum_mismatch", "the body's SHA-256 differs from the declared one");
  }
  return digest;
}

/** fsync through a fresh descriptor: it flushes the file's data whichever descriptor wrote it. */
async function syncFile(path: string): Promise<void> {
  const handle = await open(path, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function syncDirectory(path: string): Promise<void> {
  // Some filesystems refuse fsync on a directory; the rename is then as durable as they allow.
  const dir = await open(path, "r").catch(() => null);
  if (!dir) return;
  try {
    await dir.sync();
  } catch {
    // best effort, see above
  } finally {
    await dir.close();
  }
}

/**
 * A pull-driven stream over a file: chunks are read only as the consumer asks (plus one read ahead, so disk
 * and socket overlap), so a slow client holds at most two chunks in memory. The file opens on the first pull,
 * so a stream nobody reads (a HEAD answer) holds no descriptor.
 */
function fileStream(path: string, range?: ByteRange): ReadableStream<Uint8Array> {
  let handle: FileHandle | null = null;
  let position = range?.start ?? 0;
  const end = range ? range.end + 1 : Number.POSITIVE_INFINITY;
  let ahead: Promise<Uint8Array | null> | null = null;

  const readNext = async (): Promise<Uint8Array | null> => {
    handle ??= await open(path, "r");
    const length = Math.min(READ_CHUNK, end - position);
    if (length <= 0) return null;
    const buffer = new Uint8Array(length);
    const { bytesRead } = await handle.read(buffer, 0, length, position);
    if (bytesRead === 0) return null;
    position += bytesRead;
    return bytesRead === length ? buffer : buffer.subarray(0, bytesRead);
  };
  const closeHandle = async () => {
    const h = handle;
    handle = null;
    await h?.close().catch(() => undefined);
  };

  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const chunk = await (ahead ?? readNext());
          ahead = null;
          if (chunk === null) {
            await closeHandle();
            controller.close();
            return;
          }
          controller.enqueue(chunk);
          collectTransferGarbage(chunk.byteLength);
          ahead = readNext();
          // A failed read-ahead surfaces on the next pull; this only keeps it from being unhandled meanwhile.
          ahead.catch(() => undefined);
        } catch (err) {
          await closeHandle();
          controller.error(err);
        }
      },
      async cancel() {
        await ahead?.catch(() => undefined);
        await closeHandle();
      },
    },
    { highWaterMark: 0 },
  );
}
