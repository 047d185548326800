import { z } from "zod";
import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import {
  deleteSecret,
  listSecrets,
  protectionSchema,
  putSecret,
  putSecretSchema,
  SECRET_NAME,
  setProtection,
  toProtectionJson,
} from "../../domain/projects/project-secrets.ts";
import { getProject } from "../../domain/projects/projects.ts";
import { requireUser, ROLES } from "../middleware/auth.ts";
import { jsonBody } from "../validate.ts";
import { apiDoc } from "../route-docs.ts";
import * as json from "../responses.ts";

const SECRET = "/v1/projects/:project_id/secrets/:name";

function secretName(name: string): string {
  if (!SECRET_NAME.test(name)) {
    throw new ApiError("invalid_input", "a secret name matches [A-Z_][A-Z0-9_]{0,63}", [{ path: "name", message: "not a valid secret name" }]);
  }
  return name;
}

/**
 * Secret variables and credential protection (docs/api.md §5). Secrets are written, listed (names only) and deleted
 * by builders, like the signing credentials; which branches receive them is an owner's or admin's decision,
 * since a developer who could widen it could release the signing keys to any branch they push.
 */
export function projectSecretsRoutes(deps: AppDeps) {
  const readers = requireUser(deps, { roles: ROLES.everyone });
  const builders = requireUser(deps, { roles: ROLES.builders });
  const managers = requireUser(deps, { roles: ROLES.managers });
  return new Hono<AppEnv>()
    .get(
      "/v1/projects/:project_id/secrets",
      apiDoc({ summary: "List a project's secret variables (names only)", responses: { 200: z.array(json.SecretJson) } }),
      builders,
      async (c) => c.json(await listSecrets(deps, c.req.param("project_id"))),
    )
    .put(
      SECRET,
      apiDoc({
        summary: "Set a secret variable (name [A-Z_][A-Z0-9_]{0,63}; given to builds of protected branches)",
        responses: { 200: json.SecretJson },
        example: { body: { value: "s3cr3t-value" } },
      }),
      builders,
      jsonBody(putSecretSchema),
      async (c) => {
        const name = secretName(c.req.param("name"));
        return c.json(await putSecret(deps, c.get("user"), c.req.param("project_id"), name, c.req.valid("json").value));
      },
    )
    .delete(SECRET, apiDoc({ summary: "Remove a secret variable", responses: { 204: { noBody: "Removed" } } }), builders, async (c) => {
      await deleteSecret(deps, c.get("user"), c.req.param("project_id"), secretName(c.req.param("name")));
      return c.body(null, 204);
    })
    .get(
      "/v1/projects/:project_id/protection",
      apiDoc({ summary: "The branches that receive signing material and secrets", responses: { 200: json.ProtectionJson } }),
      readers,
      async (c) => c.json(toProtectionJson(await getProject(deps, c.req.param("project_id")))),
    )
    .put(
      "/v1/projects/:project_id/protection",
      apiDoc({
        summary: "Set the protected branch globs (owner or admin)",
        responses: { 200: json.ProtectionJson },
        example: { body: { branches: ["main", "release/**"] } },
      }),
      managers,
      jsonBody(protectionSchema),
      async (c) => c.json(toProtectionJson(await setProtection(deps, c.get("user"), c.req.param("project_id"), c.req.valid("json")))),
    );
}
