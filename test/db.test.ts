import { createClient } from "@libsql/client";
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createApp } from "../src/app.ts";
import { sql } from "drizzle-orm";
import { ConfigError, loadConfig } from "../src/config.ts";
import { openDb } from "../src/db/client.ts";
import { MIGRATIONS_FOLDER, migrateDb } from "../src/db/migrate.ts";
import { EmbeddedClient } from "../src/db/embedded.ts";
import { offLoop, oneRow } from "../src/db/fixed-sql.ts";
import { sha256Hex } from "../src/domain/common/crypto.ts";
import { issueBootstrapToken } from "../src/domain/setup/setup.ts";
import { createNodeDeps, type NodeRuntime } from "../src/runtime/node-deps.ts";

const dirs: string[] = [];
const runtimes: NodeRuntime[] = [];
afterAll(() => {
  for (const r of runtimes) r.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** The Node shell's start path (open, migrate, key file) on a fresh data directory. */
async function start() {
  const dataDir = mkdtempSync(join(tmpdir(), "hangar-db-"));
  dirs.push(dataDir);
  const config = loadConfig({ HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0" });
  // No socket under app.request(): the peer is this machine and the daemon's own user.
  const runtime = await createNodeDeps(config, { getPeerAddress: () => "127.0.0.1", isLocalUserSocket: async () => true, log: () => {} });
  runtimes.push(runtime);
  const app = createApp(runtime.deps);
  const call = async (method: string, path: string, body?: unknown, token?: string) => {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers["content-type"] = "application/json";
    if (token) headers.authorization = `Bearer ${token}`;
    const res = await app.request(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- test reads arbitrary JSON
    return { status: res.status, body: (await res.json()) as any };
  };
  return { dataDir, dbPath: join(dataDir, "hangar.db"), runtime, call };
}

/** The database file and its WAL, as text, so a plaintext token anywhere in them would show up. */
function databaseBytes(dbPath: string): string {
  return [dbPath, `${dbPath}-wal`]
    .filter((p) => existsSync(p))
    .map((p) => readFileSync(p).toString("latin1"))
    .join("\n");
}

describe("embedded database", () => {
  it("runs in WAL mode, as a second connection sees, with a busy timeout", async () => {
    const { dbPath, runtime } = await start();
    const second = createClient({ url: `file:${dbPath}` });
    try {
      const mode = await second.execute("PRAGMA journal_mode");
      expect(String(mode.rows[0]?.[0]).toLowerCase()).toBe("wal");
    } finally {
      second.close();
    }
    const busy = await runtime.opened.client.execute("PRAGMA busy_timeout");
    expect(Number(busy.rows[0]?.[0])).toBeGreaterThanOrEqual(1000);
    expect(existsSync(`${dbPath}-wal`)).toBe(true);
  });

  it("creates master.key with mode 0600 and keeps it across starts", async () => {
    const { dataDir, runtime } = await start();
    const keyPath = join(dataDir, "master.key");
    expect(statSync(keyPath).mode & 0o777).toBe(0o600);
    const sealed = await runtime.deps.secrets.seal("a secret");
    const before = readFileSync(keyPath, "utf8");
    runtime.close();
    runtimes.splice(runtimes.indexOf(runtime), 1);
    const again = await createNodeDeps(loadConfig({ HANGAR_DATA_DIR: dataDir }));
    runtimes.push(again);
    expect(readFileSync(keyPath, "utf8")).toBe(before);
    expect(await again.deps.secrets.open(sealed)).toBe("a secret");
  });

  it("holds no plaintext of any token it issued, only hashes", async () => {
    const { dbPath, runtime, call } = await start();
    const { token: bootstrap } = await issueBootstrapToken(runtime.deps);
    const verified = await call("POST", "/v1/setup/bootstrap-token/verify", { token: bootstrap });
    expect(verified.status).toBe(200);
    const setupSession: string = verified.body.session_token;
    expect((await call("POST", "/v1/setup/local-owner/create", { email: "owner@example.com" }, setupSession)).status).toBe(200);
    // A second bootstrap token, left unconsumed: its hash stays in the table until completion.
    const { token: secondBootstrap } = await issueBootstrapToken(runtime.deps);
    const secondSession = (await call("POST", "/v1/setup/bootstrap-token/verify", { token: secondBootstrap })).body.session_token as string;
    const userSessions: string[] = [];
    expect((await call("POST", "/v1/setup/complete", undefined, setupSession)).status).toBe(200);
    for (let i = 0; i < 3; i++) {
      const login = await call("POST", "/v1/auth/local/login", {});
      expect(login.status).toBe(200);
      userSessions.push(login.body.session_token);
    }
    await call("POST", "/v1/users/invite", { email: "dev@example.com", role: "developer" }, userSessions[0]);

    const tokens = [bootstrap, secondBootstrap, setupSession, secondSession, ...userSessions];
    const scan = (text: string) => {
      for (const token of tokens) {
        expect(text.includes(token), "plaintext token in the database").toBe(false);
        expect(text.includes(token.toUpperCase()), "plaintext token in the database").toBe(false);
      }
    };
    const live = databaseBytes(dbPath);
    scan(live);
    // The scan can see what is there: the user sessions' hashes are.
    for (const token of userSessions) expect(live.includes(await sha256Hex(token))).toBe(true);

    // After a checkpoint everything sits in the main file; still nothing.
    await runtime.opened.client.execute("PRAGMA wal_checkpoint(TRUNCATE)");
    scan(databaseBytes(dbPath));
  });
});

describe("migrations at start (docs/benchmarks.md)", () => {
  /** drizzle/ copied to a temp folder, its journal cut to the first `keep` entries (keep = all by default). */
  const migrationsCopy = (keep?: number): string => {
    const dir = mkdtempSync(join(tmpdir(), "hangar-migrations-"));
    dirs.push(dir);
    cpSync(MIGRATIONS_FOLDER, dir, { recursive: true });
    const journalPath = join(dir, "meta", "_journal.json");
    const journal = JSON.parse(readFileSync(journalPath, "utf8")) as { entries: unknown[] };
    if (keep !== undefined) journal.entries = journal.entries.slice(0, keep);
    writeFileSync(journalPath, JSON.stringify(journal));
    return dir;
  };
  const openFresh = async () => {
    const dir = mkdtempSync(join(tmpdir(), "hangar-migrate-"));
    dirs.push(dir);
    const opened = await openDb(`file:${join(dir, "hangar.db")}`);
    return opened;
  };
  const appliedCount = async (db: Awaited<ReturnType<typeof openDb>>["db"]) =>
    Number((await db.values<[number]>(sql`SELECT count(*) FROM __drizzle_migrations`))[0]?.[0]);
  const journalLength = () =>
    (JSON.parse(readFileSync(join(MIGRATIONS_FOLDER, "meta", "_journal.json"), "utf8")) as { entries: unknown[] }).entries.length;

  it("applies migrations newer than the database's last one, on a database migrated by an older release", async () => {
    const total = journalLength();
    expect(total).toBeGreaterThan(2);
    const opened = await openFresh();
    try {
      // The first eight (0000–0007): queue_version comes with 0008, so it is absent until the later ones run.
      await migrateDb(opened.db, migrationsCopy(8));
      expect(await appliedCount(opened.db)).toBe(8);
      const queueTable = async () =>
        (await opened.db.values<[string]>(sql`SELECT name FROM sqlite_master WHERE name = 'queue_version'`)).map((r) => r[0]);
      expect(await queueTable()).toEqual([]);
      await migrateDb(opened.db);
      expect(await appliedCount(opened.db)).toBe(total);
      expect(await queueTable()).toEqual(["queue_version"]);
      // Up to date: nothing more, however often it runs.
      await migrateDb(opened.db);
      expect(await appliedCount(opened.db)).toBe(total);
    } finally {
      opened.close();
    }
  });

  it("checks an up-to-date database from the journal alone, without reading the migration files", async () => {
    const opened = await openFresh();
    try {
      await migrateDb(opened.db);
      // The same journal with every .sql file gone: drizzle's migrator would throw "No file … found"; the check
      // before it sees the database is at the journal's last migration and never needs them.
      const bare = migrationsCopy();
      for (const f of readdirSync(bare)) if (f.endsWith(".sql")) rmSync(join(bare, f));
      await migrateDb(opened.db, bare);
      expect(await appliedCount(opened.db)).toBe(journalLength());
      // One migration behind (its row gone), the files are needed again and their absence is an error.
      await opened.db.run(sql`DELETE FROM __drizzle_migrations WHERE created_at = (SELECT max(created_at) FROM __drizzle_migrations)`);
      await expect(migrateDb(opened.db, bare)).rejects.toThrow(/No file/);
    } finally {
      opened.close();
    }
  });
});

describe("embedded database connections (docs/benchmarks.md)", () => {
  const synchronousOf = async (run: (sql: string) => Promise<{ rows: ArrayLike<unknown>[] }>) =>
    Number((await run("PRAGMA synchronous")).rows[0]?.[0]);

  it("sets synchronous=NORMAL with WAL on every connection by default, FULL with HANGAR_DB_SYNCHRONOUS=full", async () => {
    for (const [setting, expected] of [
      [undefined, 1],
      ["full", 2],
      ["NORMAL", 1],
    ] as const) {
      const dataDir = mkdtempSync(join(tmpdir(), "hangar-db-sync-"));
      dirs.push(dataDir);
      const config = loadConfig({ HANGAR_DATA_DIR: dataDir, HANGAR_DB_SYNCHRONOUS: setting });
      const runtime = await createNodeDeps(config, { log: () => {} });
      runtimes.push(runtime);
      const client = runtime.opened.client;
      // The shared connection, through the client and through drizzle.
      expect(await synchronousOf((q) => client.execute(q))).toBe(expected);
      const viaDrizzle = await runtime.deps.db.all<{ synchronous: number }>(sql`PRAGMA synchronous`);
      expect(viaDrizzle[0]?.synchronous).toBe(expected);
      expect(String((await client.execute("PRAGMA journal_mode")).rows[0]?.[0]).toLowerCase()).toBe("wal");
      // The dedicated connection an interactive transaction opens gets the same settings.
      const tx = await client.transaction("read");
      try {
        expect(await synchronousOf((q) => tx.execute(q))).toBe(expected);
        expect(Number((await tx.execute("PRAGMA busy_timeout")).rows[0]?.[0])).toBeGreaterThanOrEqual(1000);
      } finally {
        tx.close();
      }
      // A connection opened again after close (the daemon's next start) too.
      runtime.close();
      runtimes.splice(runtimes.indexOf(runtime), 1);
      const again = await openDb(`file:${join(dataDir, "hangar.db")}`, undefined, { synchronous: config.dbSynchronous });
      try {
        expect(await synchronousOf((q) => again.client.execute(q))).toBe(expected);
      } finally {
        again.close();
      }
    }
    expect(() => loadConfig({ HANGAR_DB_SYNCHRONOUS: "off" })).toThrow(ConfigError);
  });

  it("checkpoints the WAL from a timer, off the commit path; SQLite's own checkpoint is only a bound (HANGAR_DB_CHECKPOINT_MS)", async () => {
    const autocheckpointOf = async (run: (sql: string) => Promise<{ rows: ArrayLike<unknown>[] }>) =>
      Number((await run("PRAGMA wal_autocheckpoint")).rows[0]?.[0]);
    for (const [setting, expected] of [
      [undefined, 10_000],
      ["0", 1000],
    ] as const) {
      const dataDir = mkdtempSync(join(tmpdir(), "hangar-db-ckpt-"));
      dirs.push(dataDir);
      const config = loadConfig({ HANGAR_DATA_DIR: dataDir, HANGAR_DB_CHECKPOINT_MS: setting });
      expect(config.dbCheckpointMs).toBe(setting === undefined ? 5000 : 0);
      const runtime = await createNodeDeps(config, { log: () => {} });
      try {
        expect(await autocheckpointOf((q) => runtime.opened.client.execute(q))).toBe(expected);
        const tx = await runtime.opened.client.transaction("read");
        try {
          expect(await autocheckpointOf((q) => tx.execute(q))).toBe(expected);
        } finally {
          tx.close();
        }
      } finally {
        runtime.close();
      }
    }
    expect(() => loadConfig({ HANGAR_DB_CHECKPOINT_MS: "-1" })).toThrow(ConfigError);

    // What reached the database file itself (not the WAL): a copy of the file alone, opened on its own.
    const rowsInMainFile = async (dir: string, path: string) => {
      const copy = join(dir, `copy-${Math.random().toString(36).slice(2)}.db`);
      writeFileSync(copy, readFileSync(path));
      const c = createClient({ url: `file:${copy}` });
      try {
        return Number((await c.execute("SELECT count(*) FROM sqlite_master WHERE name = 't'")).rows[0]?.[0]) === 0
          ? 0
          : Number((await c.execute("SELECT count(*) FROM t")).rows[0]?.[0]);
      } finally {
        c.close();
      }
    };
    for (const every of [0, 40]) {
      const dir = mkdtempSync(join(tmpdir(), "hangar-db-ckpt-"));
      dirs.push(dir);
      const path = join(dir, "timed.db");
      const client = new EmbeddedClient(path, { timeoutMs: 1000, synchronous: "normal", checkpointEveryMs: every });
      try {
        await client.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)");
        await client.batch(
          Array.from({ length: 50 }, (_, i) => ({ sql: "INSERT INTO t (name) VALUES (?)", args: [`row ${i}`] })),
          "write",
        );
        // Without the timer the few pages stay in the WAL (under SQLite's 1,000-page threshold); with it they are
        // copied, by the checkpoint thread (started on the first tick, so given up to 10 s on a loaded machine).
        const until = Date.now() + (every ? 10_000 : 300);
        let inFile = await rowsInMainFile(dir, path);
        while (Date.now() < until && inFile === 0) {
          await new Promise((r) => setTimeout(r, 50));
          inFile = await rowsInMainFile(dir, path);
        }
        expect(inFile).toBe(every ? 50 : 0);
        const ran = client.checkpoints;
        expect(ran > 0).toBe(every > 0);
        // Nothing written since: the timer does not checkpoint again; reads do not count as writes.
        await client.execute("SELECT count(*) FROM t");
        await new Promise((r) => setTimeout(r, 200));
        expect(client.checkpoints).toBe(ran);
      } finally {
        client.close();
      }
    }
  });

  it("keeps the WAL small under a steady stream of writes: checkpoints on their own thread restart it, never SQLite's bound in a commit", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hangar-db-ckpt-"));
    dirs.push(dir);
    const path = join(dir, "stream.db");
    const client = new EmbeddedClient(path, { timeoutMs: 1000, synchronous: "normal", checkpointEveryMs: 5000 });
    try {
      await client.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)");
      // 60 MiB in 600 statements with a 1 ms timer between them (no faster than a test report is stored).
      // Without the checkpoint thread's restarts, SQLite's bound (10,000 pages, 40 MiB of WAL) is what stops the
      // WAL growing, inside one of these statements.
      let largestWal = 0;
      for (let i = 0; i < 600; i++) {
        await client.execute("INSERT INTO t (body) SELECT randomblob(4000) FROM generate_series(1, 25)");
        await new Promise((r) => setTimeout(r, 1));
        largestWal = Math.max(largestWal, statSync(`${path}-wal`).size);
      }
      expect(Number((await client.execute("SELECT count(*) FROM t")).rows[0]?.[0])).toBe(15_000);
      expect(client.checkpoints).toBeGreaterThan(1);
      expect(largestWal).toBeLessThan(30 * 2 ** 20);
    } finally {
      client.close();
    }
  });

  it("runs a read marked offLoop on its own thread: the event loop goes on meanwhile, the answer and errors are the same", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hangar-db-offloop-"));
    dirs.push(dir);
    const client = new EmbeddedClient(join(dir, "reads.db"), { timeoutMs: 1000, synchronous: "normal" });
    try {
      await client.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)");
      await client.execute({ sql: "INSERT INTO t (name) VALUES (?), (?)", args: ["one", "two"] });
      // What this client committed just before is what the thread reads.
      const names = await client.execute(offLoop("SELECT id, name FROM t WHERE id >= ? ORDER BY id", [1]));
      expect(names.columns).toEqual(["id", "name"]);
      expect(names.rows.map((r) => [r.id, r.name, r[1]])).toEqual([
        [1, "one", "one"],
        [2, "two", "two"],
      ]);
      await expect(client.execute(offLoop("SELECT missing_column FROM t", []))).rejects.toMatchObject({
        code: "SQLITE_ERROR",
        message: expect.stringContaining("no such column"),
      });

      // A read that takes a few hundred milliseconds: inline it holds the loop for all of it, off the loop a 1 ms
      // timer keeps ticking.
      const slow = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) SELECT count(*) AS n FROM c";
      const longestGap = async (run: () => Promise<{ rows: unknown[] }>) => {
        let last = performance.now();
        let gap = 0;
        const timer = setInterval(() => {
          const now = performance.now();
          gap = Math.max(gap, now - last);
          last = now;
        }, 1);
        const started = performance.now();
        const result = await run();
        const took = performance.now() - started;
        clearInterval(timer);
        gap = Math.max(gap, performance.now() - last);
        return { gap, took, n: Number((result.rows[0] as { n?: unknown } | undefined)?.n) };
      };
      const inline = await longestGap(() => client.execute({ sql: slow, args: [3_000_000] }));
      const off = await longestGap(() => client.execute(offLoop(slow, [3_000_000])));
      expect([inline.n, off.n]).toEqual([3_000_000, 3_000_000]);
      expect(inline.gap).toBeGreaterThan(inline.took * 0.8);
      expect(off.took).toBeGreaterThan(100);
      // (A third of the read's time: a loaded machine may hold a process back for tens of milliseconds anyway.)
      expect(off.gap).toBeLessThan(off.took / 3);
    } finally {
      client.close();
    }
  });

  it("leaves no read snapshot open between calls: a TRUNCATE checkpoint from another connection completes", async () => {
    const { dbPath, runtime, call } = await start();
    const { token } = await issueBootstrapToken(runtime.deps);
    expect((await call("POST", "/v1/setup/bootstrap-token/verify", { token })).status).toBe(200);
    for (let i = 0; i < 20; i++) expect((await call("GET", "/v1/public/setup-status")).status).toBe(200);
    const other = await openDb(`file:${dbPath}`);
    try {
      const result = await other.client.execute("PRAGMA wal_checkpoint(TRUNCATE)");
      // (busy, log frames, checkpointed frames): busy 0 means no connection held a reader on the WAL.
      expect(Number(result.rows[0]?.[0])).toBe(0);
    } finally {
      other.close();
    }
    expect(statSync(`${dbPath}-wal`).size).toBe(0);
  });

  it("reads a one-row statement with one call, the same row as a plain read, and leaves no read snapshot open", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hangar-db-onerow-"));
    dirs.push(dir);
    const path = join(dir, "one.db");
    const client = new EmbeddedClient(path, { timeoutMs: 1000, synchronous: "normal" });
    try {
      await client.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, data BLOB)");
      await client.batch(["INSERT INTO t (name, data) VALUES ('a', x'0102')", "INSERT INTO t (name) VALUES ('b')"], "write");
      const plain = await client.execute({ sql: "SELECT id, name, data FROM t WHERE name = ?", args: ["a"] });
      const one = await client.execute(oneRow("SELECT id, name, data FROM t WHERE name = ?", ["a"]));
      expect(one.rows).toHaveLength(1);
      expect(one.columns).toEqual(plain.columns);
      const [p, o] = [plain.rows[0]!, one.rows[0]!];
      expect([o.id, o.name, o[0], o.length, Object.keys(o)]).toEqual([p.id, p.name, p[0], p.length, Object.keys(p)]);
      expect([...new Uint8Array(o.data as ArrayBuffer)]).toEqual([1, 2]);
      expect((await client.execute(oneRow("SELECT id FROM t WHERE name = ?", ["none"]))).rows).toEqual([]);
      // A statement that matches two rows, read as one: the first only, and the statement is reset, so a
      // TRUNCATE checkpoint from another connection finds no reader.
      expect((await client.execute(oneRow("SELECT name FROM t ORDER BY id", []))).rows.map((r) => r.name)).toEqual(["a"]);
      const other = await openDb(`file:${path}`);
      try {
        await other.client.execute("INSERT INTO t (name) VALUES ('c')");
        expect(Number((await other.client.execute("PRAGMA wal_checkpoint(TRUNCATE)")).rows[0]?.[0])).toBe(0);
      } finally {
        other.close();
      }
    } finally {
      client.close();
    }
  });

  it("keeps a bounded number of prepared statements and answers the same through the cache", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hangar-db-cache-"));
    dirs.push(dir);
    const client = new EmbeddedClient(join(dir, "cache.db"), { timeoutMs: 1000, synchronous: "normal", cacheSize: 4 });
    try {
      await client.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, data BLOB)");
      await client.execute({ sql: "INSERT INTO t (name, data) VALUES (?, ?)", args: ["a", new Uint8Array([1, 2, 3])] });
      for (let round = 0; round < 3; round++) {
        for (let i = 0; i < 10; i++) {
          const r = await client.execute({ sql: `SELECT id, name, data, ${i} AS n FROM t WHERE name = ?`, args: ["a"] });
          const row = r.rows[0]!;
          expect([row.id, row.name, row.n, row[0], row[1], row.length]).toEqual([1, "a", i, 1, "a", 4]);
          expect(Object.keys(row)).toEqual(["id", "name", "data", "n"]);
          expect([...new Uint8Array(row.data as ArrayBuffer)]).toEqual([1, 2, 3]);
        }
        expect(client.cachedStatements).toBeLessThanOrEqual(4);
      }
      // A write that returns rows, a failing statement (the cache drops it), and a batch that rolls back whole.
      const updated = await client.execute({ sql: "UPDATE t SET name = ? WHERE id = 1 RETURNING name", args: ["b"] });
      expect(updated.rows[0]?.name).toBe("b");
      await expect(client.execute("INSERT INTO t (id) VALUES (1)")).rejects.toMatchObject({ code: "SQLITE_CONSTRAINT" });
      await expect(client.batch(["INSERT INTO t (name) VALUES ('c')", "INSERT INTO t (id) VALUES (1)"])).rejects.toMatchObject({
        code: "SQLITE_CONSTRAINT",
        statementIndex: 1,
      });
      expect(Number((await client.execute("SELECT count(*) FROM t")).rows[0]?.[0])).toBe(1);
    } finally {
      client.close();
    }
  });
});
