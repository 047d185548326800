// `npm run bench:tester-page`: the tester page /apps/{token} of a channel with 100 releases, loaded 200 times over
// loopback (sequential, keep-alive): time to first byte (fetch resolving on the headers) and the whole answer, p50 and
// p99, and the HTML size. Beside it the floor measured in the same run: a bare node:http server answering the same
// bytes as a static file. "floor ÷ Hangar" is the goal's ratio (≥ 0.3).
import { createServer, type Server } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { createNodeListener, loadConfig } from "../src/index.ts";
import { createNodeDeps } from "../src/runtime/node-deps.ts";
import { issueBootstrapToken } from "../src/domain/setup/setup.ts";
import { artifacts, builds } from "../src/db/schema/index.ts";

const N = Number(process.env.BENCH_N ?? 200);
const RELEASES = 100;

function listen(server: Server): Promise<string> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)));
}

// cpuMs: this process's CPU time per request (client and server share the process), steadier than wall time on a
// loaded machine.
async function timed(url: string, headers: Record<string, string> = {}): Promise<{ ttfb: number[]; total: number[]; body: string; cpuMs: number }> {
  const ttfb: number[] = [];
  let cpu = process.cpuUsage();
  const total: number[] = [];
  let body = "";
  for (let i = 0; i < N + 10; i++) {
    const start = performance.now();
    const res = await fetch(url, { headers });
    const first = performance.now() - start;
    body = await res.text();
    const all = performance.now() - start;
    if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
    if (i === 9) cpu = process.cpuUsage();
    if (i >= 10) {
      ttfb.push(first);
      total.push(all);
    }
  }
  const used = process.cpuUsage(cpu);
  return { ttfb: ttfb.sort((a, b) => a - b), total: total.sort((a, b) => a - b), body, cpuMs: (used.user + used.system) / 1000 / N };
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
const f = (n: number) => n.toFixed(2);

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), "hangar-bench-tester-"));
  const { deps, close } = await createNodeDeps(loadConfig({ HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0" }));
  const server = createServer(createNodeListener(deps));
  const base = await listen(server);
  const json = async (method: string, path: string, body?: unknown, token?: string) => {
    const res = await fetch(base + path, {
      method,
      headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return (await res.json()) as Record<string, unknown>;
  };
  const { token } = await issueBootstrapToken(deps);
  const setup = (await json("POST", "/v1/setup/bootstrap-token/verify", { token })).session_token as string;
  await json("POST", "/v1/setup/local-owner/create", { email: "owner@example.com" }, setup);
  await json("POST", "/v1/setup/complete", undefined, setup);
  const session = (await json("POST", "/v1/auth/local/login", {})).session_token as string;
  const project = await json("POST", "/v1/projects", { name: "app", repo_url: "https://git.example.com/app.git" }, session);
  const pipeline = await json(
    "POST",
    `/v1/projects/${project.id}/pipelines`,
    { name: "beta", config: { platform: "android", steps: [{ name: "b", run: "true" }] } },
    session,
  );
  // 100 releases: succeeded builds with an APK each, written as the daemon stores them.
  const now = Math.floor(Date.now() / 1000);
  for (let i = 1; i <= RELEASES; i++) {
    const buildId = crypto.randomUUID();
    const t = now - (RELEASES - i) * 3600;
    await deps.db.insert(builds).values({
      id: buildId,
      projectId: project.id as string,
      pipelineId: pipeline.id as string,
      buildNumber: i,
      status: "succeeded",
      platform: "android",
      triggerType: "manual",
      commitSha: i.toString(16).padStart(40, "0"),
      branch: "main",
      configSnapshot: {},
      timeoutS: 3600,
      releaseNotes: `Release ${i}: fixed the login screen, faster sync, and the settings page remembers your choice.`,
      queuedAt: t,
      createdAt: t,
      updatedAt: t,
      finishedAt: t,
    });
    await deps.db.insert(artifacts).values({
      id: crypto.randomUUID(),
      buildId,
      runnerId: "r",
      filename: "app.apk",
      sizeBytes: 40_000_000,
      contentType: "application/vnd.android.package-archive",
      status: "available",
      storageLocation: { provider: "local", key: `x/${i}` },
      appMetadata: {
        platform: "android",
        name: "Demo",
        bundle_identifier: "com.example.demo",
        version: `1.${i}`,
        build: String(i),
        min_os: "24",
        has_icon: false,
        signing: null,
      },
      completedAt: t,
      createdAt: t,
      updatedAt: t,
    });
  }
  const channel = await json("POST", `/v1/projects/${project.id}/channels`, { name: "beta", pipeline_id: pipeline.id }, session);
  const tester = await json("POST", `/v1/projects/${project.id}/channels/${channel.id}/testers`, { email: "t@example.com" }, session);
  const pagePath = new URL(tester.page_url as string).pathname;

  const hangar = await timed(base + pagePath);
  // The same releases as JSON (the page's queries without its rendering).
  const api = await timed(`${base}/v1/projects/${project.id}/channels/${channel.id}/releases`, { authorization: `Bearer ${session}` });
  const bytes = Buffer.from(hangar.body);
  const floorServer = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8", "content-length": bytes.length });
    res.end(bytes);
  });
  const floorBase = await listen(floorServer);
  const floor = await timed(floorBase + "/page.html");

  console.log(
    `tester page, ${RELEASES} releases, ${N} sequential GETs; ${cpus().length} CPUs, load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}`,
  );
  console.log(`HTML size: ${bytes.length} bytes`);
  console.log(`| | TTFB p50 | TTFB p99 | total p50 | total p99 | CPU per GET |`);
  console.log(
    `| Hangar /apps/{token} | ${f(pct(hangar.ttfb, 50))} ms | ${f(pct(hangar.ttfb, 99))} ms | ${f(pct(hangar.total, 50))} ms | ${f(pct(hangar.total, 99))} ms | ${f(hangar.cpuMs)} ms |`,
  );
  console.log(
    `| JSON releases (same queries) | ${f(pct(api.ttfb, 50))} ms | ${f(pct(api.ttfb, 99))} ms | ${f(pct(api.total, 50))} ms | ${f(pct(api.total, 99))} ms | ${f(api.cpuMs)} ms |`,
  );
  console.log(
    `| bare node:http, same bytes | ${f(pct(floor.ttfb, 50))} ms | ${f(pct(floor.ttfb, 99))} ms | ${f(pct(floor.total, 50))} ms | ${f(pct(floor.total, 99))} ms | ${f(floor.cpuMs)} ms |`,
  );
  console.log(`floor ÷ Hangar (TTFB p50): ${(pct(floor.ttfb, 50) / pct(hangar.ttfb, 50)).toFixed(2)}`);
  console.log(`floor ÷ Hangar (CPU per GET): ${(floor.cpuMs / hangar.cpuMs).toFixed(2)}`);
  floorServer.close();
  server.close();
  await close();
  rmSync(dataDir, { recursive: true, force: true });
}

await main();
