// The project page's webhook, notification and delivery sections through app.request(): each POST route's
// success, role refusal (403 page) and bad input; secrets shown once; outside strings escaped.
import { Webhook } from "standardwebhooks";
import { beforeAll, describe, expect, it } from "vitest";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { createPipeline, createProject } from "../helpers/builds.ts";
import { completeLocalSetup, userWithRole } from "../helpers/factories.ts";
import { deliver, type Provider } from "../helpers/hooks.ts";
import { startReceiver, type Receiver } from "../helpers/receiver.ts";
import { page } from "../helpers/web.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON shapes are asserted by the tests
type Json = any;

let t: TestApp;
let owner: string;
let developer: string;
let viewer: string;
let receiver: Receiver;

beforeAll(async () => {
  t = await makeTestApp();
  // Standard Webhooks receivers refuse timestamps far from their clock: the ManualClock starts at wall time.
  t.clock.set(Math.floor(Date.now() / 1000));
  owner = (await completeLocalSetup(t)).ownerToken;
  developer = (await userWithRole(t, "developer")).token;
  viewer = (await userWithRole(t, "qa_viewer")).token;
  receiver = await startReceiver();
});

const SHA = "3333333333333333333333333333333333333333";

function pushPayload(branch: string, sha: string) {
  return {
    ref: `refs/heads/${branch}`,
    before: "0".repeat(39) + "1",
    after: sha,
    deleted: false,
    head_commit: { id: sha, message: "a change" },
    repository: {
      full_name: "acme/app",
      url: "https://api.github.com/repos/acme/app",
      html_url: "https://github.com/acme/app",
      default_branch: branch,
    },
    sender: { login: "octocat" },
    pusher: { name: "octocat" },
  };
}

/** The value of a read-only CopyField input by id, unescaped. */
function copyValue(html: string, id: string): string {
  const m = new RegExp(`<input id="${id}" readonly="" value="([^"]*)"`).exec(html);
  if (!m) throw new Error(`no copy field ${id}`);
  return m[1]!
    .replace(/&amp;/g, "&")
    .replace(/&quot;/g, '"')
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">");
}

async function apiList(projectId: string, what: "webhooks" | "notifications"): Promise<Json[]> {
  const res = await t.call("GET", `/v1/projects/${projectId}/${what}`, { token: owner });
  expect(res.status).toBe(200);
  return res.body;
}

describe("what each role sees", () => {
  it("builders get both sections with their forms; a qa_viewer gets neither, nor any webhook URL", async () => {
    const project = await createProject(t, owner);
    const hook = await t.call("POST", `/v1/projects/${project.id}/webhooks`, { token: owner, body: { provider: "gitlab" } });
    expect(hook.status).toBe(200);
    for (const session of [owner, developer]) {
      const res = await page(t, "GET", `/projects/${project.id}`, { session });
      expect(res.status).toBe(200);
      expect(res.text).toContain('id="webhooks"');
      expect(res.text).toContain('id="notifications"');
      expect(res.text).toContain(`action="/projects/${project.id}/webhooks"`);
      expect(res.text).toContain(`action="/projects/${project.id}/notifications"`);
      expect(res.text).toContain(hook.body.url);
      expect(res.text).not.toContain(hook.body.secret);
    }
    const qa = await page(t, "GET", `/projects/${project.id}`, { session: viewer });
    expect(qa.status).toBe(200);
    expect(qa.text).not.toContain('id="webhooks"');
    expect(qa.text).not.toContain('id="notifications"');
    expect(qa.text).not.toContain(hook.body.url);
    expect(qa.text).not.toContain("/webhooks");
    expect(qa.text).not.toContain("Delete webhook");
  });
});

describe("POST /projects/{id}/webhooks", () => {
  const steps: Record<Provider, string> = {
    github: "Payload URL",
    gitlab: "Secret token",
    gitea: "Add webhook → Gitea",
    forgejo: "Add webhook → Forgejo",
    bitbucket: "Repository push",
  };

  it("adds a webhook for each forge and shows its URL and secret once, with that forge's steps", async () => {
    const project = await createProject(t, owner);
    for (const provider of Object.keys(steps) as Provider[]) {
      const res = await page(t, "POST", `/projects/${project.id}/webhooks`, {
        session: developer,
        form: { provider, api_url: "", report_status: "1" },
      });
      expect(res.status, res.text).toBe(200);
      const url = copyValue(res.text, "webhook-url");
      const secret = copyValue(res.text, "webhook-secret");
      expect(secret).toMatch(/^hgw_[A-Za-z0-9_-]{43}$/);
      expect(res.text).toContain(steps[provider]);
      expect(res.text).toContain('data-copy="#webhook-secret"');
      const listed = (await apiList(project.id, "webhooks")).find((w) => w.url === url);
      expect(listed).toMatchObject({ provider, report_status: true });
    }
    // Shown once: the page never carries a secret again.
    const again = await page(t, "GET", `/projects/${project.id}`, { session: owner });
    expect(again.text).not.toMatch(/hgw_[A-Za-z0-9_-]{43}/);
    expect(again.text.match(/class="card webhook"/g)).toHaveLength(5);
  });

  it("keeps report_status off when the box is not ticked, and keeps an api_url", async () => {
    const project = await createProject(t, owner);
    const res = await page(t, "POST", `/projects/${project.id}/webhooks`, {
      session: owner,
      form: { provider: "gitea", api_url: "https://git.example.com/api/v1" },
    });
    expect(res.status).toBe(200);
    expect(await apiList(project.id, "webhooks")).toMatchObject([
      { provider: "gitea", report_status: false, api_url: "https://git.example.com/api/v1" },
    ]);
    expect(res.text).toContain("not reported");
  });

  it("refuses a qa_viewer with a 403 page and creates nothing", async () => {
    const project = await createProject(t, owner);
    const res = await page(t, "POST", `/projects/${project.id}/webhooks`, { session: viewer, form: { provider: "github", report_status: "1" } });
    expect(res.status).toBe(403);
    expect(res.headers.get("content-type")).toContain("text/html");
    expect(res.text).not.toContain("hgw_");
    expect(await apiList(project.id, "webhooks")).toEqual([]);
  });

  it("answers 400 with the field's error for an unknown forge, a bad API URL or one the outbound guard refuses", async () => {
    const project = await createProject(t, owner);
    const forge = await page(t, "POST", `/projects/${project.id}/webhooks`, { session: owner, form: { provider: "svn<b>" } });
    expect(forge.status).toBe(400);
    expect(forge.text).toContain("Choose one of the forges listed.");
    expect(forge.text).not.toContain("svn<b>");
    const url = await page(t, "POST", `/projects/${project.id}/webhooks`, { session: owner, form: { provider: "gitea", api_url: "ftp://x" } });
    expect(url.status).toBe(400);
    expect(url.text).toContain("Must be an absolute http(s) URL");
    // The form keeps what was typed (escaped).
    expect(url.text).toContain('value="ftp://x"');
    const strict = await makeTestApp({ config: { HANGAR_OUTBOUND_ALLOW: "" } });
    const strictOwner = (await completeLocalSetup(strict)).ownerToken;
    const strictProject = await createProject(strict, strictOwner);
    const guarded = await page(strict, "POST", `/projects/${strictProject.id}/webhooks`, {
      session: strictOwner,
      form: { provider: "gitea", api_url: "http://127.0.0.1:3000/api/v1", report_status: "1" },
    });
    expect(guarded.status).toBe(400);
    expect(guarded.text).toContain("HANGAR_OUTBOUND_ALLOW");
    expect((await strict.call("GET", `/v1/projects/${strictProject.id}/webhooks`, { token: strictOwner })).body).toEqual([]);
    expect(await apiList(project.id, "webhooks")).toEqual([]);
  });

  it("answers a 404 page for an unknown project", async () => {
    const res = await page(t, "POST", `/projects/nope/webhooks`, { session: owner, form: { provider: "github" } });
    expect(res.status).toBe(404);
  });
});

describe("POST /projects/{id}/webhooks/{wid}/delete", () => {
  it("deletes for a builder (flash, gone from the page), refuses a qa_viewer (403), 404 for an unknown id", async () => {
    const project = await createProject(t, owner);
    const hook = await t.call("POST", `/v1/projects/${project.id}/webhooks`, { token: owner, body: { provider: "github" } });
    const refused = await page(t, "POST", `/projects/${project.id}/webhooks/${hook.body.id}/delete`, { session: viewer });
    expect(refused.status).toBe(403);
    expect(await apiList(project.id, "webhooks")).toHaveLength(1);
    const unknown = await page(t, "POST", `/projects/${project.id}/webhooks/nope/delete`, { session: owner });
    expect(unknown.status).toBe(404);
    const done = await page(t, "POST", `/projects/${project.id}/webhooks/${hook.body.id}/delete`, { session: developer });
    expect(done.status).toBe(303);
    expect(done.location).toBe(`/projects/${project.id}#webhooks`);
    expect(await apiList(project.id, "webhooks")).toEqual([]);
    const after = await page(t, "GET", `/projects/${project.id}`, { session: developer, cookies: done.setCookies.map((c) => c.split(";")[0]!) });
    expect(after.text).toContain("Webhook deleted.");
    expect(after.text).not.toContain(hook.body.url);
  });
});

describe("webhook deliveries on the page", () => {
  it("lists built, ignored and refused deliveries with links to the builds, the event header escaped", async () => {
    const project = await createProject(t, owner, { default_branch: "main" });
    await createPipeline(t, owner, project.id);
    const created = await t.call("POST", `/v1/projects/${project.id}/webhooks`, { token: owner, body: { provider: "github", report_status: false } });
    const hook = { ...created.body, provider: "github" as const };
    const built = await deliver(t, hook, "push", pushPayload("main", SHA), { deliveryId: "delivery-built-1" });
    expect(built.status).toBe(200);
    const buildId: string = built.body.builds[0].id;
    expect((await deliver(t, hook, "ping", { zen: "hi", hook_id: 1 }, { deliveryId: "delivery-ping-1" })).status).toBe(200);
    const forged = await deliver(t, { ...hook, secret: "hgw_wrong" }, "<script>alert(1)</script>", pushPayload("main", SHA), {
      deliveryId: "delivery-forged-1",
    });
    expect([forged.status, forged.body.code]).toEqual([401, "invalid_signature"]);
    const res = await page(t, "GET", `/projects/${project.id}`, { session: owner });
    const table = res.text.slice(res.text.indexOf(`id="webhook-deliveries-${hook.id}"`));
    expect(table).toContain("delivery-built-1");
    expect(table).toContain(`href="/builds/${buildId}">#1</a>`);
    expect(table).toMatch(/badge-ok">built</);
    expect(table).toContain("delivery-ping-1");
    expect(table).toMatch(/badge-neutral">ignored</);
    expect(table).toMatch(/badge-bad">refused</);
    expect(table).toContain("missing or wrong signature");
    expect(res.text).not.toContain("<script>alert(1)</script>");
    expect(res.text).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
  });
});

describe("POST /projects/{id}/notifications", () => {
  it("adds a Slack target (303 + flash, URL never shown) with events and branch globs", async () => {
    const project = await createProject(t, owner);
    const url = `${receiver.url}/slack-${crypto.randomUUID()}`;
    const res = await page(t, "POST", `/projects/${project.id}/notifications`, {
      session: developer,
      form: { kind: "slack", url, on: ["failed", "fixed"], branches: "main, release/*  \u202Eevil" },
    });
    expect(res.status, res.text).toBe(303);
    const [listed] = await apiList(project.id, "notifications");
    expect(listed).toMatchObject({ kind: "slack", on: ["failed", "fixed"], branches: ["main", "release/*", "\u202Eevil"] });
    expect(res.location).toBe(`/projects/${project.id}#notification-${listed.id}`);
    const after = await page(t, "GET", `/projects/${project.id}`, { session: developer, cookies: res.setCookies.map((c) => c.split(";")[0]!) });
    expect(after.text).toContain("Slack notification added.");
    expect(after.text).not.toContain(url);
    expect(after.text).toContain("failed, fixed");
    // A bidi override in a glob is shown, not obeyed.
    expect(after.text).not.toContain("\u202E");
    expect(after.text).toContain("&lt;U+202E&gt;evil");
  });

  it("adds a signed webhook and shows its whsec_ secret once", async () => {
    const project = await createProject(t, owner);
    const res = await page(t, "POST", `/projects/${project.id}/notifications`, {
      session: owner,
      form: { kind: "webhook", url: `${receiver.url}/signed`, on: ["started"] },
    });
    expect(res.status).toBe(200);
    const secret = copyValue(res.text, "notification-secret");
    expect(secret).toMatch(/^whsec_/);
    const again = await page(t, "GET", `/projects/${project.id}`, { session: owner });
    expect(again.text).not.toContain(secret);
    expect(again.text).toContain("Signed webhook (Standard Webhooks)");
  });

  it("refuses a qa_viewer with a 403 page and creates nothing", async () => {
    const project = await createProject(t, owner);
    const res = await page(t, "POST", `/projects/${project.id}/notifications`, {
      session: viewer,
      form: { kind: "slack", url: `${receiver.url}/x`, on: ["failed"] },
    });
    expect(res.status).toBe(403);
    expect(await apiList(project.id, "notifications")).toEqual([]);
  });

  it("answers 400 with the field's error: no event, a bad URL, an unknown kind, a destination the guard refuses", async () => {
    const project = await createProject(t, owner);
    const noEvent = await page(t, "POST", `/projects/${project.id}/notifications`, {
      session: owner,
      form: { kind: "slack", url: `${receiver.url}/x` },
    });
    expect(noEvent.status).toBe(400);
    expect(noEvent.text).toContain("Choose at least one event.");
    const badUrl = await page(t, "POST", `/projects/${project.id}/notifications`, {
      session: owner,
      form: { kind: "discord", url: "https://user:pw@example.com/x", on: ["failed"] },
    });
    expect(badUrl.status).toBe(400);
    expect(badUrl.text).toContain("without a user name or password");
    // What was chosen stays chosen.
    expect(badUrl.text).toMatch(/value="failed" checked=""/);
    const kind = await page(t, "POST", `/projects/${project.id}/notifications`, {
      session: owner,
      form: { kind: "irc", url: `${receiver.url}/x`, on: ["failed"] },
    });
    expect(kind.status).toBe(400);
    expect(kind.text).toContain("Choose where to send.");
    const badEvent = await page(t, "POST", `/projects/${project.id}/notifications`, {
      session: owner,
      form: { kind: "slack", url: `${receiver.url}/x`, on: ["exploded"] },
    });
    expect(badEvent.status).toBe(400);
    expect(await apiList(project.id, "notifications")).toEqual([]);
    const strict = await makeTestApp({ config: { HANGAR_OUTBOUND_ALLOW: "" } });
    const strictOwner = (await completeLocalSetup(strict)).ownerToken;
    const strictProject = await createProject(strict, strictOwner);
    const guarded = await page(strict, "POST", `/projects/${strictProject.id}/notifications`, {
      session: strictOwner,
      form: { kind: "webhook", url: `${receiver.url}/x`, on: ["failed"] },
    });
    expect(guarded.status).toBe(400);
    expect(guarded.text).toContain("HANGAR_OUTBOUND_ALLOW");
    expect(guarded.text).not.toMatch(/whsec_[A-Za-z0-9+/=]{20,}/);
  });
});

describe("POST /projects/{id}/notifications/{nid}/test and /delete", () => {
  it("sends a signed test the receiver verifies, and shows the outcome, a failure too", async () => {
    const project = await createProject(t, owner);
    const path = `/test-${crypto.randomUUID()}`;
    const created = await t.call("POST", `/v1/projects/${project.id}/notifications`, {
      token: owner,
      body: { kind: "webhook", url: `${receiver.url}${path}`, on: ["failed"] },
    });
    const nid: string = created.body.id;
    const res = await page(t, "POST", `/projects/${project.id}/notifications/${nid}/test`, { session: developer });
    expect(res.status).toBe(303);
    expect(res.location).toBe(`/projects/${project.id}#notification-${nid}`);
    const got = receiver.requests.filter((r) => r.path === path);
    expect(got).toHaveLength(1);
    const verified = new Webhook(created.body.secret).verify(got[0]!.body, got[0]!.headers as Record<string, string>) as Json;
    expect(verified.type).toBe("build.succeeded");
    const shown = await page(t, "GET", `/projects/${project.id}`, { session: developer, cookies: res.setCookies.map((c) => c.split(";")[0]!) });
    expect(shown.text).toContain("Test message delivered (HTTP 200).");
    const table = shown.text.slice(shown.text.indexOf(`id="notification-deliveries-${nid}"`));
    expect(table).toContain("test message");
    expect(table).toMatch(/badge-ok">delivered</);

    receiver.respond = (r) => (r.path === path ? 500 : 200);
    try {
      const failed = await page(t, "POST", `/projects/${project.id}/notifications/${nid}/test`, { session: owner });
      const page2 = await page(t, "GET", `/projects/${project.id}`, { session: owner, cookies: failed.setCookies.map((c) => c.split(";")[0]!) });
      expect(page2.text).toContain("Test message not delivered: http_500 (HTTP 500).");
      expect(page2.text).toContain('class="flash flash-error"');
      const rows = page2.text.slice(page2.text.indexOf(`id="notification-deliveries-${nid}"`));
      expect(rows).toMatch(/badge-bad">failed</);
    } finally {
      receiver.respond = () => 200;
    }
  });

  it("refuses a qa_viewer's test and delete (403), 404 for an unknown target, deletes for a builder", async () => {
    const project = await createProject(t, owner);
    const path = `/qa-${crypto.randomUUID()}`;
    const created = await t.call("POST", `/v1/projects/${project.id}/notifications`, {
      token: owner,
      body: { kind: "slack", url: `${receiver.url}${path}`, on: ["failed"] },
    });
    const nid: string = created.body.id;
    expect((await page(t, "POST", `/projects/${project.id}/notifications/${nid}/test`, { session: viewer })).status).toBe(403);
    expect(receiver.requests.filter((r) => r.path === path)).toHaveLength(0);
    expect((await page(t, "POST", `/projects/${project.id}/notifications/${nid}/delete`, { session: viewer })).status).toBe(403);
    expect((await page(t, "POST", `/projects/${project.id}/notifications/nope/test`, { session: owner })).status).toBe(404);
    expect((await page(t, "POST", `/projects/${project.id}/notifications/nope/delete`, { session: owner })).status).toBe(404);
    expect(await apiList(project.id, "notifications")).toHaveLength(1);
    const done = await page(t, "POST", `/projects/${project.id}/notifications/${nid}/delete`, { session: developer });
    expect(done.status).toBe(303);
    expect(done.location).toBe(`/projects/${project.id}#notifications`);
    expect(await apiList(project.id, "notifications")).toEqual([]);
  });

  it("refuses a POST without a same-origin Origin (a cross-site form)", async () => {
    const project = await createProject(t, owner);
    const res = await page(t, "POST", `/projects/${project.id}/webhooks`, {
      session: owner,
      form: { provider: "github" },
      origin: "https://evil.example",
    });
    expect(res.status).toBe(403);
    expect(await apiList(project.id, "webhooks")).toEqual([]);
  });
});
