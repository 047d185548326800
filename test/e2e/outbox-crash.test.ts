// The outbox across a kill -9 of the real daemon (docs/api.md §12): every message queued before the kill is
// delivered after the restart, each webhook-id at least once and every one of them, none lost.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { rmSync } from "node:fs";
import { Webhook } from "standardwebhooks";
import { afterAll, describe, expect, it } from "vitest";
import { claim, createPipeline, createProject, daemonCaller, queueBuild, registerRunner, reportStatus } from "../helpers/builds.ts";
import { makeDataDir, runCli, startDaemon, type Daemon } from "../helpers/daemon.ts";
import { waitFor } from "../helpers/receiver.ts";

const BUILDS = 15;

describe("outbox across kill -9", () => {
  const dataDir = makeDataDir();
  const env = { HANGAR_DATA_DIR: dataDir, HANGAR_OUTBOX_POLL_MS: "20", HANGAR_OUTBOX_RETRY_BASE_MS: "50", HANGAR_LOG_REQUESTS: "0" };
  const received: Array<{ id: string; body: string; headers: Record<string, string>; startedMs: number }> = [];
  // A slow receiver, so the kill lands while deliveries are in flight and queued.
  const server = createServer((req, res) => {
    const startedMs = performance.now();
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString()));
    req.on("end", () => {
      setTimeout(() => {
        received.push({ id: String(req.headers["webhook-id"]), body, headers: req.headers as Record<string, string>, startedMs });
        res.writeHead(200).end();
      }, 60);
    });
  });
  let daemon: Daemon | undefined;
  afterAll(async () => {
    await daemon?.stop("SIGKILL");
    server.closeAllConnections();
    server.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("delivers every message queued before the kill after a restart: each webhook-id once from the restarted daemon, a second copy only of one the killed daemon sent", async () => {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const receiverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    daemon = await startDaemon(env);
    const c = daemonCaller(daemon.url);
    const token = (await runCli(["setup-token"], env)).stdout.trim();
    const setup = (await c.call("POST", "/v1/setup/bootstrap-token/verify", { body: { token } })).body.session_token;
    await c.call("POST", "/v1/setup/local-owner/create", { token: setup, body: { email: "owner@example.com" } });
    await c.call("POST", "/v1/setup/complete", { token: setup });
    const owner = (await c.call("POST", "/v1/auth/local/login", { body: { email: "owner@example.com" } })).body.session_token;
    const project = await createProject(c, owner);
    const pipeline = await createPipeline(c, owner, project.id);
    const created = await c.call("POST", `/v1/projects/${project.id}/notifications`, {
      token: owner,
      body: { kind: "webhook", url: receiverUrl, on: ["started", "failed"] },
    });
    expect(created.status).toBe(200);
    const runner = await registerRunner(c, owner);
    for (let i = 0; i < BUILDS; i++) {
      const build = await queueBuild(c, owner, project.id, pipeline.id);
      expect((await claim(c, runner))?.build_id).toBe(build.id);
      await reportStatus(c, runner, build.id, { status: "running" });
      await reportStatus(c, runner, build.id, { status: "failed", exit_code: 1 });
    }
    // Some delivered, most not yet: kill -9 now.
    await waitFor(() => received.length >= 3, 20_000, "the first deliveries");
    await daemon.stop("SIGKILL");
    // The killed process has exited: a request that starts arriving after this comes from the restarted daemon.
    const killedMs = performance.now();
    const beforeRestart = new Set(received.map((r) => r.id)).size;
    expect(beforeRestart).toBeLessThan(BUILDS * 2);

    daemon = await startDaemon(env);
    await waitFor(() => new Set(received.map((r) => r.id)).size >= BUILDS * 2, 60_000, "every message after the restart");
    // Let any redelivery of an attempt cut off by the kill arrive, then count.
    await new Promise((r) => setTimeout(r, 300));
    const hook = new Webhook(created.body.secret);
    const types = new Map<string, string>();
    for (const r of received) types.set(r.id, (hook.verify(r.body, r.headers) as { type: string }).type);
    expect(types.size).toBe(BUILDS * 2);
    expect([...types.values()].filter((t) => t === "build.failed")).toHaveLength(BUILDS);
    // Exactly once by webhook-id from the restarted daemon; a second copy only of a message the killed daemon had
    // already sent (its answer never recorded), never more than two copies.
    const fromOld = new Set(received.filter((r) => r.startedMs < killedMs).map((r) => r.id));
    const fromNew = received.filter((r) => r.startedMs >= killedMs).map((r) => r.id);
    expect(fromNew.length).toBeGreaterThan(0);
    expect(new Set(fromNew).size).toBe(fromNew.length);
    for (const id of new Set(received.map((r) => r.id))) {
      const copies = received.filter((r) => r.id === id).length;
      expect(copies, id).toBeLessThanOrEqual(2);
      if (copies === 2) expect(fromOld.has(id), id).toBe(true);
    }
    expect(daemon.stderr()).not.toContain('"level":"error"');
  }, 150_000);
});
