// Artifacts against the real daemon process: 100 MiB uploads (with and without Content-Length) and downloads,
// byte-identical, plus an over-the-air install of an IPA whose manifest python3's plistlib reads back.
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { createReadStream, createWriteStream, mkdtempSync, rmSync, statSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claim, createPipeline, createProject, daemonCaller, queueBuild, registerRunner, type Caller } from "../helpers/builds.ts";
import { makeIpa } from "../helpers/artifact-world.ts";
import { makeDataDir, runCli, startDaemon, type Daemon } from "../helpers/daemon.ts";

const SIZE = 100 * 1024 * 1024;

/** PUT a file with Node's http client: a Content-Length body, or chunked transfer encoding. */
function putFile(url: string, path: string, chunked: boolean): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { "content-type": "application/octet-stream" };
    if (!chunked) headers["content-length"] = String(statSync(path).size);
    const req = request(url, { method: "PUT", headers }, (res) => {
      let body = "";
      res.on("data", (d: Buffer) => (body += d.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    pipeline(createReadStream(path, { highWaterMark: 1024 * 1024 }), req).catch(reject);
  });
}

/** GET a URL, hashing the body as it streams. */
function hashGet(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; sha256: string; bytes: number; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    request(url, { headers }, (res) => {
      const hash = createHash("sha256");
      let bytes = 0;
      res.on("data", (d: Buffer) => {
        bytes += d.length;
        hash.update(d);
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, sha256: hash.digest("hex"), bytes, headers: res.headers }));
      res.on("error", reject);
    })
      .on("error", reject)
      .end();
  });
}

async function readySession(c: Caller, daemon: Daemon, env: Record<string, string>): Promise<string> {
  const issued = await runCli(["setup-token"], env);
  const token = issued.stdout.trim();
  const verified = await c.call("POST", "/v1/setup/bootstrap-token/verify", { body: { token } });
  const setup = verified.body.session_token as string;
  expect((await c.call("POST", "/v1/setup/local-owner/create", { token: setup, body: { email: "owner@example.com" } })).status).toBe(200);
  expect((await c.call("POST", "/v1/setup/complete", { token: setup })).status).toBe(200);
  const login = await c.call("POST", "/v1/auth/local/login", { body: { email: "owner@example.com" } });
  expect(login.status).toBe(200);
  expect(daemon.url).toMatch(/^http:\/\/127\.0\.0\.1:/);
  return login.body.session_token;
}

describe("artifacts through the daemon process", () => {
  let daemon: Daemon;
  let dataDir: string;
  let work: string;
  let c: Caller;
  let owner: string;
  let jobPath: string;
  let runner: { id: string; token: string };
  let file: string;
  let fileSha: string;

  beforeAll(async () => {
    dataDir = makeDataDir();
    work = mkdtempSync(join(tmpdir(), "hangar-e2e-bytes-"));
    const env = { HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0" };
    daemon = await startDaemon(env);
    c = daemonCaller(daemon.url);
    owner = await readySession(c, daemon, env);
    const project = await createProject(c, owner);
    const pipe = await createPipeline(c, owner, project.id, { platform: "any", artifacts: ["*.apk"] });
    runner = await registerRunner(c, owner);
    await queueBuild(c, owner, project.id, pipe.id);
    const job = await claim(c, runner);
    jobPath = `/v1/runners/${runner.id}/jobs/${job.build_id}/artifacts`;

    file = join(work, "big.apk");
    const out = createWriteStream(file);
    const hash = createHash("sha256");
    for (let i = 0; i < SIZE / (1024 * 1024); i++) {
      const chunk = randomBytes(1024 * 1024);
      hash.update(chunk);
      if (!out.write(chunk)) await new Promise<void>((r) => out.once("drain", () => r()));
    }
    await new Promise<void>((r) => out.end(r));
    fileSha = hash.digest("hex");
  }, 120_000);

  afterAll(async () => {
    await daemon?.stop();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  });

  async function uploadThroughDaemon(name: string, chunked: boolean): Promise<string> {
    const created = await c.call("POST", jobPath, {
      token: runner.token,
      body: { filename: name, size_bytes: SIZE, content_type: "application/vnd.android.package-archive", sha256: fileSha },
    });
    expect(created.status).toBe(200);
    expect(created.body.upload.url.startsWith(`${daemon.url}/v1/artifacts/local-upload/`)).toBe(true);
    const put = await putFile(created.body.upload.url, file, chunked);
    expect(put.status, put.body).toBe(200);
    expect(JSON.parse(put.body).sha256).toBe(fileSha);
    const done = await c.call("POST", `${jobPath}/${created.body.artifact.id}/complete`, { token: runner.token });
    expect(done.status).toBe(200);
    return created.body.artifact.id;
  }

  it("uploads 100 MiB with Content-Length and downloads it byte-identical", async () => {
    const id = await uploadThroughDaemon("big.apk", false);
    const link = await c.call("POST", `/v1/artifacts/${id}/download-link`, { token: owner });
    expect(link.body.url.startsWith(`${daemon.url}/v1/artifacts/download/`)).toBe(true);
    const got = await hashGet(link.body.url);
    expect(got.status).toBe(200);
    expect(got.bytes).toBe(SIZE);
    expect(got.sha256).toBe(fileSha);
    expect(got.headers["content-length"]).toBe(String(SIZE));
    expect(got.headers["content-disposition"]).toBe('attachment; filename="big.apk"');
  }, 60_000);

  it("uploads 100 MiB as a chunked body and serves a range from its middle", async () => {
    const id = await uploadThroughDaemon("chunked.apk", true);
    const link = await c.call("POST", `/v1/artifacts/${id}/download-link`, { token: owner });
    const whole = await hashGet(link.body.url);
    expect(whole.sha256).toBe(fileSha);
    const start = 50 * 1024 * 1024 - 7;
    const end = start + 4 * 1024 * 1024;
    const part = await hashGet(link.body.url, { range: `bytes=${start}-${end}` });
    expect(part.status).toBe(206);
    const expected = createHash("sha256");
    await pipeline(createReadStream(file, { start, end }), expected);
    expect(part.sha256).toBe(expected.digest("hex"));
  }, 60_000);

  it("refuses a body longer than declared with 400 size_mismatch, with or without Content-Length", async () => {
    const small = join(work, "small.bin");
    await pipeline(createReadStream(file, { start: 0, end: 2047 }), createWriteStream(small));
    const created = await c.call("POST", jobPath, {
      token: runner.token,
      body: { filename: "s.apk", size_bytes: 1024, content_type: "application/octet-stream" },
    });
    const put = await putFile(created.body.upload.url, small, false);
    expect(put.status).toBe(400);
    expect(JSON.parse(put.body).code).toBe("size_mismatch");
    // Chunked, so the daemon only finds out while reading: the answer still arrives whole.
    const chunked = await putFile(created.body.upload.url, small, true);
    expect(chunked.status).toBe(400);
    expect(JSON.parse(chunked.body).code).toBe("size_mismatch");
  });

  it("installs an IPA over the air: itms-services URL, manifest read by plistlib, one redirect to the bytes", async () => {
    const network = await c.call("PUT", "/v1/settings/external-access/network", {
      token: owner,
      body: { public_url: "https://ci.example.com", allowed_origins: ["https://ci.example.com"] },
    });
    expect(network.status).toBe(200);
    const ipa = makeIpa({ plist: { CFBundleIdentifier: "com.example.e2e", CFBundleShortVersionString: "3.1", CFBundleName: "E2E" } });
    const created = await c.call("POST", jobPath, {
      token: runner.token,
      body: { filename: "E2E.ipa", size_bytes: ipa.length, content_type: "application/octet-stream" },
    });
    expect((await fetch(created.body.upload.url, { method: "PUT", body: ipa })).status).toBe(200);
    await c.call("POST", `${jobPath}/${created.body.artifact.id}/complete`, { token: runner.token });
    const link = await c.call("POST", `/v1/artifacts/${created.body.artifact.id}/install-link`, { token: owner });
    expect(link.status).toBe(200);
    expect(new URL(link.body.install_url).searchParams.get("url")).toBe(link.body.manifest_url);
    // The public URL is a proxy in front of this daemon: fetch its paths from the daemon directly.
    const local = (url: string) => daemon.url + new URL(url).pathname + new URL(url).search;
    const manifest = await fetch(local(link.body.manifest_url));
    expect(manifest.headers.get("content-type")).toBe("application/xml");
    const parsed = JSON.parse(
      execFileSync("python3", ["-c", "import json, plistlib, sys; print(json.dumps(plistlib.loads(sys.stdin.buffer.read())))"], {
        input: Buffer.from(await manifest.arrayBuffer()),
      }).toString(),
    );
    expect(parsed.items[0].metadata).toEqual({ "bundle-identifier": "com.example.e2e", "bundle-version": "3.1", kind: "software", title: "E2E" });
    expect(parsed.items[0].assets[0].url).toBe(link.body.download_url);
    const redirect = await fetch(local(link.body.download_url), { redirect: "manual" });
    expect(redirect.status).toBe(302);
    const bytes = new Uint8Array(await (await fetch(local(redirect.headers.get("location")!))).arrayBuffer());
    expect(Buffer.compare(Buffer.from(bytes), Buffer.from(ipa))).toBe(0);
  });
});
