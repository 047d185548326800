import { createClient } from "@libsql/client";
import { rmSync } from "node:fs";
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { http, makeDataDir, runCli, startDaemon, type Daemon } from "../helpers/daemon.ts";

const dataDir = makeDataDir();
const env = { HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "1" };
const daemons: Daemon[] = [];

afterAll(async () => {
  for (const d of daemons) await d.stop("SIGKILL");
  rmSync(dataDir, { recursive: true, force: true });
});

/** A local login whose body arrives in two parts, so the request is still in flight between them. */
function slowLogin(port: number, email: string) {
  let finish = () => {};
  let started = () => {};
  const startedP = new Promise<void>((r) => (started = r));
  const response = new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        method: "POST",
        path: "/v1/auth/local/login",
        headers: { "content-type": "application/json", "transfer-encoding": "chunked" },
      },
      (res) => {
        let body = "";
        res.on("data", (d: Buffer) => (body += d.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on("error", reject);
    req.write(`{"email":`, () => setTimeout(started, 100));
    finish = () => req.end(`"${email}"}`);
  });
  return { started: startedP, finish: () => finish(), response };
}

/** Every stderr line of the daemon is one JSON record; the request records are those with a method. */
function stderrRecords(d: Daemon): Array<Record<string, unknown>> {
  return d
    .stderr()
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe("the hangar command", () => {
  it("prints help for itself and for each command", async () => {
    const top = await runCli(["--help"], env);
    expect(top.code).toBe(0);
    for (const word of ["Usage: hangar", "serve", "setup-token", "migrate", "runner"]) expect(top.stdout).toContain(word);

    const tokenHelp = await runCli(["setup-token", "--help"], env);
    expect(tokenHelp.code).toBe(0);
    expect(tokenHelp.stdout).toContain("--ttl");
    for (const command of ["serve", "migrate"]) {
      const help = await runCli([command, "--help"], env);
      expect(help.code, command).toBe(0);
      expect(help.stdout).toContain(`hangar ${command}`);
    }

    // migrate on a fresh directory creates the database with every table, and is idempotent.
    const migrateDir = makeDataDir();
    try {
      for (let i = 0; i < 2; i++) {
        const migrated = await runCli(["migrate"], { HANGAR_DATA_DIR: migrateDir });
        expect(migrated.code).toBe(0);
        expect(migrated.stderr).toContain("migrations applied");
      }
      const client = createClient({ url: `file:${join(migrateDir, "hangar.db")}` });
      const tables = await client.execute("select name from sqlite_master where type = 'table'");
      client.close();
      const names = tables.rows.map((r) => String(r[0]));
      for (const table of ["instance", "bootstrap_tokens", "setup_sessions", "users", "user_sessions", "audit_events"])
        expect(names).toContain(table);
    } finally {
      rmSync(migrateDir, { recursive: true, force: true });
    }

    // A port that is taken: exit 1 with a message, not a stack trace.
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, "127.0.0.1", r));
    try {
      const busy = await runCli(["serve"], { ...env, HANGAR_HOST: "127.0.0.1", HANGAR_PORT: String((taken.address() as AddressInfo).port) });
      expect(busy.code).toBe(1);
      expect(busy.stderr).toContain("EADDRINUSE");
      expect(busy.stderr).not.toContain("    at ");
      expect(busy.stdout).toBe("");
    } finally {
      taken.close();
    }

    const unknown = await runCli(["frobnicate"], env);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command");
    const badTtl = await runCli(["setup-token", "--ttl", "soon"], env);
    expect(badTtl.code).toBe(2);
  });
});

describe("a newcomer on a fresh data directory", () => {
  it("walks setup, team management and a restart over the real daemon", async () => {
    const first = await startDaemon(env);
    daemons.push(first);
    const base = first.url;
    expect(first.stdout().split("\n")[0]).toMatch(/^hangar listening on http:\/\/127\.0\.0\.1:\d+$/);
    expect(first.port).toBeGreaterThan(0);
    // The hint to make a token, since setup is not done; the daemon never makes one itself.
    await expect.poll(() => first.stderr()).toContain("npx hangar setup-token");
    expect((await http(base, "GET", "/v1/public/setup-status")).body).toMatchObject({ state: "uninitialized", setup_mode: true });
    expect((await http(base, "GET", "/healthz")).body).toEqual({ ok: true });

    // --ttl: a token of one second is expired two seconds later.
    const short = await runCli(["setup-token", "--ttl", "1"], env);
    expect(short.code).toBe(0);
    await new Promise((r) => setTimeout(r, 2100));
    const expired = await http(base, "POST", "/v1/setup/bootstrap-token/verify", { body: { token: short.stdout.trim() } });
    expect(expired.status).toBe(410);
    expect(expired.body.code).toBe("token_expired");

    // The real setup-token command, while the daemon runs; it replaces the expired one.
    const made = await runCli(["setup-token"], env);
    expect(made.code).toBe(0);
    expect(made.stdout).toMatch(/^[0-9a-f]{64}\n$/);
    const bootstrap = made.stdout.trim();

    const verify = await http(base, "POST", "/v1/setup/bootstrap-token/verify", { body: { token: bootstrap } });
    expect(verify.status).toBe(200);
    const setup: string = verify.body.session_token;
    expect((await http(base, "POST", "/v1/setup/preferences", { token: setup, body: { runtime_mode: "local" } })).body).toMatchObject({
      runtime_mode: "local",
    });
    const owner = await http(base, "POST", "/v1/setup/local-owner/create", { token: setup, body: { email: "me@example.com" } });
    expect(owner.body).toMatchObject({ state: "owner_created", owner_email: "me@example.com" });
    const done = await http(base, "POST", "/v1/setup/complete", { token: setup });
    expect(done.body).toMatchObject({ state: "ready" });

    // Sign in from this machine without naming the only user.
    const login = await http(base, "POST", "/v1/auth/local/login");
    expect(login.status).toBe(200);
    const ownerSession: string = login.body.session_token;
    expect(login.body.user).toMatchObject({ email: "me@example.com", role: "owner" });

    const dev = await http(base, "POST", "/v1/users/invite", { token: ownerSession, body: { email: "dev@example.com", role: "developer" } });
    expect(dev.body).toMatchObject({ status: "invited", role: "developer" });
    const qa = await http(base, "POST", "/v1/users/invite", { token: ownerSession, body: { email: "qa@example.com", role: "qa_viewer" } });
    expect(qa.status).toBe(200);
    expect((await http(base, "PATCH", `/v1/users/${dev.body.id}/role`, { token: ownerSession, body: { role: "admin" } })).body.role).toBe("admin");
    expect((await http(base, "DELETE", `/v1/users/${dev.body.id}`, { token: ownerSession })).body.status).toBe("disabled");
    const refused = await http(base, "POST", "/v1/auth/local/login", { body: { email: "dev@example.com" } });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe("user_not_found");
    expect((await http(base, "POST", `/v1/users/${dev.body.id}/enable`, { token: ownerSession })).body.status).toBe("active");

    // The invited QA user signs in and becomes active.
    const qaLogin = await http(base, "POST", "/v1/auth/local/login", { body: { email: "qa@example.com" } });
    expect(qaLogin.status).toBe(200);
    const qaSession: string = qaLogin.body.session_token;
    expect((await http(base, "GET", "/v1/users/me", { token: qaSession })).body).toMatchObject({ status: "active", role: "qa_viewer" });
    const devSession: string = (await http(base, "POST", "/v1/auth/local/login", { body: { email: "dev@example.com" } })).body.session_token;

    const transfer = await http(base, "POST", "/v1/users/transfer-owner", { token: ownerSession, body: { email: "dev@example.com" } });
    expect(transfer.status).toBe(200);
    expect(transfer.body.owner).toMatchObject({ email: "dev@example.com", role: "owner" });
    expect(transfer.body.previous_owner).toMatchObject({ email: "me@example.com", role: "admin" });
    expect((await http(base, "GET", "/v1/users/me", { token: ownerSession })).status).toBe(401);
    expect((await http(base, "GET", "/v1/users/me", { token: devSession })).status).toBe(401);
    const newOwnerSession: string = (await http(base, "POST", "/v1/auth/local/login", { body: { email: "dev@example.com" } })).body.session_token;

    // Setup is over: no new bootstrap token, and the setup endpoints are closed.
    const late = await runCli(["setup-token"], env);
    expect(late.code).toBe(1);
    expect(late.stdout).toBe("");
    expect(late.stderr).toContain("setup is complete");
    expect((await http(base, "POST", "/v1/setup/bootstrap-token/verify", { body: { token: bootstrap } })).body.code).toBe("already_configured");

    // Graceful stop on SIGTERM: exit code 0.
    expect(await first.stop("SIGTERM")).toBe(0);

    // Request log: one JSON record per request, never a token.
    const records = stderrRecords(first);
    const requests = records.filter((r) => typeof r.method === "string");
    expect(requests.length).toBeGreaterThanOrEqual(20);
    for (const r of requests) expect(Object.keys(r).sort()).toEqual(["duration_ms", "level", "method", "path", "request_id", "status", "time"]);
    for (const secret of [bootstrap, setup, ownerSession, qaSession, devSession, newOwnerSession]) {
      expect(first.stderr()).not.toContain(secret);
      expect(first.stdout()).not.toContain(secret);
    }

    // Restart on the same data directory: users and sessions are still there.
    const second = await startDaemon(env);
    daemons.push(second);
    const base2 = second.url;
    expect(second.stderr()).not.toContain("setup-token");
    expect((await http(base2, "GET", "/v1/public/setup-status")).body).toMatchObject({ state: "ready", is_configured: true });
    expect((await http(base2, "GET", "/v1/users/me", { token: newOwnerSession })).body).toMatchObject({ email: "dev@example.com", role: "owner" });
    expect((await http(base2, "GET", "/v1/users/me", { token: qaSession })).body).toMatchObject({ email: "qa@example.com", status: "active" });
    expect((await http(base2, "GET", "/v1/users/me", { token: ownerSession })).status).toBe(401);
    const list = await http(base2, "GET", "/v1/users", { token: newOwnerSession });
    expect(list.body.map((u: { email: string; role: string; status: string }) => `${u.email} ${u.role} ${u.status}`).sort()).toEqual([
      "dev@example.com owner active",
      "me@example.com admin active",
      "qa@example.com qa_viewer active",
    ]);
    const audit = await http(base2, "GET", "/v1/audit-events?limit=100", { token: newOwnerSession });
    expect(audit.body.map((e: { action: string }) => e.action)).toContain("user.ownership_transferred");
    // A request in flight when the signal arrives is finished before the daemon exits (SIGINT, as Ctrl-C sends).
    const inFlight = slowLogin(second.port, "qa@example.com");
    await inFlight.started;
    const exit = second.stop("SIGINT");
    await new Promise((r) => setTimeout(r, 300));
    expect(second.proc.exitCode).toBeNull();
    inFlight.finish();
    const answer = await inFlight.response;
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body).user.email).toBe("qa@example.com");
    expect(await exit).toBe(0);
    // And nothing new is accepted afterwards.
    await expect(fetch(`${base2}/healthz`)).rejects.toThrow();
  });
});
