// `hangar backup` and `hangar restore` (docs/api.md §13): a consistent online snapshot of the embedded database,
// the key file and optionally the local artifacts, with a manifest of counts and checksums. Node only.
import { createHash } from "node:crypto";
import {
  chmodSync,
  copyFileSync,
  createReadStream,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { sql } from "drizzle-orm";
import type { HangarConfig } from "../config.ts";
import type { OpenedDb } from "../db/client.ts";

export class BackupError extends Error {}

export const MANIFEST_FORMAT = 1;

export interface ManifestFile {
  path: string;
  bytes: number;
  sha256: string;
}

export interface BackupManifest {
  format: number;
  created_at: string;
  hangar_version: string;
  source: { data_dir: string; artifacts_dir: string };
  with_artifacts: boolean;
  integrity_check: string;
  counts: Record<string, number>;
  files: ManifestFile[];
}

type Progress = (line: string) => void;

interface DbOpener {
  openDb(url: string, authToken?: string): Promise<OpenedDb>;
}

/** The path of an embedded database URL, or an error for a libSQL server (it has its own backup tools). */
function embeddedPath(config: HangarConfig): string {
  if (!config.databaseUrl.startsWith("file:")) {
    throw new BackupError(
      `HANGAR_DATABASE_URL points at a libSQL server (${new URL(config.databaseUrl).protocol}//…): back it up with the server's own tools (sqld snapshots, Turso point-in-time restore); hangar backup copies the embedded database`,
    );
  }
  return resolve(config.databaseUrl.slice("file:".length).replace(/^\/\/(?=\/)/, ""));
}

async function sha256File(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/** DIR must be new or empty: a backup never mixes with older files. */
function prepareEmptyDir(dir: string, what: string): void {
  if (existsSync(dir)) {
    if (!statSync(dir).isDirectory()) throw new BackupError(`${what} ${dir} is not a directory`);
    if (readdirSync(dir).length > 0) throw new BackupError(`${what} ${dir} is not empty`);
    chmodSync(dir, 0o700);
  } else {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  }
}

/** Row counts of every table of a database, and its integrity check answer. */
async function inspect(opened: OpenedDb): Promise<{ counts: Record<string, number>; integrity: string }> {
  const integrityRows = await opened.db.all<{ integrity_check: string }>(sql`PRAGMA integrity_check`);
  const integrity = integrityRows.map((r) => r.integrity_check).join("; ");
  const tables = await opened.db.all<{ name: string }>(sql`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`);
  const counts: Record<string, number> = {};
  // SQLite's own tables and drizzle's migration journal are not Hangar's data.
  for (const { name } of tables.filter((t) => !t.name.startsWith("sqlite_") && !t.name.startsWith("__"))) {
    const [row] = await opened.db.all<{ n: number }>(sql.raw(`SELECT count(*) AS n FROM "${name.replace(/"/g, '""')}"`));
    counts[name] = Number(row?.n ?? 0);
  }
  return { counts, integrity };
}

interface LocalArtifact {
  id: string;
  base_dir: string;
  key: string;
  size_bytes: number;
}

async function localArtifacts(opened: OpenedDb): Promise<LocalArtifact[]> {
  return opened.db.all<LocalArtifact>(sql`
    SELECT id, json_extract(storage_location, '$.base_dir') AS base_dir, json_extract(storage_location, '$.key') AS key, size_bytes
    FROM artifacts WHERE status = 'available' AND json_extract(storage_location, '$.provider') = 'local' ORDER BY id`);
}

/** A stored key is `<build id>/<artifact id>`; anything that could climb out of a directory is refused. */
function safeKey(key: string): string {
  if (!key || isAbsolute(key) || key.split(/[\\/]/).some((part) => part === ".." || part === "")) {
    throw new BackupError(`an artifact has an unsafe storage key: ${JSON.stringify(key)}`);
  }
  return key;
}

export async function runBackup(
  config: HangarConfig,
  options: { out: string; withArtifacts: boolean; version: string },
  modules: DbOpener,
  progress: Progress,
): Promise<BackupManifest> {
  const dbPath = embeddedPath(config);
  if (!existsSync(dbPath)) throw new BackupError(`there is no database at ${dbPath} (HANGAR_DATA_DIR=${config.dataDir})`);
  const out = resolve(options.out);
  const dataDir = resolve(config.dataDir);
  if (out === dataDir || out.startsWith(dataDir + sep)) throw new BackupError("--out must be outside the data directory");
  prepareEmptyDir(out, "--out");
  const started = Date.now();

  // VACUUM INTO writes a consistent copy from one read transaction: the daemon keeps writing meanwhile, and the
  // copy is a compact, self-contained file (no -wal beside it).
  progress(`hangar: copying the database ${dbPath}`);
  const source = await modules.openDb(`file:${dbPath}`);
  const snapshotPath = join(out, "hangar.db");
  try {
    await source.db.run(sql`VACUUM INTO ${snapshotPath}`);
  } finally {
    source.close();
  }
  chmodSync(snapshotPath, 0o600);

  const snapshot = await modules.openDb(`file:${snapshotPath}`);
  let counts: Record<string, number>;
  let integrity: string;
  let artifacts: LocalArtifact[] = [];
  try {
    ({ counts, integrity } = await inspect(snapshot));
    if (integrity !== "ok") throw new BackupError(`the snapshot failed its integrity check: ${integrity}`);
    if (options.withArtifacts) artifacts = await localArtifacts(snapshot);
  } finally {
    snapshot.close();
  }
  progress(`hangar: database copied and checked (${counts.builds ?? 0} builds, ${counts.users ?? 0} users)`);

  const keyPath = join(dataDir, "master.key");
  if (!existsSync(keyPath)) throw new BackupError(`there is no key file at ${keyPath}: without it the secrets in the database cannot be read`);
  copyFileSync(keyPath, join(out, "master.key"));
  chmodSync(join(out, "master.key"), 0o600);

  const files: ManifestFile[] = [];
  for (const name of ["hangar.db", "master.key"]) {
    const path = join(out, name);
    files.push({ path: name, bytes: statSync(path).size, sha256: await sha256File(path) });
  }

  // Only artifacts the snapshot lists as available are copied: the copy agrees with the database it comes with.
  const defaultArtifactsDir = join(dataDir, "artifacts");
  let copiedBytes = 0;
  for (const [i, a] of artifacts.entries()) {
    const key = safeKey(a.key);
    const from = join(a.base_dir, key);
    const target = join("artifacts", key);
    if (!existsSync(from) || statSync(from).size !== a.size_bytes) {
      throw new BackupError(`artifact ${a.id} is missing or has the wrong size at ${from}`);
    }
    mkdirSync(dirname(join(out, target)), { recursive: true, mode: 0o700 });
    copyFileSync(from, join(out, target));
    chmodSync(join(out, target), 0o600);
    files.push({ path: target, bytes: a.size_bytes, sha256: await sha256File(join(out, target)) });
    copiedBytes += a.size_bytes;
    if ((i + 1) % 50 === 0 || i + 1 === artifacts.length) {
      progress(`hangar: artifacts ${i + 1}/${artifacts.length} (${(copiedBytes / 1024 ** 2).toFixed(1)} MiB)`);
    }
  }

  const manifest: BackupManifest = {
    format: MANIFEST_FORMAT,
    created_at: new Date(started).toISOString(),
    hangar_version: options.version,
    source: { data_dir: dataDir, artifacts_dir: defaultArtifactsDir },
    with_artifacts: options.withArtifacts,
    integrity_check: integrity,
    counts,
    files,
  };
  writeFileSync(join(out, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o600 });
  progress(`hangar: backup written to ${out} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return manifest;
}

function readManifest(from: string): BackupManifest {
  const path = join(from, "manifest.json");
  let manifest: BackupManifest;
  try {
    manifest = JSON.parse(readFileSync(path, "utf8")) as BackupManifest;
  } catch {
    throw new BackupError(`${path} is missing or not valid JSON: is ${from} a hangar backup?`);
  }
  if (manifest.format !== MANIFEST_FORMAT || !Array.isArray(manifest.files)) {
    throw new BackupError(`${path} is not a hangar backup manifest of format ${MANIFEST_FORMAT}`);
  }
  return manifest;
}

export async function runRestore(config: HangarConfig, options: { from: string }, modules: DbOpener, progress: Progress): Promise<BackupManifest> {
  const dbPath = embeddedPath(config);
  const from = resolve(options.from);
  const manifest = readManifest(from);
  const dataDir = resolve(config.dataDir);
  if (existsSync(dataDir) && readdirSync(dataDir).length > 0) {
    throw new BackupError(
      `the data directory ${dataDir} is not empty: restore only into an empty or new directory (HANGAR_DATA_DIR), with the daemon stopped`,
    );
  }
  if (existsSync(dbPath)) throw new BackupError(`a database already exists at ${dbPath}`);

  progress(`hangar: checking ${manifest.files.length} files of the backup from ${manifest.created_at}`);
  for (const f of manifest.files) {
    const path = join(from, f.path);
    if (relative(from, path).startsWith("..")) throw new BackupError(`the manifest names a file outside the backup: ${f.path}`);
    if (!existsSync(path) || statSync(path).size !== f.bytes || (await sha256File(path)) !== f.sha256) {
      throw new BackupError(`${f.path} in the backup is missing or does not match its checksum`);
    }
  }

  prepareEmptyDir(dataDir, "the data directory");
  // Copied under a temporary name and renamed: a restore cut off halfway leaves no database that looks complete.
  const partial = `${dbPath}.restoring`;
  mkdirSync(dirname(dbPath), { recursive: true, mode: 0o700 });
  copyFileSync(join(from, "hangar.db"), partial);
  chmodSync(partial, 0o600);
  copyFileSync(join(from, "master.key"), join(dataDir, "master.key"));
  chmodSync(join(dataDir, "master.key"), 0o600);

  const artifactsDir = join(dataDir, "artifacts");
  for (const f of manifest.files.filter((x) => x.path.startsWith("artifacts/"))) {
    const target = join(dataDir, f.path);
    mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
    copyFileSync(join(from, f.path), target);
    chmodSync(target, 0o600);
  }

  const restored = await modules.openDb(`file:${partial}`);
  try {
    const { integrity, counts } = await inspect(restored);
    if (integrity !== "ok") throw new BackupError(`the restored database failed its integrity check: ${integrity}`);
    if (manifest.with_artifacts) {
      // Every available local artifact was copied to artifacts/<key> of the backup, wherever it lived: it now
      // lives in this data directory's artifacts/.
      await restored.db.run(sql`
        UPDATE artifacts SET storage_location = json_set(storage_location, '$.base_dir', ${artifactsDir})
        WHERE status = 'available' AND json_extract(storage_location, '$.provider') = 'local'`);
    }
    progress(`hangar: restored ${counts.builds ?? 0} builds, ${counts.users ?? 0} users`);
  } finally {
    restored.close();
  }
  renameSync(partial, dbPath);
  progress(`hangar: restored into ${dataDir}; start the daemon with HANGAR_DATA_DIR=${dataDir}`);
  return manifest;
}
