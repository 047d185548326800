// The data directory and `hangar login` against the real daemon process (docs/api.md §3, §7, §13): a private data
// directory, daemon.url while the daemon runs, `hangar login` links and tokens, and no partial upload left
// behind after a kill -9 in the middle of one.
import { chmodSync, existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { claim, createPipeline, createProject, daemonCaller, queueBuild, registerRunner } from "../helpers/builds.ts";
import { http, makeDataDir, runCli, startDaemon, type Daemon } from "../helpers/daemon.ts";
import { waitFor } from "./runner-harness.ts";

const daemons: Daemon[] = [];
const dirs: string[] = [];

afterAll(async () => {
  for (const d of daemons) await d.stop("SIGKILL");
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function freshDataDir(): string {
  const parent = makeDataDir();
  dirs.push(parent);
  // A path that does not exist yet: the daemon creates it.
  return join(parent, "data");
}

async function start(env: Record<string, string>): Promise<Daemon> {
  const d = await startDaemon(env, 60_000);
  daemons.push(d);
  return d;
}

/** Every file and directory under `dir` that another user could read or enter. */
function openToOthers(dir: string): string[] {
  const found: string[] = [];
  const walk = (path: string) => {
    const st = statSync(path);
    if ((st.mode & 0o077) !== 0) found.push(`${path} ${(st.mode & 0o777).toString(8)}`);
    if (st.isDirectory()) for (const name of readdirSync(path)) walk(join(path, name));
  };
  walk(dir);
  return found;
}

async function setUp(d: Daemon, env: Record<string, string>): Promise<void> {
  const made = await runCli(["setup-token"], env);
  const verified = await http(d.url, "POST", "/v1/setup/bootstrap-token/verify", { body: { token: made.stdout.trim() } });
  const setup = verified.body.session_token as string;
  expect((await http(d.url, "POST", "/v1/setup/local-owner/create", { token: setup, body: { email: "owner@example.com" } })).status).toBe(200);
  expect((await http(d.url, "POST", "/v1/setup/complete", { token: setup })).status).toBe(200);
}

// Real daemon processes on a shared, slow machine: generous limits, conditions waited for rather than slept.
describe("the data directory", { timeout: 180_000 }, () => {
  it("is created 0700 with every file in it private, and daemon.url exists only while the daemon runs", async () => {
    const dataDir = freshDataDir();
    const env = { HANGAR_DATA_DIR: dataDir };
    const d = await start(env);
    expect(statSync(dataDir).mode & 0o777).toBe(0o700);
    const urlFile = join(dataDir, "daemon.url");
    expect(readFileSync(urlFile, "utf8")).toBe(`${d.url}\n`);

    const made = await runCli(["setup-token"], env);
    expect(made.code).toBe(0);
    // Which data directory and database the command wrote to, on stderr; stdout stays the token alone.
    expect(made.stderr).toContain(`data directory ${dataDir}`);
    expect(made.stderr).toContain(`database ${join(dataDir, "hangar.db")}`);
    expect(made.stdout).toMatch(/^[0-9a-f]{64}\n$/);
    expect(openToOthers(dataDir)).toEqual([]);

    expect(await d.stop("SIGTERM")).toBe(0);
    expect(existsSync(urlFile)).toBe(false);
    expect(openToOthers(dataDir)).toEqual([]);
  });

  it("tightens a data directory and database that an older version left open to others", async () => {
    const dataDir = freshDataDir();
    const env = { HANGAR_DATA_DIR: dataDir };
    const first = await start(env);
    expect(await first.stop()).toBe(0);
    expect(existsSync(join(dataDir, "daemon.url"))).toBe(false);
    chmodSync(dataDir, 0o755);
    chmodSync(join(dataDir, "hangar.db"), 0o644);
    chmodSync(join(dataDir, "master.key"), 0o644);
    const second = await start(env);
    expect(openToOthers(dataDir)).toEqual([]);
    await second.stop();
  });

  it("removes the partial upload a kill -9 left behind when the daemon starts again", async () => {
    const dataDir = freshDataDir();
    const env = { HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0" };
    const d = await start(env);
    await setUp(d, env);
    const c = daemonCaller(d.url);
    const owner = (await runCli(["login", "--print-token"], env)).stdout.trim();
    const project = await createProject(c, owner);
    const pipe = await createPipeline(c, owner, project.id, { platform: "any", artifacts: ["*.apk"] });
    const runner = await registerRunner(c, owner);
    await queueBuild(c, owner, project.id, pipe.id);
    const job = await claim(c, runner);
    const created = await c.call("POST", `/v1/runners/${runner.id}/jobs/${job.build_id}/artifacts`, {
      token: runner.token,
      body: { filename: "app.apk", size_bytes: 10 * 1024 * 1024, content_type: "application/vnd.android.package-archive" },
    });
    expect(created.status).toBe(200);

    // Half the body, then the daemon dies with the upload open.
    const req = request(created.body.upload.url, { method: "PUT", headers: { "content-length": String(10 * 1024 * 1024) } });
    req.on("error", () => undefined);
    req.write(Buffer.alloc(5 * 1024 * 1024, 1));
    const artifactsDir = join(dataDir, "artifacts");
    const partials = () => {
      const out: string[] = [];
      const walk = (p: string) => {
        if (!existsSync(p)) return;
        for (const e of readdirSync(p, { withFileTypes: true })) {
          if (e.isDirectory()) walk(join(p, e.name));
          else if (e.name.includes(".part-")) out.push(join(p, e.name));
        }
      };
      walk(artifactsDir);
      return out;
    };
    await waitFor("the partial upload file", () => partials().length > 0 && statSync(partials()[0]!).size > 0);
    await d.stop("SIGKILL");
    req.destroy();
    expect(partials()).toHaveLength(1);

    // A partial file whose writer still runs (this test process) belongs to someone alive and stays.
    const alive = join(artifactsDir, `other.apk.part-${process.pid}-abcdef`);
    writeFileSync(alive, "in flight");
    const again = await start(env);
    expect(partials()).toEqual([alive]);
    // stderr is its own pipe: the log line may arrive after the listening line on stdout.
    await expect.poll(() => again.stderr(), { timeout: 20_000 }).toContain("partial upload");
    await again.stop();
  });
});

describe("hangar login", { timeout: 180_000 }, () => {
  it("prints a one-time link built from daemon.url, or a session token, and says which data directory it used", async () => {
    const dataDir = freshDataDir();
    const env = { HANGAR_DATA_DIR: dataDir };
    const d = await start(env);

    const early = await runCli(["login", "--print-token"], env);
    expect(early.code).toBe(1);
    expect(early.stderr).toContain("setup is not complete");
    await setUp(d, env);

    const [link, token, usage, unknown] = await Promise.all([
      runCli(["login"], env),
      runCli(["login", "--print-token"], env),
      runCli(["login", "--frobnicate"], env),
      runCli(["login", "--print-token", "--email", "nobody@example.com"], env),
    ]);
    expect(link.code, link.stderr).toBe(0);
    expect(link.stdout).toMatch(new RegExp(`^${d.url.replace(/\./g, "\\.")}/login/local/[A-Za-z0-9_-]{43}\\n$`));
    expect(link.stderr).toContain(`data directory ${dataDir}`);
    expect(link.stderr).toContain("owner@example.com");

    expect(token.code, token.stderr).toBe(0);
    expect(token.stderr).toContain(`database ${join(dataDir, "hangar.db")}`);
    const session = token.stdout.trim();
    const me = await http(d.url, "GET", "/v1/users/me", { token: session });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ email: "owner@example.com", role: "owner" });

    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("Usage: hangar login");
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("no active or invited user");

    // The sign-in is audited, with how it came.
    const audit = await http(d.url, "GET", "/v1/audit-events?limit=20", { token: session });
    expect(audit.status).toBe(200);
    const events = (Array.isArray(audit.body) ? audit.body : audit.body.events) as Array<{ action: string; details: Record<string, unknown> }>;
    expect(events.some((e) => e.action === "auth.sign_in" && e.details.via === "cli")).toBe(true);
    expect(events.some((e) => e.action === "auth.local_login_link_created")).toBe(true);

    // Stopped: no daemon.url, so no link; a token still works for a daemon started later.
    await d.stop();
    const noDaemon = await runCli(["login"], env);
    expect(noDaemon.code).toBe(1);
    expect(noDaemon.stderr).toContain("no running daemon");
    expect((await runCli(["login", "--print-token"], env)).code).toBe(0);
  });
});
