// `npm run bench:tester-page`: the tester page /apps/{token} of a channel with 100 releases, loaded 200 times over
// loopback (sequential, keep-alive): time to first byte (fetch resolving on the headers) and the whole answer, p50 and
// p99, and the HTML size. Beside it the floor measured in the same run: a bare node:http server answering the same
// bytes as a static file. "floor ÷ Hangar" is the goal's ratio (≥ 0.3). The three are measured in alternating blocks
// of 20 GETs, so that a change in the machine's load falls on all of them alike. Then the first GET after a write
// (the page rendered afresh, docs/decisions.md "Tester page cache"), 30 times.
import { createServer, type Server } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { createNodeListener, loadConfig } from "../src/index.ts";
import { createNodeDeps } from "../src/runtime/node-deps.ts";
import { issueBootstrapToken } from "../src/domain/setup/setup.ts";
import { artifacts, builds } from "../src/db/schema/index.ts";
import { eq } from "drizzle-orm";

const N = Number(process.env.BENCH_N ?? 200);
/** GETs of each before the measured ones: the JIT compiles each path after some hundreds of calls. */
const WARMUP = Number(process.env.BENCH_WARMUP ?? 300);
const RELEASES = 100;

function listen(server: Server): Promise<string> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)));
}

interface Timings {
  ttfb: number[];
  total: number[];
  body: string;
  /** This process's CPU time (client and server share it), steadier than wall time on a loaded machine. */
  cpuMicros: number;
}

const newTimings = (): Timings => ({ ttfb: [], total: [], body: "", cpuMicros: 0 });

/** `count` sequential GETs of `url`, added to `into`. */
async function timed(into: Timings, url: string, count: number, headers: Record<string, string> = {}): Promise<void> {
  const cpu = process.cpuUsage();
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    const res = await fetch(url, { headers });
    const first = performance.now() - start;
    into.body = await res.text();
    into.total.push(performance.now() - start);
    into.ttfb.push(first);
    if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
  }
  const used = process.cpuUsage(cpu);
  into.cpuMicros += used.user + used.system;
}

const BLOCK = 20;

const pct = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
};
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

  const pageUrl = base + pagePath;
  const apiUrl = `${base}/v1/projects/${project.id}/channels/${channel.id}/releases`;
  const apiHeaders = { authorization: `Bearer ${session}` };
  // A daemon serving testers is warm: the first GETs of a path run before the JIT compiled it.
  const warm = newTimings();
  await timed(warm, pageUrl, Math.max(1, WARMUP));
  const bytes = Buffer.from(warm.body);
  const floorServer = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8", "content-length": bytes.length });
    res.end(bytes);
  });
  const floorUrl = `${await listen(floorServer)}/page.html`;
  await timed(warm, apiUrl, Math.max(1, WARMUP / 3), apiHeaders);
  await timed(warm, floorUrl, Math.max(1, WARMUP));
  const hangar = newTimings();
  // The same releases as JSON (the page's queries without its rendering).
  const api = newTimings();
  const floor = newTimings();
  for (let block = 0; block < N / BLOCK; block++) {
    await timed(hangar, pageUrl, BLOCK);
    await timed(api, apiUrl, BLOCK, apiHeaders);
    await timed(floor, floorUrl, BLOCK);
  }
  // The first GET after a write that changes the page: the latest release's notes, as another writer would change them.
  const afterWrite = newTimings();
  const latest = await deps.db.select({ id: builds.id }).from(builds).where(eq(builds.buildNumber, RELEASES)).get();
  for (let i = 0; i < 30; i++) {
    await deps.db
      .update(builds)
      .set({ releaseNotes: `Release ${RELEASES}, corrected ${i} times.` })
      .where(eq(builds.id, latest!.id));
    await timed(afterWrite, pageUrl, 1);
  }
  const cpuMs = (t: Timings) => t.cpuMicros / 1000 / t.ttfb.length;

  console.log(
    `tester page, ${RELEASES} releases, ${N} sequential GETs after ${WARMUP}; ${cpus().length} CPUs, load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}`,
  );
  console.log(`HTML size: ${bytes.length} bytes`);
  console.log(`| | TTFB p50 | TTFB p99 | total p50 | total p99 | CPU per GET |`);
  const row = (name: string, t: Timings) =>
    console.log(
      `| ${name} | ${f(pct(t.ttfb, 50))} ms | ${f(pct(t.ttfb, 99))} ms | ${f(pct(t.total, 50))} ms | ${f(pct(t.total, 99))} ms | ${f(cpuMs(t))} ms |`,
    );
  row("Hangar /apps/{token}", hangar);
  row("JSON releases (same queries)", api);
  row("bare node:http, same bytes", floor);
  row("Hangar, first GET after a write", afterWrite);
  console.log(`floor ÷ Hangar (TTFB p50): ${(pct(floor.ttfb, 50) / pct(hangar.ttfb, 50)).toFixed(2)}`);
  console.log(`floor ÷ Hangar (CPU per GET): ${(cpuMs(floor) / cpuMs(hangar)).toFixed(2)}`);
  floorServer.close();
  server.close();
  await close();
  rmSync(dataDir, { recursive: true, force: true });
}

await main();
