// npm run bench:hooks (docs/benchmarks.md): webhook-to-claim latency over 200 signed GitHub pushes beside the same build
// triggered through the API (the limit), and outbox throughput: 1,000 queued notifications delivered to a
// loopback receiver beside a loop of plain fetch POSTs of the same size to the same receiver (the limit).
import { createHmac } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCli, startDaemon, stopProcess } from "./daemon.ts";

const PUSHES = 200;
const NOTIFICATIONS = 1000;
const CONCURRENCY = 16;

const pct = (v: number[], p: number) => [...v].sort((a, b) => a - b)[Math.min(v.length - 1, Math.ceil((p / 100) * v.length) - 1)]!;

async function daemon(env: Record<string, string>): Promise<{ url: string; stop: () => Promise<void> }> {
  const d = await startDaemon(
    { HANGAR_HOST: "127.0.0.1", HANGAR_PORT: "0", HANGAR_LOG_REQUESTS: "0", HANGAR_OUTBOUND_ALLOW: "127.0.0.1/32", ...env },
    { stderrMode: "inherit" },
  );
  return { url: d.url, stop: () => stopProcess(d.proc) };
}

async function api(base: string, method: string, path: string, token?: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(base + path, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body !== undefined ? { "content-type": "application/json" } : {}),
      ...headers,
    },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

async function ready(base: string, env: Record<string, string>): Promise<string> {
  const token = await runCli(["setup-token"], env);
  const setup = (await api(base, "POST", "/v1/setup/bootstrap-token/verify", undefined, { token })).session_token;
  await api(base, "POST", "/v1/setup/local-owner/create", setup, { email: "bench@example.com" });
  await api(base, "POST", "/v1/setup/complete", setup);
  return (await api(base, "POST", "/v1/auth/local/login", undefined, { email: "bench@example.com" })).session_token;
}

async function main() {
  const dataDir = mkdtempSync(join(tmpdir(), "hangar-bench-hooks-"));
  const env = { HANGAR_DATA_DIR: dataDir, HANGAR_OUTBOX_POLL_MS: "600000" };
  let d = await daemon(env);
  try {
    const owner = await ready(d.url, env);
    const project = await api(d.url, "POST", "/v1/projects", owner, {
      name: "bench",
      repo_url: "https://git.example.com/a.git",
      default_branch: "main",
    });
    const pipeline = await api(d.url, "POST", `/v1/projects/${project.id}/pipelines`, owner, {
      name: "build",
      config: { platform: "any", steps: [{ name: "s", run: "true" }], triggers: [{ event: "push" }] },
    });
    const hook = await api(d.url, "POST", `/v1/projects/${project.id}/webhooks`, owner, { provider: "github", report_status: false });
    const runner = await api(d.url, "POST", "/v1/runners/register", owner, { name: "bench", capabilities: { platforms: ["android"] } });

    // Latency: a runner long-polls. Two clocks per build: from the trigger request leaving to the claim's answer
    // (the whole way), and from the trigger's answer to the claim's answer, where a claim that arrives before the
    // trigger's own answer counts as 0 (the runner had the build before the forge heard back).
    const measure = async (trigger: (i: number) => Promise<void>) => {
      const total: number[] = [];
      const afterAnswer: number[] = [];
      for (let i = 0; i < PUSHES; i++) {
        const claimed = api(d.url, "POST", `/v1/runners/${runner.id}/claim?wait=10`, runner.token).then((job) => ({ job, at: performance.now() }));
        await new Promise((r) => setTimeout(r, 2));
        const sent = performance.now();
        await trigger(i);
        const answered = performance.now();
        const { job, at } = await claimed;
        if (!job) throw new Error("the claim came back empty");
        total.push(at - sent);
        afterAnswer.push(Math.max(0, at - answered));
        await api(d.url, "POST", `/v1/runners/${runner.id}/jobs/${job.build_id}/status`, runner.token, { status: "running" });
        await api(d.url, "POST", `/v1/runners/${runner.id}/jobs/${job.build_id}/status`, runner.token, { status: "succeeded" });
      }
      return { total, afterAnswer };
    };
    const viaHook = await measure(async (i) => {
      const sha = createHmac("sha1", "h").update(`hook${i}`).digest("hex");
      const body = JSON.stringify({
        ref: "refs/heads/main",
        after: sha,
        head_commit: { id: sha, message: "bench" },
        repository: { full_name: "a/b" },
        sender: { login: "bench" },
      });
      const sig = createHmac("sha256", hook.secret).update(body).digest("hex");
      await api(d.url, "POST", `/v1/hooks/${hook.id}`, undefined, body, {
        "x-github-event": "push",
        "x-github-delivery": crypto.randomUUID(),
        "x-hub-signature-256": `sha256=${sig}`,
      });
    });
    const viaApi = await measure(async (i) => {
      const sha = createHmac("sha1", "a").update(`api${i}`).digest("hex");
      await api(d.url, "POST", `/v1/projects/${project.id}/builds`, owner, { pipeline_id: pipeline.id, commit_sha: sha });
    });

    // Throughput: 1,000 notifications queued while the daemon's outbox sleeps, delivered after a restart.
    // Counted by webhook-id: a redelivered message does not count twice.
    const delivered = new Set<string>();
    let copies = 0;
    let onAll: () => void = () => undefined;
    const server = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200).end();
        const id = req.headers["webhook-id"];
        if (typeof id !== "string") return;
        copies++;
        delivered.add(id);
        if (delivered.size === NOTIFICATIONS) onAll();
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const receiver = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    await api(d.url, "POST", `/v1/projects/${project.id}/notifications`, owner, { kind: "webhook", url: receiver, on: ["canceled"] });
    for (let i = 0; i < NOTIFICATIONS; i += 50) {
      await Promise.all(
        Array.from({ length: 50 }, async (_, j) => {
          const b = await api(d.url, "POST", `/v1/projects/${project.id}/builds`, owner, {
            pipeline_id: pipeline.id,
            commit_sha: createHmac("sha1", "n")
              .update(`${i + j}`)
              .digest("hex"),
          });
          await api(d.url, "POST", `/v1/builds/${b.id}/cancel`, owner);
        }),
      );
    }
    await d.stop();
    const all = new Promise<void>((r) => (onAll = r));
    const started = performance.now();
    d = await daemon({ ...env, HANGAR_OUTBOX_POLL_MS: "20" });
    await all;
    const outboxS = (performance.now() - started) / 1000;

    // The limit: plain fetch POSTs of a message of the same size, CONCURRENCY at a time.
    const outboxCopies = copies;
    const body = JSON.stringify({ type: "build.canceled", data: { pad: "x".repeat(1500) } });
    const loopStarted = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < NOTIFICATIONS) {
          next++;
          const r = await fetch(receiver, { method: "POST", headers: { "content-type": "application/json" }, body });
          await r.text();
        }
      }),
    );
    const loopS = (performance.now() - loopStarted) / 1000;
    server.close();

    const fmt = (v: number[]) => `p50 ${pct(v, 50).toFixed(2)} ms, p99 ${pct(v, 99).toFixed(2)} ms`;
    console.log(`push sent → claim (${PUSHES} pushes):          ${fmt(viaHook.total)}`);
    console.log(`API trigger sent → claim (the limit):   ${fmt(viaApi.total)}`);
    console.log(
      `ratio p50 ${(pct(viaHook.total, 50) / pct(viaApi.total, 50)).toFixed(2)}x, p99 ${(pct(viaHook.total, 99) / pct(viaApi.total, 99)).toFixed(2)}x`,
    );
    console.log(`hook's 200 → claim (0 when the claim came first): ${fmt(viaHook.afterAnswer)}; API answer → claim: ${fmt(viaApi.afterAnswer)}`);
    console.log(
      `outbox: ${NOTIFICATIONS} notifications in ${outboxS.toFixed(2)} s = ${(NOTIFICATIONS / outboxS).toFixed(0)}/s (includes the daemon's start); ${outboxCopies} requests for ${delivered.size} webhook-ids`,
    );
    console.log(
      `plain fetch loop (the limit, ${CONCURRENCY} at a time): ${(NOTIFICATIONS / loopS).toFixed(0)}/s; outbox at ${((NOTIFICATIONS / outboxS / (NOTIFICATIONS / loopS)) * 100).toFixed(1)} % of it`,
    );
  } finally {
    await d.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
