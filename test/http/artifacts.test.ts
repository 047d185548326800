import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { artifacts } from "../../src/db/schema/index.ts";
import { runMaintenance } from "../../src/domain/setup/maintenance.ts";
import { openNodeArtifactStore } from "../../src/storage/node-stores.ts";
import type { StoreTarget } from "../../src/storage/types.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import {
  artifactWorld,
  insertBuild,
  insertRunner,
  makeIpa,
  pathOf,
  sha256Of,
  uploadArtifact,
  type ArtifactWorld,
} from "../helpers/artifact-world.ts";
import { userWithRole } from "../helpers/factories.ts";

const bytes = (n: number, seed = 7) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff);

async function create(t: TestApp, w: ArtifactWorld, body: Record<string, unknown>) {
  return t.call("POST", w.jobPath, {
    token: w.runner.token,
    body: { filename: "app.apk", size_bytes: 10, content_type: "application/vnd.android.package-archive", ...body },
  });
}

describe("runner side: create, local upload, complete, abort", () => {
  let t: TestApp;
  let w: ArtifactWorld;
  beforeAll(async () => {
    t = await makeTestApp({ config: { HANGAR_MAX_UPLOAD_BYTES: "4096" } });
    w = await artifactWorld(t);
  });

  it("creates a pending artifact with a local upload URL on the daemon", async () => {
    const r = await create(t, w, {});
    expect(r.status).toBe(200);
    expect(r.body.artifact).toMatchObject({ build_id: w.buildId, filename: "app.apk", size_bytes: 10, status: "pending" });
    expect(r.body.upload.method).toBe("PUT");
    expect(r.body.upload.url).toMatch(/^http:\/\/localhost\/v1\/artifacts\/local-upload\/[A-Za-z0-9_-]{43}$/);
    expect(r.body.upload.expires_at).toBe(t.clock.now() + 3600);
  });

  it.each([
    ["a path", "dist/app.apk"],
    ["a backslash", "dist\\app.apk"],
    ["dot-dot", "..app.apk"],
    ["a control character", "app\n.apk"],
    ["more than 255 bytes", `${"é".repeat(128)}.apk`],
    ["an empty name", ""],
  ])("refuses a filename with %s (400 invalid_input)", async (_, filename) => {
    const r = await create(t, w, { filename });
    expect(r.status).toBe(400);
    expect(r.body.code).toBe("invalid_input");
    expect(r.body.issues[0].path).toBe("filename");
  });

  it("accepts a non-ASCII base name of 255 bytes", async () => {
    const r = await create(t, w, { filename: `${"é".repeat(125)}.apk` });
    expect(r.status).toBe(200);
  });

  it("refuses a declared size over the local limit at create (413 upload_too_large)", async () => {
    const r = await create(t, w, { size_bytes: 4097 });
    expect(r.status).toBe(413);
    expect(r.body.code).toBe("upload_too_large");
  });

  it("uploads, completes and lists an artifact; the stored bytes are identical", async () => {
    const data = bytes(3000);
    const created = await create(t, w, { filename: "app.apk", size_bytes: data.length, sha256: sha256Of(data) });
    const put = await t.call("PUT", pathOf(created.body.upload.url), { rawBody: data });
    expect(put.status).toBe(200);
    expect(put.body.sha256).toBe(sha256Of(data));
    expect(put.headers.get("referrer-policy")).toBe("no-referrer");

    const before = await t.call("GET", `/v1/builds/${w.buildId}/artifacts`, { token: w.ownerToken });
    expect(before.body.map((a: { id: string }) => a.id)).not.toContain(created.body.artifact.id);

    const done = await t.call("POST", `${w.jobPath}/${created.body.artifact.id}/complete`, { token: w.runner.token });
    expect(done.status).toBe(200);
    expect(done.body.artifact.status).toBe("available");
    const again = await t.call("POST", `${w.jobPath}/${created.body.artifact.id}/complete`, { token: w.runner.token });
    expect(again.status).toBe(200);

    const row = await t.deps.db.select().from(artifacts).where(eq(artifacts.id, created.body.artifact.id)).get();
    const location = row!.storageLocation as { base_dir: string; key: string };
    expect(location.base_dir).toBe(join(t.dataDir, "artifacts"));
    expect(new Uint8Array(readFileSync(join(location.base_dir, location.key)))).toEqual(data);
    // Nothing temporary is left beside it.
    expect(readdirSync(join(location.base_dir, w.buildId))).toEqual([created.body.artifact.id]);

    const { token: qa } = await userWithRole(t, "qa_viewer");
    const list = await t.call("GET", `/v1/builds/${w.buildId}/artifacts`, { token: qa });
    expect(list.status).toBe(200);
    expect(list.body.find((a: { id: string }) => a.id === created.body.artifact.id)).toMatchObject({
      filename: "app.apk",
      size_bytes: 3000,
      content_type: "application/vnd.android.package-archive",
      status: "available",
    });
  });

  it("answers 410 token_expired for a used upload token", async () => {
    const data = bytes(10);
    const created = await create(t, w, {});
    expect((await t.call("PUT", pathOf(created.body.upload.url), { rawBody: data })).status).toBe(200);
    const second = await t.call("PUT", pathOf(created.body.upload.url), { rawBody: data });
    expect(second.status).toBe(410);
    expect(second.body.code).toBe("token_expired");
  });

  it("answers 410 token_expired for an expired upload token and 404 for an unknown one", async () => {
    const created = await create(t, w, {});
    t.clock.advance(3601);
    const late = await t.call("PUT", pathOf(created.body.upload.url), { rawBody: bytes(10) });
    expect(late.status).toBe(410);
    expect(late.body.code).toBe("token_expired");
    const unknown = await t.call("PUT", `/v1/artifacts/local-upload/${"A".repeat(43)}`, { rawBody: bytes(10) });
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe("not_found");
  });

  it("refuses a short or long body with 400 size_mismatch and lets the runner retry the same URL", async () => {
    const created = await create(t, w, { size_bytes: 100 });
    const url = pathOf(created.body.upload.url);
    const short = await t.call("PUT", url, { rawBody: bytes(99) });
    expect(short.status).toBe(400);
    expect(short.body.code).toBe("size_mismatch");
    const long = await t.call("PUT", url, { rawBody: bytes(101) });
    expect(long.status).toBe(400);
    expect(long.body.code).toBe("size_mismatch");
    // A chunked body (no Content-Length) is counted as it streams.
    const chunked = await t.app.request(url, { method: "PUT", body: streamOf([bytes(60), bytes(60)]), duplex: "half" } as RequestInit, {
      peerAddress: "127.0.0.1",
    });
    expect(chunked.status).toBe(400);
    expect(((await chunked.json()) as { code: string }).code).toBe("size_mismatch");
    const ok = await t.call("PUT", url, { rawBody: bytes(100) });
    expect(ok.status).toBe(200);
  });

  it("keeps the upload link usable after a body that broke off mid-way, and leaves no partial file", async () => {
    const created = await create(t, w, { size_bytes: 100 });
    const url = pathOf(created.body.upload.url);
    const broken = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(bytes(40));
        controller.error(new Error("connection reset"));
      },
    });
    const r = await t.app.request(url, { method: "PUT", body: broken, duplex: "half" } as RequestInit, { peerAddress: "127.0.0.1" });
    expect(r.status).toBe(500);
    const row = await t.deps.db.select().from(artifacts).where(eq(artifacts.id, created.body.artifact.id)).get();
    const location = row!.storageLocation as { base_dir: string; key: string };
    expect(readdirSync(join(location.base_dir, w.buildId)).filter((n) => n.startsWith(created.body.artifact.id))).toEqual([]);
    const retry = await t.call("PUT", url, { rawBody: bytes(100) });
    expect(retry.status).toBe(200);
  });

  it("refuses a body over HANGAR_MAX_UPLOAD_BYTES with 413 upload_too_large", async () => {
    const created = await create(t, w, { size_bytes: 4000 });
    const r = await t.app.request(pathOf(created.body.upload.url), { method: "PUT", body: streamOf([bytes(5000)]), duplex: "half" } as RequestInit, {
      peerAddress: "127.0.0.1",
    });
    expect(r.status).toBe(413);
    expect(((await r.json()) as { code: string }).code).toBe("upload_too_large");
    const declared = await t.call("PUT", pathOf(created.body.upload.url), { rawBody: bytes(5000) });
    expect(declared.status).toBe(413);
    expect(declared.body.code).toBe("upload_too_large");
  });

  it("refuses a body whose SHA-256 differs from the declared one (400 checksum_mismatch)", async () => {
    const data = bytes(50);
    const created = await create(t, w, { size_bytes: 50, sha256: sha256Of(bytes(50, 9)) });
    const r = await t.call("PUT", pathOf(created.body.upload.url), { rawBody: data });
    expect(r.status).toBe(400);
    expect(r.body.code).toBe("checksum_mismatch");
    const done = await t.call("POST", `${w.jobPath}/${created.body.artifact.id}/complete`, { token: w.runner.token });
    expect(done.status).toBe(409);
    expect(done.body.code).toBe("upload_incomplete");
  });

  it("answers 409 upload_incomplete when nothing was uploaded", async () => {
    const created = await create(t, w, {});
    const r = await t.call("POST", `${w.jobPath}/${created.body.artifact.id}/complete`, { token: w.runner.token });
    expect(r.status).toBe(409);
    expect(r.body.code).toBe("upload_incomplete");
  });

  it("aborts: status aborted, stored bytes deleted, the upload link void", async () => {
    const data = bytes(20);
    const created = await create(t, w, { size_bytes: 20 });
    const url = pathOf(created.body.upload.url);
    expect((await t.call("PUT", url, { rawBody: data })).status).toBe(200);
    const row = await t.deps.db.select().from(artifacts).where(eq(artifacts.id, created.body.artifact.id)).get();
    const location = row!.storageLocation as { base_dir: string; key: string };
    expect(existsSync(join(location.base_dir, location.key))).toBe(true);

    const r = await t.call("POST", `${w.jobPath}/${created.body.artifact.id}/abort`, { token: w.runner.token });
    expect(r.status).toBe(200);
    expect(r.body.artifact.status).toBe("aborted");
    expect(existsSync(join(location.base_dir, location.key))).toBe(false);
    const complete = await t.call("POST", `${w.jobPath}/${created.body.artifact.id}/complete`, { token: w.runner.token });
    expect(complete.status).toBe(409);
    expect(complete.body.code).toBe("invalid_transition");
  });

  it("refuses to abort a completed artifact (409 invalid_transition)", async () => {
    const a = await uploadArtifact(t, w, "done.apk", bytes(5));
    const r = await t.call("POST", `${w.jobPath}/${a.id}/abort`, { token: w.runner.token });
    expect(r.status).toBe(409);
    expect(r.body.code).toBe("invalid_transition");
  });
});

describe("runner authentication and job ownership", () => {
  let t: TestApp;
  let w: ArtifactWorld;
  beforeAll(async () => {
    t = await makeTestApp();
    w = await artifactWorld(t);
  });

  const body = { filename: "a.apk", size_bytes: 1, content_type: "application/octet-stream" };

  it("401 missing_auth without a token, 401 invalid_runner_token with a wrong one", async () => {
    const none = await t.call("POST", w.jobPath, { body });
    expect(none.status).toBe(401);
    expect(none.body.code).toBe("missing_auth");
    const wrong = await t.call("POST", w.jobPath, { body, token: "x".repeat(43) });
    expect(wrong.status).toBe(401);
    expect(wrong.body.code).toBe("invalid_runner_token");
  });

  it("403 runner_mismatch for another runner's token, 404 not_found for a job not on this runner", async () => {
    const other = await insertRunner(t, "someone");
    const mismatch = await t.call("POST", w.jobPath, { body, token: other.token });
    expect(mismatch.status).toBe(403);
    expect(mismatch.body.code).toBe("runner_mismatch");
    const notMine = await t.call("POST", `/v1/runners/${other.id}/jobs/${w.buildId}/artifacts`, { body, token: other.token });
    expect(notMine.status).toBe(404);
    expect(notMine.body.code).toBe("not_found");
  });

  it("404 not_found when completing or aborting an artifact that is not this job's", async () => {
    for (const verb of ["complete", "abort"]) {
      const r = await t.call("POST", `${w.jobPath}/${crypto.randomUUID()}/${verb}`, { token: w.runner.token });
      expect(r.status).toBe(404);
      expect(r.body.code).toBe("not_found");
    }
  });

  it("409 job_not_active for a canceled build", async () => {
    const canceled = await insertBuild(t, w.projectId, crypto.randomUUID(), w.runner.id, "canceled");
    const r = await t.call("POST", `/v1/runners/${w.runner.id}/jobs/${canceled}/artifacts`, { body, token: w.runner.token });
    expect(r.status).toBe(409);
    expect(r.body.code).toBe("job_not_active");
  });

  it("lists artifacts only with a session (401), and 404 for an unknown build", async () => {
    const anon = await t.call("GET", `/v1/builds/${w.buildId}/artifacts`);
    expect(anon.status).toBe(401);
    expect(anon.body.code).toBe("missing_auth");
    const unknown = await t.call("GET", `/v1/builds/${crypto.randomUUID()}/artifacts`, { token: w.ownerToken });
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe("not_found");
  });
});

describe("orphans", () => {
  it("deletes pending artifacts and their bytes once the upload link expired (plus the grace hour)", async () => {
    const t = await makeTestApp();
    const w = await artifactWorld(t);
    const data = bytes(64);
    const created = await t.call("POST", w.jobPath, {
      token: w.runner.token,
      body: { filename: "orphan.apk", size_bytes: 64, content_type: "application/octet-stream" },
    });
    expect((await t.call("PUT", pathOf(created.body.upload.url), { rawBody: data })).status).toBe(200);
    const kept = await uploadArtifact(t, w, "kept.apk", data);
    const row = await t.deps.db.select().from(artifacts).where(eq(artifacts.id, created.body.artifact.id)).get();
    const location = row!.storageLocation as { base_dir: string; key: string };
    const file = join(location.base_dir, location.key);

    t.clock.advance(3600);
    await runMaintenance(t.deps);
    expect(existsSync(file)).toBe(true);

    t.clock.advance(3601);
    await runMaintenance(t.deps);
    expect(existsSync(file)).toBe(false);
    expect(await t.deps.db.select().from(artifacts).where(eq(artifacts.id, created.body.artifact.id)).get()).toBeUndefined();
    const left = await t.deps.db.select().from(artifacts).where(eq(artifacts.id, kept.id)).get();
    expect(left?.status).toBe("available");
  });
});

describe("IPA metadata", () => {
  let t: TestApp;
  let w: ArtifactWorld;
  const reads: number[] = [];
  beforeAll(async () => {
    t = await makeTestApp({
      deps: {
        // Counts the bytes read through ranged reads, to show the archive is not read whole.
        openArtifactStore: (target: StoreTarget) => {
          const store = openNodeArtifactStore(target, fetch, { now: () => 0 });
          return {
            ...store,
            kind: store.kind,
            readRange: async (key, range) => {
              const out = await store.readRange(key, range);
              reads.push(out.length);
              return out;
            },
          };
        },
      },
    });
    w = await artifactWorld(t);
  });

  const info = {
    CFBundleIdentifier: "com.example.demo",
    CFBundleVersion: "421",
    CFBundleShortVersionString: "1.10",
    CFBundleDisplayName: "Démo & Co",
    CFBundleName: "Demo",
  };

  it("reads an XML Info.plist from Payload/*.app with ranged reads only", async () => {
    const ipa = makeIpa({ plist: info, fillerBytes: 3 * 1024 * 1024 });
    reads.length = 0;
    const a = await uploadArtifact(t, w, "Demo.ipa", ipa);
    expect(a.install_metadata).toEqual({ bundle_identifier: "com.example.demo", bundle_version: "1.10", title: "Démo & Co" });
    const total = reads.reduce((x, y) => x + y, 0);
    expect(total).toBeGreaterThan(0);
    expect(total).toBeLessThan(200 * 1024);
  });

  it("reads a binary Info.plist written by plistlib, falling back to CFBundleVersion and CFBundleName", async () => {
    const { CFBundleShortVersionString: _s, CFBundleDisplayName: _d, ...rest } = info;
    const ipa = makeIpa({ plist: rest, binary: true });
    const a = await uploadArtifact(t, w, "Demo.ipa", ipa);
    expect(a.install_metadata).toEqual({ bundle_identifier: "com.example.demo", bundle_version: "421", title: "Demo" });
  });

  it("keeps the runner's install_metadata when given, and none for an IPA without Info.plist", async () => {
    const given = { bundle_identifier: "com.given", bundle_version: "2.0", title: "Given" };
    const a = await uploadArtifact(t, w, "Given.ipa", makeIpa({ plist: info }), { install_metadata: given });
    expect(a.install_metadata).toEqual(given);
    const none = await uploadArtifact(t, w, "Broken.ipa", makeIpa({ plist: null }));
    expect(none.install_metadata).toBeNull();
    const notZip = await uploadArtifact(t, w, "Garbage.ipa", bytes(100));
    expect(notZip.install_metadata).toBeNull();
  });
});

function streamOf(chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const c of chunks) controller.enqueue(c);
      controller.close();
    },
  });
}
