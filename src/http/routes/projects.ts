import { z } from "zod";
import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import {
  createPipeline,
  createPipelineSchema,
  createProject,
  createProjectSchema,
  deletePipeline,
  deleteProject,
  getPipeline,
  getProject,
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
import {
  androidSigningUploadSchema,
  iosSigningUploadSchema,
  readSigning,
  storeAndroidSigning,
  storeIosSigning,
  toSigningAnswer,
} from "../../domain/signing/signing.ts";
import { runSigningHealthPassAfterUpload, signingHealth } from "../../domain/signing/health.ts";
import { refreshFromDefaultBranch } from "../../domain/builds/schedules.ts";
import { isBuilder, requireUser, ROLES } from "../middleware/auth.ts";
import { jsonBody } from "../validate.ts";
import { apiDoc } from "../route-docs.ts";
import * as json from "../responses.ts";

/** Projects, pipelines and their credentials (docs/api.md §5). Reading is for everyone, writing for builders. */
export function projectsRoutes(deps: AppDeps) {
  const readers = requireUser(deps, { roles: ROLES.everyone });
  const builders = requireUser(deps, { roles: ROLES.builders });
  return new Hono<AppEnv>()
    .post(
      "/v1/projects",
      apiDoc({
        summary: "Create a project",
        responses: { 200: json.ProjectJson },
        errors: { 409: ["already_exists"] },
        example: { body: { name: "Demo app", repo_url: "https://git.example.com/team/demo-app.git", default_branch: "main" } },
      }),
      builders,
      jsonBody(createProjectSchema),
      async (c) => c.json(toProjectJson(await createProject(deps, c.get("user"), c.req.valid("json")))),
    )
    .get("/v1/projects", apiDoc({ summary: "List projects", responses: { 200: z.array(json.ProjectJson) } }), readers, async (c) =>
      c.json((await listProjects(deps)).map(toProjectJson)),
    )
    .get("/v1/projects/:project_id", apiDoc({ summary: "Read a project", responses: { 200: json.ProjectJson } }), readers, async (c) =>
      c.json(toProjectJson(await getProject(deps, c.req.param("project_id")))),
    )
    .patch(
      "/v1/projects/:project_id",
      apiDoc({
        summary: "Change a project's name, repository or default branch",
        responses: { 200: json.ProjectJson },
        errors: { 409: ["already_exists"] },
        example: { body: { default_branch: "develop" } },
      }),
      builders,
      jsonBody(patchProjectSchema),
      async (c) => c.json(toProjectJson(await updateProject(deps, c.get("user"), c.req.param("project_id"), c.req.valid("json")))),
    )
    .delete(
      "/v1/projects/:project_id",
      apiDoc({ summary: "Delete a project", responses: { 204: { noBody: "Deleted" } }, errors: { 409: ["project_busy"] } }),
      builders,
      async (c) => {
        await deleteProject(deps, c.get("user"), c.req.param("project_id"));
        return c.body(null, 204);
      },
    )
    .post(
      "/v1/projects/:project_id/pipelines",
      apiDoc({
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
      }),
      builders,
      jsonBody(createPipelineSchema),
      async (c) => c.json(toPipelineJson(await createPipeline(deps, c.get("user"), c.req.param("project_id"), c.req.valid("json")))),
    )
    .get(
      "/v1/projects/:project_id/pipelines",
      apiDoc({
        summary: "List a project's pipelines (the pipeline file is read at the default branch's head first)",
        responses: { 200: z.array(json.PipelineJson) },
      }),
      readers,
      async (c) => {
        const project = await getProject(deps, c.req.param("project_id"));
        await refreshFromDefaultBranch(deps, project);
        return c.json((await listPipelines(deps, project.id)).map((p) => toPipelineJson(p, project.configPath, isBuilder(c.get("user").role))));
      },
    )
    .get(
      "/v1/projects/:project_id/pipelines/:pipeline_id",
      apiDoc({ summary: "Read a pipeline", responses: { 200: json.PipelineJson } }),
      readers,
      async (c) => {
        const project = await getProject(deps, c.req.param("project_id"));
        return c.json(
          toPipelineJson(await getPipeline(deps, project.id, c.req.param("pipeline_id")), project.configPath, isBuilder(c.get("user").role)),
        );
      },
    )
    .patch(
      "/v1/projects/:project_id/pipelines/:pipeline_id",
      apiDoc({
        summary: "Rename a pipeline or replace its config (builds queued later use it)",
        responses: { 200: json.PipelineJson },
        errors: { 409: ["already_exists"] },
        example: { body: { name: "android-nightly" } },
      }),
      builders,
      jsonBody(patchPipelineSchema),
      async (c) =>
        c.json(toPipelineJson(await updatePipeline(deps, c.get("user"), c.req.param("project_id"), c.req.param("pipeline_id"), c.req.valid("json")))),
    )
    .delete(
      "/v1/projects/:project_id/pipelines/:pipeline_id",
      apiDoc({ summary: "Delete a pipeline", responses: { 204: { noBody: "Deleted" } }, errors: { 409: ["project_busy"] } }),
      builders,
      async (c) => {
        await deletePipeline(deps, c.get("user"), c.req.param("project_id"), c.req.param("pipeline_id"));
        return c.body(null, 204);
      },
    )
    .put(
      "/v1/projects/:project_id/source-credentials",
      apiDoc({
        summary: "Store the credentials that clone the repository (stored encrypted, never answered)",
        responses: { 200: json.ProjectJson },
        example: { body: { username: "ci-bot", token: "glpat-example-token" } },
      }),
      builders,
      jsonBody(sourceCredentialsSchema),
      async (c) =>
        c.json(
          toProjectJson(await storeProjectSecret(deps, c.get("user"), c.req.param("project_id"), "sourceCredentialsSealed", c.req.valid("json"))),
        ),
    )
    .get(
      "/v1/signing/health",
      apiDoc({
        summary: "Every stored certificate and profile with its expiry state (expiring within 30 days, expired)",
        responses: { 200: json.SigningHealthJson },
      }),
      readers,
      async (c) => c.json(await signingHealth(deps)),
    )
    .get(
      "/v1/projects/:project_id/signing",
      apiDoc({
        summary: "Describe the stored signing material (certificate, profiles, keystore; never a secret)",
        responses: { 200: json.SigningJson },
      }),
      readers,
      async (c) => c.json(await readSigning(deps, c.req.param("project_id"))),
    )
    .put(
      "/v1/projects/:project_id/signing/android",
      apiDoc({
        summary: "Store the Android signing keystore (PKCS#12 or JKS, opened with its passwords on upload; stored encrypted, never answered)",
        responses: { 200: json.SigningAnswerJson },
        errors: { 400: ["invalid_keystore"] },
        example: {
          body: {
            keystore_base64: "MIIKAgIBAzCCCbwGCSqGSIb3DQEHAaCCCa0=",
            keystore_password: "store-password",
            key_alias: "upload",
            key_password: "key-password",
          },
        },
      }),
      builders,
      jsonBody(androidSigningUploadSchema),
      async (c) => {
        const project = await storeAndroidSigning(deps, c.get("user"), c.req.param("project_id"), c.req.valid("json"));
        await runSigningHealthPassAfterUpload(deps, project.id);
        return c.json(toSigningAnswer(project));
      },
    )
    .put(
      "/v1/projects/:project_id/signing/ios",
      apiDoc({
        summary: "Store the iOS signing certificate and provisioning profiles (checked on upload; stored encrypted, never answered)",
        responses: { 200: json.SigningAnswerJson },
        errors: { 400: ["invalid_certificate", "invalid_profile", "certificate_not_in_profile"] },
        example: {
          body: {
            certificate_p12_base64: "MIIMYQIBAzCCDCcGCSqGSIb3DQEHAaCCDBg=",
            certificate_password: "p12-password",
            provisioning_profiles_base64: ["MIIdSAYJKoZIhvcNAQcCoIIdOTCCHTU=", "MIIdRwYJKoZIhvcNAQcCoIIdODCCHTQ="],
          },
        },
      }),
      builders,
      jsonBody(iosSigningUploadSchema),
      async (c) => {
        const project = await storeIosSigning(deps, c.get("user"), c.req.param("project_id"), c.req.valid("json"));
        await runSigningHealthPassAfterUpload(deps, project.id);
        return c.json(toSigningAnswer(project));
      },
    );
}
