// The runner as an attacker's step sees it (docs/api.md §9): no runner token in what a step can dump, secrets masked,
// a setsid'd leftover ended with the job, and a crashed runner's job directory and signing file removed at restart.
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPipeline, createProject, makeGitRepo, queueBuild, registerRunner, type GitRepo } from "../helpers/builds.ts";
import { getLog, removeDir, startReadyDaemon, startRunner, stopRunner, waitFor, waitForFinal, type ReadyDaemon } from "./runner-harness.ts";
import { androidSigningBody } from "../helpers/signing-material.ts";

let d: ReadyDaemon;
let repo: GitRepo;
let scratch: string;

beforeAll(async () => {
  d = await startReadyDaemon();
  repo = makeGitRepo({ "README.md": "isolation\n" });
  scratch = mkdtempSync(join(tmpdir(), "hangar-isolation-"));
}, 60_000);

afterAll(async () => {
  await d?.daemon.stop();
  repo?.remove();
  if (scratch) removeDir(scratch);
});

function alive(pid: number): boolean {
  try {
    // A zombie (exited, not yet reaped) counts as gone.
    return !/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

describe("runner isolation, end to end", () => {
  it("leaves no runner token in the stored log, masks a secret variable, and ends a setsid'd step with the job", async () => {
    const project = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const pidFile = join(scratch, "setsid.pid");
    const pipeline = await createPipeline(d.api, d.ownerToken, project.id, {
      platform: "any",
      steps: [
        { name: "dump", run: "env; echo ---parent; tr '\\0' '\\n' < /proc/$PPID/environ; echo ---ps; ps -eo pid,args; echo secret=$DEPLOY_KEY" },
        { name: "escape", run: `setsid sh -c 'echo $$ > ${pidFile}; exec sleep 300' > /dev/null 2>&1 & sleep 0.5; cat ${pidFile}` },
      ],
    });
    const secret = "deploy-key-9f8e7d6c5b4a";
    expect((await d.api.call("PUT", `/v1/projects/${project.id}/secrets/DEPLOY_KEY`, { token: d.ownerToken, body: { value: secret } })).status).toBe(
      200,
    );
    const runner = await registerRunner(d.api, d.ownerToken);
    const build = await queueBuild(d.api, d.ownerToken, project.id, pipeline.id, { commit_sha: repo.shas.main });
    // The token reaches the runner through its environment and the command line: the two ways a step could see it.
    const r = startRunner(d.daemon.url, runner, ["--once", "--token", runner.token], join(scratch, "work-a"), { HANGAR_RUNNER_ONCE_WAIT_S: "20" });
    try {
      expect(await r.exited).toBe(0);
      const final = await waitForFinal(d, build.id);
      expect(final.status).toBe("succeeded");
      const log = await getLog(d, build.id);
      expect(log).toContain("---parent");
      expect(log).toContain("---ps");
      expect(log).toContain("secret=***");
      expect(log).not.toContain(secret);
      expect(log).not.toContain(runner.token);
      // The step's parent is the wrapper shell, whose environment is the step's own.
      const parentEnv = /\n---parent\n([\s\S]*?)\n---ps\n/.exec(log)?.[1] ?? "";
      expect(parentEnv).toContain("HANGAR_JOB_COOKIE=");
      expect(parentEnv).not.toContain("HANGAR_RUNNER_TOKEN");
      const pid = Number(readFileSync(pidFile, "utf8").trim());
      expect(pid).toBeGreaterThan(1);
      await waitFor("the setsid step to be gone", () => !alive(pid), 10_000);
      expect(log).toMatch(/hangar: ended \d+ process\(es\) the job left running/);
    } finally {
      await stopRunner(r);
    }
  }, 120_000);

  it("withholds secrets from an unprotected branch; a SIGKILLed runner's job directory and signing file are gone after restart", async () => {
    const project = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    await d.api.call("PUT", `/v1/projects/${project.id}/secrets/DEPLOY_KEY`, { token: d.ownerToken, body: { value: "never-here-1234" } });
    await d.api.call("PUT", `/v1/projects/${project.id}/signing/android`, {
      token: d.ownerToken,
      body: androidSigningBody({ storePassword: "store-pass", keyPassword: "key-pass", alias: "k" }),
    });
    const pipeline = await createPipeline(d.api, d.ownerToken, project.id, {
      platform: "android",
      steps: [{ name: "hold", run: 'echo "key=${DEPLOY_KEY:-none} keystore=${HANGAR_ANDROID_KEYSTORE_PATH:-none}"; sleep 120' }],
    });
    const runner = await registerRunner(d.api, d.ownerToken, { platforms: ["android"] });
    const workdir = join(scratch, "work-b");

    // 1. Protected branches exclude main: the build runs without secrets or signing.
    expect(
      (await d.api.call("PUT", `/v1/projects/${project.id}/protection`, { token: d.ownerToken, body: { branches: ["release/**"] } })).status,
    ).toBe(200);
    const unprotected = await queueBuild(d.api, d.ownerToken, project.id, pipeline.id, { commit_sha: repo.shas.main });
    let r = startRunner(d.daemon.url, runner, [], workdir);
    try {
      await waitFor("the step to start", async () => /^key=/m.test(await getLog(d, unprotected.id)), 60_000).catch(async (err: Error) => {
        throw new Error(`${err.message}\nlog: ${await getLog(d, unprotected.id)}\nrunner: ${r.stderr()}`);
      });
      const log = await getLog(d, unprotected.id);
      expect(log).toContain("key=none keystore=none");
      expect(log).toContain("secret variables withheld");
      expect(log).toContain("signing material withheld");
      await d.api.call("POST", `/v1/builds/${unprotected.id}/cancel`, { token: d.ownerToken });
      await waitForFinal(d, unprotected.id);

      // 2. A protected build gets its keystore; the runner dies while the step holds it.
      await d.api.call("PUT", `/v1/projects/${project.id}/protection`, { token: d.ownerToken, body: { branches: ["**"] } });
      const signed = await queueBuild(d.api, d.ownerToken, project.id, pipeline.id, { commit_sha: repo.shas.main });
      await waitFor("the signed step to start", async () => /^key=.* keystore=\//m.test(await getLog(d, signed.id)), 60_000);
      const keystore = /^key=.* keystore=(\S+)/m.exec(await getLog(d, signed.id))![1]!;
      expect(existsSync(keystore)).toBe(true);
      r.proc.kill("SIGKILL");
      await r.exited;
      expect(existsSync(keystore)).toBe(true);
      expect(readdirSync(workdir).some((n) => n.startsWith("build-"))).toBe(true);

      // 3. On restart the job directory (and the keystore in it) is removed before anything else.
      r = startRunner(d.daemon.url, runner, ["--once"], workdir, { HANGAR_RUNNER_ONCE_WAIT_S: "1" });
      await r.exited;
      expect(existsSync(keystore)).toBe(false);
      expect(readdirSync(workdir).filter((n) => n.startsWith("build-"))).toEqual([]);
      expect(r.stderr()).toMatch(/removed 1 job directory/);
    } finally {
      await stopRunner(r);
    }
  }, 180_000);
});
