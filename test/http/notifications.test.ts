import { Webhook } from "standardwebhooks";
import { beforeAll, describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { buildEvents } from "../../src/db/schema/index.ts";
import { countPendingDeliveries, expandBuildEvents, retryDelayMs, runOutboxOnce } from "../../src/domain/events/outbox.ts";
import { sweep } from "../../src/domain/builds/sweeper.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { claim, createPipeline, createProject, queueBuild, registerRunner, reportStatus } from "../helpers/builds.ts";
import { completeLocalSetup, userWithRole } from "../helpers/factories.ts";
import { startReceiver, type Receiver } from "../helpers/receiver.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON shapes are asserted by the tests
type Json = any;

let t: TestApp;
let owner: string;
let receiver: Receiver;

beforeAll(async () => {
  t = await makeTestApp({ config: { HANGAR_OUTBOX_RETRY_BASE_MS: "20" } });
  // Standard Webhooks receivers refuse timestamps far from their clock: the ManualClock starts at wall time.
  t.clock.set(Math.floor(Date.now() / 1000));
  owner = (await completeLocalSetup(t)).ownerToken;
  receiver = await startReceiver();
});

/** Runs outbox passes until nothing is pending (retries included). */
async function drain(timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await runOutboxOnce(t.deps, "test-owner");
    if ((await countPendingDeliveries(t.deps)) === 0) return;
    if (Date.now() > deadline) throw new Error("the outbox did not drain");
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function world(options: { on?: string[]; branches?: string[]; kind?: string; path?: string } = {}) {
  const project = await createProject(t, owner);
  const pipeline = await createPipeline(t, owner, project.id);
  const created = await t.call("POST", `/v1/projects/${project.id}/notifications`, {
    token: owner,
    body: {
      kind: options.kind ?? "webhook",
      url: `${receiver.url}${options.path ?? `/${crypto.randomUUID()}`}`,
      on: options.on ?? ["started", "succeeded", "failed", "fixed"],
      ...(options.branches ? { branches: options.branches } : {}),
    },
  });
  expect(created.status).toBe(200);
  return { project, pipeline, notification: created.body };
}

async function runBuild(projectId: string, pipelineId: string, result: "succeeded" | "failed", branch = "main") {
  const runner = await registerRunner(t, owner);
  const build = await queueBuild(t, owner, projectId, pipelineId, { branch });
  // Earlier tests may have left builds queued: claim until this one comes.
  for (let job = await claim(t, runner); job && job.build_id !== build.id; job = await claim(t, runner)) {
    await reportStatus(t, runner, job.build_id, { status: "running" });
    await reportStatus(t, runner, job.build_id, { status: "failed", exit_code: 1 });
  }
  expect((await reportStatus(t, runner, build.id, { status: "running" })).status).toBe(200);
  expect(
    (await reportStatus(t, runner, build.id, result === "succeeded" ? { status: "succeeded" } : { status: "failed", exit_code: 2 })).status,
  ).toBe(200);
  return build;
}

const sent = (path: string) => receiver.requests.filter((r) => r.path === path);

describe("notification settings", () => {
  it("creates each kind; only `webhook` answers a whsec_ secret, once; the URL is never answered", async () => {
    const project = await createProject(t, owner);
    for (const kind of ["slack", "discord", "teams", "webhook"]) {
      const url = `${receiver.url}/secret-path-${kind}`;
      const r = await t.call("POST", `/v1/projects/${project.id}/notifications`, {
        token: owner,
        body: { kind, url, on: ["failed"], branches: ["main"] },
      });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ kind, on: ["failed"], branches: ["main"], has_url: true });
      expect(r.text).not.toContain("secret-path");
      if (kind === "webhook") expect(r.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
      else expect(r.body.secret).toBeUndefined();
    }
    const listed = await t.call("GET", `/v1/projects/${project.id}/notifications`, { token: owner });
    expect(listed.body).toHaveLength(4);
    expect(listed.text).not.toContain("secret-path");
    expect(listed.text).not.toContain("whsec_");
  });

  it("answers 400 invalid_input for a bad kind, URL or event; 404 not_found for unknown ids; 403 forbidden for a qa_viewer", async () => {
    const project = await createProject(t, owner);
    const path = `/v1/projects/${project.id}/notifications`;
    for (const body of [
      { kind: "email", url: "https://x.example", on: ["failed"] },
      { kind: "slack", url: "not a url", on: ["failed"] },
      { kind: "slack", url: "https://user:pw@x.example/", on: ["failed"] },
      { kind: "slack", url: "https://x.example/", on: ["exploded"] },
      { kind: "slack", url: "https://x.example/", on: [] },
    ]) {
      const r = await t.call("POST", path, { token: owner, body });
      expect([r.status, r.body.code], JSON.stringify(body)).toEqual([400, "invalid_input"]);
    }
    for (const [method, sub] of [
      ["DELETE", "/nope"],
      ["POST", "/nope/test"],
      ["GET", "/nope/deliveries"],
    ] as const) {
      const r = await t.call(method, `${path}${sub}`, { token: owner });
      expect([r.status, r.body.code]).toEqual([404, "not_found"]);
    }
    const missing = await t.call("GET", `/v1/projects/nope/notifications`, { token: owner });
    expect([missing.status, missing.body.code]).toEqual([404, "not_found"]);
    const viewer = await userWithRole(t, "qa_viewer");
    const refused = await t.call("GET", path, { token: viewer.token });
    expect([refused.status, refused.body.code]).toEqual([403, "forbidden"]);
  });

  it("sends a test message on request and lists it among the deliveries", async () => {
    const { project, notification } = await world({ path: "/test-send" });
    const r = await t.call("POST", `/v1/projects/${project.id}/notifications/${notification.id}/test`, { token: owner });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ attempt: 1, status_code: 200, error: null });
    const got = sent("/test-send");
    expect(got).toHaveLength(1);
    new Webhook(notification.secret).verify(got[0]!.body, got[0]!.headers as Record<string, string>);
    const deliveries = await t.call("GET", `/v1/projects/${project.id}/notifications/${notification.id}/deliveries`, { token: owner });
    expect(deliveries.body).toEqual([r.body]);
  });

  it("deletes a notification", async () => {
    const { project, notification } = await world();
    expect((await t.call("DELETE", `/v1/projects/${project.id}/notifications/${notification.id}`, { token: owner })).status).toBe(204);
    expect((await t.call("GET", `/v1/projects/${project.id}/notifications`, { token: owner })).body).toEqual([]);
  });
});

describe("notifications through the outbox", () => {
  it("a signed webhook gets build.started and build.failed, then build.fixed; the Standard Webhooks signature verifies", async () => {
    const path = "/signed";
    const { project, pipeline, notification } = await world({ path });
    const failed = await runBuild(project.id, pipeline.id, "failed");
    await drain();
    const hook = new Webhook(notification.secret);
    const first = sent(path).map((r) => hook.verify(r.body, r.headers as Record<string, string>) as Json);
    expect(first.map((m) => m.type)).toEqual(["build.started", "build.failed"]);
    expect(first[1]).toMatchObject({
      data: {
        build: { id: failed.id, status: "failed", branch: "main" },
        project: { id: project.id },
        pipeline: { id: pipeline.id, name: "build" },
        url: `http://localhost/builds/${failed.id}`,
      },
    });
    await runBuild(project.id, pipeline.id, "succeeded");
    await drain();
    const all = sent(path).map((r) => (hook.verify(r.body, r.headers as Record<string, string>) as Json).type);
    expect(all).toEqual(["build.started", "build.failed", "build.started", "build.fixed"]);
    // A second success is not a fix.
    await runBuild(project.id, pipeline.id, "succeeded");
    await drain();
    expect(
      sent(path)
        .map((r) => JSON.parse(r.body).type)
        .slice(4),
    ).toEqual(["build.started", "build.succeeded"]);
    // A forged signature does not verify.
    const last = sent(path).at(-1)!;
    expect(() => hook.verify(last.body.replace("succeeded", "failed"), last.headers as Record<string, string>)).toThrow();
  });

  it("Slack, Discord and Teams messages name the build; Discord parses no mentions", async () => {
    const project = await createProject(t, owner, { name: "@everyone <script>" });
    const pipeline = await createPipeline(t, owner, project.id);
    for (const kind of ["slack", "discord", "teams"]) {
      const r = await t.call("POST", `/v1/projects/${project.id}/notifications`, {
        token: owner,
        body: { kind, url: `${receiver.url}/${kind}-${project.id}`, on: ["failed"] },
      });
      expect(r.status).toBe(200);
    }
    const build = await runBuild(project.id, pipeline.id, "failed");
    await drain();
    const slack = JSON.parse(sent(`/slack-${project.id}`)[0]!.body);
    expect(slack.text).toContain("&lt;script&gt;");
    expect(JSON.stringify(slack.blocks)).toContain(`/builds/${build.id}`);
    const discord = JSON.parse(sent(`/discord-${project.id}`)[0]!.body);
    expect(discord.allowed_mentions).toEqual({ parse: [] });
    expect(discord.embeds[0].url).toBe(`http://localhost/builds/${build.id}`);
    const teams = JSON.parse(sent(`/teams-${project.id}`)[0]!.body);
    expect(teams.attachments[0].contentType).toBe("application/vnd.microsoft.card.adaptive");
    expect(JSON.stringify(teams)).toContain(`#${build.build_number}`);
  });

  it("branch filters choose which builds notify", async () => {
    const path = "/filtered";
    const { project, pipeline } = await world({ path, on: ["failed"], branches: ["release/**"] });
    await runBuild(project.id, pipeline.id, "failed", "main");
    await runBuild(project.id, pipeline.id, "failed", "release/1.0/rc");
    await drain();
    expect(sent(path).map((r) => JSON.parse(r.body).data.build.branch)).toEqual(["release/1.0/rc"]);
  });

  it("closes every event nobody is told of in one statement, however many, and still expands the ones with a target", async () => {
    await drain();
    const quiet = await createProject(t, owner);
    const quietPipeline = await createPipeline(t, owner, quiet.id);
    for (let i = 0; i < 3; i++) await runBuild(quiet.id, quietPipeline.id, "succeeded");
    const path = `/${crypto.randomUUID()}`;
    const { project, pipeline } = await world({ path, on: ["succeeded"] });
    const told = await runBuild(project.id, pipeline.id, "succeeded");
    // limit 0: the per-event loop takes nothing, so only the single statement runs.
    expect(await expandBuildEvents(t.deps, 0)).toBeGreaterThanOrEqual(9);
    const open = await t.deps.db.select().from(buildEvents).where(eq(buildEvents.expanded, 0));
    expect(new Set(open.map((e) => e.buildId))).toEqual(new Set([told.id]));
    expect(open.map((e) => e.event).sort()).toEqual(["queued", "running", "succeeded"]);
    await drain();
    expect(sent(path).map((r) => JSON.parse(r.body))).toMatchObject([{ type: "build.succeeded", data: { build: { id: told.id } } }]);
  });

  it("retries failures with backoff keeping one webhook-id, and lists every attempt", async () => {
    const path = "/flaky";
    const { project, pipeline, notification } = await world({ path, on: ["failed"] });
    let calls = 0;
    const previous = receiver.respond;
    receiver.respond = (req, i) => (req.path === path ? (++calls <= 2 ? 500 : 200) : previous(req, i));
    await runBuild(project.id, pipeline.id, "failed");
    await drain();
    receiver.respond = previous;
    const attempts = sent(path);
    expect(attempts).toHaveLength(3);
    expect(new Set(attempts.map((a) => a.headers["webhook-id"])).size).toBe(1);
    const listed = await t.call("GET", `/v1/projects/${project.id}/notifications/${notification.id}/deliveries`, { token: owner });
    expect(listed.body.map((d: Json) => [d.attempt, d.status_code, d.error])).toEqual([
      [3, 200, null],
      [2, 500, "http_500"],
      [1, 500, "http_500"],
    ]);
  });

  it("a 410 answer disables the target: later builds send it nothing", async () => {
    const path = "/gone";
    const { project, pipeline } = await world({ path, on: ["failed"] });
    const previous = receiver.respond;
    receiver.respond = (req, i) => (req.path === path ? 410 : previous(req, i));
    await runBuild(project.id, pipeline.id, "failed");
    await drain();
    receiver.respond = previous;
    await runBuild(project.id, pipeline.id, "failed");
    await drain();
    expect(sent(path)).toHaveLength(1);
    const listed = await t.call("GET", `/v1/projects/${project.id}/notifications`, { token: owner });
    expect(listed.body[0].disabled).toBe(true);
  });

  it("a redirect is not followed: it is a failed attempt", async () => {
    const path = "/redirect";
    const { project, pipeline, notification } = await world({ path, on: ["failed"] });
    const previous = receiver.respond;
    receiver.respond = (req, i) => (req.path === path ? 302 : previous(req, i));
    await runBuild(project.id, pipeline.id, "failed");
    await runOutboxOnce(t.deps, "test-owner");
    receiver.respond = previous;
    const listed = await t.call("GET", `/v1/projects/${project.id}/notifications/${notification.id}/deliveries`, { token: owner });
    expect(listed.body[0]).toMatchObject({ status_code: 302, error: "redirect_refused" });
    await drain();
  });

  it("an expiry by the sweeper notifies too (the outbox row comes with the status change)", async () => {
    const path = "/expired";
    const { project, pipeline } = await world({ path, on: ["expired"] });
    const build = await queueBuild(t, owner, project.id, pipeline.id);
    t.clock.advance(t.deps.config.queueTtlS + 1);
    await sweep(t.deps);
    t.clock.set(Math.floor(Date.now() / 1000));
    await drain();
    expect(sent(path).map((r) => JSON.parse(r.body))).toMatchObject([{ type: "build.expired", data: { build: { id: build.id } } }]);
  });

  it("two senders sharing the database never send one attempt twice", async () => {
    const path = "/shared";
    const { project, pipeline } = await world({ path, on: ["started", "failed"] });
    for (let i = 0; i < 5; i++) await runBuild(project.id, pipeline.id, "failed");
    await Promise.all([runOutboxOnce(t.deps, "daemon-a"), runOutboxOnce(t.deps, "daemon-b"), runOutboxOnce(t.deps, "daemon-c")]);
    await drain();
    const ids = sent(path).map((r) => r.headers["webhook-id"]);
    expect(ids).toHaveLength(10);
    expect(new Set(ids).size).toBe(10);
  });

  it("backoff doubles from the base with ±20 % jitter", () => {
    expect(retryDelayMs(30_000, 1, () => 0.5)).toBe(30_000);
    expect(retryDelayMs(30_000, 3, () => 0.5)).toBe(120_000);
    expect(retryDelayMs(30_000, 1, () => 0)).toBe(24_000);
    expect(retryDelayMs(30_000, 1, () => 1)).toBe(36_000);
  });
});

describe("the outbound guard", () => {
  it("refuses a loopback receiver that HANGAR_OUTBOUND_ALLOW does not list: 400 destination_not_allowed at creation", async () => {
    const guarded = await makeTestApp({ config: { HANGAR_OUTBOUND_ALLOW: "192.0.2.0/24" } });
    const token = (await completeLocalSetup(guarded)).ownerToken;
    const project = await createProject(guarded, token);
    const r = await guarded.call("POST", `/v1/projects/${project.id}/notifications`, {
      token,
      body: { kind: "webhook", url: `${receiver.url}/refused`, on: ["failed"] },
    });
    expect([r.status, r.body.code]).toEqual([400, "destination_not_allowed"]);
    expect(r.body.message).toContain("HANGAR_OUTBOUND_ALLOW");
    const hook = await guarded.call("POST", `/v1/projects/${project.id}/webhooks`, {
      token,
      body: { provider: "gitea", api_url: `${receiver.url}/api/v1` },
    });
    expect([hook.status, hook.body.code]).toEqual([400, "destination_not_allowed"]);
  });

  it("refuses it again at send time (a name that pointed elsewhere when saved): the delivery's error is destination_not_allowed", async () => {
    // The creation check is told the destination is fine (as when DNS answered differently then); the send is not.
    const guarded = await makeTestApp({
      config: { HANGAR_OUTBOUND_ALLOW: "192.0.2.0/24", HANGAR_OUTBOX_RETRY_BASE_MS: "20" },
      deps: { checkDestination: async () => ({ listed: true }) },
    });
    const token = (await completeLocalSetup(guarded)).ownerToken;
    const project = await createProject(guarded, token);
    const pipeline = await createPipeline(guarded, token, project.id);
    const created = await guarded.call("POST", `/v1/projects/${project.id}/notifications`, {
      token,
      body: { kind: "webhook", url: `${receiver.url}/rebound`, on: ["expired"] },
    });
    expect(created.status).toBe(200);
    await queueBuild(guarded, token, project.id, pipeline.id);
    const before = guarded.clock.now();
    guarded.clock.advance(guarded.deps.config.queueTtlS + 1);
    await sweep(guarded.deps);
    guarded.clock.set(before);
    await runOutboxOnce(guarded.deps, "guarded");
    const listed = await guarded.call("GET", `/v1/projects/${project.id}/notifications/${created.body.id}/deliveries`, { token });
    expect(listed.body).toMatchObject([{ attempt: 1, status_code: null, error: "destination_not_allowed" }]);
    expect(sent("/rebound")).toHaveLength(0);
    const test = await guarded.call("POST", `/v1/projects/${project.id}/notifications/${created.body.id}/test`, { token });
    expect(test.body).toMatchObject({ status_code: null, error: "destination_not_allowed" });
  });
});
