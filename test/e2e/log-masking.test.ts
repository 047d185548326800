import { afterAll, describe, expect, it } from "vitest";
import { claim, createPipeline, createProject, queueBuild, registerRunner, reportStatus } from "../helpers/builds.ts";
import type { Daemon } from "../helpers/daemon.ts";
import { startReadyDaemon } from "./runner-harness.ts";

const daemons: Daemon[] = [];
afterAll(async () => {
  await Promise.all(daemons.map((d) => d.stop("SIGKILL")));
});

describe("log masking on the real daemon (docs/decisions.md)", () => {
  it("masks 1 MiB near-miss chunks against an 8 KiB secret while /healthz keeps answering", async () => {
    const d = await startReadyDaemon({ HANGAR_LOG_REQUESTS: "0" });
    daemons.push(d.daemon);
    // The worst case of the old scan: a secret of 8191 'A' and a 'B', a chunk of nothing but 'A'.
    const secret = `${"A".repeat(8191)}B`;
    const project = await createProject(d.api, d.ownerToken, { repo_url: "https://git.example.com/app.git" });
    expect((await d.api.call("PUT", `/v1/projects/${project.id}/source-credentials`, { token: d.ownerToken, body: { token: secret } })).status).toBe(
      200,
    );
    const pipeline = await createPipeline(d.api, d.ownerToken, project.id);
    const runner = await registerRunner(d.api, d.ownerToken, {});
    const build = await queueBuild(d.api, d.ownerToken, project.id, pipeline.id, { commit_sha: "abcdef1" });
    expect((await claim(d.api, runner)).build_id).toBe(build.id);
    expect((await reportStatus(d.api, runner, build.id, { status: "running" })).status).toBe(200);

    const chunk = Buffer.alloc(1024 * 1024, "A");
    // The last chunk ends with the secret itself, so the masking is seen to work as well as to be quick.
    const last = Buffer.concat([Buffer.alloc(1024 * 1024 - secret.length - 1, "A"), Buffer.from(`\n${secret}`)]);
    const appends = (async () => {
      let offset = 0;
      const started = performance.now();
      for (const body of [chunk, chunk, chunk, last]) {
        const res = await fetch(`${d.daemon.url}/v1/runners/${runner.id}/jobs/${build.id}/logs?offset=${offset}`, {
          method: "POST",
          headers: { authorization: `Bearer ${runner.token}`, "content-type": "text/plain" },
          body,
        });
        expect(res.status).toBe(200);
        offset += body.length;
        expect(((await res.json()) as { log_bytes: number }).log_bytes).toBe(offset);
      }
      return performance.now() - started;
    })();
    let done = false;
    const healthLatencies: number[] = [];
    void appends.finally(() => (done = true));
    while (!done) {
      const t0 = performance.now();
      const res = await fetch(`${d.daemon.url}/healthz`);
      expect(res.status).toBe(200);
      await res.arrayBuffer();
      healthLatencies.push(performance.now() - t0);
      await new Promise((r) => setTimeout(r, 20));
    }
    const appendMs = await appends;
    expect(healthLatencies.length).toBeGreaterThan(0);
    // The old scan took a minute per chunk; a linear one keeps the event loop free (2 shared cores: generous).
    expect(Math.max(...healthLatencies)).toBeLessThan(2_000);
    expect(appendMs).toBeLessThan(20_000);

    expect((await reportStatus(d.api, runner, build.id, { status: "succeeded" })).status).toBe(200);
    const log = await d.api.call("GET", `/v1/builds/${build.id}/logs?offset=${4 * 1024 * 1024 - 20_000}`, { token: d.ownerToken });
    expect(log.text.endsWith("\n***")).toBe(true);
    expect(log.text).not.toContain("B");
    expect(log.text.length).toBe(20_000 - 8192 + 3);
  });
});
