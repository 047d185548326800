import { Hono, type Context } from "hono";
import { z } from "zod";
import { BUILD_STATUSES } from "../../db/schema/constants.ts";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { createDownloadLink, listBuildArtifacts } from "../../domain/artifacts/artifacts.ts";
import { isFinalStatus } from "../../domain/builds/build-machine.ts";
import { listPublishes } from "../../domain/publishing/publisher.ts";
import { cancelBuild, getBuild, listBuilds, queueInfo, rerunBuild, type BuildRow } from "../../domain/builds/builds.ts";
import { readLogBefore, readLogTail } from "../../domain/logs/log-view.ts";
import { readLog } from "../../domain/logs/logs.ts";
import { setBuildPinned } from "../../domain/retention/pins.ts";
import { nameDirectory, type NameDirectory } from "../../domain/projects/projects.ts";
import { listRunners } from "../../domain/runners/runners.ts";
import { ROLES } from "../../http/middleware/auth.ts";
import { signingHealth, type SigningHealthItem } from "../../domain/signing/health.ts";
import { ApiError } from "../../errors.ts";
import { Button, EmptyState, Name, PostForm, Section, Select, StatusBadge, Table, Time, Field } from "../components.tsx";
import { setFlash } from "../flash.ts";
import { Layout, type PageCtx } from "../layout.tsx";
import { logStylesheetUrl, logViewerUrl } from "../log-viewer.ts";
import { ArtifactInstall } from "./install.tsx";
import { pageContext, renderPage, requireBrowserUser } from "../session.tsx";
import { formatBytes, relativeTime } from "../text.ts";
import { buildUpdate, liveBuildEvents } from "../live-log.ts";
import { searchLogs, type LogMatch } from "../../domain/logs/log-search.ts";
import { listBuildTests } from "../../domain/tests/test-reports.ts";
import { FAILURES_SHOWN, SearchResults, TestsSection, type BuildTests } from "./tests.tsx";
import { BuildCachesSection } from "./build-caches.tsx";
import { duration } from "../text.ts";

// Built on first use (z.lazy), not at every daemon start (docs/benchmarks.md).
const listQuery = z.lazy(() =>
  z.object({
    project_id: z.string().max(100).optional(),
    pipeline_id: z.string().max(100).optional(),
    branch: z.string().max(255).optional(),
    status: z.enum(BUILD_STATUSES).optional().catch(undefined),
    cursor: z.string().max(100).optional(),
    /** Log search (docs/log-search.md): the other filters narrow it. */
    q: z.string().max(500).optional(),
  }),
);

/** "1 min 5 s" for a span in seconds. */

function buildDuration(b: BuildRow, now: number): string | null {
  if (b.startedAt === null) return null;
  return duration((b.finishedAt ?? now) - b.startedAt);
}

function shortSha(sha: string): string {
  return sha.slice(0, 10);
}

function RelTime(props: { at: number | null; now: number }) {
  if (props.at === null) return <span class="muted">–</span>;
  return <Time at={props.at} now={props.now} />;
}

function FiltersForm(props: { names: NameDirectory; query: z.infer<typeof listQuery> }) {
  const projects = [...props.names.projects.values()].filter((p) => !p.deleted);
  const pipelines = [...props.names.pipelines.values()].filter(
    (p) => !p.deleted && (!props.query.project_id || p.projectId === props.query.project_id),
  );
  const statusOptions = [
    { value: "", label: "Any status" },
    ...BUILD_STATUSES.filter((s) => s !== "scheduled").map((s) => ({ value: s, label: s.replace(/_/g, " ") })),
  ];
  return (
    <form method="get" action="/builds" class="filters card" aria-label="Filter builds">
      <Select
        label="Project"
        name="project_id"
        value={props.query.project_id ?? ""}
        options={[{ value: "", label: "All projects" }, ...projects.map((p) => ({ value: p.id, label: p.name }))]}
      />
      <Select
        label="Pipeline"
        name="pipeline_id"
        value={props.query.pipeline_id ?? ""}
        options={[
          { value: "", label: "All pipelines" },
          ...pipelines.map((p) => ({ value: p.id, label: `${props.names.projects.get(p.projectId)?.name ?? "?"} / ${p.name}` })),
        ]}
      />
      <Field label="Branch" name="branch" value={props.query.branch ?? ""} placeholder="main" />
      <Select label="Status" name="status" value={props.query.status ?? ""} options={statusOptions} />
      <div class="actions">
        <Button>Filter</Button>
        <Button variant="link" href="/builds">
          Clear
        </Button>
      </div>
    </form>
  );
}

/** One line on the Builds page when a certificate or profile needs attention (docs/signing.md). */
function SigningSummary(props: { items: SigningHealthItem[]; names: NameDirectory }) {
  const urgent = props.items.filter((i) => i.state !== "ok");
  if (urgent.length === 0) return null;
  const expired = urgent.filter((i) => i.state === "expired").length;
  const expiring = urgent.length - expired;
  const projectIds = [...new Set(urgent.map((i) => i.project_id))];
  return (
    <p class={expired > 0 ? "flash flash-error" : "flash flash-info"} id="signing-summary" role="status">
      Signing: {expired > 0 ? `${expired} expired` : ""}
      {expired > 0 && expiring > 0 ? ", " : ""}
      {expiring > 0 ? `${expiring} expiring within 30 days` : ""} in{" "}
      {projectIds.map((id, i) => (
        <>
          {i > 0 ? ", " : ""}
          <a href={`/projects/${id}#credentials`}>
            <Name value={props.names.projects.get(id)?.name ?? id} />
          </a>
        </>
      ))}
      .
    </p>
  );
}

interface SearchState {
  q: string;
  matches: Array<LogMatch & { marked: string }> | null;
  error: string | null;
}

function SearchForm(props: { query: z.infer<typeof listQuery> }) {
  return (
    <form method="get" action="/builds" class="card search-form" role="search" aria-label="Search build logs">
      {(["project_id", "pipeline_id", "branch"] as const).map((k) =>
        props.query[k] ? <input type="hidden" name={k} value={props.query[k]} /> : null,
      )}
      <Field label="Search logs" name="q" type="search" value={props.query.q ?? ""} placeholder={'error "build failed" Signing*'} />
      <div class="actions">
        <Button>Search</Button>
      </div>
    </form>
  );
}

function BuildsPage(props: {
  ctx: PageCtx;
  names: NameDirectory;
  builds: BuildRow[];
  nextHref: string | null;
  query: z.infer<typeof listQuery>;
  search: SearchState | null;
  signing: SigningHealthItem[];
}) {
  const now = props.ctx.now;
  return (
    <Layout ctx={props.ctx} title="Builds" head={<link rel="stylesheet" href={logStylesheetUrl()} />}>
      <h1>Builds</h1>
      <SigningSummary items={props.signing} names={props.names} />
      <SearchForm query={props.query} />
      {props.search ? (
        <SearchResults
          q={props.search.q}
          matches={props.search.matches}
          error={props.search.error}
          projectName={(id) => props.names.projects.get(id)?.name}
        />
      ) : null}
      <FiltersForm names={props.names} query={props.query} />
      {props.builds.length === 0 ? (
        <EmptyState title="No builds here yet">
          <p>
            Trigger one from a <a href="/projects">project</a>.
          </p>
        </EmptyState>
      ) : (
        <Table headers={["Build", "Status", "Project / pipeline", "Branch", "Commit", "Trigger", "Queued", "Duration"]} id="builds">
          {props.builds.map((b) => (
            <tr>
              <td>
                <a href={`/builds/${b.id}`}>#{b.buildNumber}</a>
              </td>
              <td>
                <StatusBadge status={b.status} />
              </td>
              <td>
                <Name value={props.names.projects.get(b.projectId)?.name} fallback="(deleted)" /> /{" "}
                <Name value={props.names.pipelines.get(b.pipelineId)?.name} fallback="(deleted)" />
              </td>
              <td>
                <Name value={b.branch} />
              </td>
              <td>
                <code>{shortSha(b.commitSha)}</code>
              </td>
              <td>
                {b.triggerType === "webhook" ? "webhook" : "manual"}
                {b.triggerActor ? (
                  <>
                    {" · "}
                    <Name value={b.triggerActor} />
                  </>
                ) : null}
              </td>
              <td>
                <span title={relativeTime(b.queuedAt, now)}>{relativeTime(b.queuedAt, now)}</span>
              </td>
              <td>{buildDuration(b, now) ?? <span class="muted">–</span>}</td>
            </tr>
          ))}
        </Table>
      )}
      {props.nextHref ? (
        <p class="pager">
          <a href={props.nextHref} rel="next">
            Older builds →
          </a>
        </p>
      ) : null}
    </Layout>
  );
}

const REASON_TEXT = {
  waiting_for_runner: "Waiting for a runner that offers this platform to take it.",
  no_runner_online: "No online runner offers this platform: the build starts once one comes back online.",
  no_matching_runner: "No registered runner offers this platform: the build can never start until one does.",
  no_runner_of_trust:
    "Runners offer this platform, but none of a fitting trust: a fork's pull request needs an open runner, a build that gets credentials a protected one.",
} as const;

function QueueNote(props: { platform: string; queue: Awaited<ReturnType<typeof queueInfo>> }) {
  const q = props.queue;
  const m = q.matching_runners;
  return (
    <div class="queue-note card" id="why-queued">
      <h2>Why is it queued?</h2>
      <p>
        <strong>{REASON_TEXT[q.reason]}</strong>{" "}
        {q.reason === "no_matching_runner" ? (
          <>
            Register a runner with <code>--platform {props.platform === "any" ? "android" : props.platform}</code>.
          </>
        ) : null}
      </p>
      <p class="muted">
        Platform <code>{props.platform}</code>
        {q.position !== null ? ` · position ${q.position} in the queue` : ""} · runners offering it: {m.online} online, {m.busy} busy, {m.draining}{" "}
        draining, {m.offline} offline.
      </p>
    </div>
  );
}

interface BuildPageData {
  build: BuildRow;
  names: NameDirectory;
  runnerName: string | null;
  artifacts: Awaited<ReturnType<typeof listBuildArtifacts>>;
  queue: Awaited<ReturnType<typeof queueInfo>> | null;
  canAct: boolean;
  /** Null while the build has no test report. */
  tests: BuildTests | null;
  failures: BuildTests["tests"];
  publishes: Awaited<ReturnType<typeof listPublishes>>;
}

const STORE_NAMES = { testflight: "TestFlight", google_play: "Google Play" } as const;
/** A publish's state in the badge colours of build states. */
const PUBLISH_BADGES: Record<string, string> = {
  pending: "queued",
  uploading: "running",
  processing: "running",
  done: "succeeded",
  failed: "failed",
};

function BuildPage(props: { ctx: PageCtx } & BuildPageData) {
  const { build: b, ctx } = props;
  const now = ctx.now;
  const project = props.names.projects.get(b.projectId);
  const pipeline = props.names.pipelines.get(b.pipelineId);
  const live = !isFinalStatus(b.status);
  const update = buildUpdate(b, now);
  return (
    <Layout ctx={ctx} title={`Build #${b.buildNumber}`} head={<link rel="stylesheet" href={logStylesheetUrl()} />}>
      <h1>
        Build #{b.buildNumber} · <Name value={project?.name} fallback="(deleted project)" /> /{" "}
        <Name value={pipeline?.name} fallback="(deleted pipeline)" />{" "}
        <span id="build-status" class={`badge badge-${update.tone}`}>
          {b.status.replace(/_/g, " ")}
        </span>
        {b.pinned ? (
          <>
            {" "}
            <span class="badge badge-info" id="pinned-badge" title="Retention never deletes this build's artifacts or log">
              pinned
            </span>
          </>
        ) : null}
      </h1>
      {props.canAct ? (
        <div class="actions" id="build-actions">
          {live ? (
            <span data-while-active>
              <form method="post" action={`/builds/${b.id}/cancel`} class="inline-form" data-confirm="Cancel this build?">
                <Button variant="danger">Cancel build</Button>
              </form>
            </span>
          ) : null}
          <PostForm action={`/builds/${b.id}/rerun`} class="inline-form">
            <Button variant="secondary">Rerun</Button>
          </PostForm>
          <PostForm action={`/builds/${b.id}/${b.pinned ? "unpin" : "pin"}`} class="inline-form" id="pin-form">
            <Button variant="secondary">{b.pinned ? "Unpin" : "Pin (keep forever)"}</Button>
          </PostForm>
        </div>
      ) : null}
      <p id="finished-note" class="muted" hidden>
        The build finished. <a href={`/builds/${b.id}`}>Reload</a> for its artifacts.
      </p>
      {props.queue ? <QueueNote platform={b.platform} queue={props.queue} /> : null}
      <Section title="Details" id="details">
        <dl class="kv">
          <dt>Trigger</dt>
          <dd>
            {b.triggerType === "webhook" ? `webhook (${b.triggerEvent ?? "event"})` : "manual"}
            {b.triggerActor ? (
              <>
                {" by "}
                <Name value={b.triggerActor} />
              </>
            ) : null}
            {b.triggerRef ? (
              <>
                {" · "}
                <code>
                  <Name value={b.triggerRef} />
                </code>
              </>
            ) : null}
          </dd>
          {b.rerunOf ? (
            <>
              <dt>Rerun of</dt>
              <dd>
                <a href={`/builds/${b.rerunOf}`}>the earlier build</a>
              </dd>
            </>
          ) : null}
          <dt>Branch</dt>
          <dd>
            <Name value={b.branch} />
          </dd>
          <dt>Commit</dt>
          <dd>
            <code>{b.commitSha}</code>
          </dd>
          <dt>Runner</dt>
          <dd>{b.runnerId ? <Name value={props.runnerName} fallback={b.runnerId} /> : <span class="muted">none yet</span>}</dd>
          <dt>Queued</dt>
          <dd>
            <RelTime at={b.queuedAt} now={now} /> <span class="muted">({relativeTime(b.queuedAt, now)})</span>
          </dd>
          <dt>Started</dt>
          <dd>
            <RelTime at={b.startedAt} now={now} />
          </dd>
          <dt>Finished</dt>
          <dd>
            <RelTime at={b.finishedAt} now={now} />
          </dd>
          <dt>Duration</dt>
          <dd>{buildDuration(b, now) ?? <span class="muted">–</span>}</dd>
          {b.exitCode !== null ? (
            <>
              <dt>Exit code</dt>
              <dd>{b.exitCode}</dd>
            </>
          ) : null}
          {b.failureReason ? (
            <>
              <dt>Reason</dt>
              <dd>{b.failureReason.replace(/_/g, " ")}</dd>
            </>
          ) : null}
        </dl>
      </Section>
      <Section title="Steps" id="steps-section">
        <ol class="step-list" id="steps">
          {update.steps.length === 0 ? <li class="muted">No step has started yet.</li> : null}
          {update.steps.map((s) => (
            <li>
              <span class={`badge badge-${s.tone}`}>{s.status}</span> <span class="step-name">{neutralName(s.name)}</span>{" "}
              <span class="muted">{s.duration}</span>
            </li>
          ))}
        </ol>
      </Section>
      <BuildCachesSection build={b} />
      {props.tests ? <TestsSection projectId={b.projectId} tests={props.tests} failures={props.failures} /> : null}
      <Section title="Log" id="log-section">
        {b.logExpiredAt !== null ? (
          <p class="muted" id="log-expired">
            This build's log was deleted by the retention policy <RelTime at={b.logExpiredAt} now={now} />. Its steps and artifacts are listed here.
          </p>
        ) : (
          <>
            <div class="log-toolbar">
              <span id="log-state" class="muted" aria-live="polite"></span>
              <a href={`/builds/${b.id}/log`}>Raw log</a>
              <button type="button" class="btn btn-secondary" id="log-follow" hidden>
                Follow the end
              </button>
            </div>
            <div
              id="log"
              class="log"
              tabindex={0}
              role="log"
              aria-label="Build log"
              data-log-url={`/builds/${b.id}/log`}
              data-events-url={`/builds/${b.id}/events`}
            >
              <noscript>
                JavaScript is off: read the <a href={`/builds/${b.id}/log`}>raw log</a>.
              </noscript>
            </div>
          </>
        )}
      </Section>
      <Section title="Artifacts" id="artifacts">
        {props.artifacts.length === 0 ? (
          <p class="muted">{live ? "Artifacts appear here once the runner uploads them." : "This build has no artifacts."}</p>
        ) : (
          <Table headers={["File", "Size", ""]}>
            {props.artifacts.map((a) => (
              <tr>
                <td>
                  <Name value={a.filename} />
                </td>
                <td>{formatBytes(a.size_bytes)}</td>
                <td>
                  {a.status === "expired" ? (
                    <span class="badge badge-off" title="Deleted by the retention policy">
                      expired
                    </span>
                  ) : (
                    <div class="actions">
                      <PostForm action={`/builds/${b.id}/artifacts/${a.id}/download`} class="inline-form">
                        <Button variant="secondary">Download</Button>
                      </PostForm>
                      <ArtifactInstall artifact={a} />
                    </div>
                  )}
                </td>
              </tr>
            ))}
          </Table>
        )}
      </Section>
      {props.publishes.length > 0 ? (
        <Section title="Publishing" id="publishes" description="Uploads of this build to the stores; a store's refusal is shown in its own words.">
          <Table headers={["Store", "State", "Attempts", "Detail", "Updated"]}>
            {props.publishes.map((p) => (
              <tr data-publish={p.to}>
                <td>{STORE_NAMES[p.to]}</td>
                <td>
                  <span class={`publish-state publish-${p.state}`}>
                    <StatusBadge status={PUBLISH_BADGES[p.state] ?? p.state} label={p.state} />
                  </span>
                </td>
                <td>{p.attempts}</td>
                <td class="publish-detail">{p.detail ?? ""}</td>
                <td>
                  <Time at={p.updated_at} now={now} />
                </td>
              </tr>
            ))}
          </Table>
        </Section>
      ) : null}
      <script type="module" src={logViewerUrl()}></script>
    </Layout>
  );
}

/** Step names come from the pipeline config (a user), shown through the same neutralising as other names. */
function neutralName(name: string) {
  return <Name value={name} />;
}

function logBody(c: Context, bytes: Uint8Array, headers: Record<string, string>) {
  return c.body(new Uint8Array(bytes).buffer as ArrayBuffer, 200, {
    "Content-Type": "text/plain; charset=utf-8",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    ...headers,
  });
}

const logQuery = z.lazy(() =>
  z.object({
    tail: z.coerce
      .number()
      .int()
      .min(1)
      .max(16 * 1024 * 1024)
      .optional(),
    before: z.coerce.number().int().min(0).optional(),
    limit: z.coerce
      .number()
      .int()
      .min(1)
      .max(16 * 1024 * 1024)
      .default(1024 * 1024),
    offset: z.coerce.number().int().min(0).optional(),
  }),
);

/**
 * `/builds`, `/builds/{id}` and what the build page reads with its cookie session: the log (`/builds/{id}/log`,
 * raw or by window) and the live stream (`/builds/{id}/events`, Server-Sent Events). These live outside /v1/ on
 * purpose: /v1/ takes Bearer tokens only, and EventSource cannot send one.
 */
export function buildPages(deps: AppDeps) {
  const readers = requireBrowserUser(deps, { roles: ROLES.everyone });
  const builders = requireBrowserUser(deps, { roles: ROLES.builders });
  const canAct = (c: Context<AppEnv>) => (ROLES.builders as readonly string[]).includes(c.get("user").role);

  return new Hono<AppEnv>()
    .get("/builds", readers, async (c) => {
      const parsed = listQuery.safeParse(c.req.query());
      const query = parsed.success ? parsed.data : {};
      const clean = Object.fromEntries(Object.entries(query).filter(([, v]) => v !== undefined && v !== "")) as z.infer<typeof listQuery>;
      let page;
      try {
        page = await listBuilds(deps, { ...clean, limit: 50 });
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        page = await listBuilds(deps, { ...clean, cursor: undefined, limit: 50 });
      }
      let nextHref: string | null = null;
      if (page.nextCursor) {
        const params = new URLSearchParams(Object.entries(clean).filter(([k]) => k !== "cursor") as [string, string][]);
        params.set("cursor", page.nextCursor);
        nextHref = `/builds?${params}`;
      }
      let search: SearchState | null = null;
      const q = clean.q?.trim();
      if (q) {
        search = { q, matches: null, error: null };
        try {
          search.matches = (
            await searchLogs(deps, { q, project_id: clean.project_id, pipeline_id: clean.pipeline_id, branch: clean.branch, limit: 50 })
          ).matches;
        } catch (err) {
          if (!(err instanceof ApiError)) throw err;
          search.error = err.message;
        }
      }
      const [names, health] = await Promise.all([nameDirectory(deps), signingHealth(deps)]);
      return renderPage(
        c,
        <BuildsPage
          ctx={pageContext(c, deps)}
          names={names}
          builds={page.builds}
          nextHref={nextHref}
          query={clean}
          search={search}
          signing={health.items}
        />,
      );
    })
    .get("/builds/:build_id", readers, async (c) => {
      const build = await getBuild(deps, c.req.param("build_id"));
      const [names, artifacts, queue, runners, publishList] = await Promise.all([
        nameDirectory(deps),
        listBuildArtifacts(deps, build.id),
        build.status === "queued" ? queueInfo(deps, build) : Promise.resolve(null),
        build.runnerId ? listRunners(deps) : Promise.resolve([]),
        listPublishes(deps, build.id),
      ]);
      const runnerName = runners.find((r) => r.id === build.runnerId)?.name ?? null;
      const tests = build.testsSummary ? await listBuildTests(deps, build.id, { limit: 1 }) : null;
      const failures = tests
        ? [
            ...(await listBuildTests(deps, build.id, { status: "failed", limit: FAILURES_SHOWN })).tests,
            ...(await listBuildTests(deps, build.id, { status: "errored", limit: FAILURES_SHOWN })).tests,
          ].slice(0, FAILURES_SHOWN)
        : [];
      return renderPage(
        c,
        <BuildPage
          ctx={pageContext(c, deps)}
          build={build}
          names={names}
          artifacts={artifacts}
          queue={queue}
          runnerName={runnerName}
          canAct={canAct(c)}
          tests={tests}
          failures={failures}
          publishes={publishList}
        />,
      );
    })
    .post("/builds/:build_id/cancel", builders, async (c) => {
      const build = await cancelBuild(deps, c.get("user"), c.req.param("build_id"));
      setFlash(
        c,
        build.status === "canceled" ? "ok" : "info",
        build.status === "canceled" ? "The build was canceled." : `The build had already ${build.status.replace(/_/g, " ")}.`,
      );
      return c.redirect(`/builds/${build.id}`, 303);
    })
    .post("/builds/:build_id/pin", builders, async (c) => {
      const build = await setBuildPinned(deps, c.get("user"), c.req.param("build_id"), true);
      setFlash(c, "ok", "Pinned: retention never deletes this build's artifacts or log.");
      return c.redirect(`/builds/${build.id}`, 303);
    })
    .post("/builds/:build_id/unpin", builders, async (c) => {
      const build = await setBuildPinned(deps, c.get("user"), c.req.param("build_id"), false);
      setFlash(c, "ok", "Unpinned: the retention policy applies to this build again.");
      return c.redirect(`/builds/${build.id}`, 303);
    })
    .post("/builds/:build_id/rerun", builders, async (c) => {
      try {
        const build = await rerunBuild(deps, c.get("user"), c.req.param("build_id"));
        setFlash(c, "ok", `Build #${build.buildNumber} queued: a rerun of the same commit.`);
        return c.redirect(`/builds/${build.id}`, 303);
      } catch (err) {
        if (!(err instanceof ApiError) || err.status !== 404) throw err;
        await getBuild(deps, c.req.param("build_id"));
        setFlash(c, "error", "This build's pipeline was deleted: it cannot be rerun.");
        return c.redirect(`/builds/${c.req.param("build_id")}`, 303);
      }
    })
    .post("/builds/:build_id/artifacts/:artifact_id/download", readers, async (c) => {
      const buildId = c.req.param("build_id");
      const artifacts = await listBuildArtifacts(deps, buildId);
      if (!artifacts.some((a) => a.id === c.req.param("artifact_id"))) throw new ApiError("not_found", "no such artifact in this build");
      const link = await createDownloadLink(deps, { artifactId: c.req.param("artifact_id"), requestOrigin: new URL(c.req.url).origin });
      return c.redirect(link.url, 303);
    })
    .get("/builds/:build_id/log", readers, async (c) => {
      const buildId = c.req.param("build_id");
      const parsed = logQuery.safeParse(c.req.query());
      if (!parsed.success) throw new ApiError("invalid_input", "the log query is not valid");
      const q = parsed.data;
      if (q.tail !== undefined || q.before !== undefined) {
        const w = q.tail !== undefined ? await readLogTail(deps, buildId, q.tail) : await readLogBefore(deps, buildId, q.before!, q.limit);
        return logBody(c, w.bytes, {
          "X-Log-Start-Offset": String(w.start),
          "X-Log-Next-Offset": String(w.next),
          "X-Log-Lines-Before": String(w.linesBefore),
          "X-Log-Mid-Line": w.midLine ? "true" : "false",
          "X-Log-Complete": w.complete ? "true" : "false",
        });
      }
      if (q.offset !== undefined) {
        const log = await readLog(deps, buildId, q.offset);
        return logBody(c, log.bytes, { "X-Log-Next-Offset": String(log.nextOffset), "X-Log-Complete": log.complete ? "true" : "false" });
      }
      // The whole log as text, page by page (a raw view and a download).
      await getBuild(deps, buildId);
      return new Response(
        new ReadableStream<Uint8Array>({
          async start(controller) {
            let offset = 0;
            for (;;) {
              const page = await readLog(deps, buildId, offset);
              if (page.bytes.length > 0) controller.enqueue(page.bytes);
              offset = page.nextOffset;
              if (page.bytes.length === 0 || page.complete) break;
            }
            controller.close();
          },
        }),
        { headers: { "Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff" } },
      );
    })
    .get("/builds/:build_id/events", readers, liveBuildEvents(deps));
}
