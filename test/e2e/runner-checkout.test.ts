// Checkout credentials end to end: a private repository served over git smart-HTTP with Basic auth. The source
// token must reach git, and nothing else: not a command line, not the remote URL, not a step, not a log.
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPipeline, createProject, makeGitRepo, queueBuild, registerRunner, type GitRepo } from "../helpers/builds.ts";
import {
  getBuild,
  getLog,
  removeDir,
  startGitHttpServer,
  startReadyDaemon,
  startRunner,
  stopRunner,
  type GitHttpServer,
  type ReadyDaemon,
  type RunnerProcess,
} from "./runner-harness.ts";

const USERNAME = "ci-bot";
const TOKEN = `ghp_${crypto.randomUUID().replace(/-/g, "")}SECRET`;
const BASIC = Buffer.from(`${USERNAME}:${TOKEN}`).toString("base64");

let d: ReadyDaemon;
let repo: GitRepo;
let scratch: string;
let git: GitHttpServer;
const runners: RunnerProcess[] = [];

beforeAll(async () => {
  d = await startReadyDaemon();
  repo = makeGitRepo({ "README.md": "private sources\n" });
  scratch = mkdtempSync(join(tmpdir(), "hangar-runner-checkout-"));
  const root = join(scratch, "repos");
  execFileSync("git", ["clone", "-q", "--bare", repo.path, join(root, "app.git")]);
  git = await startGitHttpServer(root, USERNAME, TOKEN);
});

afterAll(async () => {
  for (const r of runners) await stopRunner(r);
  await git?.close();
  await d?.daemon.stop("SIGKILL");
  removeDir(d.dataDir);
  repo?.remove();
  removeDir(scratch);
});

function decodeLine(log: string, key: string): string {
  const b64 = new RegExp(`^${key}=([A-Za-z0-9+/=]*)$`, "m").exec(log)?.[1];
  if (b64 === undefined) throw new Error(`no ${key} line in the log`);
  return Buffer.from(b64, "base64").toString("utf8");
}

describe("checkout of a private repository", () => {
  it("clones with the source token through git's environment; the token is in no log, step, URL or command line", async () => {
    const p = await createProject(d.api, d.ownerToken, { repo_url: `${git.url}/app.git` });
    const creds = await d.api.call("PUT", `/v1/projects/${p.id}/source-credentials`, {
      token: d.ownerToken,
      body: { username: USERNAME, token: TOKEN },
    });
    expect(creds.status).toBe(200);
    expect(creds.text).not.toContain(TOKEN);
    const pipeline = await createPipeline(d.api, d.ownerToken, p.id, {
      platform: "any",
      steps: [
        {
          name: "inspect",
          run: [
            "cat README.md",
            "git remote -v",
            "git log --oneline -1",
            // base64 defeats any masking: what is decoded below is exactly what the step could see.
            'echo "env-b64=$(env | base64 | tr -d "\\n")"',
            'echo "config-b64=$(cat .git/config | base64 | tr -d "\\n")"',
            'echo "gitconfig-b64=$(git config --list | base64 | tr -d "\\n")"',
          ].join("\n"),
        },
      ],
    });
    const runner = await registerRunner(d.api, d.ownerToken);
    // No commit given: the daemon resolves the branch with `git ls-remote` and the same credentials.
    const build = await queueBuild(d.api, d.ownerToken, p.id, pipeline.id, { commit_sha: undefined });
    const r = startRunner(d.daemon.url, runner, ["--once"], join(scratch, "work"));
    runners.push(r);
    expect(await r.exited).toBe(0);

    const done = await getBuild(d, build.id);
    expect(done.status).toBe("succeeded");
    expect(done.commit_sha).toBe(repo.shas.main);
    expect(git.authorized).toBeGreaterThan(0);

    const log = await getLog(d, build.id);
    expect(log).toContain("private sources");
    expect(log).toContain(`origin\t${git.url}/app.git (fetch)`);
    expect(log).not.toContain(TOKEN);
    expect(log).not.toContain(BASIC);
    const stepEnv = decodeLine(log, "env-b64");
    expect(stepEnv).toContain("HANGAR_BUILD_ID=");
    expect(stepEnv).not.toContain(TOKEN);
    expect(stepEnv).not.toContain(BASIC);
    expect(stepEnv).not.toContain("GIT_CONFIG");
    expect(stepEnv).not.toContain(runner.token);
    expect(decodeLine(log, "config-b64")).toContain(`url = ${git.url}/app.git`);
    expect(decodeLine(log, "config-b64")).not.toContain(TOKEN);
    expect(decodeLine(log, "gitconfig-b64")).not.toContain(BASIC);

    // While git talked to the server, no process on this machine had the token on its command line.
    expect(git.leakedCommandLines).toEqual([]);
    expect(r.stdout() + r.stderr()).not.toContain(TOKEN);
    expect(r.stdout() + r.stderr()).not.toContain(runner.token);
  });

  it("without credentials the clone fails at once (no password prompt) and the build ends failed", async () => {
    const p = await createProject(d.api, d.ownerToken, { repo_url: `${git.url}/app.git` });
    const pipeline = await createPipeline(d.api, d.ownerToken, p.id, { platform: "any", steps: [{ name: "never", run: "echo never-printed" }] });
    const runner = await registerRunner(d.api, d.ownerToken);
    const refusedBefore = git.unauthorized;
    const build = await queueBuild(d.api, d.ownerToken, p.id, pipeline.id, { commit_sha: repo.shas.main });
    const r = startRunner(d.daemon.url, runner, ["--once"], join(scratch, "work-anon"));
    runners.push(r);
    expect(await r.exited).toBe(1);
    const done = await getBuild(d, build.id);
    expect(done.status).toBe("failed");
    expect(git.unauthorized).toBeGreaterThan(refusedBefore);
    const log = await getLog(d, build.id);
    expect(log).toContain("checkout of");
    expect(log).not.toContain("never-printed");
  });
});
