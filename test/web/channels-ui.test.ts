// The Channels section of the project page and the channel page (docs/spec.md §18), through the pages' own forms.
import { eq } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { pipelines } from "../../src/db/schema/index.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { artifactWorld, type ArtifactWorld } from "../helpers/artifact-world.ts";
import { userWithRole } from "../helpers/factories.ts";
import { page } from "../helpers/web.ts";

describe("channels in the UI", () => {
  let t: TestApp;
  let w: ArtifactWorld;
  let pipelineId: string;
  let qa: string;
  beforeAll(async () => {
    t = await makeTestApp();
    w = await artifactWorld(t);
    pipelineId = (await t.deps.db.select().from(pipelines).where(eq(pipelines.projectId, w.projectId)).get())!.id;
    qa = (await userWithRole(t, "qa_viewer")).token;
  });

  it("a builder creates a channel and adds a tester, whose link is shown once to copy; a qa_viewer reads only", async () => {
    const project = await page(t, "GET", `/projects/${w.projectId}`, { session: w.ownerToken });
    expect(project.status).toBe(200);
    expect(project.text).toContain('id="channels"');
    expect(project.text).toContain(`action="/projects/${w.projectId}/channels"`);

    const created = await page(t, "POST", `/projects/${w.projectId}/channels`, {
      session: w.ownerToken,
      form: { name: `<b>beta</b>`, pipeline_id: pipelineId, branches: "main, release/*", platforms: ["android"] },
    });
    expect(created.status, created.text).toBe(303);
    const channelPath = created.location!;
    expect(channelPath).toMatch(new RegExp(`^/projects/${w.projectId}/channels/[0-9a-f-]{36}$`));
    const channelId = channelPath.split("/").pop();
    const api = await t.call("GET", `/v1/projects/${w.projectId}/channels/${channelId}`, { token: w.ownerToken });
    expect(api.body).toMatchObject({ name: "<b>beta</b>", branches: ["main", "release/*"], platforms: ["android"] });

    const added = await page(t, "POST", `${channelPath}/testers`, { session: w.ownerToken, form: { email: "tess@example.com", name: "Tess" } });
    expect(added.status).toBe(200);
    expect(added.headers.get("referrer-policy")).toBe("no-referrer");
    const link = /id="tester-page-url" readonly="" value="([^"]+)"/.exec(added.text)?.[1];
    expect(link).toMatch(/^http:\/\/localhost\/apps\/[A-Za-z0-9_-]{43}$/);
    expect(added.text).toContain("&lt;b&gt;beta&lt;/b&gt;");
    expect(added.text).not.toContain("<b>beta</b>");

    // The link is not on the page again.
    const again = await page(t, "GET", channelPath, { session: qa });
    expect(again.status).toBe(200);
    expect(again.text).toContain("tess@example.com");
    expect(again.text).not.toContain(link!);
    expect(again.text).not.toContain('id="add-tester"');
    const refused = await page(t, "POST", `${channelPath}/testers`, { session: qa, form: { email: "x@example.com" } });
    expect(refused.status).toBe(403);
    const bad = await page(t, "POST", `${channelPath}/testers`, { session: w.ownerToken, form: { email: "nope" } });
    expect(bad.status).toBe(400);

    const testerId = (await t.call("GET", `/v1/projects/${w.projectId}/channels/${channelId}/testers`, { token: qa })).body[0].id;
    const removed = await page(t, "POST", `${channelPath}/testers/${testerId}/delete`, { session: w.ownerToken });
    expect(removed.status).toBe(303);
    expect((await page(t, "GET", new URL(link!).pathname)).status).toBe(404);
    const deleted = await page(t, "POST", `${channelPath}/delete`, { session: w.ownerToken });
    expect(deleted.status).toBe(303);
    expect((await page(t, "GET", channelPath, { session: qa })).status).toBe(404);
  });
});
