import examples from "@octokit/webhooks-examples";
import { readFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { claim, createPipeline, createProject, registerRunner } from "../helpers/builds.ts";
import { completeLocalSetup, userWithRole } from "../helpers/factories.ts";
import { deliver, forgeHeaders, type Provider } from "../helpers/hooks.ts";
import { androidSigningBody } from "../helpers/signing-material.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- example payloads are read loosely
type Json = any;

function github(name: string, pick: (e: Json) => boolean = () => true): Json {
  const found = (examples as Array<{ name: string; examples: Json[] }>).find((e) => e.name === name)!;
  return structuredClone(found.examples.find(pick));
}
function fixture(name: string): Json {
  return JSON.parse(readFileSync(new URL(`../fixtures/webhooks/${name}.json`, import.meta.url), "utf8"));
}
const SHA_A = "1111111111111111111111111111111111111111";
const SHA_B = "2222222222222222222222222222222222222222";

/** A GitHub push of `branch` to `sha`, built from the package's real example. */
function githubPush(branch: string, sha: string, message = "a change"): Json {
  const p = github("push", (e) => e.ref === "refs/heads/master" && !e.deleted);
  p.ref = `refs/heads/${branch}`;
  p.after = sha;
  p.head_commit.id = sha;
  p.head_commit.message = message;
  return p;
}

let t: TestApp;
let owner: string;

beforeAll(async () => {
  t = await makeTestApp();
  owner = (await completeLocalSetup(t)).ownerToken;
});

async function projectWithHook(provider: Provider, options: { triggers?: Json; default_branch?: string } = {}) {
  const project = await createProject(t, owner, { default_branch: options.default_branch ?? "master" });
  const pipeline = await createPipeline(t, owner, project.id, options.triggers !== undefined ? { triggers: options.triggers } : {});
  const created = await t.call("POST", `/v1/projects/${project.id}/webhooks`, { token: owner, body: { provider } });
  expect(created.status).toBe(200);
  return { project, pipeline, webhook: { ...created.body, provider } as { id: string; secret: string; provider: Provider; url: string } };
}

describe("webhook settings", () => {
  it("creates a webhook whose URL and hgw_ secret are shown once, then lists it without the secret", async () => {
    const project = await createProject(t, owner);
    const created = await t.call("POST", `/v1/projects/${project.id}/webhooks`, { token: owner, body: { provider: "github", report_status: false } });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ provider: "github", report_status: false, url: `http://localhost/v1/hooks/${created.body.id}` });
    expect(created.body.secret).toMatch(/^hgw_[A-Za-z0-9_-]{43}$/);
    const listed = await t.call("GET", `/v1/projects/${project.id}/webhooks`, { token: owner });
    expect(listed.status).toBe(200);
    expect(listed.body).toHaveLength(1);
    expect(listed.text).not.toContain(created.body.secret);
    expect(listed.body[0]).toMatchObject({ id: created.body.id, url: created.body.url, report_status: false });
    // The secret is stored sealed, not in the clear.
    const raw = await t.opened.client.execute("SELECT secret_sealed FROM webhooks");
    expect(String(raw.rows[0]?.[0])).not.toContain(created.body.secret);
  });

  it("answers 400 invalid_input for an unknown provider or a bad api_url, 404 not_found for an unknown project or webhook", async () => {
    const project = await createProject(t, owner);
    const bad = await t.call("POST", `/v1/projects/${project.id}/webhooks`, { token: owner, body: { provider: "svn" } });
    expect([bad.status, bad.body.code]).toEqual([400, "invalid_input"]);
    const badUrl = await t.call("POST", `/v1/projects/${project.id}/webhooks`, { token: owner, body: { provider: "gitea", api_url: "ftp://x" } });
    expect([badUrl.status, badUrl.body.code]).toEqual([400, "invalid_input"]);
    const missing = await t.call("POST", `/v1/projects/nope/webhooks`, { token: owner, body: { provider: "github" } });
    expect([missing.status, missing.body.code]).toEqual([404, "not_found"]);
    const gone = await t.call("DELETE", `/v1/projects/${project.id}/webhooks/nope`, { token: owner });
    expect([gone.status, gone.body.code]).toEqual([404, "not_found"]);
    const deliveries = await t.call("GET", `/v1/projects/${project.id}/webhooks/nope/deliveries`, { token: owner });
    expect([deliveries.status, deliveries.body.code]).toEqual([404, "not_found"]);
  });

  it("refuses a qa_viewer (403 forbidden) and a caller without a session (401)", async () => {
    const project = await createProject(t, owner);
    const viewer = await userWithRole(t, "qa_viewer");
    const refused = await t.call("POST", `/v1/projects/${project.id}/webhooks`, { token: viewer.token, body: { provider: "github" } });
    expect([refused.status, refused.body.code]).toEqual([403, "forbidden"]);
    const anonymous = await t.call("GET", `/v1/projects/${project.id}/webhooks`);
    expect(anonymous.status).toBe(401);
  });

  it("deletes a webhook: its URL answers 404 not_found afterwards", async () => {
    const { project, webhook } = await projectWithHook("github");
    const deleted = await t.call("DELETE", `/v1/projects/${project.id}/webhooks/${webhook.id}`, { token: owner });
    expect(deleted.status).toBe(204);
    const r = await deliver(t, webhook, "ping", github("ping"));
    expect([r.status, r.body.code]).toEqual([404, "not_found"]);
  });
});

describe("POST /v1/hooks/{id}: verification", () => {
  it("answers 404 not_found for an unknown webhook", async () => {
    const r = await t.call("POST", "/v1/hooks/unknown", { rawBody: "{}", headers: { "content-type": "application/json" } });
    expect([r.status, r.body.code]).toEqual([404, "not_found"]);
  });

  for (const provider of ["github", "gitlab", "gitea", "forgejo", "bitbucket"] as const) {
    it(`${provider}: a missing or wrong signature answers 401 invalid_signature and is listed as refused`, async () => {
      const { project, webhook } = await projectWithHook(provider);
      const body = JSON.stringify({ hello: "world" });
      const event = { github: "push", gitlab: "Push Hook", gitea: "push", forgejo: "push", bitbucket: "repo:push" }[provider];
      const good = forgeHeaders(provider, webhook.secret, event, body);
      const signatureHeader = Object.keys(good).find((h) => /signature|token/.test(h))!;
      const { [signatureHeader]: _dropped, ...missing } = good;
      const r1 = await t.call("POST", `/v1/hooks/${webhook.id}`, { rawBody: body, headers: missing });
      expect([r1.status, r1.body.code]).toEqual([401, "invalid_signature"]);
      const wrong = forgeHeaders(provider, `${webhook.secret}x`, event, body);
      const r2 = await t.call("POST", `/v1/hooks/${webhook.id}`, { rawBody: body, headers: wrong });
      expect([r2.status, r2.body.code]).toEqual([401, "invalid_signature"]);
      if (provider !== "gitlab") {
        // A body changed after signing fails too (GitLab sends the secret itself, so it cannot tell).
        const r3 = await t.call("POST", `/v1/hooks/${webhook.id}`, { rawBody: body.replace("world", "w0rld"), headers: good });
        expect([r3.status, r3.body.code]).toEqual([401, "invalid_signature"]);
      }
      const listed = await t.call("GET", `/v1/projects/${project.id}/webhooks/${webhook.id}/deliveries`, { token: owner });
      expect(listed.body.map((d: Json) => d.outcome)).toEqual(provider === "gitlab" ? ["refused", "refused"] : ["refused", "refused", "refused"]);
    });
  }

  it("a verified body that is not JSON answers 400 invalid_input", async () => {
    const { webhook } = await projectWithHook("github");
    const r = await deliver(t, webhook, "push", "not json{");
    expect([r.status, r.body.code]).toEqual([400, "invalid_input"]);
  });
});

describe("POST /v1/hooks/{id}: GitHub events to builds", () => {
  it("ping answers 200 with no builds and ignored: ping", async () => {
    const { webhook } = await projectWithHook("github");
    const r = await deliver(t, webhook, "ping", github("ping"));
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ builds: [], ignored: "ping" });
  });

  it("a push to the default branch queues one build per matching pipeline with the webhook trigger fields", async () => {
    const { project, pipeline, webhook } = await projectWithHook("github");
    const r = await deliver(t, webhook, "push", githubPush("master", SHA_A));
    expect(r.status).toBe(200);
    expect(r.body.builds).toEqual([{ id: expect.any(String), pipeline_id: pipeline.id, build_number: 1 }]);
    const build = (await t.call("GET", `/v1/builds/${r.body.builds[0].id}`, { token: owner })).body;
    expect(build).toMatchObject({
      project_id: project.id,
      status: "queued",
      trigger_type: "webhook",
      trigger_event: "push",
      trigger_actor: "Codertocat",
      trigger_ref: "refs/heads/master",
      commit_sha: SHA_A,
      branch: "master",
    });
  });

  it("a push to another branch builds nothing when triggers are absent (default branch only)", async () => {
    const { webhook } = await projectWithHook("github");
    const r = await deliver(t, webhook, "push", githubPush("feature/x", SHA_A));
    expect(r.body).toEqual({ builds: [], ignored: "no pipeline's triggers match" });
  });

  it("an empty trigger list builds nothing; branch globs choose pipelines", async () => {
    const none = await projectWithHook("github", { triggers: [] });
    expect((await deliver(t, none.webhook, "push", githubPush("master", SHA_A))).body.builds).toEqual([]);
    const globbed = await projectWithHook("github", { triggers: [{ event: "push", branches: ["release/**"] }] });
    expect((await deliver(t, globbed.webhook, "push", githubPush("release/1.2/rc", SHA_A))).body.builds).toHaveLength(1);
    expect((await deliver(t, globbed.webhook, "push", githubPush("main", SHA_A))).body.builds).toHaveLength(0);
  });

  it("a tag push of an annotated tag builds the commit it points to, with trigger_event tag and the tag's name as branch", async () => {
    const { webhook } = await projectWithHook("github", { triggers: [{ event: "tag", tags: ["simple-*"] }] });
    const tag = github("push", (e) => e.ref === "refs/tags/simple-tag" && !e.deleted);
    tag.after = "3".repeat(40); // the tag object
    const r = await deliver(t, webhook, "push", tag);
    expect(r.body.builds).toHaveLength(1);
    const build = (await t.call("GET", `/v1/builds/${r.body.builds[0].id}`, { token: owner })).body;
    expect(build).toMatchObject({ trigger_event: "tag", trigger_ref: "refs/tags/simple-tag", branch: "simple-tag", commit_sha: tag.head_commit.id });
  });

  it("a deleted branch and [skip ci] build nothing: 200 with ignored", async () => {
    const { webhook } = await projectWithHook("github", { triggers: [{ event: "push" }, { event: "tag" }] });
    const deleted = await deliver(
      t,
      webhook,
      "push",
      github("push", (e) => e.deleted),
    );
    expect(deleted.body).toEqual({ builds: [], ignored: "ref deleted" });
    const skipped = await deliver(t, webhook, "push", githubPush("master", SHA_A, "docs only [skip ci]"));
    expect(skipped.body).toEqual({ builds: [], ignored: "[skip ci] in the head commit message" });
    const ciSkip = await deliver(t, webhook, "push", githubPush("master", SHA_A, "[ci skip]"));
    expect(ciSkip.body.ignored).toMatch(/skip ci/);
  });

  it("a redelivery (same delivery id) answers the first builds with duplicate: true and builds nothing new", async () => {
    const { project, webhook } = await projectWithHook("github");
    const deliveryId = crypto.randomUUID();
    const first = await deliver(t, webhook, "push", githubPush("master", SHA_A), { deliveryId });
    const again = await deliver(t, webhook, "push", githubPush("master", SHA_A), { deliveryId });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ builds: first.body.builds, duplicate: true });
    const list = await t.call("GET", `/v1/builds?project_id=${project.id}`, { token: owner });
    expect(list.body).toHaveLength(1);
    const deliveries = await t.call("GET", `/v1/projects/${project.id}/webhooks/${webhook.id}/deliveries`, { token: owner });
    expect(deliveries.body.map((d: Json) => [d.delivery_id, d.outcome])).toEqual([
      [deliveryId, "duplicate"],
      [deliveryId, "built"],
    ]);
    expect(deliveries.body[1]).toMatchObject({ event: "push", build_ids: [first.body.builds[0].id], reason: null });
  });

  it("a replayed payload (same webhook, same body) is a duplicate whatever its delivery id, forever; another webhook's copy is not", async () => {
    const { project, webhook } = await projectWithHook("github");
    const payload = githubPush("master", SHA_A, "replay me");
    const first = await deliver(t, webhook, "push", payload, { deliveryId: crypto.randomUUID() });
    expect(first.body.builds).toHaveLength(1);
    t.clock.advance(3600);
    const replayed = await deliver(t, webhook, "push", payload, { deliveryId: crypto.randomUUID() });
    expect([replayed.status, replayed.body]).toEqual([200, { builds: first.body.builds, duplicate: true }]);
    const noId = await deliver(t, webhook, "push", payload, { deliveryId: "" });
    expect(noId.body.duplicate).toBe(true);
    // Concurrent replays under fresh ids of a payload never seen: one builds, the rest are duplicates.
    const fresh = githubPush("master", SHA_B, "raced");
    const raced = await Promise.all(Array.from({ length: 6 }, () => deliver(t, webhook, "push", fresh, { deliveryId: crypto.randomUUID() })));
    expect(raced.every((a) => a.status === 200)).toBe(true);
    expect(new Set(raced.flatMap((a) => a.body.builds.map((b: Json) => b.id))).size).toBe(1);
    expect(raced.filter((a) => a.body.duplicate === true)).toHaveLength(5);
    const list = await t.call("GET", `/v1/builds?project_id=${project.id}`, { token: owner });
    expect(list.body).toHaveLength(2);
    const deliveries = await t.call("GET", `/v1/projects/${project.id}/webhooks/${webhook.id}/deliveries`, { token: owner });
    expect(deliveries.body.find((d: Json) => d.outcome === "duplicate").reason).toMatch(/payload seen before/);
    // The same body to another webhook (another project) is its own delivery.
    const other = await projectWithHook("github");
    expect((await deliver(t, other.webhook, "push", payload, { deliveryId: crypto.randomUUID() })).body.builds).toHaveLength(1);
  });

  it("concurrent copies of one delivery build once", async () => {
    const { project, webhook } = await projectWithHook("github");
    const deliveryId = crypto.randomUUID();
    const answers = await Promise.all(Array.from({ length: 6 }, () => deliver(t, webhook, "push", githubPush("master", SHA_B), { deliveryId })));
    expect(answers.every((a) => a.status === 200)).toBe(true);
    const ids = new Set(answers.flatMap((a) => a.body.builds.map((b: Json) => b.id)));
    expect(ids.size).toBe(1);
    const list = await t.call("GET", `/v1/builds?project_id=${project.id}`, { token: owner });
    expect(list.body).toHaveLength(1);
  });

  it("the same pipeline, event, ref and commit within 10 minutes builds nothing new; after 10 minutes it builds again", async () => {
    const { webhook } = await projectWithHook("github");
    // Another push of the same commit (another pusher): not the same payload, so not a replay.
    const pushBy = (sha: string, who: string) => ({ ...githubPush("master", sha), pusher: { name: who, email: `${who}@example.com` } });
    const first = await deliver(t, webhook, "push", pushBy(SHA_A, "ann"));
    expect(first.body.builds).toHaveLength(1);
    const second = await deliver(t, webhook, "push", pushBy(SHA_A, "bob"));
    expect(second.body).toEqual({ builds: [], ignored: "built within the last 10 minutes" });
    const other = await deliver(t, webhook, "push", pushBy(SHA_B, "ann"));
    expect(other.body.builds[0].build_number).toBe(2); // no gap from the skipped one
    t.clock.advance(601);
    const later = await deliver(t, webhook, "push", pushBy(SHA_A, "cid"));
    expect(later.body.builds[0].build_number).toBe(3);
  });

  it("a fork pull request builds without signing material (403 secrets_withheld); a same-repo one gets it", async () => {
    // Claims take the oldest queued build: this test drains every earlier one first.
    const drain = await registerRunner(t, owner);
    while (await claim(t, drain)) {
      // each claim takes one earlier build off the queue
    }
    const { project, webhook } = await projectWithHook("github", { triggers: [{ event: "pull_request", branches: ["master"] }] });
    const signing = androidSigningBody();
    expect((await t.call("PUT", `/v1/projects/${project.id}/signing/android`, { token: owner, body: signing })).status).toBe(200);
    expect((await t.call("PUT", `/v1/projects/${project.id}/secrets/STORE_KEY`, { token: owner, body: { value: "app-store-key-1" } })).status).toBe(
      200,
    );
    const runner = await registerRunner(t, owner);

    const same = github("pull_request", (e) => e.action === "opened");
    const sameBuild = (await deliver(t, webhook, "pull_request", same)).body.builds[0];
    expect(sameBuild).toBeDefined();
    const job1 = await claim(t, runner);
    expect(job1.build_id).toBe(sameBuild.id);
    const ok = await t.call("GET", `/v1/runners/${runner.id}/jobs/${job1.build_id}/android-signing`, { token: runner.token });
    expect(ok.status).toBe(200);
    const secrets = await t.call("GET", `/v1/runners/${runner.id}/jobs/${job1.build_id}/secrets`, { token: runner.token });
    expect([secrets.status, secrets.body]).toEqual([200, { STORE_KEY: "app-store-key-1" }]);

    const fork = github("pull_request", (e) => e.action === "synchronize");
    fork.pull_request.head.repo.full_name = "mallory/Hello-World";
    fork.pull_request.head.sha = "6".repeat(40);
    const forkBuild = (await deliver(t, webhook, "pull_request", fork)).body.builds[0];
    const build = (await t.call("GET", `/v1/builds/${forkBuild.id}`, { token: owner })).body;
    expect(build).toMatchObject({
      trigger_event: "pull_request",
      trigger_ref: `refs/pull/${fork.number}/head`,
      branch: "changes",
      commit_sha: fork.pull_request.head.sha,
    });
    expect([sameBuild.id, build.trust]).toEqual([sameBuild.id, "fork"]);
    expect((await t.call("GET", `/v1/builds/${sameBuild.id}`, { token: owner })).body.trust).toBe("protected");
    // A fork's pull request never reaches a protected runner: only an open one takes it.
    expect(await claim(t, runner)).toBeNull();
    const open = (
      await t.call("POST", "/v1/runners/register", {
        token: owner,
        body: { trust: "open", capabilities: { platforms: ["ios", "android", "macos"] } },
      })
    ).body;
    expect(open.trust).toBe("open");
    const job2 = await claim(t, open);
    expect(job2.build_id).toBe(forkBuild.id);
    // Secret variables are withheld from a fork's pull request like the signing material (docs/api.md §5).
    for (const kind of ["android-signing", "ios-signing", "secrets"]) {
      const withheld = await t.call("GET", `/v1/runners/${open.id}/jobs/${job2.build_id}/${kind}`, { token: open.token });
      expect([withheld.status, withheld.body.code]).toEqual([403, "secrets_withheld"]);
    }
    const closed = github("pull_request", (e) => e.action === "closed");
    expect((await deliver(t, webhook, "pull_request", closed)).body).toEqual({ builds: [], ignored: "pull request closed" });
  });

  it("takes a 20 MiB body; refuses one over 25 MiB with 413 payload_too_large", async () => {
    const { webhook } = await projectWithHook("github");
    const big = githubPush("master", "4".repeat(40));
    big.padding = "x".repeat(20 * 1024 * 1024);
    const r = await deliver(t, webhook, "push", big);
    expect(r.status).toBe(200);
    expect(r.body.builds).toHaveLength(1);
    big.padding = "x".repeat(25 * 1024 * 1024 + 1);
    const tooBig = await deliver(t, webhook, "push", big);
    expect([tooBig.status, tooBig.body.code]).toEqual([413, "payload_too_large"]);
  });

  it("accepts GitHub's form-encoded content type", async () => {
    const { webhook } = await projectWithHook("github");
    const body = new URLSearchParams({ payload: JSON.stringify(githubPush("master", "5".repeat(40))) }).toString();
    const headers = { ...forgeHeaders("github", webhook.secret, "push", body), "content-type": "application/x-www-form-urlencoded" };
    const r = await t.call("POST", `/v1/hooks/${webhook.id}`, { rawBody: body, headers });
    expect(r.body.builds).toHaveLength(1);
  });
});

describe("POST /v1/hooks/{id}: the other forges", () => {
  it("GitLab Push Hook, Tag Push Hook and Merge Request Hook build; the token is the secret", async () => {
    const { webhook } = await projectWithHook("gitlab", { triggers: [{ event: "push" }, { event: "tag" }, { event: "pull_request" }] });
    const push = await deliver(t, webhook, "Push Hook", fixture("gitlab-push"));
    expect(push.body.builds).toHaveLength(1);
    const tag = await deliver(t, webhook, "Tag Push Hook", fixture("gitlab-tag-push"));
    const tagBuild = (await t.call("GET", `/v1/builds/${tag.body.builds[0].id}`, { token: owner })).body;
    expect(tagBuild).toMatchObject({ trigger_event: "tag", commit_sha: "5937ac0a7beb003549fc5fd26fc247adbce4a52e", trigger_actor: "jsmith" });
    const mr = await deliver(t, webhook, "Merge Request Hook", fixture("gitlab-merge-request"));
    const mrBuild = (await t.call("GET", `/v1/builds/${mr.body.builds[0].id}`, { token: owner })).body;
    expect(mrBuild).toMatchObject({
      trigger_event: "pull_request",
      trigger_ref: "refs/merge-requests/1/head",
      branch: "ms-viewport",
      trigger_actor: "root",
    });
  });

  it("Gitea and Forgejo push and pull_request build", async () => {
    for (const provider of ["gitea", "forgejo"] as const) {
      const { webhook } = await projectWithHook(provider, { triggers: [{ event: "push", branches: ["develop"] }, { event: "pull_request" }] });
      const push = await deliver(t, webhook, "push", fixture("gitea-push"));
      expect(push.status).toBe(200);
      expect(push.body.builds).toHaveLength(1);
      const pr = await deliver(t, webhook, "pull_request", fixture("gitea-pull-request"));
      expect(pr.body.builds).toHaveLength(1);
    }
  });

  it("each forge's ping and events Hangar does not build answer 200 with ignored and are listed as ignored", async () => {
    const cases: Array<[Provider, string, unknown]> = [
      ["bitbucket", "diagnostics:ping", { test: true }],
      ["bitbucket", "repo:commit_status_created", { repository: { full_name: "a/b" } }],
      ["gitlab", "Note Hook", { object_kind: "note" }],
      ["gitea", "issues", { action: "opened" }],
      ["forgejo", "issues", { action: "opened" }],
      ["github", "issues", github("issues")],
    ];
    for (const [provider, event, payload] of cases) {
      const { project, webhook } = await projectWithHook(provider);
      const r = await deliver(t, webhook, event, payload, { deliveryId: `${provider}-${event}` });
      expect(r.status, `${provider} ${event}: ${r.text}`).toBe(200);
      expect(r.body.builds, `${provider} ${event}`).toEqual([]);
      expect(typeof r.body.ignored, `${provider} ${event}`).toBe("string");
      if (event === "diagnostics:ping") expect(r.body.ignored).toBe("ping");
      const listed = await t.call("GET", `/v1/projects/${project.id}/webhooks/${webhook.id}/deliveries`, { token: owner });
      expect(listed.body, `${provider} ${event}`).toMatchObject([{ delivery_id: `${provider}-${event}`, event, outcome: "ignored", build_ids: [] }]);
    }
  });

  it("Bitbucket repo:push and pullrequest:created build; the actor is the nickname", async () => {
    const { webhook } = await projectWithHook("bitbucket", { triggers: [{ event: "push" }, { event: "pull_request" }] });
    const push = await deliver(t, webhook, "repo:push", fixture("bitbucket-push"));
    const build = (await t.call("GET", `/v1/builds/${push.body.builds[0].id}`, { token: owner })).body;
    expect(build).toMatchObject({ trigger_actor: "amills", commit_sha: "109d5aaf0c2daf86d429c22f6a8c34d8a6ab9114", branch: "master" });
    const pr = await deliver(t, webhook, "pullrequest:created", fixture("bitbucket-pullrequest-created"));
    expect(pr.body.builds).toHaveLength(1);
  });
});
