// A job's `cache` entries (docs/api.md §16, docs/caches.md): keys filled in after the checkout, restored before the
// first step (the local store, else the instance's shared cache), saved after a succeeded build. Archives are plain
// tar streams made and read by the system's `tar` (never whole in memory); with --run-as, `tar` runs as the build
// user, so a restore writes only where that user may and a save reads only what that user may.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { chmod, lstat, mkdir, readdir, readFile, realpath, rm, stat, symlink, writeFile } from "node:fs/promises";
import { dirname, join, sep } from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { cachePathProblem, parseKeyTemplate, type KeyPart } from "../../domain/common/cache-key.ts";
import { matchFiles } from "./artifact-files.ts";
import type { CacheEntryReport, RemoteCache, RemoteCacheHit } from "./cache-remote-types.ts";
import type { CacheStore, StoredEntry } from "./cache-store.ts";

export interface CacheEntryConfig {
  key: string;
  paths: string[];
  restore_keys?: string[];
}

export interface KeyValues {
  branch: string;
  platform: string;
  os: string;
  arch: string;
  pipeline: string;
}

/** `{{ os }}` and `{{ arch }}` as docs/api.md §16 names them. */
export function hostKeyValues(): { os: string; arch: string } {
  const os = process.platform === "darwin" ? "macos" : process.platform === "win32" ? "windows" : process.platform;
  const arch = process.arch === "x64" ? "x64" : process.arch === "arm64" ? "arm64" : process.arch;
  return { os, arch };
}

/** SHA-256 over the sorted files matching `globs`: each file's workspace-relative path, then its bytes. */
export async function hashFiles(workspace: string, globs: string[]): Promise<string> {
  const { files } = await matchFiles(workspace, globs);
  const hash = createHash("sha256");
  for (const rel of files) {
    hash.update(`${rel}\0`);
    for await (const chunk of createReadStream(join(workspace, rel))) hash.update(chunk as Buffer);
    hash.update("\0");
  }
  return hash.digest("hex");
}

/** Bytes a cache must never hold: the job's signing files and secret values (a step's copies of them included). */
export interface SecretPrints {
  sizes: Set<number>;
  hashes: Set<string>;
}

export async function secretPrints(secretsDir: string, values: string[]): Promise<SecretPrints> {
  const prints: SecretPrints = { sizes: new Set(), hashes: new Set() };
  const add = (bytes: Buffer) => {
    if (bytes.length === 0) return;
    prints.sizes.add(bytes.length);
    prints.hashes.add(createHash("sha256").update(bytes).digest("hex"));
  };
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) await walk(path);
      else if (entry.isFile()) add(await readFile(path));
    }
  };
  await walk(secretsDir);
  for (const value of values) add(Buffer.from(value));
  return prints;
}

async function fileHash(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

export interface Identity {
  uid?: number;
  gid?: number;
}

interface TarRun {
  code: number;
  stderr: string;
}

function runTar(
  args: string[],
  identity: Identity,
  io: { input?: string; output?: string; hash?: ReturnType<typeof createHash> },
): Promise<TarRun & { bytes: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn("tar", args, {
      stdio: [io.input ? "pipe" : "ignore", io.output ? "pipe" : "ignore", "pipe"],
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LC_ALL: "C" },
      ...(identity.uid !== undefined ? { uid: identity.uid, gid: identity.gid } : {}),
    });
    let stderr = "";
    let bytes = 0;
    child.stderr!.on("data", (d: Buffer) => {
      if (stderr.length < 4000) stderr += d.toString();
    });
    const work: Array<Promise<unknown>> = [];
    if (io.input) work.push(pipeline(createReadStream(io.input), child.stdin!).catch(() => undefined));
    if (io.output) {
      const counter = new Transform({
        transform(chunk: Buffer, _enc, done) {
          bytes += chunk.length;
          io.hash?.update(chunk);
          done(null, chunk);
        },
      });
      work.push(pipeline(child.stdout!, counter, createWriteStream(io.output, { mode: 0o600 })));
    }
    child.once("error", reject);
    child.once("close", (code) => {
      Promise.all(work).then(
        () => resolve({ code: code ?? 1, stderr, bytes }),
        (err: unknown) => reject(err),
      );
    });
  });
}

/** Names inside an archive: `w/…` for the workspace, `h/…` for the job's home. */
const ROOTS = { workspace: "w", home: "h" } as const;

export interface JobCachesOptions {
  entries: CacheEntryConfig[];
  store: CacheStore;
  remote: RemoteCache | null;
  /** The store's directory for this job's project and trust class. */
  scope: string;
  workspace: string;
  home: string;
  /** A directory of the job's the step user may traverse, for the archive's staging links. */
  stageDir: string;
  identity: Identity;
  values: KeyValues;
  say: (line: string) => void;
}

interface EntryState {
  config: CacheEntryConfig;
  key: string;
  restoreKeys: string[];
  report: CacheEntryReport;
}

export class JobCaches {
  private states: EntryState[] = [];

  constructor(private readonly options: JobCachesOptions) {}

  /** Workspace-relative cache paths: a persistent workspace's clean keeps them. */
  static workspacePaths(entries: CacheEntryConfig[] | undefined): string[] {
    return (entries ?? []).flatMap((e) => e.paths).filter((p) => !p.startsWith("~/") && cachePathProblem(p) === null);
  }

  /** Fills in every key and restore key (after the checkout: `hash` reads the workspace's files). */
  async resolveKeys(): Promise<void> {
    const { entries, workspace, values } = this.options;
    const render = async (template: string): Promise<string> => {
      const parsed = parseKeyTemplate(template);
      if (!parsed.ok) throw new Error(`cache key ${JSON.stringify(template)}: ${parsed.message}`);
      return renderParts(parsed.parts, values, workspace);
    };
    this.states = [];
    for (const config of entries) {
      const key = await render(config.key);
      const restoreKeys: string[] = [];
      for (const r of config.restore_keys ?? []) restoreKeys.push(await render(r));
      this.states.push({
        config,
        key,
        restoreKeys,
        report: { key, result: "miss", restored_key: null, source: null, size_bytes: null, restore_ms: null, save_ms: null, saved: false },
      });
    }
  }

  /** `HANGAR_CACHE_HIT`: `exact`, `partial` or `miss` per entry, in order. */
  hitVariable(): string {
    return this.states.map((s) => s.report.result).join(",");
  }

  reports(): CacheEntryReport[] {
    return this.states.map((s) => ({ ...s.report }));
  }

  /** Restores each entry: the local store's exact entry, else the shared cache's, else the best prefix match. */
  async restore(): Promise<void> {
    const { store, remote, scope, say } = this.options;
    for (const state of this.states) {
      const started = Date.now();
      try {
        const found = await this.find(state);
        if (!found) {
          say(`hangar: cache ${state.key}: miss`);
          continue;
        }
        let local: StoredEntry | null = found.local;
        if (!local && found.shared) {
          // Downloaded into the local store first: the next build here restores it without the network.
          const tmp = await store.tempFile();
          try {
            await remote!.download(found.shared, tmp);
            await store.put(scope, found.shared.key, tmp, found.shared.size_bytes, found.shared.sha256);
          } finally {
            await rm(tmp, { force: true });
          }
          local = await store.find(scope, found.shared.key, []);
          if (!local) throw new Error("the downloaded entry did not stay in the local store");
        }
        await this.extract(state.config, local!.file);
        state.report.result = local!.key === state.key ? "exact" : "partial";
        state.report.restored_key = local!.key;
        state.report.source = found.shared ? "shared" : "local";
        state.report.size_bytes = local!.size_bytes;
        state.report.restore_ms = Date.now() - started;
        say(
          `hangar: cache ${state.key}: ${state.report.result} hit${state.report.result === "partial" ? ` (${local!.key})` : ""}, ` +
            `${formatBytes(local!.size_bytes)} from the ${state.report.source} cache in ${(state.report.restore_ms / 1000).toFixed(1)} s`,
        );
      } catch (err) {
        // A cache is an optimisation: a failed restore is a miss, said in the log, never a failed build.
        say(`hangar: cache ${state.key}: restore failed (${(err as Error).message}); going on without it`);
        state.report = { ...state.report, result: "miss", restored_key: null, source: null, size_bytes: null, restore_ms: null };
      }
    }
  }

  private async find(state: EntryState): Promise<{ local: StoredEntry | null; shared: RemoteCacheHit | null } | null> {
    const { store, remote, scope, say } = this.options;
    const exact = await store.find(scope, state.key, []);
    if (exact) return { local: exact, shared: null };
    let shared: RemoteCacheHit | null = null;
    if (remote) {
      shared = await remote.find(state.key, state.restoreKeys).catch((err: Error) => {
        say(`hangar: cache ${state.key}: the shared cache could not be asked (${err.message})`);
        return null;
      });
      if (shared?.key === state.key) return { local: null, shared };
    }
    const partial = await store.find(scope, state.key, state.restoreKeys);
    if (partial) return { local: partial, shared: null };
    return shared ? { local: null, shared } : null;
  }

  private async extract(config: CacheEntryConfig, archive: string): Promise<void> {
    const { workspace, home, identity } = this.options;
    const targets: Array<[string, string]> = [[ROOTS.workspace, workspace]];
    if (config.paths.some((p) => p.startsWith("~/"))) targets.push([ROOTS.home, home]);
    for (const [root, dir] of targets) {
      // The build user cannot open the store's files: the runner streams the archive to its tar; otherwise tar reads it.
      const piped = identity.uid !== undefined;
      const args = ["-x", "-f", piped ? "-" : archive, "--no-same-owner", "-C", dir, "--strip-components=1", root];
      const run = await runTar(args, identity, piped ? { input: archive } : {});
      if (run.code !== 0) throw new Error(`tar -x exited with ${run.code}: ${run.stderr.trim().slice(0, 500)}`);
    }
  }

  /** Saves every entry not restored exactly (called after a succeeded build, once the job's processes are ended). */
  async save(prints: SecretPrints): Promise<void> {
    const { store, remote, scope, say } = this.options;
    for (const [i, state] of this.states.entries()) {
      if (state.report.result === "exact") continue;
      const started = Date.now();
      let tmp: string | null = null;
      try {
        tmp = await store.tempFile();
        const made = await this.archive(i, state.config, prints, tmp);
        if (made.excluded > 0) say(`hangar: cache ${state.key}: ${made.excluded} file(s) equal to signing material or secrets left out`);
        await store.put(scope, state.key, tmp, made.size, made.sha256);
        if (remote) {
          const stored = await store.find(scope, state.key, []);
          if (stored) {
            await remote.upload(state.key, stored.file, stored.size_bytes, stored.sha256).catch((err: Error) => {
              say(`hangar: cache ${state.key}: not shared (${err.message}); kept on this runner`);
            });
          }
        }
        state.report.saved = true;
        state.report.save_ms = Date.now() - started;
        if (state.report.size_bytes === null) state.report.size_bytes = made.size;
        say(`hangar: cache ${state.key}: saved ${formatBytes(made.size)} (${made.files} entries) in ${(state.report.save_ms / 1000).toFixed(1)} s`);
      } catch (err) {
        say(`hangar: cache ${state.key}: not saved (${(err as Error).message})`);
      } finally {
        if (tmp) await rm(tmp, { force: true });
      }
    }
  }

  /** Writes the entry's archive to `out`: the listed paths, signing material left out. */
  private async archive(
    index: number,
    config: CacheEntryConfig,
    prints: SecretPrints,
    out: string,
  ): Promise<{ size: number; sha256: string; files: number; excluded: number }> {
    const { workspace, home, stageDir, identity } = this.options;
    const stage = join(stageDir, `cache-${index}`);
    await rm(stage, { recursive: true, force: true });
    await mkdir(stage, { recursive: true });
    await chmod(stage, 0o755);
    await symlink(workspace, join(stage, ROOTS.workspace));
    await symlink(home, join(stage, ROOTS.home));
    // The roots' own entries come first so each is found at extraction (stripped to nothing, so never written).
    const names: string[] = [ROOTS.workspace, ROOTS.home];
    let excluded = 0;
    for (const path of config.paths) {
      if (cachePathProblem(path)) continue;
      const inHome = path.startsWith("~/");
      const root = inHome ? home : workspace;
      const rel = (inHome ? path.slice(2) : path).replace(/^(\.\/)+/, "").replace(/\/+$/, "");
      const full = join(root, rel);
      // A path whose parent leads elsewhere through a symbolic link is not followed out of its root.
      const parent = await realpath(dirname(full)).catch(() => null);
      const realRoot = await realpath(root).catch(() => null);
      if (!parent || !realRoot || (parent !== realRoot && !parent.startsWith(realRoot + sep))) continue;
      const walk = async (relPath: string): Promise<void> => {
        const info = await lstat(join(root, relPath)).catch(() => null);
        if (!info) return;
        const name = `${inHome ? ROOTS.home : ROOTS.workspace}/${relPath}`;
        if (info.isDirectory()) {
          names.push(name);
          for (const child of (await readdir(join(root, relPath)).catch(() => [] as string[])).sort()) await walk(`${relPath}/${child}`);
        } else if (info.isFile()) {
          if (prints.sizes.has(info.size) && prints.hashes.has(await fileHash(join(root, relPath)))) {
            excluded++;
            return;
          }
          names.push(name);
        } else if (info.isSymbolicLink()) names.push(name);
      };
      await walk(rel);
    }
    const list = join(stage, "list");
    await writeFile(list, `${names.join("\0")}\0`);
    await chmod(list, 0o644);
    const hash = createHash("sha256");
    const run = await runTar(["-c", "-f", "-", "--null", "--no-recursion", "-C", stage, "-T", list], identity, { output: out, hash });
    await rm(stage, { recursive: true, force: true });
    if (run.code !== 0) throw new Error(`tar -c exited with ${run.code}: ${run.stderr.trim().slice(0, 500)}`);
    const size = (await stat(out)).size;
    return { size, sha256: hash.digest("hex"), files: names.length - 2, excluded };
  }
}

async function renderParts(parts: KeyPart[], values: KeyValues, workspace: string): Promise<string> {
  let out = "";
  for (const part of parts) {
    if (part.kind === "text") out += part.text;
    else if (part.kind === "var") out += values[part.name];
    else out += await hashFiles(workspace, part.globs);
  }
  return out;
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}
