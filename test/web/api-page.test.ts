import { describe, expect, it } from "vitest";
import { makeTestApp } from "../helpers/app.ts";
import { completeLocalSetup } from "../helpers/factories.ts";
import { page } from "../helpers/web.ts";

/** The text of an HTML fragment, as a reader sees it (tags dropped, the entities the renderer writes decoded). */
function text(html: string): string {
  return html
    .replace(/<[^>]+>/g, "")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&");
}

describe("GET /api (the API reference page)", () => {
  it("lists every operation of /v1/openapi.json by area with its method, path, summary, access, request and responses", async () => {
    const t = await makeTestApp();
    const { ownerToken } = await completeLocalSetup(t);
    const doc = (await t.call("GET", "/v1/openapi.json")).body;
    const res = await page(t, "GET", "/api");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/html");
    expect(res.headers.get("content-security-policy")).toContain("script-src");
    expect(res.text).toContain('href="/v1/openapi.json"');

    // One row per documented operation (its id anchors the row), with its method and path and summary.
    let rows = 0;
    for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, { operationId: string; summary: string }>>)) {
      for (const [method, op] of Object.entries(ops)) {
        const start = res.text.indexOf(`<tr id="${op.operationId}">`);
        expect(start, `${method} ${path} has a row`).toBeGreaterThan(-1);
        const row = text(res.text.slice(start, res.text.indexOf("</tr>", start)));
        expect(row).toContain(`${method.toUpperCase()} ${path}`);
        expect(row).toContain(op.summary);
        rows++;
      }
    }
    expect(rows).toBeGreaterThan(75);
    expect(res.text.match(/<tr id="/g)?.length).toBe(rows);

    // Grouped by area, each a section with a heading and an anchor in the area nav.
    for (const [id, title] of [
      ["api-setup", "Setup"],
      ["api-builds", "Builds and logs"],
      ["api-jobs", "Runner jobs (runner token)"],
    ]) {
      expect(res.text).toContain(`<section class="card" id="${id}"`);
      expect(res.text).toContain(`<a href="#${id}">${title}</a>`);
    }

    // Access and schema summaries come from the document: roles, a required request field, an answer's fields.
    const rowOf = (operationId: string) => {
      const start = res.text.indexOf(`<tr id="${operationId}">`);
      return text(res.text.slice(start, res.text.indexOf("</tr>", start)));
    };
    const register = rowOf("post_runners_register");
    expect(register).toContain("user session: owner, admin");
    expect(register).toContain("{name, capabilities, trust}");
    expect(register).toMatch(
      /200 \{id, name, status, capabilities, trust, last_heartbeat_at, free_disk_bytes, low_disk, registered_by, created_at, updated_at, token\}/,
    );
    expect(register).toContain("401 missing_auth, invalid_session");
    const trigger = rowOf("post_projects_project_id_builds");
    expect(trigger).toContain("pipeline_id*");
    expect(trigger).toContain("user session: owner, admin, developer");
    expect(trigger).toContain("422 branch_not_found");
    expect(rowOf("get_public_setup_status")).toContain("public");
    expect(rowOf("post_runners_runner_id_claim")).toContain("?wait");
    expect(rowOf("post_runners_runner_id_claim")).toContain("204 Nothing to build");
    expect(rowOf("get_artifacts_artifact_id_icon")).toContain("200 image/png");

    // Every signed-in page links to it (and to the document) from its footer.
    const builds = await page(t, "GET", "/builds", { session: ownerToken });
    expect(builds.status).toBe(200);
    expect(builds.text).toMatch(/<footer class="page-foot"><a href="\/api">API reference<\/a>.*<a href="\/v1\/openapi.json">/s);
  });
});
