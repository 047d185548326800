// npm run bench:claim — claim throughput over loopback HTTP against the same claims straight on the database
// (the limit), and job pickup latency with long-poll against a runner polling every 3 s. Issue 5.
import { rmSync } from "node:fs";
import { Agent, request } from "node:http";
import { loadConfig } from "../src/config.ts";
import { openDb } from "../src/db/client.ts";
import { builds } from "../src/db/schema/index.ts";
import { systemClock } from "../src/deps.ts";
import { claimOnce } from "../src/domain/scheduler.ts";
import { http as httpOnce, makeDataDir, runCli, startDaemon } from "../test/helpers/daemon.ts";

const BUILDS = 2000;
const RUNNERS = 20;
const PICKUP_BUILDS = 200;
const POLL_EVERY_MS = 3000;

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}
const ms = (n: number) => `${n.toFixed(2)} ms`;
const sleep = (n: number) => new Promise((r) => setTimeout(r, n));

/** The test helper's JSON fetch, retried once for the same idle-socket race as below. */
const http: typeof httpOnce = async (...args) => {
  try {
    return await httpOnce(...args);
  } catch {
    return httpOnce(...args);
  }
};

// Runners talk to the daemon through node:http with keep-alive (lighter on the shared CPU than fetch).
const agent = new Agent({ keepAlive: true, maxSockets: 64 });

/** A runner's POST; retried once when a kept-alive socket was closed by the server while idle (nothing was sent). */
async function post(url: string, token: string): Promise<{ status: number; text: string }> {
  const once = () =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = request(url, { method: "POST", agent, headers: { authorization: `Bearer ${token}`, "content-length": "0" } }, (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (text += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end();
    });
  try {
    return await once();
  } catch {
    return once();
  }
}

async function main() {
  const dataDir = makeDataDir();
  // Quiet daemon; the sweeper stays out of the way of the measured window.
  const env = { HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0", HANGAR_SWEEP_INTERVAL_MS: "600000" };
  const daemon = await startDaemon(env);
  const base = daemon.url;
  try {
    const made = await runCli(["setup-token"], env);
    const setup = (await http(base, "POST", "/v1/setup/bootstrap-token/verify", { body: { token: made.stdout.trim() } })).body.session_token;
    await http(base, "POST", "/v1/setup/local-owner/create", { token: setup, body: { email: "bench@example.com" } });
    await http(base, "POST", "/v1/setup/complete", { token: setup });
    const owner = (await http(base, "POST", "/v1/auth/local/login", { body: {} })).body.session_token as string;

    const project = (await http(base, "POST", "/v1/projects", { token: owner, body: { name: "bench", repo_url: "https://example.com/x.git" } })).body;
    const mk = async (name: string, platform: string) =>
      (await http(base, "POST", `/v1/projects/${project.id}/pipelines`, { token: owner, body: { name, config: { platform, steps: [{ name: "s", run: "true" }] } } })).body;
    const android = await mk("android", "android");
    const ios = await mk("ios", "ios");
    const macos = await mk("macos", "macos");
    const register = async (platforms: string[]) =>
      (await http(base, "POST", "/v1/runners/register", { token: owner, body: { capabilities: { platforms } } })).body as { id: string; token: string };
    const fleet = await Promise.all(Array.from({ length: RUNNERS }, () => register(["android"])));
    const trigger = (pipelineId: string) =>
      http(base, "POST", `/v1/projects/${project.id}/builds`, { token: owner, body: { pipeline_id: pipelineId, commit_sha: "abcdef0123456789" } });

    process.stdout.write(`queueing ${BUILDS} builds...\n`);
    for (let i = 0; i < BUILDS; i += 50) await Promise.all(Array.from({ length: 50 }, () => trigger(android.id)));

    // 1. The limit: the daemon's own claim statement (with its heartbeat batch), 20 concurrent workers, straight
    //    on the database file from this process. 2. The same claims over loopback HTTP, 20 runners each claiming
    //    until 204. Run in the order direct, HTTP, HTTP, direct (ABBA) so a drift in machine load during the run
    //    weighs on both alike; the same 2000 builds are put back in the queue before every phase.
    const opened = await openDb(`file:${dataDir}/hangar.db`);
    const deps = { db: opened.db, clock: systemClock, config: loadConfig(env) };
    const requeue = () => opened.db.update(builds).set({ status: "queued", runnerId: null, leaseExpiresAt: null, attemptCount: 0 });
    const direct: number[] = [];
    const viaHttp: number[] = [];
    let directSeconds = 0;
    let httpSeconds = 0;
    const runDirect = async () => {
      await requeue();
      const before = direct.length;
      const t0 = performance.now();
      await Promise.all(
        fleet.map(async (r) => {
          for (;;) {
            const s = performance.now();
            const b = await claimOnce(deps, r.id);
            if (!b) return;
            direct.push(performance.now() - s);
          }
        }),
      );
      directSeconds += (performance.now() - t0) / 1000;
      if (direct.length - before !== BUILDS) throw new Error(`direct claims: ${direct.length - before}`);
    };
    const runHttp = async () => {
      await requeue();
      const seen = new Set<string>();
      const t0 = performance.now();
      await Promise.all(
        fleet.map(async (r) => {
          for (;;) {
            const s = performance.now();
            const res = await post(`${base}/v1/runners/${r.id}/claim`, r.token);
            const text = res.text;
            if (res.status === 204) return;
            if (res.status !== 200) throw new Error(`claim ${res.status} ${text}`);
            viaHttp.push(performance.now() - s);
            seen.add(JSON.parse(text).build_id);
          }
        }),
      );
      httpSeconds += (performance.now() - t0) / 1000;
      if (seen.size !== BUILDS) throw new Error(`http claims: distinct ${seen.size}`);
    };
    await runDirect();
    await runHttp();
    await runHttp();
    await runDirect();
    opened.close();

    // 3. Pickup latency: a long-polling runner (ios) and a runner polling every 3 s (macos), side by side,
    //    each fed PICKUP_BUILDS builds at random moments. Latency = trigger sent → claim answer received.
    const longPoller = await register(["ios"]);
    const poller = await register(["macos"]);
    const sentAt = new Map<number, number>();
    // Answer times are keyed by build number and matched with send times at the end: a long-poll answer can
    // arrive before the trigger's own response does.
    const longPollAt = new Map<number, number>();
    const pollAt = new Map<number, number>();
    let stop = false;
    const claimVia = async (r: { id: string; token: string }, wait: number) => {
      const res = await post(`${base}/v1/runners/${r.id}/claim${wait ? `?wait=${wait}` : ""}`, r.token);
      const text = res.text;
      return res.status === 200 ? (JSON.parse(text) as { build_number: number }) : null;
    };
    const longPollLoop = (async () => {
      while (!stop) {
        const job = await claimVia(longPoller, 30);
        if (job) longPollAt.set(job.build_number, performance.now());
      }
    })();
    const pollLoop = (async () => {
      while (!stop) {
        for (;;) {
          const job = await claimVia(poller, 0);
          if (!job) break;
          pollAt.set(job.build_number, performance.now());
        }
        await sleep(POLL_EVERY_MS);
      }
    })();
    // Random offset so the poller's phase is not aligned with the triggers.
    const feed = async (pipelineId: string) => {
      for (let i = 0; i < PICKUP_BUILDS; i++) {
        await sleep(50 + Math.random() * 250);
        const s = performance.now();
        const body = (await trigger(pipelineId)).body as { build_number: number };
        sentAt.set(body.build_number, s);
      }
    };
    await Promise.all([feed(ios.id), feed(macos.id)]);
    const deadline = Date.now() + 10_000;
    while ((longPollAt.size < PICKUP_BUILDS || pollAt.size < PICKUP_BUILDS) && Date.now() < deadline) await sleep(100);
    stop = true;
    await trigger(ios.id);
    await Promise.race([Promise.all([longPollLoop, pollLoop]), sleep(POLL_EVERY_MS + 1000)]);
    const latencies = (at: Map<number, number>) => [...at].filter(([n]) => sentAt.has(n)).map(([n, t]) => t - sentAt.get(n)!);
    const longPollLatency = latencies(longPollAt);
    const pollLatency = latencies(pollAt);

    const directRate = direct.length / directSeconds;
    const httpRate = viaHttp.length / httpSeconds;
    const { loadavg, cpus } = await import("node:os");
    const lines = [
      `Claims (issue 5): ${BUILDS} queued builds, ${RUNNERS} concurrent runners, one daemon, embedded libSQL file`,
      `  machine: ${cpus().length} cores, load average ${loadavg().map((l) => l.toFixed(1)).join(" ")} at the end (other work shares the CPU)`,
      `  (each mode run twice, ABBA order; rates over both runs, latencies over all ${2 * BUILDS} claims)`,
      `  direct on the database (limit): ${directRate.toFixed(0)} claims/s, p50 ${ms(percentile(direct, 50))}, p99 ${ms(percentile(direct, 99))}`,
      `  over loopback HTTP:             ${httpRate.toFixed(0)} claims/s, p50 ${ms(percentile(viaHttp, 50))}, p99 ${ms(percentile(viaHttp, 99))}`,
      `  ratio HTTP / direct:            ${((httpRate / directRate) * 100).toFixed(1)}% (target >= 50%)`,
      `Pickup latency, trigger sent -> claim answer, ${PICKUP_BUILDS} builds each:`,
      `  long-poll (?wait=30):           p50 ${ms(percentile(longPollLatency, 50))}, p99 ${ms(percentile(longPollLatency, 99))} (n=${longPollLatency.length}, target p99 < 100 ms)`,
      `  polling every 3 s:              p50 ${ms(percentile(pollLatency, 50))}, p99 ${ms(percentile(pollLatency, 99))} (n=${pollLatency.length})`,
    ];
    process.stdout.write(`${lines.join("\n")}\n`);
  } catch (err) {
    process.stderr.write(`daemon stderr (tail):\n${daemon.stderr().slice(-3000)}\n`);
    throw err;
  } finally {
    await daemon.stop("SIGTERM");
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
