import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import {
  androidSigningSchema,
  createPipeline,
  createPipelineSchema,
  createProject,
  createProjectSchema,
  deletePipeline,
  deleteProject,
  getPipeline,
  getProject,
  iosSigningSchema,
  listPipelines,
  listProjects,
  patchPipelineSchema,
  patchProjectSchema,
  sourceCredentialsSchema,
  storeProjectSecret,
  toPipelineJson,
  toProjectJson,
  updatePipeline,
  updateProject,
} from "../../domain/projects/projects.ts";
import { requireUser, ROLES } from "../middleware/auth.ts";
import { jsonBody } from "../validate.ts";

/** Projects, pipelines and their credentials (CONTRACT §5). Reading is for everyone, writing for builders. */
export function projectsRoutes(deps: AppDeps) {
  const readers = requireUser(deps, { roles: ROLES.everyone });
  const builders = requireUser(deps, { roles: ROLES.builders });
  return new Hono<AppEnv>()
    .post("/v1/projects", builders, jsonBody(createProjectSchema), async (c) =>
      c.json(toProjectJson(await createProject(deps, c.get("user"), c.req.valid("json")))),
    )
    .get("/v1/projects", readers, async (c) => c.json((await listProjects(deps)).map(toProjectJson)))
    .get("/v1/projects/:project_id", readers, async (c) => c.json(toProjectJson(await getProject(deps, c.req.param("project_id")))))
    .patch("/v1/projects/:project_id", builders, jsonBody(patchProjectSchema), async (c) =>
      c.json(toProjectJson(await updateProject(deps, c.get("user"), c.req.param("project_id"), c.req.valid("json")))),
    )
    .delete("/v1/projects/:project_id", builders, async (c) => {
      await deleteProject(deps, c.get("user"), c.req.param("project_id"));
      return c.body(null, 204);
    })
    .post("/v1/projects/:project_id/pipelines", builders, jsonBody(createPipelineSchema), async (c) =>
      c.json(toPipelineJson(await createPipeline(deps, c.get("user"), c.req.param("project_id"), c.req.valid("json")))),
    )
    .get("/v1/projects/:project_id/pipelines", readers, async (c) =>
      c.json((await listPipelines(deps, c.req.param("project_id"))).map(toPipelineJson)),
    )
    .get("/v1/projects/:project_id/pipelines/:pipeline_id", readers, async (c) => {
      await getProject(deps, c.req.param("project_id"));
      return c.json(toPipelineJson(await getPipeline(deps, c.req.param("project_id"), c.req.param("pipeline_id"))));
    })
    .patch("/v1/projects/:project_id/pipelines/:pipeline_id", builders, jsonBody(patchPipelineSchema), async (c) =>
      c.json(
        toPipelineJson(await updatePipeline(deps, c.get("user"), c.req.param("project_id"), c.req.param("pipeline_id"), c.req.valid("json"))),
      ),
    )
    .delete("/v1/projects/:project_id/pipelines/:pipeline_id", builders, async (c) => {
      await deletePipeline(deps, c.get("user"), c.req.param("project_id"), c.req.param("pipeline_id"));
      return c.body(null, 204);
    })
    .put("/v1/projects/:project_id/source-credentials", builders, jsonBody(sourceCredentialsSchema), async (c) =>
      c.json(toProjectJson(await storeProjectSecret(deps, c.get("user"), c.req.param("project_id"), "sourceCredentialsSealed", c.req.valid("json")))),
    )
    .put("/v1/projects/:project_id/signing/android", builders, jsonBody(androidSigningSchema), async (c) =>
      c.json(toProjectJson(await storeProjectSecret(deps, c.get("user"), c.req.param("project_id"), "androidSigningSealed", c.req.valid("json")))),
    )
    .put("/v1/projects/:project_id/signing/ios", builders, jsonBody(iosSigningSchema), async (c) =>
      c.json(toProjectJson(await storeProjectSecret(deps, c.get("user"), c.req.param("project_id"), "iosSigningSealed", c.req.valid("json")))),
    );
}
