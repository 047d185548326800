// Operating Hangar (docs/api.md §13) against the real CLI and daemon processes: a strict command line, backup while a
// workload writes and restore onto a new data directory, service units checked by their own tools, and `npm start`
// stopping on SIGTERM.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { appendLog, claim, createPipeline, createProject, daemonCaller, queueBuild, registerRunner, type Caller } from "../helpers/builds.ts";
import { makeDataDir, PROJECT_ROOT, runCli, startDaemon, type Daemon } from "../helpers/daemon.ts";

const cleanup: string[] = [];
afterAll(() => {
  for (const dir of cleanup) rmSync(dir, { recursive: true, force: true });
});
function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanup.push(dir);
  return dir;
}

async function readySession(c: Caller, env: Record<string, string>): Promise<string> {
  const issued = await runCli(["setup-token"], env);
  expect(issued.code, issued.stderr).toBe(0);
  const verified = await c.call("POST", "/v1/setup/bootstrap-token/verify", { body: { token: issued.stdout.trim() } });
  const setup = verified.body.session_token as string;
  expect((await c.call("POST", "/v1/setup/local-owner/create", { token: setup, body: { email: "owner@example.com" } })).status).toBe(200);
  expect((await c.call("POST", "/v1/setup/complete", { token: setup })).status).toBe(200);
  const login = await c.call("POST", "/v1/auth/local/login", { body: { email: "owner@example.com" } });
  expect(login.status, login.text).toBe(200);
  return login.body.session_token;
}

describe("the command line is strict", () => {
  const env = { HANGAR_DATA_DIR: makeDataDir() };
  cleanup.push(env.HANGAR_DATA_DIR);

  it("prints its version", async () => {
    const pkg = JSON.parse(readFileSync(join(PROJECT_ROOT, "package.json"), "utf8")) as { version: string };
    const r = await runCli(["--version"], env);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`hangar ${pkg.version}\n`);
  });

  it("refuses unknown options, arguments and commands with exit 2 and the usage on stderr", { timeout: 180_000 }, async () => {
    const cases: Array<[string[], RegExp]> = [
      [["serve", "--port", "9000"], /Unknown option '--port'[\s\S]*Usage: hangar serve/],
      [["migrate", "extra"], /Unexpected argument 'extra'[\s\S]*Usage: hangar migrate/],
      [["setup-token", "--ttl", "soon"], /--ttl must be a whole number[\s\S]*Usage: hangar setup-token/],
      [["setup-token", "--ttl", "1.5"], /--ttl must be a whole number/],
      [["backup"], /--out DIR is required[\s\S]*Usage: hangar backup/],
      [["restore", "--from"], /--from/],
      [["service"], /exactly one of --systemd or --launchd/],
      [["frobnicate"], /unknown command 'frobnicate'[\s\S]*Usage: hangar <command>/],
      [[], /no command given[\s\S]*Usage: hangar <command>/],
    ];
    for (const [args, message] of cases) {
      const r = await runCli(args, env);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr, args.join(" ")).toMatch(message);
      expect(r.stderr).not.toContain("    at ");
      expect(r.stdout).toBe("");
    }
  });

  it("reports an unusable data directory or configuration in one line, exit 1, no stack trace", { timeout: 60_000 }, async () => {
    const file = join(tempDir("hangar-ops-file-"), "plain-file");
    writeFileSync(file, "not a directory");
    const notDir = await runCli(["migrate"], { HANGAR_DATA_DIR: join(file, "data") });
    expect(notDir.code).toBe(1);
    expect(notDir.stderr).toMatch(/^hangar: the data directory \S+ cannot be created: .*\(ENOTDIR\)$/m);
    expect(notDir.stderr.trim().split("\n")).toHaveLength(1);
    const badPort = await runCli(["migrate"], { ...env, HANGAR_PORT: "eighty" });
    expect(badPort.code).toBe(1);
    expect(badPort.stderr).toMatch(/^hangar: invalid configuration: HANGAR_PORT/);
    expect(badPort.stderr).not.toContain("    at ");
  });
});

describe("backup while the daemon writes, restore onto a new data directory", () => {
  it("keeps every write acknowledged before the backup, old sessions and artifacts byte for byte", async () => {
    const dataDir = makeDataDir();
    cleanup.push(dataDir);
    const env = { HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0" };
    let daemon: Daemon | undefined = await startDaemon(env);
    let restoredDaemon: Daemon | undefined;
    try {
      const c = daemonCaller(daemon.url);
      const owner = await readySession(c, env);
      const project = await createProject(c, owner);
      const pipeline = await createPipeline(c, owner, project.id, { platform: "any" });
      const runner = await registerRunner(c, owner);

      // One artifact, uploaded through the daemon's local store.
      await queueBuild(c, owner, project.id, pipeline.id);
      const job = await claim(c, runner);
      const bytes = randomBytes(3 * 1024 * 1024 + 17);
      const sha256 = createHash("sha256").update(bytes).digest("hex");
      const created = await c.call("POST", `/v1/runners/${runner.id}/jobs/${job.build_id}/artifacts`, {
        token: runner.token,
        body: { filename: "app.apk", size_bytes: bytes.length, content_type: "application/vnd.android.package-archive", sha256 },
      });
      expect(created.status, created.text).toBe(200);
      const put = await fetch(created.body.upload.url, { method: "PUT", body: bytes, headers: created.body.upload.headers });
      expect(put.status).toBe(200);
      const completed = await c.call("POST", `/v1/runners/${runner.id}/jobs/${job.build_id}/artifacts/${created.body.artifact.id}/complete`, {
        token: runner.token,
      });
      expect(completed.status).toBe(200);

      // A workload that keeps writing (builds queued, log lines appended) while the backup runs.
      const acknowledged: string[] = [];
      let logOffset = 0;
      let stop = false;
      const workload = (async () => {
        while (!stop) {
          const build = await queueBuild(c, owner, project.id, pipeline.id);
          acknowledged.push(build.id);
          const line = `line ${acknowledged.length}\n`;
          const appended = await appendLog(c, runner, job.build_id, logOffset, line);
          if (appended.status === 200) logOffset += Buffer.byteLength(line);
        }
      })();
      while (acknowledged.length < 20) await new Promise((r) => setTimeout(r, 20));
      const ackedBeforeBackup = [...acknowledged];
      const logBeforeBackup = logOffset;

      const out = join(tempDir("hangar-ops-backup-"), "snapshot");
      const backup = await runCli(["backup", "--out", out, "--with-artifacts"], env, 120_000);
      stop = true;
      await workload;
      expect(backup.code, backup.stderr).toBe(0);
      expect(backup.stderr).toMatch(/database copied and checked/);
      expect(acknowledged.length).toBeGreaterThan(ackedBeforeBackup.length);

      expect(readdirSync(out).sort()).toEqual(["artifacts", "hangar.db", "manifest.json", "master.key"]);
      expect(statSync(join(out, "master.key")).mode & 0o777).toBe(0o600);
      const manifest = JSON.parse(readFileSync(join(out, "manifest.json"), "utf8"));
      expect(manifest.integrity_check).toBe("ok");
      expect(manifest.counts.builds).toBeGreaterThanOrEqual(ackedBeforeBackup.length + 1);
      expect(manifest.counts.users).toBe(1);
      for (const f of manifest.files) {
        expect(
          createHash("sha256")
            .update(readFileSync(join(out, f.path)))
            .digest("hex"),
        ).toBe(f.sha256);
      }
      const summary = JSON.parse(backup.stdout);
      expect(summary.files).toBe(manifest.files.length);

      // A second backup into the same directory is refused: backups never mix.
      const again = await runCli(["backup", "--out", out], env);
      expect(again.code).toBe(1);
      expect(again.stderr).toMatch(/is not empty/);

      await daemon.stop();
      daemon = undefined;

      // Restore on a "new machine": a new data directory, then a daemon on it.
      const restoredDir = join(tempDir("hangar-ops-restore-"), "data");
      const restoreEnv = { HANGAR_DATA_DIR: restoredDir, HANGAR_LOG_REQUESTS: "0" };
      const restored = await runCli(["restore", "--from", out], restoreEnv, 120_000);
      expect(restored.code, restored.stderr).toBe(0);
      expect(statSync(restoredDir).mode & 0o777).toBe(0o700);
      const refused = await runCli(["restore", "--from", out], restoreEnv);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/not empty/);

      restoredDaemon = await startDaemon(restoreEnv);
      const r = daemonCaller(restoredDaemon.url);
      // The old session still works: the sessions table came along, and the key file with it.
      const me = await r.call("GET", "/v1/users/me", { token: owner });
      expect(me.status).toBe(200);
      for (const id of ackedBeforeBackup) expect((await r.call("GET", `/v1/builds/${id}`, { token: owner })).status, id).toBe(200);
      const log = await r.call("GET", `/v1/builds/${job.build_id}/logs`, { token: owner });
      expect(Buffer.byteLength(log.text)).toBeGreaterThanOrEqual(logBeforeBackup);
      const link = await r.call("POST", `/v1/artifacts/${created.body.artifact.id}/download-link`, { token: owner });
      expect(link.status, link.text).toBe(200);
      const downloaded = Buffer.from(await (await fetch(link.body.url)).arrayBuffer());
      expect(createHash("sha256").update(downloaded).digest("hex")).toBe(sha256);
    } finally {
      await daemon?.stop();
      await restoredDaemon?.stop();
    }
  }, 240_000);

  it("refuses a tampered backup", { timeout: 120_000 }, async () => {
    const dataDir = makeDataDir();
    cleanup.push(dataDir);
    const env = { HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0" };
    // A daemon's first start makes the key file a backup needs.
    await (await startDaemon(env)).stop();
    expect((await runCli(["setup-token"], env)).code).toBe(0);
    const out = join(tempDir("hangar-ops-tamper-"), "b");
    expect((await runCli(["backup", "--out", out], env)).code).toBe(0);
    writeFileSync(join(out, "master.key"), "tampered\n");
    const target = join(tempDir("hangar-ops-tamper-target-"), "data");
    const r = await runCli(["restore", "--from", out], { HANGAR_DATA_DIR: target });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/master\.key in the backup is missing or does not match its checksum/);
    expect(existsSync(join(target, "hangar.db"))).toBe(false);
  });
});

describe("service units", () => {
  it("prints a systemd unit that systemd-analyze accepts, running node directly", async () => {
    const r = await runCli(["service", "--systemd", "--environment-file", "/etc/hangar/hangar.env"], {});
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`ExecStart=${process.execPath} ${join(PROJECT_ROOT, "bin/hangar.mjs")} serve`);
    expect(r.stdout).toContain("EnvironmentFile=-/etc/hangar/hangar.env");
    expect(r.stdout).toContain("Restart=on-failure");
    expect(r.stdout).toContain(`WorkingDirectory=${PROJECT_ROOT.replace(/\/$/, "")}`);
    const dir = tempDir("hangar-ops-unit-");
    const unit = join(dir, "hangar.service");
    writeFileSync(unit, r.stdout);
    const analyze = spawnSync("systemd-analyze", ["verify", unit], { encoding: "utf8" });
    if (analyze.error) {
      // No systemd tools here: check the structure instead.
      expect(r.stdout).toMatch(/^\[Unit\][\s\S]*^\[Service\][\s\S]*^\[Install\]/m);
    } else {
      // verify reports problems on stderr; the only line allowed is about this test machine lacking the user.
      const problems = analyze.stderr
        .split("\n")
        .filter(
          (l) =>
            l.trim() &&
            !/Failed to resolve user|is not executable|Unknown user|No such file or directory|Cannot add dependency job|network-online.target|multi-user.target/.test(
              l,
            ),
        );
      expect(problems, analyze.stderr).toEqual([]);
    }
  });

  it("prints a launchd plist that plistlib parses, with node exec'd from the shell", async () => {
    const r = await runCli(["service", "--launchd"], {});
    expect(r.code, r.stderr).toBe(0);
    const parsed = JSON.parse(
      execFileSync("python3", ["-c", "import plistlib,sys,json; print(json.dumps(plistlib.loads(sys.stdin.buffer.read())))"], {
        input: r.stdout,
        encoding: "utf8",
      }),
    );
    expect(parsed.Label).toBe("dev.hangar.daemon");
    expect(parsed.ProgramArguments.slice(0, 2)).toEqual(["/bin/sh", "-c"]);
    expect(parsed.ProgramArguments[2]).toContain('exec "$2" "$3" serve');
    expect(parsed.ProgramArguments.slice(4)).toEqual([join(PROJECT_ROOT, "hangar.env"), process.execPath, join(PROJECT_ROOT, "bin/hangar.mjs")]);
    expect(parsed.KeepAlive).toEqual({ SuccessfulExit: false });
    expect(parsed.Umask).toBe(0o077);
    // The shell line really starts the daemon with the file's settings and execs node (one process left).
    const dir = tempDir("hangar-ops-launchd-");
    const envFile = join(dir, "hangar.env");
    writeFileSync(envFile, `HANGAR_DATA_DIR=${join(dir, "data")}\nHANGAR_PORT=0\nHANGAR_LOG_REQUESTS=0\n`);
    const args = [...parsed.ProgramArguments.slice(1, 4), envFile, ...parsed.ProgramArguments.slice(5)];
    const proc = spawn("/bin/sh", args, { cwd: PROJECT_ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    proc.stdout.on("data", (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => proc.once("exit", resolve));
    await expect.poll(() => out, { timeout: 30_000 }).toMatch(/hangar listening on/);
    expect(existsSync(join(dir, "data", "hangar.db"))).toBe(true);
    proc.kill("SIGTERM");
    expect(await exited).toBe(0);
  }, 60_000);
});

describe("npm start", () => {
  it("stops the daemon when npm gets SIGTERM", async () => {
    const dataDir = makeDataDir();
    cleanup.push(dataDir);
    const npm = spawn("npm", ["start", "--silent"], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, HANGAR_DATA_DIR: dataDir, HANGAR_HOST: "127.0.0.1", HANGAR_PORT: "0", HANGAR_LOG_REQUESTS: "0" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    npm.stdout.on("data", (d: Buffer) => (out += d.toString()));
    const exited = new Promise<void>((resolve) => npm.once("exit", () => resolve()));
    await expect.poll(() => out, { timeout: 30_000 }).toMatch(/hangar listening on (http:\/\/\S+)/);
    const url = /hangar listening on (http:\/\/\S+)/.exec(out)![1]!;
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    npm.kill("SIGTERM");
    await exited;
    // The daemon itself is gone: nothing answers on its port any more.
    await expect
      .poll(
        async () =>
          fetch(`${url}/healthz`).then(
            () => "up",
            () => "down",
          ),
        { timeout: 15_000 },
      )
      .toBe("down");
  }, 60_000);
});
