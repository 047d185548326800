// bench:publish — a 1 GiB .aab published by a real daemon to a local Google Play stand-in (test/helpers/
// fake-stores.ts, which hashes and counts the bytes; the daemon uses its resumable upload, in chunks), beside a
// raw streaming HTTP POST of the same file to the same server, measured in the same run before and after the
// publish (the machine's load drifts; the ratio is against their mean). Also the daemon's peak RSS while it uploads, against its idle RSS.
// Goals (docs/publishing.md): 0.8 of the raw rate or more; peak RSS flat, under idle + 100 MiB.
import { createHash, randomBytes } from "node:crypto";
import { createReadStream, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { spawn } from "node:child_process";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { claim, createPipeline, createProject, daemonCaller, queueBuild, registerRunner, reportStatus } from "../test/helpers/builds.ts";
import { makeDataDir, runCli, startDaemon } from "../test/helpers/daemon.ts";
import { startFakeStores } from "../test/helpers/fake-stores.ts";
import { makeAscKey, makeServiceAccount } from "../test/helpers/store-keys.ts";
import { waitFor } from "../test/helpers/receiver.ts";

const SIZE = Number(process.env.BENCH_ARTIFACT_BYTES ?? 1024 ** 3);
const MiB = 1024 * 1024;

function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

/**
 * The raw upload, from a process of its own as the daemon is one: the same file streamed by plain node:http
 * (1 MiB reads) to the same server's media upload route. Both rates are timed by the server (first byte to last).
 */
async function putFile(url: string, path: string): Promise<void> {
  const script = `
    import { createReadStream } from "node:fs";
    import { spawn } from "node:child_process";
import { request } from "node:http";
    import { pipeline } from "node:stream/promises";
    const [url, path, size] = process.argv.slice(1);
    const req = request(url, { method: "POST", headers: { "content-type": "application/octet-stream", "content-length": size, authorization: "Bearer ya29.fake-access-token" } }, (res) => {
      res.resume();
      res.on("end", () => process.exit(res.statusCode === 200 ? 0 : 1));
    });
    await pipeline(createReadStream(path, { highWaterMark: 1024 * 1024 }), req);
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script, url, path, String(SIZE)], { stdio: "inherit" });
  const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
  if (code !== 0) throw new Error(`the raw upload failed (${code})`);
}

async function main() {
  const work = mkdtempSync(join(tmpdir(), "hangar-bench-publish-"));
  const dataDir = makeDataDir();
  const source = join(work, "app.aab");
  const hash = createHash("sha256");
  {
    const chunk = randomBytes(8 * MiB);
    const parts: Buffer[] = [];
    for (let written = 0; written < SIZE; written += chunk.length) parts.push(chunk.subarray(0, Math.min(chunk.length, SIZE - written)));
    writeFileSync(source, Buffer.alloc(0));
    for (const p of parts) {
      hash.update(p);
      writeFileSync(source, p, { flag: "a" });
    }
  }
  const sha256 = hash.digest("hex");
  const asc = makeAscKey();
  const placeholder = makeServiceAccount("http://127.0.0.1:9/token");
  const stores = await startFakeStores({
    ascPublicPem: asc.publicPem,
    ascIssuer: asc.issuerId,
    ascKeyId: asc.keyId,
    googlePublicPem: placeholder.publicPem,
    googleEmail: placeholder.clientEmail,
  });
  stores.sinkUploads = true;
  const google = placeholder.json.replace("http://127.0.0.1:9/token", `${stores.url}/token`);
  const env = {
    HANGAR_DATA_DIR: dataDir,
    HANGAR_LOG_REQUESTS: "0",
    HANGAR_OUTBOX_POLL_MS: "20",
    HANGAR_ASC_API_URL: stores.url,
    HANGAR_GOOGLE_API_URL: stores.url,
  };
  const daemon = await startDaemon(env);
  try {
    const c = daemonCaller(daemon.url);
    const token = (await runCli(["setup-token"], env)).stdout.trim();
    const setup = (await c.call("POST", "/v1/setup/bootstrap-token/verify", { body: { token } })).body.session_token;
    await c.call("POST", "/v1/setup/local-owner/create", { token: setup, body: { email: "bench@example.com" } });
    await c.call("POST", "/v1/setup/complete", { token: setup });
    const owner = (await c.call("POST", "/v1/auth/local/login", { body: { email: "bench@example.com" } })).body.session_token;
    const project = await createProject(c, owner);
    await c.call("PUT", `/v1/projects/${project.id}/secrets/RELEASE`, { token: owner, body: { value: "x" } });
    await c.call("PUT", `/v1/projects/${project.id}/stores/google-play`, { token: owner, body: { service_account_json: google } });
    const config = {
      platform: "any",
      steps: [{ name: "b", run: "true" }],
      publish: [{ to: "google_play", package_name: "com.example.demo", track: "internal" }],
    };
    const pipe = await createPipeline(c, owner, project.id, config as never);
    const runner = await registerRunner(c, owner);
    const build = await queueBuild(c, owner, project.id, pipe.id);
    await claim(c, runner);
    await reportStatus(c, runner, build.id, { status: "running" });
    const jobPath = `/v1/runners/${runner.id}/jobs/${build.id}/artifacts`;
    const created = await c.call("POST", jobPath, {
      token: runner.token,
      body: { filename: "app.aab", size_bytes: SIZE, content_type: "application/octet-stream", sha256 },
    });
    await new Promise<void>((resolve, reject) => {
      const req = request(
        created.body.upload.url,
        { method: "PUT", headers: { "content-length": String(SIZE) } },
        (res) => (res.resume(), res.on("end", () => resolve())),
      );
      req.on("error", reject);
      pipeline(createReadStream(source, { highWaterMark: MiB }), req).catch(reject);
    });
    await c.call("POST", `${jobPath}/${created.body.artifact.id}/complete`, { token: runner.token });

    // Raw: the same file streamed by plain node:http to the same server's upload route.
    const rawUrl = `${stores.url}/upload/androidpublisher/v3/applications/com.example.demo/edits/raw/bundles?uploadType=media`;
    await putFile(rawUrl, source);
    const rawBeforeMs = stores.sunk[0]!.ms;
    if (stores.sunk[0]?.sha256 !== sha256) throw new Error("the raw upload arrived different");

    const pid = daemon.proc.pid!;
    await new Promise((r) => setTimeout(r, 500));
    const idle = rssOf(pid);
    let peak = idle;
    const sampler = setInterval(() => (peak = Math.max(peak, rssOf(pid))), 10);
    await reportStatus(c, runner, build.id, { status: "succeeded", exit_code: 0 });
    await waitFor(() => stores.sunk.length >= 2, 600_000, "the publish upload");
    clearInterval(sampler);
    const up = stores.sunk[1]!;
    if (up.sha256 !== sha256 || up.bytes !== SIZE) throw new Error("the published bytes differ from the artifact");
    await putFile(rawUrl, source);
    if (stores.sunk[2]?.sha256 !== sha256) throw new Error("the second raw upload arrived different");
    const rawAfterMs = stores.sunk[2].ms;
    const rawMs = (rawBeforeMs + rawAfterMs) / 2;
    const rate = (ms: number) => SIZE / MiB / (ms / 1000);
    console.log(
      JSON.stringify({
        size_mib: SIZE / MiB,
        raw_mib_s: Number(rate(rawMs).toFixed(1)),
        raw_before_after_mib_s: [Number(rate(rawBeforeMs).toFixed(1)), Number(rate(rawAfterMs).toFixed(1))],
        publish_mib_s: Number(rate(up.ms).toFixed(1)),
        ratio: Number((rawMs / up.ms).toFixed(2)),
        idle_rss_mib: Math.round(idle),
        peak_rss_mib: Math.round(peak),
      }),
    );
  } finally {
    await daemon.stop("SIGTERM");
    await stores.close();
    rmSync(work, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
