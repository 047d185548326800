// A publish across a kill -9 of the real daemon (docs/publishing.md): killed while the .ipa is being uploaded,
// restarted, it finishes once: one committed upload whose bytes equal the artifact, one group assignment.
import { rmSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { claim, createPipeline, createProject, daemonCaller, queueBuild, registerRunner, reportStatus } from "../helpers/builds.ts";
import { DEMO_INFO, makeIpaArchive } from "../helpers/app-fixtures.ts";
import { makeDataDir, runCli, startDaemon, type Daemon } from "../helpers/daemon.ts";
import { startFakeStores, type FakeStores } from "../helpers/fake-stores.ts";
import { waitFor } from "../helpers/receiver.ts";
import { makeAscKey, makeServiceAccount } from "../helpers/store-keys.ts";

describe("publish across kill -9", () => {
  const dataDir = makeDataDir();
  const asc = makeAscKey();
  const google = makeServiceAccount("http://127.0.0.1:9/token");
  let stores: FakeStores | undefined;
  let daemon: Daemon | undefined;
  afterAll(async () => {
    await daemon?.stop("SIGKILL");
    await stores?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("resumes after the kill and finishes the publish once", async () => {
    stores = await startFakeStores({
      ascPublicPem: asc.publicPem,
      ascIssuer: asc.issuerId,
      ascKeyId: asc.keyId,
      googlePublicPem: google.publicPem,
      googleEmail: google.clientEmail,
    });
    const env = {
      HANGAR_DATA_DIR: dataDir,
      HANGAR_LOG_REQUESTS: "0",
      HANGAR_OUTBOX_POLL_MS: "20",
      HANGAR_OUTBOX_RETRY_BASE_MS: "50",
      HANGAR_PUBLISH_POLL_MS: "20",
      HANGAR_PUBLISH_LEASE_MS: "1500",
      HANGAR_ASC_API_URL: stores.url,
      HANGAR_GOOGLE_API_URL: stores.url,
    };
    daemon = await startDaemon(env);
    const c = daemonCaller(daemon.url);
    const setupToken = (await runCli(["setup-token"], env)).stdout.trim();
    const setup = (await c.call("POST", "/v1/setup/bootstrap-token/verify", { body: { token: setupToken } })).body.session_token;
    await c.call("POST", "/v1/setup/local-owner/create", { token: setup, body: { email: "owner@example.com" } });
    await c.call("POST", "/v1/setup/complete", { token: setup });
    const owner = (await c.call("POST", "/v1/auth/local/login", { body: { email: "owner@example.com" } })).body.session_token;
    const project = await createProject(c, owner);
    // A secret variable makes the project's builds of protected branches protected builds.
    expect((await c.call("PUT", `/v1/projects/${project.id}/secrets/RELEASE`, { token: owner, body: { value: "x" } })).status).toBe(200);
    const put = await c.call("PUT", `/v1/projects/${project.id}/stores/app-store-connect`, {
      token: owner,
      body: { issuer_id: asc.issuerId, key_id: asc.keyId, private_key_p8: asc.privatePem },
    });
    expect(put.status).toBe(200);
    const config = { platform: "any", steps: [{ name: "b", run: "true" }], publish: [{ to: "testflight", groups: ["QA"] }] };
    const pipeline = await createPipeline(c, owner, project.id, config as never);
    const runner = await registerRunner(c, owner);
    const build = await queueBuild(c, owner, project.id, pipeline.id);
    expect((await claim(c, runner))?.build_id).toBe(build.id);
    await reportStatus(c, runner, build.id, { status: "running" });
    const ipa = makeIpaArchive({ info: DEMO_INFO, fillerBytes: 2_000_000 });
    const jobPath = `/v1/runners/${runner.id}/jobs/${build.id}/artifacts`;
    const created = await c.call("POST", jobPath, {
      token: runner.token,
      body: { filename: "Demo.ipa", size_bytes: ipa.length, content_type: "application/octet-stream" },
    });
    expect(created.status).toBe(200);
    const upload = await fetch(created.body.upload.url, { method: "PUT", body: ipa });
    expect(upload.status).toBe(200);
    expect((await c.call("POST", `${jobPath}/${created.body.artifact.id}/complete`, { token: runner.token })).status).toBe(200);

    // The first upload range kills the daemon before its bytes are read.
    let killed = false;
    const running = daemon;
    stores.onUploadRange = async () => {
      if (killed) return;
      killed = true;
      await running.stop("SIGKILL");
    };
    expect((await reportStatus(c, runner, build.id, { status: "succeeded", exit_code: 0 })).status).toBe(200);
    await waitFor(() => killed, 20_000, "the upload to begin");
    expect(stores.ascUploaded).toHaveLength(0);

    daemon = await startDaemon(env);
    const c2 = daemonCaller(daemon.url);
    await waitFor(
      async () => (await c2.call("GET", `/v1/builds/${build.id}/publishes`, { token: owner })).body[0]?.state === "done",
      30_000,
      "the publish to finish",
    );
    const [publish] = (await c2.call("GET", `/v1/builds/${build.id}/publishes`, { token: owner })).body;
    expect(publish).toMatchObject({ to: "testflight", state: "done" });
    expect(stores.ascUploaded).toHaveLength(1);
    expect(Buffer.compare(stores.ascUploaded[0]!, Buffer.from(ipa))).toBe(0);
    expect(stores.groupsAdded).toEqual(["group-QA"]);
    expect(stores.requests.filter((r) => r.method === "PATCH")).toHaveLength(1);
  });
});
