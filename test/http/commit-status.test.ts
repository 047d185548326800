import examples from "@octokit/webhooks-examples";
import { beforeAll, describe, expect, it } from "vitest";
import { countPendingDeliveries, runOutboxOnce } from "../../src/domain/events/outbox.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { claim, createPipeline, createProject, registerRunner, reportStatus } from "../helpers/builds.ts";
import { completeLocalSetup } from "../helpers/factories.ts";
import { deliver, type Provider } from "../helpers/hooks.ts";
import { startReceiver, type Receiver } from "../helpers/receiver.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON shapes are asserted by the tests
type Json = any;

let t: TestApp;
let owner: string;
let forge: Receiver;

beforeAll(async () => {
  t = await makeTestApp({ config: { HANGAR_OUTBOX_RETRY_BASE_MS: "20" } });
  owner = (await completeLocalSetup(t)).ownerToken;
  forge = await startReceiver();
});

async function drain(timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await runOutboxOnce(t.deps, "test-owner");
    if ((await countPendingDeliveries(t.deps)) === 0) return;
    if (Date.now() > deadline) throw new Error("the outbox did not drain");
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A project with source credentials and a webhook whose api_url is the fake forge; one push queues a build. */
async function pushedBuild(provider: Provider, event: string, payload: Json, name = `p-${crypto.randomUUID().slice(0, 6)}`) {
  const project = await createProject(t, owner, { default_branch: "master", repo_url: "https://git.example.com/acme/app.git" });
  await createPipeline(t, owner, project.id, { triggers: [{ event: "push" }] }, name);
  expect(
    (await t.call("PUT", `/v1/projects/${project.id}/source-credentials`, { token: owner, body: { username: "bot", token: "forge-token" } })).status,
  ).toBe(200);
  const apiPath = `/${provider}-${crypto.randomUUID().slice(0, 8)}`;
  const created = await t.call("POST", `/v1/projects/${project.id}/webhooks`, {
    token: owner,
    body: { provider, api_url: `${forge.url}${apiPath}` },
  });
  expect(created.status).toBe(200);
  const r = await deliver(t, { ...created.body, provider }, event, payload);
  expect(r.body.builds).toHaveLength(1);
  return { project, build: r.body.builds[0], apiPath, name };
}

async function finish(buildId: string, result: "succeeded" | "failed") {
  const runner = await registerRunner(t, owner);
  for (let job = await claim(t, runner); job; job = await claim(t, runner)) {
    await reportStatus(t, runner, job.build_id, { status: "running" });
    const mine = job.build_id === buildId;
    await reportStatus(t, runner, job.build_id, mine && result === "succeeded" ? { status: "succeeded" } : { status: "failed", exit_code: 1 });
    if (mine) return;
  }
  throw new Error("the build was never claimed");
}

function githubPush(sha: string): Json {
  const p = structuredClone(
    (examples as Array<{ name: string; examples: Json[] }>)
      .find((e) => e.name === "push")!
      .examples.find((e: Json) => e.ref === "refs/heads/master" && !e.deleted),
  );
  p.after = sha;
  p.head_commit.id = sha;
  return p;
}

describe("commit statuses through the outbox", () => {
  it("GitHub: pending (queued), pending (running), success, with context, target_url and the source token", async () => {
    const sha = "a".repeat(40);
    const { build, apiPath, name } = await pushedBuild("github", "push", githubPush(sha));
    await drain();
    const runner = await registerRunner(t, owner);
    for (let job = await claim(t, runner); job; job = await claim(t, runner)) {
      if (job.build_id !== build.id) continue;
      await reportStatus(t, runner, build.id, { status: "running" });
      await drain();
      await reportStatus(t, runner, build.id, { status: "succeeded" });
      break;
    }
    await drain();
    const calls = forge.requests.filter((r) => r.path.startsWith(apiPath));
    expect(calls.map((c) => c.path)).toEqual(Array(3).fill(`${apiPath}/repos/Codertocat/Hello-World/statuses/${sha}`));
    const bodies = calls.map((c) => JSON.parse(c.body));
    expect(bodies.map((b) => b.state)).toEqual(["pending", "pending", "success"]);
    expect(bodies[2]).toEqual({
      state: "success",
      context: `hangar/${name}`,
      target_url: `http://localhost/builds/${build.id}`,
      description: `Build #${build.build_number} succeeded`,
    });
    expect(calls[0]!.headers.authorization).toBe("Bearer forge-token");
  });

  it("a failed build with failing tests says how many and which in the description and in a Slack message", async () => {
    const sha = "f".repeat(40);
    const { project, build, apiPath } = await pushedBuild("github", "push", githubPush(sha));
    const slackPath = `/slack-${project.id}`;
    const note = await t.call("POST", `/v1/projects/${project.id}/notifications`, {
      token: owner,
      body: { kind: "slack", url: `${forge.url}${slackPath}`, on: ["failed"] },
    });
    expect(note.status).toBe(200);
    const runner = await registerRunner(t, owner);
    for (let job = await claim(t, runner); job; job = await claim(t, runner)) {
      if (job.build_id !== build.id) continue;
      await reportStatus(t, runner, build.id, { status: "running" });
      const cases = ["testA", "testB", "testC", "testD"].map((n) => `<testcase classname="T" name="${n}"><failure message="x"/></testcase>`).join("");
      const xml = new TextEncoder().encode(`<testsuite name="T">${cases}<testcase classname="T" name="ok"/></testsuite>`);
      const jobPath = `/v1/runners/${runner.id}/jobs/${build.id}/artifacts`;
      const created = await t.call("POST", jobPath, {
        token: runner.token,
        body: { filename: "junit.xml", size_bytes: xml.length, content_type: "application/xml", kind: "junit" },
      });
      const url = new URL(created.body.upload.url);
      expect((await t.call("PUT", url.pathname, { rawBody: xml })).status).toBe(200);
      expect((await t.call("POST", `${jobPath}/${created.body.artifact.id}/complete`, { token: runner.token })).status).toBe(200);
      await reportStatus(t, runner, build.id, { status: "failed", exit_code: 1 });
      break;
    }
    await drain();
    const last = JSON.parse(forge.requests.filter((r) => r.path.startsWith(apiPath)).at(-1)!.body);
    expect(last.description).toBe(`Build #${build.build_number} failed: 4 tests failed: T.testA, T.testB, T.testC and 1 more`);
    const slack = JSON.parse(forge.requests.find((r) => r.path === slackPath)!.body);
    expect(slack.text).toContain("failed (4 tests failed: T.testA, T.testB, T.testC and 1 more)");
  });

  it("retries after 500s and the final state is the last one the forge hears, whatever the order of retries", async () => {
    const sha = "b".repeat(40);
    const { build, apiPath } = await pushedBuild("github", "push", githubPush(sha));
    const previous = forge.respond;
    // The forge fails every report for a while: queued and running pile up unsent behind failures.
    let failing = true;
    forge.respond = (req, i) => (req.path.startsWith(apiPath) && failing ? 500 : previous(req, i));
    await runOutboxOnce(t.deps, "test-owner");
    await finish(build.id, "failed");
    await runOutboxOnce(t.deps, "test-owner");
    failing = false;
    await drain();
    forge.respond = previous;
    const calls = forge.requests.filter((r) => r.path.startsWith(apiPath)).map((c) => JSON.parse(c.body).state);
    expect(calls[0]).toBe("pending");
    expect(calls.at(-1)).toBe("failure");
    // Once the final state was sent (and failed, and was retried), no earlier state follows it.
    expect(calls.slice(calls.indexOf("failure")).every((s) => s === "failure")).toBe(true);
    expect(calls.filter((s) => s === "failure").length).toBeGreaterThanOrEqual(2);
  });

  it("GitLab, Gitea, Forgejo and Bitbucket use their own API paths and state words", async () => {
    const cases: Array<[Provider, string, Json, string, string]> = [
      [
        "gitlab",
        "Push Hook",
        {
          object_kind: "push",
          ref: "refs/heads/master",
          after: "c".repeat(40),
          checkout_sha: "c".repeat(40),
          user_username: "jsmith",
          project: { id: 15, web_url: "http://gitlab.example.com/mike/diaspora" },
          commits: [],
        },
        "/projects/15/statuses/" + "c".repeat(40),
        "failed",
      ],
      [
        "gitea",
        "push",
        {
          ref: "refs/heads/master",
          after: "d".repeat(40),
          repository: { full_name: "gitea/webhooks", html_url: "http://localhost:3000/gitea/webhooks" },
          sender: { login: "gitea" },
        },
        "/repos/gitea/webhooks/statuses/" + "d".repeat(40),
        "failure",
      ],
      [
        "forgejo",
        "push",
        {
          ref: "refs/heads/master",
          after: "e".repeat(40),
          repository: { full_name: "org/app", html_url: "https://code.example.org/org/app" },
          sender: { login: "f" },
        },
        "/repos/org/app/statuses/" + "e".repeat(40),
        "failure",
      ],
      [
        "bitbucket",
        "repo:push",
        {
          push: { changes: [{ new: { type: "branch", name: "master", target: { hash: "f".repeat(40), message: "m" } } }] },
          actor: { nickname: "amills" },
          repository: { full_name: "ws/repo" },
        },
        "/repositories/ws/repo/commit/" + "f".repeat(40) + "/statuses/build",
        "FAILED",
      ],
    ];
    for (const [provider, event, payload, path, finalState] of cases) {
      const { build, apiPath } = await pushedBuild(provider, event, payload);
      await finish(build.id, "failed");
      await drain();
      const calls = forge.requests.filter((r) => r.path.startsWith(apiPath));
      expect(calls.length, provider).toBeGreaterThanOrEqual(1);
      expect(
        calls.every((c) => c.path === `${apiPath}${path}`),
        `${provider}: ${calls.map((c) => c.path)}`,
      ).toBe(true);
      expect(JSON.parse(calls.at(-1)!.body).state, provider).toBe(finalState);
      if (provider === "gitlab") expect(calls[0]!.headers["private-token"]).toBe("forge-token");
      if (provider === "gitea" || provider === "forgejo") expect(calls[0]!.headers.authorization).toBe("token forge-token");
      if (provider === "bitbucket") expect(calls[0]!.headers.authorization).toBe(`Basic ${btoa("bot:forge-token")}`);
    }
  });

  it("a manual build of the project is reported too; report_status false reports nothing", async () => {
    const project = await createProject(t, owner, { repo_url: "https://github.com/acme/app.git" });
    const pipeline = await createPipeline(t, owner, project.id);
    await t.call("PUT", `/v1/projects/${project.id}/source-credentials`, { token: owner, body: { token: "forge-token" } });
    const apiPath = `/manual-${crypto.randomUUID().slice(0, 8)}`;
    await t.call("POST", `/v1/projects/${project.id}/webhooks`, { token: owner, body: { provider: "github", api_url: `${forge.url}${apiPath}` } });
    await t.call("POST", `/v1/projects/${project.id}/webhooks`, {
      token: owner,
      body: { provider: "github", api_url: `${forge.url}${apiPath}-off`, report_status: false },
    });
    const build = (
      await t.call("POST", `/v1/projects/${project.id}/builds`, { token: owner, body: { pipeline_id: pipeline.id, commit_sha: "9".repeat(40) } })
    ).body;
    await drain();
    const calls = forge.requests.filter((r) => r.path.startsWith(apiPath));
    expect(calls.map((c) => c.path)).toEqual([`${apiPath}/repos/acme/app/statuses/${"9".repeat(40)}`]);
    expect(JSON.parse(calls[0]!.body)).toMatchObject({ state: "pending", target_url: `http://localhost/builds/${build.id}` });
  });
});
