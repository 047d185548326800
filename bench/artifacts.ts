// bench:artifacts — a 1 GiB artifact uploaded to and downloaded from a real daemon over loopback, beside a raw
// file-to-file copy of the same bytes (read, write, fsync: what the daemon's local store must do at least)
// measured in the same run, as the limit. Also the daemon's peak RSS while the bytes move.
// Targets (docs/benchmarks.md): 70% or more of the raw copy, peak RSS under 150 MiB.
import { createHash, randomBytes } from "node:crypto";
import { createReadStream, createWriteStream, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { open } from "node:fs/promises";
import { request } from "node:http";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { claim, createPipeline, createProject, daemonCaller, queueBuild, registerRunner } from "../test/helpers/builds.ts";
import { makeDataDir, runCli, startDaemon } from "../test/helpers/daemon.ts";

const SIZE = Number(process.env.BENCH_ARTIFACT_BYTES ?? 1024 ** 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const MiB = 1024 * 1024;

const rate = (bytes: number, ms: number) => bytes / MiB / (ms / 1000);

/** Samples VmRSS of a process every 10 ms until stopped; answers the maximum in MiB. */
function sampleRss(pid: number) {
  let max = 0;
  const read = () => {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    if (m) max = Math.max(max, Number(m[1]) / 1024);
  };
  read();
  const timer = setInterval(read, 10);
  return {
    stop() {
      clearInterval(timer);
      read();
      return max;
    },
  };
}

function hwm(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

async function rawCopy(from: string, to: string): Promise<number> {
  const started = performance.now();
  await pipeline(createReadStream(from, { highWaterMark: MiB }), createWriteStream(to, { highWaterMark: MiB }));
  const handle = await open(to, "r+");
  await handle.sync();
  await handle.close();
  return performance.now() - started;
}

function put(url: string, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: "PUT", headers: { "content-type": "application/octet-stream", "content-length": String(SIZE) } }, (res) => {
      let body = "";
      res.on("data", (d: Buffer) => (body += d.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    pipeline(createReadStream(path, { highWaterMark: MiB }), req).catch(reject);
  });
}

function download(url: string): Promise<{ status: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    request(url, (res) => {
      let bytes = 0;
      res.on("data", (d: Buffer) => (bytes += d.length));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, bytes }));
      res.on("error", reject);
    })
      .on("error", reject)
      .end();
  });
}

async function main() {
  const work = mkdtempSync(join(tmpdir(), "hangar-bench-artifacts-"));
  const dataDir = makeDataDir();
  const source = join(work, "source.bin");
  const env = { HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0" };
  const daemon = await startDaemon(env);
  try {
    process.stdout.write(`writing ${SIZE / MiB} MiB of random bytes...\n`);
    const hash = createHash("sha256");
    const out = createWriteStream(source);
    for (let written = 0; written < SIZE; written += MiB) {
      const chunk = randomBytes(Math.min(MiB, SIZE - written));
      hash.update(chunk);
      if (!out.write(chunk)) await new Promise<void>((r) => out.once("drain", () => r()));
    }
    await new Promise<void>((r) => out.end(r));
    const sha256 = hash.digest("hex");

    const c = daemonCaller(daemon.url);
    const setupToken = (await runCli(["setup-token"], env)).stdout.trim();
    const setup = (await c.call("POST", "/v1/setup/bootstrap-token/verify", { body: { token: setupToken } })).body.session_token;
    await c.call("POST", "/v1/setup/local-owner/create", { token: setup, body: { email: "bench@example.com" } });
    await c.call("POST", "/v1/setup/complete", { token: setup });
    const owner = (await c.call("POST", "/v1/auth/local/login", { body: { email: "bench@example.com" } })).body.session_token;
    const project = await createProject(c, owner);
    const pipe = await createPipeline(c, owner, project.id);
    const runner = await registerRunner(c, owner);
    await queueBuild(c, owner, project.id, pipe.id);
    const job = await claim(c, runner);
    const jobPath = `/v1/runners/${runner.id}/jobs/${job.build_id}/artifacts`;
    const pid = daemon.proc.pid!;
    const idleRss = sampleRss(pid).stop();

    // Warm the page cache and the code paths once, then measure rounds of raw copy, upload, download back to
    // back, so each ratio compares figures taken under the same machine load.
    await rawCopy(source, join(work, "warm.bin"));
    rmSync(join(work, "warm.bin"));
    const rounds: Array<{ raw: number; up: number; down: number }> = [];
    let uploadPeak = 0;
    let downloadPeak = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const rawMs = await rawCopy(source, join(work, "copy.bin"));
      rmSync(join(work, "copy.bin"));

      const created = await c.call("POST", jobPath, {
        token: runner.token,
        body: { filename: `bench-${round}.ipa`, size_bytes: SIZE, content_type: "application/octet-stream", sha256 },
      });
      const upRss = sampleRss(pid);
      let started = performance.now();
      const uploaded = await put(created.body.upload.url, source);
      const uploadMs = performance.now() - started;
      uploadPeak = Math.max(uploadPeak, upRss.stop());
      if (uploaded.status !== 200) throw new Error(`upload: ${uploaded.status} ${uploaded.body}`);
      if (JSON.parse(uploaded.body).sha256 !== sha256) throw new Error("the daemon stored different bytes");
      const done = await c.call("POST", `${jobPath}/${created.body.artifact.id}/complete`, { token: runner.token });
      if (done.status !== 200) throw new Error(`complete: ${done.status} ${done.text}`);

      const link = await c.call("POST", `/v1/artifacts/${created.body.artifact.id}/download-link`, { token: owner });
      const downRss = sampleRss(pid);
      started = performance.now();
      const got = await download(link.body.url);
      const downloadMs = performance.now() - started;
      downloadPeak = Math.max(downloadPeak, downRss.stop());
      if (got.status !== 200 || got.bytes !== SIZE) throw new Error(`download: ${got.status}, ${got.bytes} bytes`);
      rounds.push({ raw: rate(SIZE, rawMs), up: rate(SIZE, uploadMs), down: rate(SIZE, downloadMs) });
      process.stdout.write(
        `round ${round + 1}: raw ${rate(SIZE, rawMs).toFixed(0)} MiB/s, upload ${rate(SIZE, uploadMs).toFixed(0)} MiB/s ` +
          `(${(rate(SIZE, uploadMs) / rate(SIZE, rawMs)).toFixed(2)}), download ${rate(SIZE, downloadMs).toFixed(0)} MiB/s ` +
          `(${(rate(SIZE, downloadMs) / rate(SIZE, rawMs)).toFixed(2)})\n`,
      );
    }
    const peakHwm = hwm(pid);
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const raw = median(rounds.map((r) => r.raw));
    const upRatio = median(rounds.map((r) => r.up / r.raw));
    const downRatio = median(rounds.map((r) => r.down / r.raw));
    const lines = [
      `artifact size:               ${(SIZE / MiB).toFixed(0)} MiB, ${ROUNDS} rounds, medians; load average ${loadavg()
        .map((l) => l.toFixed(1))
        .join(" ")}`,
      `raw copy (read+write+fsync): ${raw.toFixed(0)} MiB/s  <- limit`,
      `upload through the daemon:   ${median(rounds.map((r) => r.up)).toFixed(0)} MiB/s  ratio ${upRatio.toFixed(2)}  (streamed, SHA-256 checked, fsync, rename)  target >= 0.70`,
      `download through the daemon: ${median(rounds.map((r) => r.down)).toFixed(0)} MiB/s  ratio ${downRatio.toFixed(2)}  target >= 0.70`,
      `daemon RSS idle:             ${idleRss.toFixed(0)} MiB`,
      `daemon peak RSS (sampled):   upload ${uploadPeak.toFixed(0)} MiB, download ${downloadPeak.toFixed(0)} MiB  target < 150 MiB`,
      `daemon VmHWM (whole life):   ${peakHwm.toFixed(0)} MiB`,
    ];
    process.stdout.write(`${lines.join("\n")}\n`);
  } finally {
    await daemon.stop();
    rmSync(work, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
