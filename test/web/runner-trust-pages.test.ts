// The Runners and project pages on runner trust (docs/runner-isolation.md): which runner takes which builds, the
// warning for a protected runner without isolation, the --run-as start, the trust and max_jobs forms, and the
// project's warning when fork pull requests have no open runner to go to.
import { describe, expect, it } from "vitest";
import { makeTestApp } from "../helpers/app.ts";
import { createPipeline, createProject } from "../helpers/builds.ts";
import { completeLocalSetup, userWithRole } from "../helpers/factories.ts";
import { page } from "../helpers/web.ts";

const HOSTILE = `<script>alert("x")</script>\u202Egpj.exe`;

async function world() {
  const t = await makeTestApp();
  const { ownerToken } = await completeLocalSetup(t);
  return { t, ownerToken };
}

/** The table row of one runner, as HTML. */
function rowOf(html: string, runnerId: string): string {
  return new RegExp(`<tr data-runner="${runnerId}">([\\s\\S]*?)</tr>`).exec(html)?.[1] ?? "";
}

describe("/runners and trust", () => {
  it("warns about a protected runner without isolation, not about an isolated or an open one; escapes its name", async () => {
    const { t, ownerToken } = await world();
    const reg = (name: string, trust: string) =>
      t.call("POST", "/v1/runners/register", { token: ownerToken, body: { name, trust, capabilities: { platforms: ["ios"] } } });
    const exposed = (await reg(`${HOSTILE}"><img src=x onerror=alert(1)>`, "protected")).body;
    const isolated = (await reg("isolated-mac", "protected")).body;
    const open = (await reg("fork-builder", "open")).body;
    for (const [r, isolation] of [
      [exposed, "none"],
      [isolated, "user"],
      [open, "none"],
    ] as const) {
      const res = await t.call("PATCH", `/v1/runners/${r.id}`, { token: r.token, body: { capabilities: { platforms: ["ios"], isolation } } });
      expect(res.status).toBe(200);
    }
    const html = (await page(t, "GET", "/runners", { session: ownerToken })).text;
    expect(html).toContain('id="isolation-warning"');
    const warning = /<div class="flash flash-warn" role="alert" id="isolation-warning">([\s\S]*?)<\/div>/.exec(html)?.[1] ?? "";
    expect(warning).toContain("any build on it can read its token");
    expect(warning).toContain("--run-as BUILD_USER --token-file FILE");
    expect(warning).toContain("&lt;U+202E&gt;gpj.exe");
    expect(warning).not.toContain("isolated-mac");
    expect(warning).not.toContain("fork-builder");
    expect(html).not.toContain("<script>alert");
    expect(html).not.toContain("<img src=x");
    expect(html).not.toContain("\u202E");

    expect(rowOf(html, exposed.id)).toContain("any build on it can read its token");
    expect(rowOf(html, isolated.id)).not.toContain("any build on it can read its token");
    expect(rowOf(html, open.id)).not.toContain("any build on it can read its token");
    expect(rowOf(html, isolated.id)).toMatch(/runner-takes">protected builds and open builds</);
    expect(rowOf(html, open.id)).toMatch(/runner-takes">open builds and fork pull requests</);
    expect(rowOf(html, isolated.id)).toMatch(/runner-isolation">user</);

    // Once it runs with --run-as (it reports `user`), the warning goes.
    await t.call("PATCH", `/v1/runners/${exposed.id}`, { token: exposed.token, body: { capabilities: { platforms: ["ios"], isolation: "user" } } });
    expect((await page(t, "GET", "/runners", { session: ownerToken })).text).not.toContain('id="isolation-warning"');
  });

  it("registers an open runner from the form and gives the --run-as start with a token file", async () => {
    const { t, ownerToken } = await world();
    const res = await page(t, "POST", "/runners/register", { session: ownerToken, form: { name: "forks", platforms: ["android"], trust: "open" } });
    expect(res.status).toBe(200);
    const token = /id="runner-token" readonly="" value="([^"]+)"/.exec(res.text)?.[1];
    const runners = (await t.call("GET", "/v1/runners", { token: ownerToken })).body;
    expect(runners).toHaveLength(1);
    expect(runners[0]).toMatchObject({ name: "forks", trust: "open" });
    expect(res.text).toContain(
      `sudo npx hangar runner --url http://localhost --id ${runners[0].id} --token-file /etc/hangar/runner.token --run-as hangar-build`,
    );
    expect(res.text).toContain(`printf &#39;%s\\n&#39; ${token} | sudo tee /etc/hangar/runner.token`);
    // A forged trust value registers a protected runner (the default), never anything else.
    await page(t, "POST", "/runners/register", { session: ownerToken, form: { name: "odd", platforms: ["android"], trust: "fork" } });
    const odd = (await t.call("GET", "/v1/runners", { token: ownerToken })).body.find((r: { name: string }) => r.name === "odd");
    expect(odd).toMatchObject({ name: "odd", trust: "protected" });
  });

  it("lets an admin change trust and max_jobs through the forms; a developer gets 403", async () => {
    const { t, ownerToken } = await world();
    const admin = await userWithRole(t, "admin");
    const r = (
      await t.call("POST", "/v1/runners/register", {
        token: ownerToken,
        body: { name: "mini", capabilities: { platforms: ["ios"], isolation: "user" } },
      })
    ).body;
    const list = (await page(t, "GET", "/runners", { session: admin.token })).text;
    expect(list).toContain(`action="/runners/${r.id}/trust"`);
    expect(list).toContain(`action="/runners/${r.id}/max-jobs"`);

    const demote = await page(t, "POST", `/runners/${r.id}/trust`, { session: admin.token, form: { trust: "open" } });
    expect([demote.status, demote.location]).toEqual([303, "/runners"]);
    expect((await t.call("GET", "/v1/runners", { token: ownerToken })).body[0].trust).toBe("open");
    const capped = await page(t, "POST", `/runners/${r.id}/max-jobs`, { session: admin.token, form: { max_jobs: "3" } });
    expect(capped.status).toBe(303);
    expect((await t.call("GET", "/v1/runners", { token: ownerToken })).body[0].capabilities).toEqual({
      platforms: ["ios"],
      isolation: "user",
      max_jobs: 3,
    });
    for (const bad of ["0", "-1", "2.5", "many", "1001"]) {
      expect((await page(t, "POST", `/runners/${r.id}/max-jobs`, { session: admin.token, form: { max_jobs: bad } })).status).toBe(303);
      expect((await t.call("GET", "/v1/runners", { token: ownerToken })).body[0].capabilities.max_jobs).toBe(3);
    }
    await page(t, "POST", `/runners/${r.id}/max-jobs`, { session: admin.token, form: { max_jobs: "" } });
    expect((await t.call("GET", "/v1/runners", { token: ownerToken })).body[0].capabilities).toEqual({ platforms: ["ios"], isolation: "user" });
    const badTrust = await page(t, "POST", `/runners/${r.id}/trust`, { session: admin.token, form: { trust: "trusted" } });
    expect(badTrust.status).toBe(303);
    expect((await t.call("GET", "/v1/runners", { token: ownerToken })).body[0].trust).toBe("open");

    const dev = await userWithRole(t, "developer");
    expect((await page(t, "POST", `/runners/${r.id}/trust`, { session: dev.token, form: { trust: "protected" } })).status).toBe(403);
    expect((await page(t, "POST", `/runners/${r.id}/max-jobs`, { session: dev.token, form: { max_jobs: "9" } })).status).toBe(403);
    expect((await t.call("GET", "/v1/runners", { token: ownerToken })).body[0].trust).toBe("open");
  });
});

describe("the project page and trust", () => {
  it("says which runners take its builds and warns when fork pull requests have no open runner", async () => {
    const { t, ownerToken } = await world();
    const project = await createProject(t, ownerToken);
    await createPipeline(t, ownerToken, project.id, { platform: "android", triggers: [{ event: "pull_request" }] });
    await t.call("POST", "/v1/runners/register", { token: ownerToken, body: { name: `${HOSTILE}-mac`, capabilities: { platforms: ["ios"] } } });
    let html = (await page(t, "GET", `/projects/${project.id}`, { session: ownerToken })).text;
    expect(html).toContain('id="project-runners"');
    expect(html).toContain("Every build (the project holds no signing material or secret)");
    // No webhook yet: pull requests do not arrive, nothing to warn about.
    expect(html).not.toContain('id="no-open-runner"');

    expect((await t.call("POST", `/v1/projects/${project.id}/webhooks`, { token: ownerToken, body: { provider: "github" } })).status).toBe(200);
    await t.call("PUT", `/v1/projects/${project.id}/secrets/KEY`, { token: ownerToken, body: { value: "v" } });
    html = (await page(t, "GET", `/projects/${project.id}`, { session: ownerToken })).text;
    expect(html).toContain('id="no-open-runner"');
    expect(html).toContain("protected runners only:");
    expect(html).toContain("&lt;U+202E&gt;gpj.exe-mac");
    expect(html).not.toContain("<script>alert");

    await t.call("POST", "/v1/runners/register", {
      token: ownerToken,
      body: { name: "fork-builder", trust: "open", capabilities: { platforms: ["android"] } },
    });
    html = (await page(t, "GET", `/projects/${project.id}`, { session: ownerToken })).text;
    expect(html).not.toContain('id="no-open-runner"');
    expect(/open runners only: ([\s\S]*?)<\/dd>/.exec(html)?.[1]).toContain("fork-builder");
  });
});
