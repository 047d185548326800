import { rmSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeSetting } from "../../src/domain/settings/instance-settings.ts";
import { ARTIFACT_STORAGE_SETTING } from "../../src/domain/settings/artifact-storage-settings.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { artifactWorld, pathOf, sha256Of, uploadArtifact, useS3Storage, type ArtifactWorld } from "../helpers/artifact-world.ts";
import { userWithRole } from "../helpers/factories.ts";
import { startTestS3, type TestS3 } from "../helpers/s3rver.ts";

// An RFC 6266 parser that is not ours (jshttp's content-disposition, present through s3rver's Koa).
const contentDisposition = createRequire(import.meta.url)("content-disposition") as {
  parse(header: string): { type: string; parameters: Record<string, string> };
};

const bytes = (n: number, seed = 3) => Uint8Array.from({ length: n }, (_, i) => (i * 131 + seed) & 0xff);

async function raw(t: TestApp, path: string, init: RequestInit = {}) {
  const res = await t.app.request(path, init, { peerAddress: "203.0.113.9" });
  return { res, body: new Uint8Array(await res.arrayBuffer()) };
}

describe("local downloads", () => {
  let t: TestApp;
  let w: ArtifactWorld;
  const data = bytes(1000);
  let artifact: { id: string };
  let url: string;
  beforeAll(async () => {
    t = await makeTestApp();
    w = await artifactWorld(t);
    artifact = await uploadArtifact(t, w, "app.apk", data, { content_type: "application/vnd.android.package-archive" });
    const link = await t.call("POST", `/v1/artifacts/${artifact.id}/download-link`, { token: w.ownerToken });
    expect(link.status).toBe(200);
    expect(link.body.expires_at).toBe(t.clock.now() + 900);
    url = pathOf(link.body.url);
  });

  it("hands out a 15-minute link to the daemon", async () => {
    expect(url).toMatch(/^\/v1\/artifacts\/download\/[A-Za-z0-9_-]{43}$/);
  });

  it("serves the bytes with Content-Type, Content-Length and an attachment Content-Disposition", async () => {
    const { res, body } = await raw(t, url);
    expect(res.status).toBe(200);
    expect(body).toEqual(data);
    expect(res.headers.get("content-type")).toBe("application/vnd.android.package-archive");
    expect(res.headers.get("content-length")).toBe("1000");
    expect(res.headers.get("content-disposition")).toBe('attachment; filename="app.apk"');
    expect(res.headers.get("accept-ranges")).toBe("bytes");
    expect(res.headers.get("referrer-policy")).toBe("no-referrer");
    expect(res.headers.get("cache-control")).toBe("no-store");
  });

  it("answers HEAD with the headers and no body", async () => {
    const { res, body } = await raw(t, url, { method: "HEAD" });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-length")).toBe("1000");
    expect(body.length).toBe(0);
  });

  it.each([
    ["bytes=0-9", 0, 9],
    ["bytes=990-", 990, 999],
    ["bytes=-5", 995, 999],
    ["bytes=500-5000", 500, 999],
  ])("serves the range %s with 206 and Content-Range", async (range, start, end) => {
    const { res, body } = await raw(t, url, { headers: { range } });
    expect(res.status).toBe(206);
    expect(res.headers.get("content-range")).toBe(`bytes ${start}-${end}/1000`);
    expect(res.headers.get("content-length")).toBe(String(end - start + 1));
    expect(body).toEqual(data.subarray(start, end + 1));
  });

  it("answers 416 with bytes */size for a range past the end, and the whole file for several ranges", async () => {
    const { res } = await raw(t, url, { headers: { range: "bytes=1000-" } });
    expect(res.status).toBe(416);
    expect(res.headers.get("content-range")).toBe("bytes */1000");
    const multi = await raw(t, url, { headers: { range: "bytes=0-1,5-6" } });
    expect(multi.res.status).toBe(200);
    expect(multi.body).toEqual(data);
  });

  it("404 not_found for an unknown token, 410 link_expired after 15 minutes", async () => {
    const unknown = await t.call("GET", `/v1/artifacts/download/${"B".repeat(43)}`);
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe("not_found");
    const link = await t.call("POST", `/v1/artifacts/${artifact.id}/download-link`, { token: w.ownerToken });
    t.clock.advance(899);
    expect((await raw(t, pathOf(link.body.url))).res.status).toBe(200);
    t.clock.advance(1);
    const expired = await t.call("GET", pathOf(link.body.url));
    expect(expired.status).toBe(410);
    expect(expired.body.code).toBe("link_expired");
  });

  it("answers 404 not_found when the stored bytes have disappeared", async () => {
    const gone = await uploadArtifact(t, w, "gone.apk", bytes(10));
    const link = await t.call("POST", `/v1/artifacts/${gone.id}/download-link`, { token: w.ownerToken });
    rmSync(join(t.dataDir, "artifacts", w.buildId, gone.id));
    const r = await t.call("GET", pathOf(link.body.url));
    expect(r.status).toBe(404);
    expect(r.body.code).toBe("not_found");
  });

  it("gives every role a link; no session → 401; unknown or pending artifact → 404", async () => {
    const { token } = await userWithRole(t, "qa_viewer");
    expect((await t.call("POST", `/v1/artifacts/${artifact.id}/download-link`, { token })).status).toBe(200);
    const anon = await t.call("POST", `/v1/artifacts/${artifact.id}/download-link`);
    expect(anon.status).toBe(401);
    expect(anon.body.code).toBe("missing_auth");
    const unknown = await t.call("POST", `/v1/artifacts/${crypto.randomUUID()}/download-link`, { token });
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe("not_found");
    const pending = await t.call("POST", w.jobPath, {
      token: w.runner.token,
      body: { filename: "p.apk", size_bytes: 1, content_type: "application/octet-stream" },
    });
    const p = await t.call("POST", `/v1/artifacts/${pending.body.artifact.id}/download-link`, { token });
    expect(p.status).toBe(404);
    expect(p.body.code).toBe("not_found");
  });

  it.each([
    ["Démo ünïcode.ipa", "attachment; filename=\"D_mo _n_code.ipa\"; filename*=UTF-8''D%C3%A9mo%20%C3%BCn%C3%AFcode.ipa"],
    ['quote"semi;colon.apk', "attachment; filename=\"quote_semi;colon.apk\"; filename*=UTF-8''quote%22semi%3Bcolon.apk"],
    ["日本語.apk", null],
  ])("encodes %s per RFC 6266 without breaking the header", async (filename, expected) => {
    const a = await uploadArtifact(t, w, filename, bytes(3));
    const link = await t.call("POST", `/v1/artifacts/${a.id}/download-link`, { token: w.ownerToken });
    const { res } = await raw(t, pathOf(link.body.url));
    const header = res.headers.get("content-disposition")!;
    if (expected) expect(header).toBe(expected);
    expect(header).not.toMatch(/[\r\n]/);
    const parsed = contentDisposition.parse(header);
    expect(parsed.type).toBe("attachment");
    expect(parsed.parameters.filename).toBe(filename);
  });
});

describe("S3 storage through s3rver with SigV4 verification", () => {
  let s3: TestS3;
  let t: TestApp;
  let w: ArtifactWorld;
  beforeAll(async () => {
    s3 = await startTestS3();
    t = await makeTestApp();
    // s3rver and the verifier check expiry against the real clock.
    t.clock.set(Math.floor(Date.now() / 1000));
    w = await artifactWorld(t);
  });
  afterAll(async () => s3?.close());

  it("uploads through the presigned PUT, refuses a tampered signature, downloads byte-identical through the presigned GET", async () => {
    const local = await uploadArtifact(t, w, "before-switch.apk", bytes(77));
    await useS3Storage(t, s3.endpoint, s3.bucket);
    const data = bytes(300_000, 11);
    const created = await t.call("POST", w.jobPath, {
      token: w.runner.token,
      body: { filename: "Démo.ipa", size_bytes: data.length, content_type: "application/octet-stream", sha256: sha256Of(data) },
    });
    expect(created.status).toBe(200);
    const upload = created.body.upload;
    expect(upload.url.startsWith(`${s3.endpoint}/${s3.bucket}/ci/${w.buildId}/`)).toBe(true);
    expect(upload.url).toContain("X-Amz-Signature=");

    const early = await t.call("POST", `${w.jobPath}/${created.body.artifact.id}/complete`, { token: w.runner.token });
    expect(early.status).toBe(409);
    expect(early.body.code).toBe("upload_incomplete");

    const tampered = upload.url.replace(/X-Amz-Signature=([0-9a-f])/, (_m: string, c: string) => `X-Amz-Signature=${c === "0" ? "1" : "0"}`);
    const refused = await fetch(tampered, { method: "PUT", headers: upload.headers, body: data });
    expect(refused.status).toBe(403);
    expect(await refused.text()).toContain("SignatureDoesNotMatch");

    const put = await fetch(upload.url, { method: "PUT", headers: upload.headers, body: data });
    expect(put.status).toBe(200);
    const done = await t.call("POST", `${w.jobPath}/${created.body.artifact.id}/complete`, { token: w.runner.token });
    expect(done.status).toBe(200);
    expect(done.body.artifact.status).toBe("available");

    const link = await t.call("POST", `/v1/artifacts/${created.body.artifact.id}/download-link`, { token: w.ownerToken });
    expect(link.status).toBe(200);
    expect(link.body.url.startsWith(s3.endpoint)).toBe(true);
    expect(link.body.expires_at).toBe(t.clock.now() + 900);
    const got = await fetch(link.body.url);
    expect(got.status).toBe(200);
    expect(sha256Of(new Uint8Array(await got.arrayBuffer()))).toBe(sha256Of(data));
    expect(contentDisposition.parse(got.headers.get("content-disposition")!).parameters.filename).toBe("Démo.ipa");

    const badGet = await fetch(link.body.url.replace(/X-Amz-Expires=900/, "X-Amz-Expires=901"));
    expect(badGet.status).toBe(403);
    // Every request the daemon itself made (HEAD on complete) carried a valid header signature too.
    expect(s3.requests.filter((r) => r.method === "HEAD").every((r) => r.verified)).toBe(true);
    expect(s3.requests.some((r) => r.method === "HEAD")).toBe(true);

    // The artifact stored on local disk before the switch is still served from there.
    const old = await t.call("POST", `/v1/artifacts/${local.id}/download-link`, { token: w.ownerToken });
    const oldRes = await t.app.request(pathOf(old.body.url), {}, { peerAddress: "127.0.0.1" });
    expect(new Uint8Array(await oldRes.arrayBuffer())).toEqual(bytes(77));

    // And the S3 one stays readable after switching back to local disk.
    await writeSetting(t.deps, ARTIFACT_STORAGE_SETTING, {
      provider: "local",
      local: { base_dir: null },
      s3: { endpoint: null, region: null, bucket: null, prefix: null, access_key_id: null, force_path_style: false, secret_access_key_sealed: null },
    });
    const after = await t.call("POST", `/v1/artifacts/${created.body.artifact.id}/download-link`, { token: w.ownerToken });
    const again = await fetch(after.body.url);
    expect(sha256Of(new Uint8Array(await again.arrayBuffer()))).toBe(sha256Of(data));
  });

  it("works as R2: region auto in the signature scope, upload and download through presigned URLs", async () => {
    await useS3Storage(t, s3.endpoint, s3.bucket, "", "r2");
    const data = bytes(4321, 5);
    const created = await t.call("POST", w.jobPath, {
      token: w.runner.token,
      body: { filename: "r2.apk", size_bytes: data.length, content_type: "application/octet-stream" },
    });
    expect(new URL(created.body.upload.url).searchParams.get("X-Amz-Credential")).toMatch(/^S3RVER\/\d{8}\/auto\/s3\/aws4_request$/);
    expect(new URL(created.body.upload.url).pathname).toBe(`/${s3.bucket}/${w.buildId}/${created.body.artifact.id}`);
    expect((await fetch(created.body.upload.url, { method: "PUT", headers: created.body.upload.headers, body: data })).status).toBe(200);
    expect((await t.call("POST", `${w.jobPath}/${created.body.artifact.id}/complete`, { token: w.runner.token })).status).toBe(200);
    const link = await t.call("POST", `/v1/artifacts/${created.body.artifact.id}/download-link`, { token: w.ownerToken });
    const got = await fetch(link.body.url);
    expect(sha256Of(new Uint8Array(await got.arrayBuffer()))).toBe(sha256Of(data));
  });

  it("abort deletes the stored object", async () => {
    await useS3Storage(t, s3.endpoint, s3.bucket);
    const data = bytes(1234);
    const created = await t.call("POST", w.jobPath, {
      token: w.runner.token,
      body: { filename: "x.apk", size_bytes: data.length, content_type: "application/octet-stream" },
    });
    expect((await fetch(created.body.upload.url, { method: "PUT", headers: created.body.upload.headers, body: data })).status).toBe(200);
    const aborted = await t.call("POST", `${w.jobPath}/${created.body.artifact.id}/abort`, { token: w.runner.token });
    expect(aborted.status).toBe(200);
    expect(s3.requests.some((r) => r.method === "DELETE" && r.verified && r.path.endsWith(created.body.artifact.id))).toBe(true);
    const key = new URL(created.body.upload.url).pathname;
    const stillThere = s3.requests.length;
    const put = await fetch(created.body.upload.url, { method: "HEAD" });
    // A presigned PUT URL used for HEAD is refused: the method is part of the signature.
    expect(put.status).toBe(403);
    expect(s3.requests.length).toBe(stillThere + 1);
    expect(key).toContain(created.body.artifact.id);
  });
});
