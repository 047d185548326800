import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ROLES } from "../../http/middleware/auth.ts";
import { Section } from "../components.tsx";
import { Layout } from "../layout.tsx";
import { PIPELINE_TEMPLATES } from "../pipeline-templates.ts";
import { pageContext, renderPage, requireBrowserUser } from "../session.tsx";

/** Pipeline file templates (docs/pipelines.md): read-only text to copy into a repository's `.hangar.yml`. */
export function templatePages(deps: AppDeps) {
  const readers = requireBrowserUser(deps, { roles: ROLES.everyone });
  return new Hono<AppEnv>().get("/templates", readers, (c) =>
    renderPage(
      c,
      <Layout ctx={pageContext(c, deps)} title="Pipeline templates">
        <h1>Pipeline templates</h1>
        <p>
          Copy one into <code>.hangar.yml</code> at the root of your repository and commit it: a project reads its pipelines from that file at each
          build's commit. Check your edits with <strong>Validate a pipeline file</strong> on the project page.
        </p>
        <nav aria-label="Templates">
          <ul>
            {PIPELINE_TEMPLATES.map((t) => (
              <li>
                <a href={`#${t.id}`}>{t.title}</a>
              </li>
            ))}
          </ul>
        </nav>
        {PIPELINE_TEMPLATES.map((t) => (
          <Section title={t.title} id={t.id} description={t.summary}>
            <pre class="pipeline-template" id={`template-${t.id}`}>
              {t.text}
            </pre>
            <button type="button" class="btn btn-secondary copy-btn" data-copy={`#template-${t.id}`} hidden>
              Copy
            </button>
          </Section>
        ))}
      </Layout>,
    ),
  );
}
