import { Hono, type Context } from "hono";
import type { Child } from "hono/jsx";
import type { z } from "zod";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { triggerBuild, triggerBuildSchema } from "../../domain/builds/builds.ts";
import { refreshFromDefaultBranch, schedulesWithNextRun } from "../../domain/builds/schedules.ts";
import { validatePipelineContent } from "../../domain/projects/pipeline-validate.ts";
import { MAX_PIPELINE_FILE_BYTES } from "../../domain/projects/pipeline-file.ts";
import {
  configForReader,
  createPipeline,
  createPipelineSchema,
  createProject,
  createProjectSchema,
  deletePipeline,
  deleteProject,
  getProject,
  listPipelines,
  listProjects,
  patchPipelineSchema,
  patchProjectSchema,
  updatePipeline,
  updateProject,
  type PipelineConfig,
  type PipelineRow,
  type ProjectRow,
} from "../../domain/projects/projects.ts";
import { ApiError, type ValidationIssue } from "../../errors.ts";
import { ROLES } from "../../http/middleware/auth.ts";
import { Button, EmptyState, Field, Name, PostForm, Section, Select, StatusBadge, Table, TextArea, Time } from "../components.tsx";
import { sentence } from "../errors.tsx";
import { setFlash } from "../flash.ts";
import { checkForm, fieldErrors } from "../form.ts";
import { Layout, type PageCtx } from "../layout.tsx";
import { logStylesheetUrl } from "../log-viewer.ts";
import { pageContext, renderPage, requireBrowserUser } from "../session.tsx";
import { jsonForDisplay } from "../text.ts";
import { projectChannelsSlot } from "./channels.tsx";
import { projectEventPages, projectEventsSlot, type EventsState } from "./project-events.tsx";
import { projectSigningPages, projectSigningSlot, type SigningState } from "./project-signing.tsx";
import { projectRunnersView, type ProjectRunnersView, type RunnerByTrust } from "../../domain/runners/trust-view.ts";

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

type Forms = Partial<Record<string, FormState>>;

function str(form: Record<string, unknown>, name: string): string {
  const v = form[name];
  return typeof v === "string" ? v : "";
}

/** Parses the config textarea; a JSON syntax error is reported as the config field's error. */
function parseConfig(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (err) {
    return { ok: false, error: `Not valid JSON: ${(err as Error).message}` };
  }
}

function ProjectsPage(props: { ctx: PageCtx; projects: ProjectRow[]; canWrite: boolean; form?: FormState }) {
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
interface ValidationView {
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

function ProjectPage(props: {
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

/** `/projects` and `/projects/{id}`: reading for everyone, creating, changing and triggering for builders. */
export function projectPages(deps: AppDeps) {
  const readers = requireBrowserUser(deps, { roles: ROLES.everyone });
  const builders = requireBrowserUser(deps, { roles: ROLES.builders });
  const canWrite = (c: Context<AppEnv>) => (ROLES.builders as readonly string[]).includes(c.get("user").role);

  const showProject = async (
    c: Context<AppEnv>,
    id: string,
    forms: Forms,
    status: 200 | 400 | 409 = 200,
    events: EventsState = {},
    signing: SigningState = {},
    validation?: ValidationView,
  ) => {
    const project = await getProject(deps, id);
    // The pipeline file at the default branch's head, as GET /v1/projects/{id}/pipelines reads it.
    await refreshFromDefaultBranch(deps, project);
    const pipelines = await listPipelines(deps, id);
    const schedules = await schedulesWithNextRun(deps, id);
    const ctx = pageContext(c, deps);
    const eventSections = await projectEventsSlot(deps, ctx, project, events);
    const runners = await projectRunnersView(deps, id);
    const channelSection = await projectChannelsSlot(deps, ctx, project, pipelines);
    const signingSection = await projectSigningSlot(deps, ctx, project, signing);
    return renderPage(
      c,
      <ProjectPage
        ctx={ctx}
        project={project}
        pipelines={pipelines}
        schedules={schedules}
        validation={validation}
        canWrite={canWrite(c)}
        forms={forms}
        events={eventSections}
        signing={signingSection}
        runners={runners}
        channels={channelSection}
      />,
      status,
    );
  };
  const errorStatus = (err: ApiError) => (err.status === 409 ? 409 : 400);

  return new Hono<AppEnv>()
    .get("/projects", readers, async (c) =>
      renderPage(c, <ProjectsPage ctx={pageContext(c, deps)} projects={await listProjects(deps)} canWrite={canWrite(c)} />),
    )
    .post("/projects", builders, async (c) => {
      const form = await c.req.parseBody();
      const values = { name: str(form, "name"), repo_url: str(form, "repo_url"), default_branch: str(form, "default_branch") || "main" };
      const checked = checkForm(createProjectSchema, values);
      let errors: Record<string, string>;
      if (checked.ok) {
        try {
          const project = await createProject(deps, c.get("user"), checked.data);
          setFlash(c, "ok", "Project created. Add a pipeline to build it.");
          return c.redirect(`/projects/${project.id}`, 303);
        } catch (err) {
          if (!(err instanceof ApiError) || err.status >= 500) throw err;
          errors = { name: sentence(err.message) };
        }
      } else errors = fieldErrors(checked.issues);
      return renderPage(c, <ProjectsPage ctx={pageContext(c, deps)} projects={await listProjects(deps)} canWrite form={{ values, errors }} />, 400);
    })
    .get("/projects/:project_id", readers, async (c) => showProject(c, c.req.param("project_id"), {}))
    .post("/projects/:project_id/edit", builders, async (c) => {
      const id = c.req.param("project_id");
      const form = await c.req.parseBody();
      const values = {
        name: str(form, "name"),
        repo_url: str(form, "repo_url"),
        default_branch: str(form, "default_branch"),
        config_path: str(form, "config_path").trim(),
      };
      const checked = checkForm(patchProjectSchema, { ...values, config_path: values.config_path === "" ? null : values.config_path });
      if (!checked.ok) return showProject(c, id, { project: { values, errors: fieldErrors(checked.issues) } }, 400);
      try {
        await updateProject(deps, c.get("user"), id, checked.data);
      } catch (err) {
        if (!(err instanceof ApiError) || err.status === 404 || err.status >= 500) throw err;
        return showProject(c, id, { project: { values, errors: { name: sentence(err.message) } } }, errorStatus(err));
      }
      setFlash(c, "ok", "Project saved.");
      return c.redirect(`/projects/${id}`, 303);
    })
    .post("/projects/:project_id/delete", builders, async (c) => {
      const id = c.req.param("project_id");
      try {
        await deleteProject(deps, c.get("user"), id);
      } catch (err) {
        if (!(err instanceof ApiError) || err.code !== "project_busy") throw err;
        return showProject(c, id, { delete: { values: {}, errors: { form: sentence(err.message) } } }, 409);
      }
      setFlash(c, "ok", "Project deleted. Its finished builds stay in the build list.");
      return c.redirect("/projects", 303);
    })
    .post("/projects/:project_id/pipelines", builders, async (c) => {
      const id = c.req.param("project_id");
      const form = await c.req.parseBody();
      const values = { name: str(form, "name"), config: str(form, "config") };
      const result = await savePipeline(c, id, null, values);
      if (result) return result;
      setFlash(c, "ok", "Pipeline created.");
      return c.redirect(`/projects/${id}#pipelines`, 303);
    })
    .post("/projects/:project_id/pipelines/:pipeline_id/edit", builders, async (c) => {
      const id = c.req.param("project_id");
      const form = await c.req.parseBody();
      const values = { name: str(form, "name"), config: str(form, "config") };
      const result = await savePipeline(c, id, c.req.param("pipeline_id"), values);
      if (result) return result;
      setFlash(c, "ok", "Pipeline saved. Builds queued from now on use the new config.");
      return c.redirect(`/projects/${id}#pipeline-${c.req.param("pipeline_id")}`, 303);
    })
    .post("/projects/:project_id/pipelines/:pipeline_id/delete", builders, async (c) => {
      const id = c.req.param("project_id");
      try {
        await deletePipeline(deps, c.get("user"), id, c.req.param("pipeline_id"));
      } catch (err) {
        if (!(err instanceof ApiError) || err.code !== "project_busy") throw err;
        setFlash(c, "error", sentence(err.message));
        return c.redirect(`/projects/${id}`, 303);
      }
      setFlash(c, "ok", "Pipeline deleted.");
      return c.redirect(`/projects/${id}`, 303);
    })
    .post("/projects/:project_id/builds", builders, async (c) => {
      const id = c.req.param("project_id");
      const form = await c.req.parseBody();
      const values = { pipeline_id: str(form, "pipeline_id"), branch: str(form, "branch").trim(), commit_sha: str(form, "commit_sha").trim() };
      const input: Record<string, string> = { pipeline_id: values.pipeline_id };
      if (values.branch) input.branch = values.branch;
      if (values.commit_sha) input.commit_sha = values.commit_sha;
      const checked = checkForm(triggerBuildSchema, input);
      if (!checked.ok) return showProject(c, id, { trigger: { values, errors: fieldErrors(checked.issues) } }, 400);
      try {
        const build = await triggerBuild(deps, c.get("user"), id, checked.data);
        setFlash(c, "ok", `Build #${build.buildNumber} queued.`);
        return c.redirect(`/builds/${build.id}`, 303);
      } catch (err) {
        if (!(err instanceof ApiError) || err.status >= 500) throw err;
        const field = err.code === "branch_not_found" ? "branch" : "form";
        return showProject(c, id, { trigger: { values, errors: { [field]: sentence(err.message) }, issues: err.issues } }, errorStatus(err));
      }
    })
    .post("/projects/:project_id/pipeline-config/validate", readers, async (c) => {
      const id = c.req.param("project_id");
      const content = str(await c.req.parseBody(), "content");
      const result = await validatePipelineContent(deps, id, content.slice(0, MAX_PIPELINE_FILE_BYTES));
      return showProject(c, id, {}, 200, {}, {}, { content, ...result });
    })
    .route(
      "/",
      projectEventPages(deps, (c, id, state, status) => showProject(c, id, {}, status, state)),
    )
    .route(
      "/",
      projectSigningPages(deps, (c, id, state, status) => showProject(c, id, {}, status, {}, state)),
    );

  /** Creates (pipelineId null) or changes a pipeline; answers the page again with the errors, or null on success. */
  async function savePipeline(c: Context<AppEnv>, projectId: string, pipelineId: string | null, values: { name: string; config: string }) {
    const key = pipelineId ? `pipeline-${pipelineId}` : "newPipeline";
    const parsed = parseConfig(values.config);
    if (!parsed.ok) return showProject(c, projectId, { [key]: { values, errors: { config: parsed.error } } }, 400);
    const body = { name: values.name, config: parsed.value };
    const checked = pipelineId ? checkForm(patchPipelineSchema, body) : checkForm(createPipelineSchema, body);
    if (!checked.ok) {
      const errors = fieldErrors(checked.issues.filter((i) => !i.path.startsWith("config")));
      const issues = checked.issues.filter((i) => i.path.startsWith("config"));
      if (issues.length > 0) errors.config = "The config has problems: see the list below.";
      return showProject(c, projectId, { [key]: { values, errors, issues } }, 400);
    }
    try {
      if (pipelineId) await updatePipeline(deps, c.get("user"), projectId, pipelineId, checked.data as z.infer<typeof patchPipelineSchema>);
      else await createPipeline(deps, c.get("user"), projectId, checked.data as z.infer<typeof createPipelineSchema>);
    } catch (err) {
      if (!(err instanceof ApiError) || err.status === 404 || err.status >= 500) throw err;
      return showProject(c, projectId, { [key]: { values, errors: { name: sentence(err.message) } } }, errorStatus(err));
    }
    return null;
  }
}
