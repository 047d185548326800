// Test results and log search in the UI (docs/test-reports.md, docs/log-search.md): the Tests section of a build
// page, the log-search results of the Builds page, and the flaky-tests page of a project.
import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { MARK_CLOSE, MARK_OPEN, type LogMatch } from "../../domain/logs/log-search.ts";
import { getProject } from "../../domain/projects/projects.ts";
import { flakyTests, type listBuildTests, testLabel, type TestsSummary } from "../../domain/tests/test-reports.ts";
import { ROLES } from "../../http/middleware/auth.ts";
import { EmptyState, Name, Section, Table } from "../components.tsx";
import { Layout } from "../layout.tsx";
import { pageContext, renderPage, requireBrowserUser } from "../session.tsx";
import { duration } from "../text.ts";

export type BuildTests = Awaited<ReturnType<typeof listBuildTests>>;

/** How many failures the build page lists (the API pages through all of them). */
export const FAILURES_SHOWN = 50;

function summaryLine(s: TestsSummary): string {
  const parts = [`${s.total} tests`, `${s.passed} passed`, `${s.failed} failed`, `${s.errored} errored`, `${s.skipped} skipped`];
  return `${parts.join(" · ")} · ${duration(Math.round(s.duration_ms / 1000))}`;
}

/** The build page's Tests section: the summary, each failure with its message and output, the reports' fate. */
export function TestsSection(props: { projectId: string; tests: BuildTests; failures: BuildTests["tests"] }) {
  const { summary, reports } = props.tests;
  const failedCount = summary.failed + summary.errored;
  return (
    <Section title="Tests" id="tests">
      <p id="tests-summary" class={failedCount > 0 ? "tests-bad" : "tests-ok"}>
        {summaryLine(summary)}
      </p>
      {props.failures.length > 0 ? (
        <ul class="test-failures" id="test-failures">
          {props.failures.map((t) => (
            <li>
              <details>
                <summary>
                  <span class={`badge badge-${t.status === "errored" ? "bad" : "bad"}`}>{t.status}</span>{" "}
                  <strong>
                    <Name value={testLabel(t.classname, t.name)} />
                  </strong>
                  {t.message ? (
                    <>
                      {" — "}
                      <span class="test-message">{t.message}</span>
                    </>
                  ) : null}
                </summary>
                {t.output ? <pre class="test-output">{t.output}</pre> : <p class="muted">No output was reported.</p>}
              </details>
            </li>
          ))}
        </ul>
      ) : null}
      {failedCount > props.failures.length ? (
        <p class="muted">
          {failedCount - props.failures.length} more failures: see <code>GET /v1/builds/…/tests?status=failed</code>.
        </p>
      ) : null}
      {reports
        .filter((r) => r.status !== "parsed")
        .map((r) => (
          <p class="muted report-note">
            A report was {r.status}: {r.message}
          </p>
        ))}
      <p>
        <a href={`/projects/${props.projectId}/flaky-tests`}>Flaky tests of this project</a>
      </p>
    </Section>
  );
}

/** A matched line with its matched terms in <mark>: the text is split on the markers and every part escaped. */
function Highlighted(props: { marked: string }) {
  const parts: Array<{ text: string; hit: boolean }> = [];
  for (const piece of props.marked.split(MARK_OPEN)) {
    const close = piece.indexOf(MARK_CLOSE);
    if (close < 0) parts.push({ text: piece, hit: false });
    else
      parts.push(
        { text: piece.slice(0, close), hit: true },
        {
          text: piece
            .slice(close + 1)
            .split(MARK_CLOSE)
            .join(""),
          hit: false,
        },
      );
  }
  return <code class="search-line">{parts.map((p) => (p.hit ? <mark>{p.text}</mark> : p.text))}</code>;
}

/** The log search results on the Builds page. */
export function SearchResults(props: {
  q: string;
  matches: Array<LogMatch & { marked: string }> | null;
  error: string | null;
  projectName: (id: string) => string | undefined;
}) {
  return (
    <Section title="Log matches" id="search-results">
      {props.error ? (
        <p class="error" role="alert">
          {props.error}
        </p>
      ) : props.matches && props.matches.length === 0 ? (
        <p class="muted">No log line matches “{props.q}”.</p>
      ) : (
        <ol class="search-matches">
          {(props.matches ?? []).map((m) => (
            <li>
              <a href={`/builds/${m.build_id}#L${m.line_number}`}>
                <Name value={props.projectName(m.project_id)} fallback="(deleted)" /> #{m.build_number}, line {m.line_number}
              </a>{" "}
              <Highlighted marked={m.marked} />
            </li>
          ))}
        </ol>
      )}
    </Section>
  );
}

/** /projects/{id}/flaky-tests: each flaky test, why, and the builds that show it. */
export function testPages(deps: AppDeps) {
  const readers = requireBrowserUser(deps, { roles: ROLES.everyone });
  return new Hono<AppEnv>().get("/projects/:project_id/flaky-tests", readers, async (c) => {
    const project = await getProject(deps, c.req.param("project_id"), { includeDeleted: true });
    const { tests } = await flakyTests(deps, project.id);
    const why = { same_commit: "passed and failed on one commit", flips: "flipped 3 or more times in its last 20 runs on a branch" } as const;
    return renderPage(
      c,
      <Layout ctx={pageContext(c, deps)} title={`Flaky tests · ${project.name}`}>
        <h1>
          Flaky tests · <Name value={project.name} />
        </h1>
        {tests.length === 0 ? (
          <EmptyState title="No flaky test found">
            <p>A test is flaky here when it passed and failed on one commit, or flipped at least 3 times in its last 20 runs on a branch.</p>
          </EmptyState>
        ) : (
          <Table headers={["Test", "Why", "Evidence"]} id="flaky-tests">
            {tests.map((t) => (
              <tr>
                <td>
                  <Name value={testLabel(t.classname, t.name)} />
                </td>
                <td>{t.reasons.map((r) => why[r]).join("; ")}</td>
                <td>
                  <ul class="evidence">
                    {t.evidence.map((e) => (
                      <li>
                        <a href={`/builds/${e.build_id}#tests`}>#{e.build_number}</a>{" "}
                        <span class={`badge badge-${e.status === "passed" ? "ok" : "bad"}`}>{e.status}</span> <Name value={e.branch} />{" "}
                        <code>{e.commit_sha.slice(0, 10)}</code>
                      </li>
                    ))}
                  </ul>
                </td>
              </tr>
            ))}
          </Table>
        )}
      </Layout>,
    );
  });
}
