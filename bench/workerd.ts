// `npm run bench:workerd` (docs/benchmarks.md): the Workers entry in real workerd (miniflare) beside the Node daemon, both on
// one sqld, same load (autocannon, 32 connections over loopback, interleaved rounds). Two requests:
// - GET /healthz: exactly one database statement (`select 1`) per request. Its reference is a raw client loop
//   doing the same statement from 32 concurrent callers in this Node process, measured in the same run: what the
//   database answers one client, with no HTTP server, framework or auth in front. It is a client's limit, not
//   the server's: workerd's own fetch can get more out of the same sqld (seen: 117–200 %).
// - GET /v1/users/me with a session: the session lookup and the answer, a typical authenticated read.
import autocannon from "autocannon";
import { createClient } from "@libsql/client/web";
import { writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { bytesToBase64Url, randomBytes } from "../src/domain/common/crypto.ts";
import { http, makeDataDir, runCli, startDaemon } from "../test/helpers/daemon.ts";
import { startSqld } from "../test/helpers/sqld.ts";
import { bundleWorker, wranglerSettings } from "../test/helpers/workerd.ts";

const CONNECTIONS = 32;
const ROUND_S = Number(process.env.BENCH_ROUND_S ?? 3);
const ROUNDS = 3;

interface Figures {
  rps: number;
  p50: number;
  p99: number;
  failed: number;
}

async function measure(url: string, token: string | undefined, seconds: number): Promise<Figures> {
  const r = await autocannon({ url, connections: CONNECTIONS, duration: seconds, headers: token ? { authorization: `Bearer ${token}` } : {} });
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, failed: r.errors + r.timeouts + r.non2xx };
}

/** The database alone: CONNECTIONS callers each running `select 1` back to back for `seconds`. */
async function rawStatements(url: string, seconds: number): Promise<Figures> {
  const client = createClient({ url, concurrency: CONNECTIONS });
  const latencies: number[] = [];
  const until = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < until) {
        const t0 = performance.now();
        await client.execute("select 1");
        latencies.push(performance.now() - t0);
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  const at = (q: number) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!);
  return { rps: latencies.length / seconds, p50: at(0.5), p99: at(0.99), failed: 0 };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function interleaved(targets: Array<() => Promise<Figures>>): Promise<Figures[]> {
  const runs: Figures[][] = targets.map(() => []);
  for (let round = 0; round < ROUNDS; round++) for (const [i, run] of targets.entries()) runs[i]!.push(await run());
  return runs.map((r) => ({
    rps: median(r.map((f) => f.rps)),
    p50: median(r.map((f) => f.p50)),
    p99: median(r.map((f) => f.p99)),
    failed: r.reduce((n, f) => n + f.failed, 0),
  }));
}

const fmt = (name: string, f: Figures) =>
  `${name.padEnd(34)} ${f.rps.toFixed(0).padStart(6)} req/s   p50 ${String(f.p50).padStart(4)} ms   p99 ${String(f.p99).padStart(4)} ms   failed ${f.failed}`;

async function main(): Promise<void> {
  const sqld = await startSqld();
  const dataDir = makeDataDir();
  const key = bytesToBase64Url(randomBytes(32));
  writeFileSync(join(dataDir, "master.key"), `${key}\n`, { mode: 0o600 });
  const env = { HANGAR_DATA_DIR: dataDir, HANGAR_DATABASE_URL: sqld.url, HANGAR_LOG_REQUESTS: "0" };
  const daemon = await startDaemon(env, 60_000);
  let mf: Miniflare | undefined;
  try {
    const token = (await runCli(["setup-token"], env)).stdout.trim();
    const setup = (await http(daemon.url, "POST", "/v1/setup/bootstrap-token/verify", { body: { token } })).body.session_token as string;
    await http(daemon.url, "POST", "/v1/setup/local-owner/create", { token: setup, body: { email: "bench@example.com" } });
    await http(daemon.url, "POST", "/v1/setup/complete", { token: setup });
    const session = (await http(daemon.url, "POST", "/v1/auth/local/login", { body: {} })).body.session_token as string;

    mf = new Miniflare({
      modules: true,
      script: await bundleWorker(),
      ...wranglerSettings(),
      host: "127.0.0.1",
      port: 0,
      bindings: { HANGAR_DATABASE_URL: sqld.url, HANGAR_MASTER_KEY: key, HANGAR_LOG_REQUESTS: "0" },
    });
    const worker = String(await mf.ready).replace(/\/$/, "");

    for (const base of [daemon.url, worker]) {
      await measure(`${base}/healthz`, undefined, 1);
      await measure(`${base}/v1/users/me`, session, 1);
    }
    const load = loadavg()[0]!.toFixed(1);
    const [raw, nodeHealth, workerHealth, nodeMe, workerMe] = await interleaved([
      () => rawStatements(sqld.url, ROUND_S),
      () => measure(`${daemon.url}/healthz`, undefined, ROUND_S),
      () => measure(`${worker}/healthz`, undefined, ROUND_S),
      () => measure(`${daemon.url}/v1/users/me`, session, ROUND_S),
      () => measure(`${worker}/v1/users/me`, session, ROUND_S),
    ]);
    console.log(
      `bench:workerd  ${CONNECTIONS} connections, ${ROUNDS} interleaved rounds of ${ROUND_S} s (medians), load average ${load} at the start`,
    );
    console.log(fmt("sqld, raw `select 1` client loop", raw!));
    console.log(fmt("Node daemon  GET /healthz", nodeHealth!) + `   ${((nodeHealth!.rps / raw!.rps) * 100).toFixed(0)} % of the raw loop`);
    console.log(fmt("workerd      GET /healthz", workerHealth!) + `   ${((workerHealth!.rps / raw!.rps) * 100).toFixed(0)} % of the raw loop`);
    console.log(fmt("Node daemon  GET /v1/users/me", nodeMe!));
    console.log(fmt("workerd      GET /v1/users/me", workerMe!) + `   ${(workerMe!.rps / nodeMe!.rps).toFixed(2)}x the daemon`);
  } finally {
    await mf?.dispose();
    await daemon.stop("SIGTERM");
    await sqld.stop();
  }
}

await main();
