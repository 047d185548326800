// Publishing from S3-backed artifact storage (docs/publishing.md): the daemon reads the artifact from s3rver
// (every request's SigV4 signature checked) in ranged GETs, part by part, and streams each to the store: App
// Store Connect's two ranges and Google Play's resumable chunks, both over 1 MiB so they take the streamed path.
import { createHash, randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { builds, publishes } from "../../src/db/schema/index.ts";
import { runPublishesOnce } from "../../src/domain/publishing/publisher.ts";
import { nodeMd5 } from "../../src/runtime/node-deps.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { DEMO_INFO, makeIpaArchive } from "../helpers/app-fixtures.ts";
import { artifactWorld, insertBuild, sha256Of, useS3Storage, type ArtifactWorld } from "../helpers/artifact-world.ts";
import { reportStatus } from "../helpers/builds.ts";
import { startFakeStores, type FakeStores } from "../helpers/fake-stores.ts";
import { startTestS3, type TestS3 } from "../helpers/s3rver.ts";
import { makeAscKey, makeServiceAccount } from "../helpers/store-keys.ts";

const asc = makeAscKey();
const CHUNK = 2 * 1024 * 1024;
let s3: TestS3;
let stores: FakeStores;
let googleJson: string;
let t: TestApp;
let world: ArtifactWorld;

beforeAll(async () => {
  s3 = await startTestS3();
  const google = makeServiceAccount("http://placeholder/token");
  stores = await startFakeStores({
    ascPublicPem: asc.publicPem,
    ascIssuer: asc.issuerId,
    ascKeyId: asc.keyId,
    googlePublicPem: google.publicPem,
    googleEmail: google.clientEmail,
  });
  googleJson = google.json.replace("http://placeholder/token", `${stores.url}/token`);
  t = await makeTestApp({
    config: {
      HANGAR_ASC_API_URL: stores.url,
      HANGAR_GOOGLE_API_URL: stores.url,
      HANGAR_PUBLISH_POLL_MS: "10",
      HANGAR_OUTBOX_RETRY_BASE_MS: "1",
      HANGAR_GOOGLE_UPLOAD_CHUNK_BYTES: String(CHUNK),
    },
    // The daemon's own MD5 (node:crypto); the other publishing tests use the core's pure-JS fallback.
    deps: { md5: nodeMd5 },
  });
  // s3rver and the signature check compare presigned expiries with the real clock.
  t.clock.set(Math.floor(Date.now() / 1000));
  world = await artifactWorld(t);
  await useS3Storage(t, s3.endpoint, s3.bucket);
});
afterAll(async () => {
  await stores?.close();
  await s3?.close();
});

/** Creates the artifact, PUTs it to its presigned S3 URL as a runner does, completes it. */
async function uploadToS3(w: ArtifactWorld, filename: string, data: Uint8Array): Promise<void> {
  const created = await t.call("POST", w.jobPath, {
    token: w.runner.token,
    body: { filename, size_bytes: data.length, content_type: "application/octet-stream", sha256: sha256Of(data) },
  });
  expect(created.status).toBe(200);
  expect(created.body.upload.url.startsWith(s3.endpoint)).toBe(true);
  const put = await fetch(created.body.upload.url, { method: "PUT", headers: created.body.upload.headers, body: data });
  expect(put.status).toBe(200);
  const done = await t.call("POST", `${w.jobPath}/${created.body.artifact.id}/complete`, { token: w.runner.token });
  expect(done.status).toBe(200);
}

describe("publishing from S3 storage", () => {
  it("streams the .ipa and the .aab from s3rver to both stores, byte for byte, in ranged reads", async () => {
    const first = await t.deps.db.select().from(builds).where(eq(builds.id, world.buildId)).get();
    const buildId = await insertBuild(t, world.projectId, first!.pipelineId, world.runner.id);
    const w: ArtifactWorld = { ...world, buildId, jobPath: `/v1/runners/${world.runner.id}/jobs/${buildId}/artifacts` };
    await t.deps.db
      .update(builds)
      .set({
        configSnapshot: {
          platform: "any",
          steps: [{ name: "b", run: "true" }],
          publish: [
            { to: "testflight", groups: ["QA"] },
            { to: "google_play", package_name: "com.example.demo", track: "internal" },
          ],
        },
        trust: "protected",
      })
      .where(eq(builds.id, buildId));
    const ipa = makeIpaArchive({ info: DEMO_INFO, fillerBytes: 3_000_000 });
    const aab = new Uint8Array(randomBytes(2 * CHUNK + 12_345));
    await uploadToS3(w, "Demo.ipa", ipa);
    await uploadToS3(w, "app-release.aab", aab);
    const ascPut = await t.call("PUT", `/v1/projects/${w.projectId}/stores/app-store-connect`, {
      token: w.ownerToken,
      body: { issuer_id: asc.issuerId, key_id: asc.keyId, private_key_p8: asc.privatePem },
    });
    expect(ascPut.status).toBe(200);
    const playPut = await t.call("PUT", `/v1/projects/${w.projectId}/stores/google-play`, {
      token: w.ownerToken,
      body: { service_account_json: googleJson },
    });
    expect(playPut.status).toBe(200);
    const s3Before = s3.requests.length;
    expect((await reportStatus(t, w.runner, buildId, { status: "succeeded", exit_code: 0 })).status).toBe(200);

    for (let i = 0; i < 200; i++) {
      const rows = await t.deps.db.select().from(publishes).where(eq(publishes.buildId, buildId));
      if (rows.length === 2 && rows.every((p) => p.state === "done" || p.state === "failed")) break;
      await runPublishesOnce(t.deps, "s3-test");
      await new Promise((r) => setTimeout(r, 15));
    }
    const list = (await t.call("GET", `/v1/builds/${buildId}/publishes`, { token: w.ownerToken })).body as Array<{ to: string; state: string }>;
    expect(list.map((p) => [p.to, p.state]).sort()).toEqual([
      ["google_play", "done"],
      ["testflight", "done"],
    ]);
    expect(Buffer.compare(stores.ascUploaded.at(-1)!, Buffer.from(ipa))).toBe(0);
    expect(stores.committedChecksum).toBe(createHash("md5").update(ipa).digest("hex"));
    expect(Buffer.compare(stores.playUploaded.at(-1)!, Buffer.from(aab))).toBe(0);
    // Three resumable chunks for the .aab, each a ranged GET of its own; two for the .ipa's ranges.
    const ranges = stores.requests.filter((r) => r.contentRange?.startsWith("bytes ") && !r.contentRange.includes("*"));
    expect(ranges.map((r) => r.contentRange)).toEqual([
      `bytes 0-${CHUNK - 1}/${aab.length}`,
      `bytes ${CHUNK}-${2 * CHUNK - 1}/${aab.length}`,
      `bytes ${2 * CHUNK}-${aab.length - 1}/${aab.length}`,
    ]);
    const gets = s3.requests.slice(s3Before).filter((r) => r.method === "GET");
    expect(gets.length).toBeGreaterThanOrEqual(5);
    expect(gets.every((r) => r.verified)).toBe(true);
  });
});
