import { z } from "zod";
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
import { isBuilder, requireUser, ROLES } from "../middleware/auth.ts";
import { jsonBody } from "../validate.ts";
import { apiDoc } from "../route-docs.ts";
import * as json from "../responses.ts";

/** Projects, pipelines and their credentials (CONTRACT §5). Reading is for everyone, writing for builders. */
export function projectsRoutes(deps: AppDeps) {
  const readers = requireUser(deps, { roles: ROLES.everyone });
  const builders = requireUser(deps, { roles: ROLES.builders });
  return new Hono<AppEnv>()
    .post("/v1/projects", apiDoc({
      summary: "Create a project",
      responses: { 200: json.ProjectJson },
      errors: { 409: ["already_exists"] },
      example: { body: { name: "Demo app", repo_url: "https://git.example.com/team/demo-app.git", default_branch: "main" } },
    }), builders, jsonBody(createProjectSchema), async (c) =>
      c.json(toProjectJson(await createProject(deps, c.get("user"), c.req.valid("json")))),
    )
    .get("/v1/projects", apiDoc({ summary: "List projects", responses: { 200: z.array(json.ProjectJson) } }), readers, async (c) => c.json((await listProjects(deps)).map(toProjectJson)))
    .get("/v1/projects/:project_id", apiDoc({ summary: "Read a project", responses: { 200: json.ProjectJson } }), readers, async (c) => c.json(toProjectJson(await getProject(deps, c.req.param("project_id")))))
    .patch("/v1/projects/:project_id", apiDoc({
      summary: "Change a project's name, repository or default branch",
      responses: { 200: json.ProjectJson },
      errors: { 409: ["already_exists"] },
      example: { body: { default_branch: "develop" } },
    }), builders, jsonBody(patchProjectSchema), async (c) =>
      c.json(toProjectJson(await updateProject(deps, c.get("user"), c.req.param("project_id"), c.req.valid("json")))),
    )
    .delete("/v1/projects/:project_id", apiDoc({ summary: "Delete a project", responses: { 204: { noBody: "Deleted" } }, errors: { 409: ["project_busy"] } }), builders, async (c) => {
      await deleteProject(deps, c.get("user"), c.req.param("project_id"));
      return c.body(null, 204);
    })
    .post("/v1/projects/:project_id/pipelines", apiDoc({
      summary: "Add a pipeline",
      responses: { 200: json.PipelineJson },
      errors: { 409: ["already_exists"] },
      example: {
        body: {
          name: "android-release",
          config: {
            platform: "android",
            steps: [{ name: "build", run: "./gradlew assembleRelease" }],
            artifacts: ["app/build/outputs/apk/release/*.apk"],
            timeout_s: 3600,
            triggers: [{ event: "push", branches: ["main"] }],
          },
        },
      },
    }), builders, jsonBody(createPipelineSchema), async (c) =>
      c.json(toPipelineJson(await createPipeline(deps, c.get("user"), c.req.param("project_id"), c.req.valid("json")))),
    )
    .get("/v1/projects/:project_id/pipelines", apiDoc({ summary: "List a project's pipelines", responses: { 200: z.array(json.PipelineJson) } }), readers, async (c) =>
      c.json((await listPipelines(deps, c.req.param("project_id"))).map((p) => toPipelineJson(p, isBuilder(c.get("user").role)))),
    )
    .get("/v1/projects/:project_id/pipelines/:pipeline_id", apiDoc({ summary: "Read a pipeline", responses: { 200: json.PipelineJson } }), readers, async (c) => {
      await getProject(deps, c.req.param("project_id"));
      return c.json(toPipelineJson(await getPipeline(deps, c.req.param("project_id"), c.req.param("pipeline_id")), isBuilder(c.get("user").role)));
    })
    .patch("/v1/projects/:project_id/pipelines/:pipeline_id", apiDoc({
      summary: "Rename a pipeline or replace its config (builds queued later use it)",
      responses: { 200: json.PipelineJson },
      errors: { 409: ["already_exists"] },
      example: { body: { name: "android-nightly" } },
    }), builders, jsonBody(patchPipelineSchema), async (c) =>
      c.json(
        toPipelineJson(await updatePipeline(deps, c.get("user"), c.req.param("project_id"), c.req.param("pipeline_id"), c.req.valid("json"))),
      ),
    )
    .delete("/v1/projects/:project_id/pipelines/:pipeline_id", apiDoc({ summary: "Delete a pipeline", responses: { 204: { noBody: "Deleted" } }, errors: { 409: ["project_busy"] } }), builders, async (c) => {
      await deletePipeline(deps, c.get("user"), c.req.param("project_id"), c.req.param("pipeline_id"));
      return c.body(null, 204);
    })
    .put("/v1/projects/:project_id/source-credentials", apiDoc({
      summary: "Store the credentials that clone the repository (stored encrypted, never answered)",
      responses: { 200: json.ProjectJson },
      example: { body: { username: "ci-bot", token: "glpat-example-token" } },
    }), builders, jsonBody(sourceCredentialsSchema), async (c) =>
      c.json(toProjectJson(await storeProjectSecret(deps, c.get("user"), c.req.param("project_id"), "sourceCredentialsSealed", c.req.valid("json")))),
    )
    .put("/v1/projects/:project_id/signing/android", apiDoc({
      summary: "Store the Android signing keystore (stored encrypted, never answered)",
      responses: { 200: json.ProjectJson },
      example: { body: { keystore_base64: "MIIKAgIBAzCCCbwGCSqGSIb3DQEHAaCCCa0=", keystore_password: "store-password", key_alias: "upload", key_password: "key-password" } },
    }), builders, jsonBody(androidSigningSchema), async (c) =>
      c.json(toProjectJson(await storeProjectSecret(deps, c.get("user"), c.req.param("project_id"), "androidSigningSealed", c.req.valid("json")))),
    )
    .put("/v1/projects/:project_id/signing/ios", apiDoc({
      summary: "Store the iOS signing certificate and provisioning profile (stored encrypted, never answered)",
      responses: { 200: json.ProjectJson },
      example: { body: { certificate_p12_base64: "MIIMYQIBAzCCDCcGCSqGSIb3DQEHAaCCDBg=", certificate_password: "p12-password", provisioning_profile_base64: "MIIdSAYJKoZIhvcNAQcCoIIdOTCCHTU=" } },
    }), builders, jsonBody(iosSigningSchema), async (c) =>
      c.json(toProjectJson(await storeProjectSecret(deps, c.get("user"), c.req.param("project_id"), "iosSigningSealed", c.req.valid("json")))),
    );
}
