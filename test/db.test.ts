import { createClient } from "@libsql/client";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createApp } from "../src/app.ts";
import { loadConfig } from "../src/config.ts";
import { sha256Hex } from "../src/domain/crypto.ts";
import { issueBootstrapToken } from "../src/domain/setup.ts";
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
  const runtime = await createNodeDeps(config, { getPeerAddress: () => "127.0.0.1", log: () => {} });
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
