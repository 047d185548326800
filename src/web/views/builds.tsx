// The build list and the build page as HTML: view components only; the routes, the log and the live stream are
// src/web/pages/builds.tsx.
import { BUILD_STATUSES, type BuildStatus } from "../../db/schema/constants.ts";
import type { listBuildArtifacts } from "../../domain/artifacts/artifacts.ts";
import { isFinalStatus } from "../../domain/builds/build-machine.ts";
import type { listPublishes } from "../../domain/publishing/publisher.ts";
import type { queueInfo, BuildRow } from "../../domain/builds/builds.ts";
import type { NameDirectory } from "../../domain/projects/projects.ts";
import type { SigningHealthItem } from "../../domain/signing/health.ts";
import { Button, EmptyState, Name, PostForm, Section, Select, StatusBadge, Table, Time, Field } from "../components.tsx";
import { Layout, type PageCtx } from "../layout.tsx";
import { logStylesheetUrl, logViewerUrl } from "../log-viewer.ts";
import { ArtifactInstall } from "../pages/install.tsx";
import { formatBytes, relativeTime } from "../text.ts";
import { buildUpdate } from "../live-log.ts";
import type { LogMatch } from "../../domain/logs/log-search.ts";
import { SearchResults, TestsSection, type BuildTests } from "../pages/tests.tsx";
import { BuildCachesSection } from "../pages/build-caches.tsx";
import { duration } from "../text.ts";

/** The list's filters as the page parsed them from the query string. */
export interface BuildListFilters {
  project_id?: string | undefined;
  pipeline_id?: string | undefined;
  branch?: string | undefined;
  status?: BuildStatus | undefined;
  cursor?: string | undefined;
  q?: string | undefined;
}

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

function FiltersForm(props: { names: NameDirectory; query: BuildListFilters }) {
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

export interface SearchState {
  q: string;
  matches: Array<LogMatch & { marked: string }> | null;
  error: string | null;
}

function SearchForm(props: { query: BuildListFilters }) {
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

export function BuildsPage(props: {
  ctx: PageCtx;
  names: NameDirectory;
  builds: BuildRow[];
  nextHref: string | null;
  query: BuildListFilters;
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

export function BuildPage(props: { ctx: PageCtx } & BuildPageData) {
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
