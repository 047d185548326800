/**
 * Busy/locked answers are retried in one place, under drizzle (src/db/busy.ts; docs/decisions.md, docs/api.md §8), and a
 * database still busy after the retries answers 503 `database_busy`, never a 500. Real SQLite locks: a second
 * connection on the same file holds the write lock while the daemon's client writes.
 */
import { LibsqlError } from "@libsql/client";
import { sql } from "drizzle-orm";
import { DrizzleQueryError } from "drizzle-orm/errors";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BusyRetryClient, busyDelayMs, DEFAULT_BUSY_RETRY, isBusyError } from "../src/db/busy.ts";
import { openDb, type OpenedDb } from "../src/db/client.ts";
import { makeTestApp } from "./helpers/app.ts";
import { completeLocalSetup } from "./helpers/factories.ts";
import { page } from "./helpers/web.ts";

const dir = mkdtempSync(join(tmpdir(), "hangar-busy-"));
const opened: OpenedDb[] = [];
afterAll(() => {
  for (const o of opened) o.close();
  rmSync(dir, { recursive: true, force: true });
});

async function open(name: string, options: Parameters<typeof openDb>[2] = {}): Promise<OpenedDb> {
  const o = await openDb(`file:${join(dir, name)}`, undefined, options);
  opened.push(o);
  return o;
}

function retryStats(o: OpenedDb) {
  if (!(o.client instanceof BusyRetryClient)) throw new Error("openDb did not wrap its client");
  return o.client.stats;
}

describe("isBusyError", () => {
  it("knows SQLite's busy and locked refusals, wrapped or not, and nothing else", () => {
    const busy = new LibsqlError("SQLITE_BUSY: database is locked", "SQLITE_BUSY");
    expect(isBusyError(busy)).toBe(true);
    expect(isBusyError(new LibsqlError("x", "SQLITE_ERROR", "SQLITE_BUSY_SNAPSHOT"))).toBe(true);
    expect(isBusyError(new LibsqlError("database table is locked", "SQLITE_LOCKED"))).toBe(true);
    expect(isBusyError(new DrizzleQueryError("update builds …", [], busy))).toBe(true);
    // A server's answer as @libsql/client reports it when it carries only the message.
    expect(isBusyError(new Error("SQLITE_BUSY: SQLite error: database is locked"))).toBe(true);
    expect(isBusyError(new LibsqlError("UNIQUE constraint failed: users.email", "SQLITE_CONSTRAINT"))).toBe(false);
    expect(isBusyError(new TypeError("fetch failed"))).toBe(false);
    expect(isBusyError("database is locked")).toBe(false);
  });

  it("backs off exponentially with jitter, capped", () => {
    const p = DEFAULT_BUSY_RETRY;
    expect(busyDelayMs(p, 0, () => 0)).toBe(p.baseMs / 2);
    expect(busyDelayMs(p, 0, () => 1)).toBe(p.baseMs);
    expect(busyDelayMs(p, 3, () => 1)).toBe(p.baseMs * 8);
    expect(busyDelayMs(p, 30, () => 1)).toBe(p.capMs);
    let total = 0;
    for (let i = 0; i < p.retries; i++) total += busyDelayMs(p, i, () => 1);
    expect(total).toBeLessThan(3000);
  });
});

describe("BusyRetryClient on the embedded file", () => {
  it("retries a write refused while another connection holds the write lock, and applies it once", async () => {
    const holder = await open("retry.db");
    await holder.client.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, who TEXT)");
    // 20 ms busy timeout: the lock below outlasts it, so SQLite answers SQLITE_BUSY and the retries take over.
    const writer = await open("retry.db", { busyTimeoutMs: 20, busyRetry: { retries: 10, baseMs: 20, capMs: 200 } });
    const tx = await holder.client.transaction("write");
    await tx.execute("INSERT INTO t (who) VALUES ('holder')");
    const release = setTimeout(() => void tx.commit(), 300);
    // A batch that reads, then writes: the kind that fails at once in a deferred transaction.
    const [count] = await writer.db.batch([
      writer.db.all(sql`SELECT count(*) AS n FROM t`),
      writer.db.run(sql`INSERT INTO t (who) VALUES ('writer')`),
    ]);
    clearTimeout(release);
    expect(count).toEqual([{ n: 1 }]);
    expect(retryStats(writer).retries).toBeGreaterThan(0);
    expect(retryStats(writer).exhausted).toBe(0);
    const rows = await holder.client.execute("SELECT who FROM t ORDER BY id");
    expect(rows.rows.map((r) => r.who)).toEqual(["holder", "writer"]);
  });

  it("gives up after its retries with the busy error, having written nothing", async () => {
    const holder = await open("giveup.db");
    await holder.client.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)");
    const writer = await open("giveup.db", { busyTimeoutMs: 10, busyRetry: { retries: 2, baseMs: 10, capMs: 20 } });
    const tx = await holder.client.transaction("write");
    try {
      const err = await writer.client.batch(["INSERT INTO t DEFAULT VALUES", "INSERT INTO t DEFAULT VALUES"]).then(
        () => null,
        (e: unknown) => e,
      );
      expect(isBusyError(err)).toBe(true);
      expect(retryStats(writer)).toEqual({ retries: 2, exhausted: 1 });
    } finally {
      await tx.rollback();
    }
    expect((await writer.client.execute("SELECT count(*) AS n FROM t")).rows[0]!.n).toBe(0);
  });

  it("passes other errors on at once", async () => {
    const o = await open("other.db");
    await o.client.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)");
    await o.client.execute("INSERT INTO t (id) VALUES (1)");
    await expect(o.client.execute("INSERT INTO t (id) VALUES (1)")).rejects.toMatchObject({ code: "SQLITE_CONSTRAINT" });
    expect(retryStats(o).retries).toBe(0);
  });
});

describe("a database still busy after the retries", () => {
  it("answers 503 database_busy with Retry-After on the API and on a page, never a 500", async () => {
    const t = await makeTestApp({ db: { busyTimeoutMs: 10, busyRetry: { retries: 1, baseMs: 10, capMs: 10 } } });
    const { ownerToken } = await completeLocalSetup(t);
    const holder = await openDb(`file:${t.dbPath}`);
    opened.push(holder);
    const tx = await holder.client.transaction("write");
    try {
      const res = await t.call("POST", "/v1/projects", { token: ownerToken, body: { name: "Busy", repo_url: "https://github.com/acme/busy.git" } });
      expect(res.status).toBe(503);
      expect(res.body.code).toBe("database_busy");
      expect(res.headers.get("retry-after")).toBe("1");
      const html = await page(t, "POST", "/projects", { session: ownerToken, form: { name: "Busy", repo_url: "https://github.com/acme/busy.git" } });
      expect(html.status).toBe(503);
      expect(html.text).toContain("The database is busy");
    } finally {
      await tx.rollback();
    }
    const again = await t.call("POST", "/v1/projects", { token: ownerToken, body: { name: "Busy", repo_url: "https://github.com/acme/busy.git" } });
    // The same client commits again once the lock is gone: a refused statement does not wedge its connection.
    expect(again.status).toBe(200);
  });
});
