// The pipeline templates page: every template is a pipeline file the validate endpoint accepts, shown escaped in
// a <pre> with a copy button, readable by every signed-in user and linked from the project page.
import { describe, expect, it } from "vitest";
import { PIPELINE_TEMPLATES } from "../../src/web/pipeline-templates.ts";
import { makeTestApp } from "../helpers/app.ts";
import { createProject } from "../helpers/builds.ts";
import { completeLocalSetup, userWithRole } from "../helpers/factories.ts";
import { page } from "../helpers/web.ts";

/** What the renderer writes for a text node's characters. */
function escapeHtml(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;");
}

describe("pipeline templates", () => {
  it("each template validates as a pipeline file, with the pipelines it names", async () => {
    const t = await makeTestApp();
    const { ownerToken } = await completeLocalSetup(t);
    const project = await createProject(t, ownerToken, { config_path: ".hangar.yml" });
    const expectedPipelines: Record<string, string[]> = {
      ios: ["ios"],
      android: ["android"],
      flutter: ["flutter-android", "flutter-ios"],
      "react-native": ["rn-android", "rn-ios"],
    };
    expect(PIPELINE_TEMPLATES.map((tpl) => tpl.id)).toEqual(["ios", "android", "flutter", "react-native"]);
    for (const tpl of PIPELINE_TEMPLATES) {
      const res = await t.call("POST", `/v1/projects/${project.id}/pipeline-config/validate`, { token: ownerToken, body: { content: tpl.text } });
      expect(res.status, tpl.id).toBe(200);
      expect(res.body, `${tpl.id}: ${JSON.stringify(res.body.issues)}`).toMatchObject({ ok: true });
      expect(res.body.pipelines, tpl.id).toEqual(expectedPipelines[tpl.id]);
      expect(tpl.text).not.toMatch(/^\s*cache:/m);
    }
    // The checks the validator makes are strict: the same text with an unknown key is refused.
    const broken = PIPELINE_TEMPLATES[1]!.text.replace("    cancel_previous: true\n", '    cancel_previous: true\n    cache: ["~/.gradle"]\n');
    const refused = await t.call("POST", `/v1/projects/${project.id}/pipeline-config/validate`, { token: ownerToken, body: { content: broken } });
    expect(refused.body.ok).toBe(false);
  });

  it("shows every template escaped in a <pre> with a copy button, to every signed-in user; the project page links to it", async () => {
    const t = await makeTestApp();
    const { ownerToken } = await completeLocalSetup(t);
    const project = await createProject(t, ownerToken);
    const { token: qaToken } = await userWithRole(t, "qa_viewer");

    const res = await page(t, "GET", "/templates", { session: qaToken });
    expect(res.status).toBe(200);
    for (const tpl of PIPELINE_TEMPLATES) {
      expect(res.text).toContain(`<pre class="pipeline-template" id="template-${tpl.id}">${escapeHtml(tpl.text)}</pre>`);
      expect(res.text).toContain(`data-copy="#template-${tpl.id}"`);
      expect(res.text).toContain(escapeHtml(tpl.summary));
    }
    // The texts hold characters HTML would read ("&&", quotes, "<" nowhere raw): none reaches the page unescaped.
    expect(PIPELINE_TEMPLATES.some((tpl) => tpl.text.includes("&&"))).toBe(true);
    expect(res.text).not.toContain("cd android && ./gradlew");

    const anonymous = await page(t, "GET", "/templates");
    expect(anonymous.status).toBe(303);
    expect(anonymous.location).toMatch(/^\/login/);
    const projectPage = await page(t, "GET", `/projects/${project.id}`, { session: qaToken });
    expect(projectPage.text).toContain('<a href="/templates">Start from a template</a>');
  });
});
