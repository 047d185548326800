import { Hono, type Context } from "hono";
import type { z } from "zod";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { triggerBuild, triggerBuildSchema } from "../../domain/builds/builds.ts";
import { refreshFromDefaultBranch, schedulesWithNextRun } from "../../domain/builds/schedules.ts";
import { validatePipelineContent } from "../../domain/projects/pipeline-validate.ts";
import { MAX_PIPELINE_FILE_BYTES } from "../../domain/projects/pipeline-file.ts";
import {
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
} from "../../domain/projects/projects.ts";
import { ApiError } from "../../errors.ts";
import { ROLES } from "../../http/middleware/auth.ts";
import { sentence } from "../errors.tsx";
import { setFlash } from "../flash.ts";
import { checkForm, fieldErrors } from "../form.ts";
import { pageContext, renderPage, requireBrowserUser } from "../session.tsx";
import { projectChannelsSlot } from "./channels.tsx";
import { projectEventPages, projectEventsSlot } from "./project-events.tsx";
import type { EventsState } from "../views/project-events.tsx";
import { projectSigningPages, projectSigningSlot } from "./project-signing.tsx";
import type { SigningState } from "../views/project-signing.tsx";
import { projectRunnersView } from "../../domain/runners/trust-view.ts";
import { type Forms, ProjectsPage, type ValidationView, ProjectPage } from "../views/projects.tsx";

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
