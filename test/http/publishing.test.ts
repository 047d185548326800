// Publishing to TestFlight and Google Play (docs/publishing.md) against local store servers that verify the
// JWTs and record the bytes: the request sequence, bytes equal to the artifact, groups, notes, track, fraction;
// retries after 5xx, a store's 4xx failing at once in its own words, open builds never publishing.
import { createHash } from "node:crypto";
import { randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { builds, projects, publishes } from "../../src/db/schema/index.ts";
import { runPublishesOnce } from "../../src/domain/publishing/publisher.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { DEMO_INFO, makeIpaArchive } from "../helpers/app-fixtures.ts";
import { artifactWorld, insertBuild, uploadArtifact, type ArtifactWorld } from "../helpers/artifact-world.ts";
import { reportStatus } from "../helpers/builds.ts";
import { startFakeStores, type FakeStores } from "../helpers/fake-stores.ts";
import { makeAscKey, makeServiceAccount } from "../helpers/store-keys.ts";
import { page } from "../helpers/web.ts";
import { startReceiver } from "../helpers/receiver.ts";
import { runOutboxOnce } from "../../src/domain/events/outbox.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON
type Json = any;

const ascKey = makeAscKey();
const asc = ascKey;
let stores: FakeStores;
let google: ReturnType<typeof makeServiceAccount>;
let t: TestApp;
let world: ArtifactWorld;

beforeAll(async () => {
  // The token endpoint's URL is in the key file, so the key is made once the server's port is known.
  const googleKeyPair = makeServiceAccount("http://placeholder/token");
  stores = await startFakeStores({
    ascPublicPem: asc.publicPem,
    ascIssuer: asc.issuerId,
    ascKeyId: asc.keyId,
    googlePublicPem: googleKeyPair.publicPem,
    googleEmail: googleKeyPair.clientEmail,
  });
  google = { ...googleKeyPair, json: googleKeyPair.json.replace("http://placeholder/token", `${stores.url}/token`) };
  t = await makeTestApp({
    config: {
      HANGAR_ASC_API_URL: stores.url,
      HANGAR_GOOGLE_API_URL: stores.url,
      HANGAR_PUBLISH_POLL_MS: "10",
      HANGAR_OUTBOX_RETRY_BASE_MS: "1",
      // The smallest chunk Google takes, so a test's megabyte goes up in several.
      HANGAR_GOOGLE_UPLOAD_CHUNK_BYTES: String(256 * 1024),
    },
  });
  world = await artifactWorld(t);
});
afterAll(async () => {
  await stores.close();
});

const PUBLISH = [
  { to: "testflight", groups: ["QA", "Friends"], what_to_test: "Try the <new> login" },
  { to: "google_play", package_name: "com.example.demo", track: "beta", user_fraction: 0.25 },
];

/** A build with an .ipa and an .aab, its config naming both stores, then reported succeeded by its runner. */
async function succeededBuild(options: { trust?: "protected" | "open" | "fork"; keys?: boolean; aabBytes?: number } = {}) {
  const first = await t.deps.db.select().from(builds).where(eq(builds.id, world.buildId)).get();
  const buildId = await insertBuild(t, world.projectId, first!.pipelineId, world.runner.id);
  const w: ArtifactWorld = { ...world, buildId, jobPath: `/v1/runners/${world.runner.id}/jobs/${buildId}/artifacts` };
  await t.deps.db
    .update(builds)
    .set({ configSnapshot: { platform: "any", steps: [{ name: "b", run: "true" }], publish: PUBLISH }, trust: options.trust ?? "protected" })
    .where(eq(builds.id, w.buildId));
  const ipa = makeIpaArchive({ info: DEMO_INFO, fillerBytes: 300_000 });
  const aab = new Uint8Array(randomBytes(options.aabBytes ?? 200_000));
  await uploadArtifact(t, w, "Demo.ipa", ipa);
  await uploadArtifact(t, w, "app-release.aab", aab);
  if (options.keys === false) {
    await t.deps.db.update(projects).set({ appStoreConnectSealed: null, googlePlaySealed: null }).where(eq(projects.id, w.projectId));
  } else {
    expect(
      (
        await t.call("PUT", `/v1/projects/${w.projectId}/stores/app-store-connect`, {
          token: w.ownerToken,
          body: { issuer_id: asc.issuerId, key_id: asc.keyId, private_key_p8: asc.privatePem },
        })
      ).status,
    ).toBe(200);
    expect(
      (await t.call("PUT", `/v1/projects/${w.projectId}/stores/google-play`, { token: w.ownerToken, body: { service_account_json: google.json } }))
        .status,
    ).toBe(200);
  }
  expect((await reportStatus(t, w.runner, w.buildId, { status: "succeeded", exit_code: 0 })).status).toBe(200);
  return { w, ipa, aab };
}

async function drain(owner = "test-daemon", rounds = 200) {
  for (let i = 0; i < rounds; i++) {
    const pending = await t.deps.db.select().from(publishes);
    if (pending.every((p) => p.state === "done" || p.state === "failed")) return;
    await runPublishesOnce(t.deps, owner);
    await new Promise((r) => setTimeout(r, 15));
  }
}

async function publishesOf(w: ArtifactWorld): Promise<Json[]> {
  const res = await t.call("GET", `/v1/builds/${w.buildId}/publishes`, { token: w.ownerToken });
  expect(res.status).toBe(200);
  return res.body;
}

describe("publishing", () => {
  it("publishes a protected build to TestFlight and Google Play with verified JWTs and the artifact's exact bytes", async () => {
    const before = stores.requests.length;
    const { w, ipa, aab } = await succeededBuild();
    const pending = await publishesOf(w);
    expect(pending.map((p: Json) => [p.to, p.state])).toEqual(
      expect.arrayContaining([
        ["testflight", "pending"],
        ["google_play", "pending"],
      ]),
    );
    await drain();
    const done = await publishesOf(w);
    for (const p of done)
      expect(p).toMatchObject({ build_id: w.buildId, state: "done", attempts: 1, detail: expect.any(String), updated_at: expect.any(Number) });
    expect(Buffer.compare(stores.ascUploaded.at(-1)!, Buffer.from(ipa))).toBe(0);
    expect(stores.committedChecksum).toBe(createHash("md5").update(ipa).digest("hex"));
    expect(Buffer.compare(stores.playUploaded.at(-1)!, Buffer.from(aab))).toBe(0);
    expect(stores.groupsAdded).toEqual(["group-QA", "group-Friends"]);
    expect(stores.whatToTest).toBe("Try the <new> login");
    expect(stores.track).toEqual({ track: "beta", releases: [{ versionCodes: ["45"], status: "inProgress", userFraction: 0.25 }] });
    expect(stores.commits).toBeGreaterThanOrEqual(1);
    const seq = stores.requests.slice(before).map((r) => `${r.method} ${r.path.split("?")[0]}`);
    const asc = seq.filter((s) => !s.includes("androidpublisher") && !s.includes("/token"));
    expect(asc.slice(0, 6)).toEqual([
      "GET /v1/apps",
      "POST /v1/buildUploads",
      "POST /v1/buildUploadFiles",
      "PUT /asc-upload/file-1/0",
      "PUT /asc-upload/file-1/1",
      "PATCH /v1/buildUploadFiles/file-1",
    ]);
    expect(asc).toContain("POST /v1/betaBuildLocalizations");
    const play = seq.filter((s) => s.includes("androidpublisher") || s.includes("/token")).map((s) => s.replace(/edit-[^/:]+/, "E"));
    expect(play).toEqual([
      "POST /token",
      "POST /androidpublisher/v3/applications/com.example.demo/edits",
      "POST /upload/androidpublisher/v3/applications/com.example.demo/edits/E/bundles",
      "PUT /upload/androidpublisher/v3/applications/com.example.demo/edits/E/bundles",
      "PUT /androidpublisher/v3/applications/com.example.demo/edits/E/tracks/beta",
      "POST /androidpublisher/v3/applications/com.example.demo/edits/E:commit",
    ]);
    // The private keys appear in no request, answer or log.
    const secretLines = [ascKey.privatePem.split("\n")[1]!, google.privatePem.split("\n")[1]!];
    for (const line of secretLines) {
      expect(JSON.stringify(stores.requests)).not.toContain(line);
      expect(JSON.stringify(t.logs)).not.toContain(line);
      expect(JSON.stringify(done)).not.toContain(line);
    }
  });

  it("uploads to Google Play in resumable chunks and resumes a cut-off chunk where the session got, not from the start", async () => {
    const chunk = 256 * 1024;
    const size = 4 * chunk + 1000;
    const cutAt = 2 * chunk + 75_000;
    const before = stores.requests.length;
    const sessionsBefore = stores.sessionsStarted;
    stores.interruptUpload = { afterBytes: cutAt };
    const { w, aab } = await succeededBuild({ aabBytes: size });
    await drain();
    const gp = (await publishesOf(w)).find((p: Json) => p.to === "google_play");
    expect(gp).toMatchObject({ state: "done", attempts: 1 });
    expect(stores.interruptUpload).toBeUndefined();
    expect(stores.sessionsStarted).toBe(sessionsBefore + 1);
    expect(Buffer.compare(stores.playUploaded.at(-1)!, Buffer.from(aab))).toBe(0);
    const puts = stores.requests.slice(before).filter((r) => r.contentRange !== undefined);
    expect(puts.map((r) => r.contentRange)).toEqual([
      `bytes 0-${chunk - 1}/${size}`,
      `bytes ${chunk}-${2 * chunk - 1}/${size}`,
      `bytes ${2 * chunk}-${3 * chunk - 1}/${size}`,
      `bytes */${size}`,
      `bytes ${cutAt}-${cutAt + chunk - 1}/${size}`,
      `bytes ${cutAt + chunk}-${size - 1}/${size}`,
    ]);
    expect(puts[2]!.body).toBe(`<${cutAt - 2 * chunk} bytes, cut off>`);
    // Every byte crossed the wire once: the cut-off chunk's first part was not sent again.
    const sent = puts.reduce((sum, r) => sum + Number(/<(\d+) bytes/.exec(r.body)?.[1] ?? 0), 0);
    expect(sent).toBe(size);
  });

  it("starts a new edit and session when Google no longer knows the upload session", async () => {
    // A 404 on the session is a lost session: the attempt is retried with a new edit and session.
    stores.failures.push({
      match: "PUT /upload/androidpublisher/",
      status: 404,
      body: { error: { code: 404, status: "NOT_FOUND", message: "gone" } },
    });
    const { w, aab } = await succeededBuild();
    await drain();
    const gp = (await publishesOf(w)).find((p: Json) => p.to === "google_play");
    expect(gp).toMatchObject({ state: "done", attempts: 2 });
    expect(Buffer.compare(stores.playUploaded.at(-1)!, Buffer.from(aab))).toBe(0);
  });

  it("retries a store's 500 and 429 with backoff, then finishes", async () => {
    stores.failures.push({
      match: "POST /v1/buildUploads",
      status: 500,
      body: { errors: [{ status: "500", code: "UNEXPECTED_ERROR", title: "oops" }] },
    });
    stores.failures.push({ match: "POST /token", status: 429, body: { error: "rate_limited", error_description: "slow down" }, times: 2 });
    const { w } = await succeededBuild();
    await drain();
    const list = await publishesOf(w);
    expect(list.find((p: Json) => p.to === "testflight")).toMatchObject({ state: "done", attempts: 2 });
    expect(list.find((p: Json) => p.to === "google_play")).toMatchObject({ state: "done", attempts: 3 });
  });

  it("fails at once on a store's 409 and shows its code and message", async () => {
    stores.failures.push({
      match: "POST /v1/buildUploads",
      status: 409,
      body: {
        errors: [
          {
            status: "409",
            code: "ENTITY_ERROR.ATTRIBUTE.INVALID.DUPLICATE",
            title: "The build already exists",
            detail: "Build 45 of version 2.3 was <b>uploaded</b> before.",
          },
        ],
      },
    });
    stores.failures.push({
      match: "PUT /androidpublisher/",
      status: 403,
      body: { error: { code: 403, status: "PERMISSION_DENIED", message: "The caller does not have permission" } },
    });
    const { w } = await succeededBuild();
    await drain();
    const list = await publishesOf(w);
    const tf = list.find((p: Json) => p.to === "testflight");
    expect(tf).toMatchObject({ state: "failed", attempts: 1 });
    expect(tf.detail).toContain("ENTITY_ERROR.ATTRIBUTE.INVALID.DUPLICATE");
    expect(tf.detail).toContain("Build 45 of version 2.3 was <b>uploaded</b> before.");
    const gp = list.find((p: Json) => p.to === "google_play");
    expect(gp).toMatchObject({ state: "failed", attempts: 1 });
    expect(gp.detail).toContain("PERMISSION_DENIED");
    expect(gp.detail).toContain("The caller does not have permission");
    // The build page shows each publish with the store's words, escaped.
    const html = (await page(t, "GET", `/builds/${w.buildId}`, { session: w.ownerToken })).text;
    expect(html).toContain('id="publishes"');
    expect(html).toContain("ENTITY_ERROR.ATTRIBUTE.INVALID.DUPLICATE");
    expect(html).toContain("was &lt;b&gt;uploaded&lt;/b&gt; before.");
    expect(html).not.toContain("<b>uploaded</b>");
    expect(html).toContain("PERMISSION_DENIED");
    expect(html).toContain("Google Play");
  });

  it("never publishes an open or fork build, and refuses a manual publish of one (403 forbidden)", async () => {
    for (const trust of ["open", "fork"] as const) {
      const before = stores.requests.length;
      const { w } = await succeededBuild({ trust });
      expect(await publishesOf(w)).toEqual([]);
      await drain();
      expect(stores.requests.length).toBe(before);
      const res = await t.call("POST", `/v1/builds/${w.buildId}/publish`, { token: w.ownerToken, body: { to: "testflight" } });
      expect(res.status).toBe(403);
      expect(res.body.code).toBe("forbidden");
    }
  });

  it("publishes by hand again after a failure; refuses a bad body (400) and an unknown build (404)", async () => {
    const { w } = await succeededBuild({ keys: false });
    await drain();
    const failed = await publishesOf(w);
    expect(failed.every((p: Json) => p.state === "failed" && p.detail.includes("no_store_credentials"))).toBe(true);
    expect(
      (await t.call("PUT", `/v1/projects/${w.projectId}/stores/google-play`, { token: w.ownerToken, body: { service_account_json: google.json } }))
        .status,
    ).toBe(200);
    const again = await t.call("POST", `/v1/builds/${w.buildId}/publish`, { token: w.ownerToken, body: { to: "google_play" } });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ to: "google_play", state: "pending", attempts: 0 });
    await drain();
    expect((await publishesOf(w)).find((p: Json) => p.to === "google_play").state).toBe("done");
    const bad = await t.call("POST", `/v1/builds/${w.buildId}/publish`, { token: w.ownerToken, body: { to: "appcenter" } });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe("invalid_input");
    const unknown = await t.call("POST", "/v1/builds/nope/publish", { token: w.ownerToken, body: { to: "testflight" } });
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe("not_found");
    const unknownList = await t.call("GET", "/v1/builds/nope/publishes", { token: w.ownerToken });
    expect(unknownList.status).toBe(404);
  });

  it("never lets two daemons work one publish at once", async () => {
    const { w } = await succeededBuild();
    const [a, b] = await Promise.all([
      import("../../src/domain/publishing/publisher.ts").then((m) => m.claimPublishes(t.deps, "daemon-a", 10)),
      import("../../src/domain/publishing/publisher.ts").then((m) => m.claimPublishes(t.deps, "daemon-b", 10)),
    ]);
    const ids = [...a, ...b].map((r) => r.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBe(2);
    await t.deps.db.update(publishes).set({ leaseUntilMs: 0 }).where(eq(publishes.buildId, w.buildId));
    await drain();
  });

  it("sends published and publish_failed notifications (webhook types build.published, build.publish_failed)", async () => {
    const receiver = await startReceiver();
    const created = await t.call("POST", `/v1/projects/${world.projectId}/notifications`, {
      token: world.ownerToken,
      body: { kind: "webhook", url: `${receiver.url}/hook`, on: ["published", "publish_failed"] },
    });
    expect(created.status).toBe(200);
    stores.failures.push({
      match: "POST /androidpublisher/",
      status: 400,
      body: { error: { code: 400, status: "INVALID_ARGUMENT", message: "Package not found: com.example.demo." } },
    });
    const { w } = await succeededBuild();
    await drain();
    for (let i = 0; i < 50 && receiver.requests.length < 2; i++) {
      await runOutboxOnce(t.deps, "test-outbox");
      await new Promise((r) => setTimeout(r, 10));
    }
    const messages = receiver.requests.map((r) => JSON.parse(r.body));
    expect(messages.map((m) => m.type).sort()).toEqual(["build.publish_failed", "build.published"]);
    for (const m of messages) expect(m.data.build.id).toBe(w.buildId);
    await t.call("DELETE", `/v1/projects/${world.projectId}/notifications/${created.body.id}`, { token: world.ownerToken });
  });
});
