// The daemon restarting under a running build: the runner rides it out (retries with backoff) and the build
// still ends with every log line exactly once, its artifact and its final status.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createPipeline, createProject, makeGitRepo, queueBuild, registerRunner, type GitRepo } from "../helpers/builds.ts";
import { startDaemon, type Daemon } from "../helpers/daemon.ts";
import {
  freePort,
  getBuild,
  getLog,
  removeDir,
  startReadyDaemon,
  startRunner,
  stopRunner,
  waitFor,
  type ReadyDaemon,
  type RunnerProcess,
} from "./runner-harness.ts";

let d: ReadyDaemon | undefined;
let repo: GitRepo | undefined;
let runner: RunnerProcess | undefined;
const daemons: Daemon[] = [];
const scratch = mkdtempSync(join(tmpdir(), "hangar-runner-restart-"));

afterAll(async () => {
  await stopRunner(runner);
  for (const daemon of daemons) await daemon.stop("SIGKILL");
  if (d) removeDir(d.dataDir);
  repo?.remove();
  removeDir(scratch);
});

describe("a daemon restart in the middle of a build", () => {
  it("loses no log line, no artifact and no final report (SIGTERM, then SIGKILL with the steps finishing while it is down)", async () => {
    // A fixed port, so the restarted daemon answers on the URL the runner knows.
    const port = await freePort();
    d = await startReadyDaemon({ HANGAR_PORT: String(port) });
    daemons.push(d.daemon);
    repo = makeGitRepo();
    // The second step waits for this file, made only once the daemon is down: on a loaded machine the stored log
    // can lag so far behind that, without it, the build could finish before the crash it is meant to ride out.
    const gate = join(scratch, "daemon-is-down");
    const p = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const pipeline = await createPipeline(d.api, d.ownerToken, p.id, {
      platform: "any",
      steps: [
        { name: "count", run: 'for i in $(seq 1 30); do echo "line-$i"; sleep 0.1; done' },
        {
          name: "more",
          run: `while [ ! -e ${gate} ]; do sleep 0.1; done; for i in $(seq 31 40); do echo "line-$i"; sleep 0.1; done; mkdir -p out; echo made-while-away > out/report.txt`,
        },
      ],
      artifacts: ["out/report.txt"],
    });
    const reg = await registerRunner(d.api, d.ownerToken);
    const build = await queueBuild(d.api, d.ownerToken, p.id, pipeline.id, { commit_sha: repo.shas.main });
    runner = startRunner(d.daemon.url, reg, ["--once"], join(scratch, "work"));
    const api = d;
    const logHas = (text: string) => async () => (await getLog(api, build.id)).includes(text);

    await waitFor("line-5 in the stored log", logHas("line-5\n"));
    // A graceful stop first, back at once.
    expect(await d.daemon.stop("SIGTERM")).toBe(0);
    const second = await startDaemon({ ...d.env, HANGAR_PORT: String(port) });
    daemons.push(second);
    d.daemon = second;

    await waitFor("line-25 in the stored log", logHas("line-25\n"));
    // Then a crash, staying down while the steps finish: the rest of the log and the final report wait in the runner.
    await second.stop("SIGKILL");
    writeFileSync(gate, "");
    await new Promise((r) => setTimeout(r, 3000));
    expect(runner.proc.exitCode).toBeNull();
    const third = await startDaemon({ ...d.env, HANGAR_PORT: String(port) });
    daemons.push(third);
    d.daemon = third;

    const exitCode = await runner.exited;
    // The runner's own account of what went wrong is the useful part of a failure here.
    expect(exitCode, runner.stderr()).toBe(0);
    const done = await getBuild(d, build.id);
    expect(done.status).toBe("succeeded");
    expect(done.step_results.map((s: { status: string }) => s.status)).toEqual(["succeeded", "succeeded"]);
    const log = await getLog(d, build.id);
    const lines = [...log.matchAll(/^line-(\d+)$/gm)].map((m) => Number(m[1]));
    expect(lines).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    expect(log).toContain("hangar: build succeeded");
    const artifacts = await d.api.call("GET", `/v1/builds/${build.id}/artifacts`, { token: d.ownerToken });
    expect((artifacts.body as Array<{ filename: string }>).map((a) => a.filename)).toEqual(["report.txt"]);
    // The runner said it was retrying, and never printed its token while doing so.
    expect(runner.stderr()).toContain("retrying");
    expect(runner.stderr()).not.toContain(reg.token);
  }, 120_000);
});
