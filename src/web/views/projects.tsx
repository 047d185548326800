// The project list and the project page as HTML: view components only; the routes that load and change what they
// show are src/web/pages/projects.tsx.
import type { Child } from "hono/jsx";
import { configForReader, type PipelineConfig, type PipelineRow, type ProjectRow } from "../../domain/projects/projects.ts";
import type { ValidationIssue } from "../../errors.ts";
import { Button, EmptyState, Field, Name, PostForm, Section, Select, StatusBadge, Table, TextArea, Time } from "../components.tsx";
import { Layout, type PageCtx } from "../layout.tsx";
import { logStylesheetUrl } from "../log-viewer.ts";
import { jsonForDisplay } from "../text.ts";
import type { ProjectRunnersView, RunnerByTrust } from "../../domain/runners/trust-view.ts";

const NEW_CONFIG = `{
  "platform": "android",
  "steps": [
    { "name": "build", "run": "./gradlew assembleRelease" }
  ],
  "artifacts": ["app/build/outputs/**/*.apk", { "path": "app/build/test-results/**/*.xml", "when": "always" }]
}`;

/** Form state of one form on the page: the values typed and what was wrong with them. */
interface FormState {
  values: Record<string, string>;
  errors: Record<string, string>;
  /** Config problems, each with the path of the wrong key (`config.steps.0.runs`). */
  issues?: ValidationIssue[];
}

export type Forms = Partial<Record<string, FormState>>;

export function ProjectsPage(props: { ctx: PageCtx; projects: ProjectRow[]; canWrite: boolean; form?: FormState }) {
  const f = props.form;
  return (
    <Layout ctx={props.ctx} title="Projects">
      <h1>Projects</h1>
      {props.projects.length === 0 ? (
        <EmptyState title="No projects yet">
          {props.canWrite ? <p>Create one below: a name and the repository to build.</p> : <p>A developer or admin creates them.</p>}
        </EmptyState>
      ) : (
        <Table headers={["Project", "Repository", "Default branch", "Created"]} id="projects">
          {props.projects.map((p) => (
            <tr>
              <td>
                <a href={`/projects/${p.id}`}>
                  <Name value={p.name} />
                </a>
              </td>
              <td>
                <code>
                  <Name value={p.repoUrl} />
                </code>
              </td>
              <td>
                <Name value={p.defaultBranch} />
              </td>
              <td>
                <Time at={p.createdAt} now={props.ctx.now} />
              </td>
            </tr>
          ))}
        </Table>
      )}
      {props.canWrite ? (
        <Section title="New project" id="new-project">
          <PostForm action="/projects">
            <Field label="Name" name="name" value={f?.values.name} error={f?.errors.name} required />
            <Field
              label="Repository URL"
              name="repo_url"
              value={f?.values.repo_url}
              error={f?.errors.repo_url}
              required
              placeholder="https://github.com/acme/app.git"
              hint="An http(s), ssh, git or file URL, or an absolute path."
            />
            <Field label="Default branch" name="default_branch" value={f?.values.default_branch ?? "main"} error={f?.errors.default_branch} />
            <Button>Create project</Button>
          </PostForm>
        </Section>
      ) : null}
    </Layout>
  );
}

function IssueList(props: { issues?: ValidationIssue[] }) {
  if (!props.issues || props.issues.length === 0) return null;
  return (
    <ul class="error config-issues" role="alert">
      {props.issues.map((i) => (
        <li>
          {i.line !== undefined ? (
            <span class="issue-at">
              line {i.line}, column {i.column}:{" "}
            </span>
          ) : null}
          <code>{i.path || "config"}</code>: {i.message}
        </li>
      ))}
    </ul>
  );
}

function PipelineForm(props: { action: string; idPrefix: string; name: string; config: string; form?: FormState; submit: string }) {
  const f = props.form;
  return (
    <PostForm action={props.action}>
      <Field label="Name" name="name" id={`${props.idPrefix}-name`} value={f?.values.name ?? props.name} error={f?.errors.name} required />
      <TextArea
        label="Config (JSON)"
        name="config"
        id={`${props.idPrefix}-config`}
        rows={12}
        value={f?.values.config ?? props.config}
        error={f?.errors.config}
        hint={
          <>
            <code>platform</code> (ios, android, macos, any), <code>steps</code> [{"{"}name, run{"}"}], and optionally <code>artifacts</code>,{" "}
            <code>env</code>, <code>timeout_s</code>, <code>triggers</code>. Unknown keys are refused.
          </>
        }
      />
      <IssueList issues={f?.issues} />
      <Button>{props.submit}</Button>
    </PostForm>
  );
}

/** Runner names as a list; every name is the runner's own string, escaped by Name. */
function RunnerNames(props: { runners: RunnerByTrust[] }) {
  if (props.runners.length === 0) return <span class="muted">none</span>;
  return (
    <>
      {props.runners.map((r, i) => (
        <>
          {i > 0 ? ", " : ""}
          <Name value={r.name} fallback={r.id.slice(0, 8)} />
        </>
      ))}
    </>
  );
}

/**
 * Which runners take this project's builds (docs/runner-isolation.md): protected builds (credentials, protected
 * refs) only protected runners, a fork's pull request only open runners; and a warning when fork pull requests
 * arrive through a webhook but no runner is open, since they would wait forever.
 */
function ProjectRunners(props: { view: ProjectRunnersView }) {
  const v = props.view;
  return (
    <Section title="Runners for these builds" id="project-runners">
      {v.receivesPullRequests && v.openRunners.length === 0 ? (
        <div class="flash flash-warn" role="alert" id="no-open-runner">
          This project receives pull requests through its webhook, and no runner is open: a pull request from a fork is built only on an open runner,
          so those builds stay queued until an owner or admin registers one (or makes one open on the Runners page).
        </div>
      ) : null}
      <dl class="kv">
        <dt>
          {v.holdsCredentials
            ? "Builds of protected branches and tags (they get signing material and secrets)"
            : "Every build (the project holds no signing material or secret)"}
        </dt>
        <dd>
          {v.holdsCredentials ? (
            <>
              protected runners only: <RunnerNames runners={v.protectedRunners} />
            </>
          ) : (
            <>
              any runner: <RunnerNames runners={[...v.protectedRunners, ...v.openRunners]} />
            </>
          )}
        </dd>
        {v.holdsCredentials ? (
          <>
            <dt>Other builds (no credentials)</dt>
            <dd>
              any runner: <RunnerNames runners={[...v.protectedRunners, ...v.openRunners]} />
            </dd>
          </>
        ) : null}
        <dt>Pull requests from forks (never credentials)</dt>
        <dd>
          open runners only: <RunnerNames runners={v.openRunners} />
        </dd>
      </dl>
    </Section>
  );
}

/** A schedule as the project page lists it (src/domain/builds/schedules.ts). */
interface ScheduleView {
  pipelineId: string;
  origin: "file" | "stored";
  cron: string;
  timezone: string;
  branch: string | null;
  nextRunAt: number | null;
}

/** The answer of the validate box: what a pasted pipeline file holds, or where it is wrong. */
export interface ValidationView {
  content: string;
  ok: boolean;
  issues: ValidationIssue[];
  pipelines: string[];
}

/** Where a pipeline comes from: the pipeline file (path and commit) or Hangar's own store. */
function PipelineSource(props: { pipeline: PipelineRow; configPath: string | null }) {
  const pl = props.pipeline;
  const file =
    props.configPath !== null && pl.fileCommit !== null ? (
      <>
        <code>
          <Name value={props.configPath} />
        </code>{" "}
        at <code>{pl.fileCommit.slice(0, 12)}</code>
      </>
    ) : null;
  if (pl.source === "repository") return <p class="pipeline-source">From the repository{file ? <>: {file}</> : null}</p>;
  return <p class="pipeline-source">Stored in Hangar{file ? <>; the file also defines it ({file}) and wins for commits that have it</> : null}</p>;
}

export function ProjectPage(props: {
  ctx: PageCtx;
  project: ProjectRow;
  pipelines: PipelineRow[];
  schedules: ScheduleView[];
  validation?: ValidationView;
  canWrite: boolean;
  forms: Forms;
  events?: Child;
  signing?: Child;
  runners: ProjectRunnersView;
  channels?: Child;
}) {
  const p = props.project;
  const forms = props.forms;
  const edit = forms.project;
  const trig = forms.trigger;
  return (
    <Layout ctx={props.ctx} title={p.name} head={<link rel="stylesheet" href={logStylesheetUrl()} />}>
      <h1>
        <Name value={p.name} />
      </h1>
      <p class="muted">
        <code>
          <Name value={p.repoUrl} />
        </code>{" "}
        · default branch <Name value={p.defaultBranch} /> · <a href={`/builds?project_id=${p.id}`}>builds of this project</a>
      </p>

      {props.canWrite && props.pipelines.length > 0 ? (
        <Section title="Trigger a build" id="trigger">
          <PostForm action={`/projects/${p.id}/builds`} class="filters">
            <Select
              label="Pipeline"
              name="pipeline_id"
              id="trigger-pipeline"
              value={trig?.values.pipeline_id}
              error={trig?.errors.pipeline_id}
              options={props.pipelines.map((pl) => ({ value: pl.id, label: pl.name }))}
            />
            <Field label="Branch" name="branch" id="trigger-branch" value={trig?.values.branch ?? p.defaultBranch} error={trig?.errors.branch} />
            <Field
              label="Commit (optional)"
              name="commit_sha"
              id="trigger-commit"
              value={trig?.values.commit_sha}
              error={trig?.errors.commit_sha}
              placeholder="the branch's head"
            />
            <div class="actions">
              <Button>Trigger build</Button>
            </div>
          </PostForm>
          {trig?.errors.form ? (
            <p class="error" role="alert">
              {trig.errors.form}
            </p>
          ) : null}
          <IssueList issues={trig?.issues} />
        </Section>
      ) : null}

      <Section title="Pipelines" id="pipelines">
        <p class="muted">
          New to the pipeline file? <a href="/templates">Start from a template</a> for iOS, Android, Flutter or React Native.
        </p>
        {props.pipelines.length === 0 ? <p class="muted">No pipeline yet{props.canWrite ? ": add one below." : "."}</p> : null}
        {props.pipelines.map((pl) => {
          const config = pl.config as PipelineConfig;
          return (
            <article class="card pipeline" id={`pipeline-${pl.id}`}>
              <h3>
                <Name value={pl.name} /> <StatusBadge status="neutral" label={config.platform} />
              </h3>
              <p class="muted">
                {config.steps.length} step{config.steps.length === 1 ? "" : "s"} · <a href={`/builds?pipeline_id=${pl.id}`}>builds</a>
              </p>
              <PipelineSource pipeline={pl} configPath={p.configPath} />
              {pl.source === "repository" ? (
                // Defined in the repository: changed by a commit, so shown read-only.
                <pre class="pipeline-config">{JSON.stringify(pl.fileConfig ?? pl.config, null, 2)}</pre>
              ) : props.canWrite ? (
                <details open={forms[`pipeline-${pl.id}`] ? true : undefined}>
                  <summary>Edit</summary>
                  <PipelineForm
                    action={`/projects/${p.id}/pipelines/${pl.id}/edit`}
                    idPrefix={`pl-${pl.id}`}
                    name={pl.name}
                    config={jsonForDisplay(pl.config)}
                    form={forms[`pipeline-${pl.id}`]}
                    submit="Save pipeline"
                  />
                  <form
                    method="post"
                    action={`/projects/${p.id}/pipelines/${pl.id}/delete`}
                    class="inline-form"
                    data-confirm="Delete this pipeline? Its finished builds stay readable."
                  >
                    <Button variant="danger">Delete pipeline</Button>
                  </form>
                </details>
              ) : (
                // Readers who are not builders never see the pipeline's env (docs/decisions.md).
                <pre>{jsonForDisplay(configForReader(config, false))}</pre>
              )}
            </article>
          );
        })}
        {props.canWrite ? (
          <details open={forms.newPipeline ? true : undefined} id="new-pipeline">
            <summary>New pipeline</summary>
            <PipelineForm
              action={`/projects/${p.id}/pipelines`}
              idPrefix="new-pipeline"
              name=""
              config={NEW_CONFIG}
              form={forms.newPipeline}
              submit="Create pipeline"
            />
          </details>
        ) : null}
      </Section>

      <Section title="Schedules" id="schedules">
        {props.schedules.length === 0 ? (
          <p class="muted">
            No schedule. Add <code>schedules</code> to the pipeline file or to a stored pipeline's config.
          </p>
        ) : (
          <Table headers={["Pipeline", "Cron", "Time zone", "Branch", "Source", "Next run"]} id="schedule-list">
            {props.schedules.map((s) => (
              <tr>
                <td>
                  <Name value={props.pipelines.find((pl) => pl.id === s.pipelineId)?.name ?? s.pipelineId} />
                </td>
                <td>
                  <code>{s.cron}</code>
                </td>
                <td>{s.timezone}</td>
                <td>
                  <Name value={s.branch ?? p.defaultBranch} />
                </td>
                <td>{s.origin === "file" ? "pipeline file" : "stored"}</td>
                <td>
                  <Time at={s.nextRunAt} />
                </td>
              </tr>
            ))}
          </Table>
        )}
      </Section>

      <Section
        title="Validate a pipeline file"
        id="validate"
        description="Paste a pipeline file to check it as a build would, without committing it."
      >
        <PostForm action={`/projects/${p.id}/pipeline-config/validate`}>
          <TextArea label="Pipeline file (YAML)" name="content" id="validate-content" rows={10} value={props.validation?.content ?? ""} />
          <Button>Validate</Button>
        </PostForm>
        {props.validation ? (
          props.validation.ok ? (
            <p class="ok validate-result" role="status">
              Valid: {props.validation.pipelines.length} pipeline{props.validation.pipelines.length === 1 ? "" : "s"} (
              {props.validation.pipelines.map((n, i) => (
                <>
                  {i > 0 ? ", " : ""}
                  <Name value={n} />
                </>
              ))}
              ).
            </p>
          ) : (
            <div class="validate-result">
              <p class="error">Not valid:</p>
              <IssueList issues={props.validation.issues} />
            </div>
          )
        ) : null}
      </Section>

      {/* Credentials, signing material, secret variables, protection and signing health (project-signing.tsx). */}
      {props.signing}

      <ProjectRunners view={props.runners} />
      {/* Webhooks, notifications and their deliveries (src/web/pages/project-events.tsx), builders only. */}
      {props.events}
      {/* Tester channels (src/web/pages/channels.tsx), every role. */}
      {props.channels}

      {props.canWrite ? (
        <Section title="Project settings" id="project-settings">
          <PostForm action={`/projects/${p.id}/edit`}>
            <Field label="Name" name="name" id="project-name" value={edit?.values.name ?? p.name} error={edit?.errors.name} required />
            <Field
              label="Repository URL"
              name="repo_url"
              id="project-repo"
              value={edit?.values.repo_url ?? p.repoUrl}
              error={edit?.errors.repo_url}
              required
            />
            <Field
              label="Default branch"
              name="default_branch"
              id="project-branch"
              value={edit?.values.default_branch ?? p.defaultBranch}
              error={edit?.errors.default_branch}
            />
            <Field
              label="Pipeline file (empty: pipelines stored in Hangar only)"
              name="config_path"
              id="project-config-path"
              value={edit?.values.config_path ?? p.configPath ?? ""}
              error={edit?.errors.config_path}
            />
            <Button>Save project</Button>
          </PostForm>
          <form
            method="post"
            action={`/projects/${p.id}/delete`}
            class="inline-form"
            data-confirm="Delete this project and its pipelines? Finished builds and artifacts stay readable."
          >
            <Button variant="danger">Delete project</Button>
          </form>
          {forms.delete?.errors.form ? (
            <p class="error" role="alert">
              {forms.delete.errors.form}
            </p>
          ) : null}
        </Section>
      ) : null}
    </Layout>
  );
}
