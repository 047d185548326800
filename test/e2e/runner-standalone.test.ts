// The standalone runner (docs/api.md §9): downloaded from a real daemon at GET /runner/hangar-runner.mjs into an empty
// directory with no node_modules anywhere above it, it registers and runs a build of a real git repository.
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPipeline, createProject, makeGitRepo, queueBuild, type GitRepo } from "../helpers/builds.ts";
import { PROJECT_ROOT } from "../helpers/daemon.ts";
import { getLog, removeDir, startReadyDaemon, waitForFinal, type ReadyDaemon } from "./runner-harness.ts";

const BUNDLE = join(PROJECT_ROOT, "dist", "hangar-runner.mjs");

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

let d: ReadyDaemon;
let repo: GitRepo;
let empty: string;
let fromPage: string;

beforeAll(async () => {
  // `npm install`/`npm ci` builds it (the prepare script): on a fresh clone (CI) it must simply be there.
  if (!existsSync(BUNDLE)) throw new Error(`${BUNDLE} is missing: \`npm install\` runs scripts/build.mjs (prepare), which should have built it`);
  // In a working copy whose sources changed since the last install, serve the runner of these sources.
  if (statSync(BUNDLE).mtimeMs < newestMtime(join(PROJECT_ROOT, "src"))) {
    const built = spawnSync(process.execPath, [join(PROJECT_ROOT, "scripts", "build.mjs"), "--runner"], { cwd: PROJECT_ROOT, encoding: "utf8" });
    if (built.status !== 0) throw new Error(`building the runner bundle failed: ${built.stderr}`);
  }
  d = await startReadyDaemon();
  repo = makeGitRepo({ "README.md": "standalone\n", "version.txt": "1.2.3\n" });
  empty = mkdtempSync(join(tmpdir(), "hangar-standalone-"));
  fromPage = mkdtempSync(join(tmpdir(), "hangar-standalone-page-"));
}, 90_000);

afterAll(async () => {
  await d?.daemon.stop();
  repo?.remove();
  if (empty) removeDir(empty);
  if (fromPage) removeDir(fromPage);
});

/** Expects no node_modules in `dir` or any directory above it: nothing Node could resolve a package from. */
function expectNoNodeModulesAbove(dir: string): void {
  for (let at = dir; ; at = dirname(at)) {
    expect(existsSync(join(at, "node_modules")), `${at}/node_modules`).toBe(false);
    if (dirname(at) === at) break;
  }
  expect(readdirSync(dir)).toEqual([]);
}

/** The text of a form control the page renders (hono/jsx escapes &, <, >, " and '). */
function controlValue(html: string, id: string): string {
  const m = new RegExp(`<input id="${id}"[^>]* value="([^"]*)"|<textarea id="${id}"[^>]*>([^<]*)</textarea>`).exec(html);
  if (!m) throw new Error(`no control #${id} on the page`);
  return (m[1] ?? m[2]!)
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&");
}

/** Runs a shell command line as a user would paste it, in `cwd` with a bare environment and HOME there. */
function shell(command: string, cwd: string, env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = spawn("sh", ["-c", command], {
    cwd,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: cwd, LANG: "C.UTF-8", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  proc.stdout.on("data", (b: Buffer) => (stdout += b.toString()));
  proc.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill("SIGKILL");
      reject(new Error(`${command} timed out\n${stderr}`));
    }, 90_000);
    proc.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Runs `node hangar-runner.mjs …` in the empty directory with a bare environment: no NODE_PATH, no loaders. */
function runStandalone(
  args: string[],
  env: Record<string, string> = {},
  timeoutMs = 90_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = spawn(process.execPath, ["hangar-runner.mjs", ...args], {
    cwd: empty,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: empty, LANG: "C.UTF-8", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  proc.stdout.on("data", (b: Buffer) => (stdout += b.toString()));
  proc.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill("SIGKILL");
      reject(new Error(`node hangar-runner.mjs ${args[0]} timed out\n${stderr}`));
    }, timeoutMs);
    proc.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe("the standalone runner bundle", () => {
  it("downloads from the daemon into an empty directory, registers and runs a build to success with no node_modules", async () => {
    expectNoNodeModulesAbove(empty);

    const res = await fetch(`${d.daemon.url}/runner/hangar-runner.mjs`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(res.headers.get("cache-control")).toBe("no-cache");
    const source = await res.text();
    writeFileSync(join(empty, "hangar-runner.mjs"), source);
    // One file: whatever it imports is Node's own.
    const specifiers = [...source.matchAll(/^import .* from "([^"]+)";?$/gm)].map((m) => m[1]!);
    expect(specifiers.length).toBeGreaterThan(0);
    expect(specifiers.filter((s) => !s.startsWith("node:"))).toEqual([]);
    expect(source).not.toMatch(/\brequire\("(?!node:)[^"]+"\)/);

    const help = await runStandalone(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("Usage: node hangar-runner.mjs");

    // register, with the owner's session from a file (docs/api.md §9: two lines for an env file).
    const sessionFile = join(empty, "session");
    writeFileSync(sessionFile, `${d.ownerToken}\n`, { mode: 0o600 });
    const reg = await runStandalone([
      "register",
      "--url",
      d.daemon.url,
      "--session-file",
      sessionFile,
      "--name",
      "second-mac",
      "--platform",
      "android",
    ]);
    expect(reg.code, reg.stderr).toBe(0);
    const id = /^HANGAR_RUNNER_ID=(\S+)$/m.exec(reg.stdout)?.[1];
    const token = /^HANGAR_RUNNER_TOKEN=(\S+)$/m.exec(reg.stdout)?.[1];
    expect(id).toBeTruthy();
    expect(token).toMatch(/^hgr_/);
    const listed = await d.api.call("GET", "/v1/runners", { token: d.ownerToken });
    const runners = listed.body as Array<{ id: string; name: string; capabilities: { platforms: string[] } }>;
    expect(runners.find((r) => r.id === id)).toMatchObject({ name: "second-mac", capabilities: { platforms: ["android"] } });

    // run one build of a real repository, artifact included (the zod-checked pipeline config, uploads, logs).
    const project = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const pipeline = await createPipeline(d.api, d.ownerToken, project.id, {
      platform: "android",
      steps: [
        {
          name: "package",
          run: 'mkdir -p out && cp version.txt out/app-$(cat version.txt | tr -d "\\n").apk && echo "built from $(git rev-parse HEAD)"',
        },
      ],
      artifacts: ["out/*.apk"],
    });
    const build = await queueBuild(d.api, d.ownerToken, project.id, pipeline.id, { commit_sha: repo.shas.main });
    const tokenFile = join(empty, "runner.token");
    writeFileSync(tokenFile, `${token}\n`);
    chmodSync(tokenFile, 0o600);
    const run = await runStandalone(["--url", d.daemon.url, "--id", id!, "--token-file", tokenFile, "--workdir", join(empty, "work"), "--once"], {
      HANGAR_RUNNER_ONCE_WAIT_S: "20",
    });
    expect(run.code, run.stderr).toBe(0);
    const final = await waitForFinal(d, build.id);
    expect(final.status).toBe("succeeded");
    expect(final.runner_id).toBe(id);
    expect(await getLog(d, build.id)).toContain(`built from ${repo.shas.main}`);
    const artifacts = await d.api.call("GET", `/v1/builds/${build.id}/artifacts`, { token: d.ownerToken });
    expect((artifacts.body as Array<{ filename: string; size_bytes: number }>).map((a) => [a.filename, a.size_bytes])).toEqual([
      ["app-1.2.3.apk", 6],
    ]);
  }, 180_000);

  it("the runners page's two commands (curl, then the runner with its token file) start a runner that builds", async () => {
    expectNoNodeModulesAbove(fromPage);
    const res = await fetch(`${d.daemon.url}/runners/register`, {
      method: "POST",
      headers: { cookie: `__Host-hangar_session=${d.ownerToken}`, origin: d.daemon.url, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams([
        ["name", "from-the-page"],
        ["platforms", "android"],
      ]).toString(),
    });
    expect(res.status).toBe(200);
    const html = await res.text();
    const download = controlValue(html, "runner-download");
    const start = controlValue(html, "runner-standalone");
    expect(download).toBe(`curl -fsSLO ${d.daemon.url}/runner/hangar-runner.mjs`);
    const id = /--id (\S+)/.exec(start)?.[1];
    expect(id).toBeTruthy();

    const fetched = await shell(download, fromPage);
    expect(fetched.code, fetched.stderr).toBe(0);
    expect(readdirSync(fromPage)).toEqual(["hangar-runner.mjs"]);

    const project = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const pipeline = await createPipeline(d.api, d.ownerToken, project.id, { platform: "android", steps: [{ name: "hello", run: "cat README.md" }] });
    const build = await queueBuild(d.api, d.ownerToken, project.id, pipeline.id, { commit_sha: repo.shas.main });
    // The page's command as pasted, with --once so the test ends (and the shortened --once wait).
    const ran = await shell(`${start} --workdir ${join(fromPage, "work")} --once`, fromPage, { HANGAR_RUNNER_ONCE_WAIT_S: "20" });
    expect(ran.code, ran.stderr).toBe(0);
    expect(statSync(join(fromPage, ".hangar-runner.token")).mode & 0o077).toBe(0);
    const final = await waitForFinal(d, build.id);
    expect(final.status).toBe("succeeded");
    expect(final.runner_id).toBe(id);
    expect(await getLog(d, build.id)).toContain("standalone");
  }, 180_000);
});
