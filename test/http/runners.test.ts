import { eq } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { openDb } from "../../src/db/client.ts";
import { builds, runners, users } from "../../src/db/schema/index.ts";
import { triggerBuild } from "../../src/domain/builds/builds.ts";
import { JobSignal } from "../../src/domain/builds/job-signal.ts";
import { sha256Hex } from "../../src/domain/common/crypto.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { buildWorld, claim, createPipeline, createProject, queueBuild, registerRunner, reportStatus } from "../helpers/builds.ts";
import { userWithRole } from "../helpers/factories.ts";
import { androidSigningBody, iosSigningBody } from "../helpers/signing-material.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON
type Json = any;

describe("runner registration and listing", () => {
  let t: TestApp;
  let w: Awaited<ReturnType<typeof buildWorld>>;
  beforeAll(async () => {
    t = await makeTestApp();
    w = await buildWorld(t);
  });

  it("registers a runner: token shown once, stored as its SHA-256 only", async () => {
    const res = await t.call("POST", "/v1/runners/register", {
      token: w.ownerToken,
      body: { name: "mac-mini", capabilities: { platforms: ["ios"], xcode: "16.2" } },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: "mac-mini", status: "online", capabilities: { platforms: ["ios"], xcode: "16.2" } });
    expect(typeof res.body.id).toBe("string");
    expect(res.body.token).toMatch(/^hgr_[A-Za-z0-9_-]{43}$/);
    expect(typeof res.body.created_at).toBe("number");
    const row = await t.deps.db.select().from(runners).where(eq(runners.id, res.body.id)).get();
    expect(row?.tokenHash).toBe(await sha256Hex(res.body.token));
    expect(JSON.stringify(row)).not.toContain(res.body.token);
    const list = await t.call("GET", "/v1/runners", { token: w.ownerToken });
    expect(list.status).toBe(200);
    expect(list.text).not.toContain(res.body.token);
    expect(list.body.find((r: Json) => r.id === res.body.id)).toMatchObject({
      name: "mac-mini",
      registered_by: expect.any(String),
      // Not started yet: no heartbeat until the runner first calls in.
      last_heartbeat_at: null,
    });
  });

  it("answers status online with last_heartbeat_at null until the runner first calls in; a heartbeat sets it", async () => {
    const reg = await t.call("POST", "/v1/runners/register", { token: w.ownerToken, body: { capabilities: { platforms: ["android"] } } });
    expect(reg.status).toBe(200);
    expect(reg.body).toMatchObject({ status: "online", last_heartbeat_at: null });
    t.clock.advance(5);
    const hb = await t.call("POST", `/v1/runners/${reg.body.id}/heartbeat`, { token: reg.body.token, body: {} });
    expect(hb.body.runner).toMatchObject({ status: "online", last_heartbeat_at: t.clock.now() });
  });

  it("refuses a registration without a platform: 400 invalid_input naming capabilities.platforms", async () => {
    for (const body of [{}, { name: "bare" }, { capabilities: {} }, { capabilities: { platforms: [] } }]) {
      const res = await t.call("POST", "/v1/runners/register", { token: w.ownerToken, body });
      expect([res.status, res.body.code], JSON.stringify(body)).toEqual([400, "invalid_input"]);
      expect(res.body.issues).toEqual([{ path: "capabilities.platforms", message: "at least one platform is required" }]);
    }
    const names = (await t.call("GET", "/v1/runners", { token: w.ownerToken })).body.map((r: Json) => r.name);
    expect(names).not.toContain("bare");
  });

  it("lets owner and admin register and list runners; developer and qa_viewer get 403 forbidden", async () => {
    const admin = await userWithRole(t, "admin");
    const body = { capabilities: { platforms: ["ios"] } };
    expect((await t.call("POST", "/v1/runners/register", { token: admin.token, body })).status).toBe(200);
    expect((await t.call("GET", "/v1/runners", { token: admin.token })).status).toBe(200);
    for (const role of ["developer", "qa_viewer"] as const) {
      const u = await userWithRole(t, role);
      const reg = await t.call("POST", "/v1/runners/register", { token: u.token, body });
      expect([reg.status, reg.body.code]).toEqual([403, "forbidden"]);
      const list = await t.call("GET", "/v1/runners", { token: u.token });
      expect([list.status, list.body.code]).toEqual([403, "forbidden"]);
    }
  });

  it("refuses registration without a session (401 missing_auth) and with bad capabilities (400 invalid_input)", async () => {
    const none = await t.call("POST", "/v1/runners/register", { body: {} });
    expect([none.status, none.body.code]).toEqual([401, "missing_auth"]);
    const bad = await t.call("POST", "/v1/runners/register", { token: w.ownerToken, body: { capabilities: { platforms: "ios" } } });
    expect([bad.status, bad.body.code]).toEqual([400, "invalid_input"]);
  });
});

describe("runner authentication on runner endpoints", () => {
  let t: TestApp;
  let w: Awaited<ReturnType<typeof buildWorld>>;
  let other: Json;
  let jobId: string;
  beforeAll(async () => {
    t = await makeTestApp();
    w = await buildWorld(t);
    other = await registerRunner(t, w.ownerToken);
    jobId = (await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id)).id;
    await claim(t, w.runner);
  });

  const endpoints = (runnerId: string, job: string): Array<[string, string, unknown?]> => [
    ["PATCH", `/v1/runners/${runnerId}`, { name: "x" }],
    ["POST", `/v1/runners/${runnerId}/heartbeat`, {}],
    ["POST", `/v1/runners/${runnerId}/claim`],
    ["GET", `/v1/runners/${runnerId}/jobs/${job}`],
    ["POST", `/v1/runners/${runnerId}/jobs/${job}/status`, { status: "running" }],
    ["GET", `/v1/runners/${runnerId}/jobs/${job}/checkout-auth`],
    ["GET", `/v1/runners/${runnerId}/jobs/${job}/android-signing`],
    ["GET", `/v1/runners/${runnerId}/jobs/${job}/ios-signing`],
  ];

  it("answers 401 missing_auth without a token", async () => {
    for (const [method, path, body] of endpoints(w.runner.id, jobId)) {
      const res = await t.call(method, path, { body });
      expect([path, res.status, res.body.code]).toEqual([path, 401, "missing_auth"]);
    }
  });

  it("answers 401 invalid_runner_token for an unknown token or a user session", async () => {
    for (const token of ["x".repeat(43), w.ownerToken]) {
      for (const [method, path, body] of endpoints(w.runner.id, jobId)) {
        // PATCH also takes an owner's or admin's session (docs/api.md §6; runner-management.test.ts).
        if (method === "PATCH" && token === w.ownerToken) continue;
        const res = await t.call(method, path, { body, token });
        expect([path, res.status, res.body.code]).toEqual([path, 401, "invalid_runner_token"]);
      }
    }
  });

  it("answers 403 runner_mismatch for another runner's token", async () => {
    for (const [method, path, body] of endpoints(w.runner.id, jobId)) {
      const res = await t.call(method, path, { body, token: other.token });
      expect([path, res.status, res.body.code]).toEqual([path, 403, "runner_mismatch"]);
    }
  });

  it("answers 404 not_found for a job this runner does not hold", async () => {
    for (const [method, path, body] of endpoints(other.id, jobId).slice(3)) {
      const res = await t.call(method, path, { body, token: other.token });
      expect([path, res.status, res.body.code]).toEqual([path, 404, "not_found"]);
    }
    const missing = await t.call("GET", `/v1/runners/${w.runner.id}/jobs/nope`, { token: w.runner.token });
    expect([missing.status, missing.body.code]).toEqual([404, "not_found"]);
  });
});

describe("claim", () => {
  it("returns 204 with an empty body when nothing fits", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const res = await t.call("POST", `/v1/runners/${w.runner.id}/claim`, { token: w.runner.token });
    expect(res.status).toBe(204);
    expect(res.text).toBe("");
  });

  it("hands out the oldest matching build first with the claimed-job fields, and counts as a heartbeat", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t, { platform: "ios" });
    const android = await createPipeline(t, w.ownerToken, w.project.id, { platform: "android" }, "android");
    const androidRunner = await registerRunner(t, w.ownerToken, { platforms: ["android"] });
    const iosRunner = await registerRunner(t, w.ownerToken, { platforms: ["ios"] });
    const first = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id, { trigger_ref: "first" });
    t.clock.advance(1);
    const second = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    const droid = await queueBuild(t, w.ownerToken, w.project.id, android.id);

    t.clock.advance(5);
    const job = await claim(t, iosRunner);
    expect(job).toEqual({
      build_id: first.id,
      project_id: w.project.id,
      pipeline_id: w.pipeline.id,
      pipeline_name: "build",
      build_number: 1,
      config_snapshot: { platform: "ios", steps: [{ name: "hello", run: "echo hello" }] },
      commit_sha: "0123456789abcdef0123456789abcdef01234567",
      branch: "main",
      repo_url: w.project.repo_url,
      trigger_event: null,
      lease_expires_at: t.clock.now() + t.deps.config.jobLeaseS,
      job_token: expect.stringMatching(/^hgj_[A-Za-z0-9_-]{43}$/),
      // The project holds no signing material or secret: an open build.
      trust: "open",
      outbound_allow: [...t.deps.config.outboundAllow.cidrs],
    });
    // Only the job token's SHA-256 is stored.
    const stored = await t.deps.db.select().from(builds).where(eq(builds.id, first.id)).get();
    expect(stored?.jobTokenHash).toBe(await sha256Hex(job.job_token));
    expect(JSON.stringify(stored)).not.toContain(job.job_token.slice(4));
    expect(t.deps.config.outboundAllow.cidrs).toEqual(["127.0.0.1/32", "::1/128"]);
    const row = await t.deps.db.select().from(runners).where(eq(runners.id, iosRunner.id)).get();
    expect(row?.lastHeartbeatAt).toBe(t.clock.now());
    expect(row?.status).toBe("busy");

    // The android runner never gets an ios build, however old.
    expect((await claim(t, androidRunner))?.build_id).toBe(droid.id);
    expect(await claim(t, androidRunner)).toBeNull();
    expect((await claim(t, iosRunner))?.build_id).toBe(second.id);
  });

  it("matches platform any with every runner, including one without platforms", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t, { platform: "any" });
    // Only the runner itself can narrow its list to nothing (a user must leave at least one platform).
    const bare = await t.call("POST", "/v1/runners/register", { token: w.ownerToken, body: { capabilities: { platforms: ["ios"] } } });
    const narrowed = await t.call("PATCH", `/v1/runners/${bare.body.id}`, { token: bare.body.token, body: { capabilities: { platforms: [] } } });
    expect(narrowed.body.capabilities.platforms).toEqual([]);
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    expect((await claim(t, bare.body))?.build_id).toBe(b.id);
  });

  it("gives a draining runner 204 even with queued builds, and resumes after PATCH status online", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const patched = await t.call("PATCH", `/v1/runners/${w.runner.id}`, { token: w.runner.token, body: { status: "draining", name: "renamed" } });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ id: w.runner.id, status: "draining", name: "renamed" });
    await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    const res = await t.call("POST", `/v1/runners/${w.runner.id}/claim`, { token: w.runner.token });
    expect([res.status, res.text]).toEqual([204, ""]);
    // A long-poll answers at once: a draining runner has nothing to wait for.
    const started = performance.now();
    const waited = await t.call("POST", `/v1/runners/${w.runner.id}/claim?wait=20`, { token: w.runner.token });
    expect([waited.status, waited.text]).toEqual([204, ""]);
    expect(performance.now() - started).toBeLessThan(2000);
    // A heartbeat without a status keeps draining.
    const hb = await t.call("POST", `/v1/runners/${w.runner.id}/heartbeat`, { token: w.runner.token, body: {} });
    expect(hb.body.runner.status).toBe("draining");
    await t.call("PATCH", `/v1/runners/${w.runner.id}`, { token: w.runner.token, body: { status: "online" } });
    expect(await claim(t, w.runner)).not.toBeNull();
  });

  it("PATCH validates its body (400 invalid_input) and updates capabilities", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const bad = await t.call("PATCH", `/v1/runners/${w.runner.id}`, { token: w.runner.token, body: { status: "busy" } });
    expect([bad.status, bad.body.code]).toEqual([400, "invalid_input"]);
    const ok = await t.call("PATCH", `/v1/runners/${w.runner.id}`, { token: w.runner.token, body: { capabilities: { platforms: ["android"] } } });
    expect(ok.body.capabilities).toEqual({ platforms: ["android"] });
  });

  it("long-polls: ?wait=N answers as soon as a build is queued", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const started = performance.now();
    const pending = t.call("POST", `/v1/runners/${w.runner.id}/claim?wait=10`, { token: w.runner.token });
    await new Promise((r) => setTimeout(r, 150));
    expect(t.deps.jobSignal.waiting).toBe(1);
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    const res = await pending;
    const elapsed = performance.now() - started;
    expect(res.status).toBe(200);
    expect(res.body.build_id).toBe(b.id);
    expect(elapsed).toBeLessThan(1500);
  });

  it("long-polls: finds a build another daemon queued (written straight to the database) by polling", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const pending = t.call("POST", `/v1/runners/${w.runner.id}/claim?wait=5`, { token: w.runner.token });
    await new Promise((r) => setTimeout(r, 100));
    // A second connection with its own signal stands in for another daemon: our waiter is never notified.
    const second = await openDb(`file:${t.dbPath}`);
    const owner = await t.deps.db.select().from(users).where(eq(users.role, "owner")).get();
    const foreign = await triggerBuild({ ...t.deps, db: second.db, jobSignal: new JobSignal() }, owner!, w.project.id, {
      pipeline_id: w.pipeline.id,
      commit_sha: "abcdef1",
    });
    second.close();
    expect(t.deps.jobSignal.waiting).toBe(1);
    const res = await pending;
    expect(res.status).toBe(200);
    expect(res.body.build_id).toBe(foreign.id);
  });

  it("long-polls: stops waiting when the runner goes away, so a later build is not assigned to it", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const ctrl = new AbortController();
    const pending = t.app.request(
      `/v1/runners/${w.runner.id}/claim?wait=20`,
      { method: "POST", headers: { authorization: `Bearer ${w.runner.token}` }, signal: ctrl.signal },
      { peerAddress: "127.0.0.1" },
    );
    await new Promise((r) => setTimeout(r, 100));
    expect(t.deps.jobSignal.waiting).toBe(1);
    ctrl.abort();
    await Promise.resolve(pending).catch(() => undefined);
    expect(t.deps.jobSignal.waiting).toBe(0);
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    await new Promise((r) => setTimeout(r, 50));
    expect((await t.deps.db.select().from(builds).where(eq(builds.id, b.id)).get())?.status).toBe("queued");
  });

  it("long-polls: 204 with an empty body when nothing arrives in N seconds; N over 30 is 400", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const started = performance.now();
    const res = await t.call("POST", `/v1/runners/${w.runner.id}/claim?wait=1`, { token: w.runner.token });
    expect([res.status, res.text]).toEqual([204, ""]);
    expect(performance.now() - started).toBeGreaterThanOrEqual(950);
    const tooLong = await t.call("POST", `/v1/runners/${w.runner.id}/claim?wait=31`, { token: w.runner.token });
    expect([tooLong.status, tooLong.body.code]).toEqual([400, "invalid_input"]);
  });

  it("claims every build exactly once: 10 runners, 200 builds, parallel claims", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const fleet = await Promise.all(Array.from({ length: 10 }, () => registerRunner(t, w.ownerToken)));
    for (let i = 0; i < 200; i++) await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    const claimed: string[] = [];
    await Promise.all(
      fleet.map(async (r) => {
        for (;;) {
          const job = await claim(t, r);
          if (!job) return;
          claimed.push(job.build_id);
        }
      }),
    );
    expect(claimed).toHaveLength(200);
    expect(new Set(claimed).size).toBe(200);
    const rows = await t.deps.db.select().from(builds);
    expect(rows.every((b) => b.status === "assigned" && b.attemptCount === 1)).toBe(true);
  });
});

describe("heartbeat and job reports", () => {
  let t: TestApp;
  let w: Awaited<ReturnType<typeof buildWorld>>;
  beforeAll(async () => {
    t = await makeTestApp();
    w = await buildWorld(t);
  });

  it("answers {runner, cancel_job_ids, next_heartbeat_in_s} and renews the leases of active jobs", async () => {
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    const job = await claim(t, w.runner);
    t.clock.advance(60);
    const hb = await t.call("POST", `/v1/runners/${w.runner.id}/heartbeat`, { token: w.runner.token, body: { status: "busy" } });
    expect(hb.status).toBe(200);
    expect(hb.body.runner).toMatchObject({ id: w.runner.id, status: "busy", last_heartbeat_at: t.clock.now() });
    expect(hb.body.cancel_job_ids).toEqual([]);
    expect(hb.body.next_heartbeat_in_s).toBe(20);
    const got = await t.call("GET", `/v1/runners/${w.runner.id}/jobs/${b.id}`, { token: w.runner.token });
    expect(got.body).toEqual({ build_id: b.id, status: "assigned", cancel_requested: false, lease_expires_at: t.clock.now() + 120 });
    expect(got.body.lease_expires_at).toBeGreaterThan(job.lease_expires_at);
    // An empty heartbeat body is fine too.
    const bare = await t.call("POST", `/v1/runners/${w.runner.id}/heartbeat`, { token: w.runner.token });
    expect(bare.status).toBe(200);
    await reportStatus(t, w.runner, b.id, { status: "running" });
    await reportStatus(t, w.runner, b.id, { status: "succeeded" });
  });

  it("follows assigned → running → final, with step results, timing and exit codes", async () => {
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    await claim(t, w.runner);
    const early = await reportStatus(t, w.runner, b.id, { status: "succeeded" });
    expect([early.status, early.body.code]).toEqual([409, "invalid_transition"]);

    t.clock.advance(3);
    const running = await reportStatus(t, w.runner, b.id, {
      status: "running",
      step_results: [{ name: "hello", status: "running", started_at: t.clock.now() }],
    });
    expect(running.status).toBe(200);
    expect(running.body).toEqual({ build_id: b.id, status: "running", cancel_requested: false, lease_expires_at: t.clock.now() + 120 });
    const startedAt = t.clock.now();
    t.clock.advance(2);
    // Progress: running → running keeps started_at.
    expect((await reportStatus(t, w.runner, b.id, { status: "running" })).status).toBe(200);

    const badExit = await reportStatus(t, w.runner, b.id, { status: "succeeded", exit_code: 2 });
    expect([badExit.status, badExit.body.code]).toEqual([400, "invalid_input"]);
    const badFail = await reportStatus(t, w.runner, b.id, { status: "failed", exit_code: 0 });
    expect([badFail.status, badFail.body.code]).toEqual([400, "invalid_input"]);
    const badSteps = await reportStatus(t, w.runner, b.id, { status: "running", step_results: [{ name: "x", status: "done" }] });
    expect([badSteps.status, badSteps.body.code]).toEqual([400, "invalid_input"]);
    const badStatus = await reportStatus(t, w.runner, b.id, { status: "queued" });
    expect([badStatus.status, badStatus.body.code]).toEqual([400, "invalid_input"]);

    t.clock.advance(10);
    const steps = [{ name: "hello", status: "failed", exit_code: 3, started_at: startedAt, finished_at: t.clock.now() }];
    const failed = await reportStatus(t, w.runner, b.id, { status: "failed", exit_code: 3, step_results: steps });
    expect(failed.body.status).toBe("failed");
    const full = await t.call("GET", `/v1/builds/${b.id}`, { token: w.ownerToken });
    expect(full.body).toMatchObject({
      status: "failed",
      exit_code: 3,
      runner_id: w.runner.id,
      step_results: steps,
      started_at: startedAt,
      finished_at: t.clock.now(),
      failure_reason: "nonzero_exit",
    });
    for (const status of ["running", "succeeded", "failed", "canceled", "timed_out"]) {
      const again = await reportStatus(t, w.runner, b.id, { status });
      expect([status, again.status, again.body.code]).toEqual([status, 409, "invalid_transition"]);
    }
    const runner = await t.deps.db.select().from(runners).where(eq(runners.id, w.runner.id)).get();
    expect(runner?.status).toBe("online");
  });

  it("defaults a failed report's exit code to 1 and a succeeded one's to 0", async () => {
    const a = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    await claim(t, w.runner);
    await reportStatus(t, w.runner, a.id, { status: "running" });
    await reportStatus(t, w.runner, a.id, { status: "failed" });
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    await claim(t, w.runner);
    await reportStatus(t, w.runner, b.id, { status: "running" });
    await reportStatus(t, w.runner, b.id, { status: "succeeded" });
    expect((await t.call("GET", `/v1/builds/${a.id}`, { token: w.ownerToken })).body).toMatchObject({ exit_code: 1, status: "failed" });
    expect((await t.call("GET", `/v1/builds/${b.id}`, { token: w.ownerToken })).body).toMatchObject({
      exit_code: 0,
      status: "succeeded",
      failure_reason: null,
    });
  });
});

describe("job credentials", () => {
  let t: TestApp;
  let w: Awaited<ReturnType<typeof buildWorld>>;
  const androidBody = androidSigningBody({ storePassword: "store-pass", keyPassword: "key-pass" });
  const keystore = androidBody.keystore_base64;
  const iosBody = iosSigningBody("p12-pass");
  beforeAll(async () => {
    t = await makeTestApp();
    w = await buildWorld(t);
  });

  it("answers 404 no_credentials while the project has none (its builds are open: signing is withheld first)", async () => {
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    expect((await claim(t, w.runner)).trust).toBe("open");
    const checkout = await t.call("GET", `/v1/runners/${w.runner.id}/jobs/${b.id}/checkout-auth`, { token: w.runner.token });
    expect([checkout.status, checkout.body.code]).toEqual([404, "no_credentials"]);
    for (const kind of ["android-signing", "ios-signing"]) {
      const res = await t.call("GET", `/v1/runners/${w.runner.id}/jobs/${b.id}/${kind}`, { token: w.runner.token });
      expect([kind, res.status, res.body.code]).toEqual([kind, 403, "secrets_withheld"]);
    }
    await reportStatus(t, w.runner, b.id, { status: "running" });
    await reportStatus(t, w.runner, b.id, { status: "succeeded" });
  });

  it("hands them out while the job is assigned or running, then 409 job_not_active", async () => {
    await t.call("PUT", `/v1/projects/${w.project.id}/source-credentials`, {
      token: w.ownerToken,
      body: { username: "bot", token: "ghp_secret_token" },
    });
    await t.call("PUT", `/v1/projects/${w.project.id}/signing/android`, {
      token: w.ownerToken,
      body: androidBody,
    });
    await t.call("PUT", `/v1/projects/${w.project.id}/signing/ios`, {
      token: w.ownerToken,
      body: iosBody,
    });
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    const job = await claim(t, w.runner);
    const path = `/v1/runners/${w.runner.id}/jobs/${b.id}`;
    const auth = await t.call("GET", `${path}/checkout-auth`, { token: w.runner.token });
    expect(auth.body).toEqual({ username: "bot", password: "ghp_secret_token", expires_at: job.lease_expires_at });
    await reportStatus(t, w.runner, b.id, { status: "running" });
    const android = await t.call("GET", `${path}/android-signing`, { token: w.runner.token });
    expect(android.body).toEqual({ keystore_base64: keystore, keystore_password: "store-pass", key_alias: "upload", key_password: "key-pass" });
    const ios = await t.call("GET", `${path}/ios-signing`, { token: w.runner.token });
    expect(ios.body).toMatchObject({
      certificate_p12_base64: iosBody.certificate_p12_base64,
      certificate_password: "p12-pass",
      provisioning_profile_base64: iosBody.provisioning_profiles_base64[0],
    });
    await reportStatus(t, w.runner, b.id, { status: "succeeded" });
    for (const kind of ["checkout-auth", "android-signing", "ios-signing"]) {
      const res = await t.call("GET", `${path}/${kind}`, { token: w.runner.token });
      expect([kind, res.status, res.body.code]).toEqual([kind, 409, "job_not_active"]);
    }
  });

  it("uses the default user name x-access-token when none was given", async () => {
    await t.call("PUT", `/v1/projects/${w.project.id}/source-credentials`, { token: w.ownerToken, body: { token: "tok-only-1234" } });
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    await claim(t, w.runner);
    const auth = await t.call("GET", `/v1/runners/${w.runner.id}/jobs/${b.id}/checkout-auth`, { token: w.runner.token });
    expect(auth.body).toMatchObject({ username: "x-access-token", password: "tok-only-1234" });
  });
});

describe("claims across projects", () => {
  it("carries the repo_url of the build's own project and numbers builds per project", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const p2 = await createProject(t, w.ownerToken, { repo_url: "https://example.com/two.git" });
    const pl2 = await createPipeline(t, w.ownerToken, p2.id);
    const b = await queueBuild(t, w.ownerToken, p2.id, pl2.id);
    expect((await claim(t, w.runner))?.repo_url).toBe("https://example.com/two.git");
    expect(b.build_number).toBe(1);
  });
});
