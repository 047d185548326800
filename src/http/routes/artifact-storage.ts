import { Hono } from "hono";
import { z } from "zod";
import { STORAGE_PROVIDERS } from "../../db/schema/constants.ts";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { readArtifactStorageSettings, updateArtifactStorageSettings } from "../../domain/settings/artifact-storage-update.ts";
import { requireUser, ROLES } from "../middleware/auth.ts";
import { jsonBody } from "../validate.ts";
import { apiDoc } from "../route-docs.ts";
import * as json from "../responses.ts";

const optionalText = (max: number) => z.string().max(max).nullable().optional();

// The GET answer's read-only fields (`has_secret_access_key`, `updated_at`) are accepted and ignored, so a
// client can send back what it read with one field changed.
// Built on first use (z.lazy), not at every daemon start (docs/benchmarks.md).
const storageSchema = z.lazy(() =>
  z.object({
    provider: z.enum(STORAGE_PROVIDERS),
    local: z.object({ base_dir: optionalText(4096) }).optional(),
    s3: z
      .object({
        endpoint: optionalText(2048),
        region: optionalText(64),
        bucket: optionalText(255),
        prefix: optionalText(512),
        access_key_id: optionalText(256),
        secret_access_key: optionalText(1024),
        force_path_style: z.boolean().optional(),
      })
      .optional(),
  }),
);

export function artifactStorageRoutes(deps: AppDeps) {
  const settingsUser = requireUser(deps, { roles: ROLES.managers, code: "insufficient_role" });
  return new Hono<AppEnv>()
    .get(
      "/v1/settings/artifact-storage",
      apiDoc({ summary: "Read where artifacts are stored", responses: { 200: json.ArtifactStorageJson } }),
      settingsUser,
      async (c) => c.json(await readArtifactStorageSettings(deps)),
    )
    .put(
      "/v1/settings/artifact-storage",
      apiDoc({
        summary: "Change where new artifacts are stored (local directory, S3 or R2)",
        responses: { 200: json.ArtifactStorageJson },
        errors: { 400: ["invalid_input", "invalid_local_base_dir", "destination_not_allowed"] },
        example: { body: { provider: "local", local: { base_dir: null } } },
      }),
      settingsUser,
      jsonBody(storageSchema),
      async (c) => c.json(await updateArtifactStorageSettings(deps, c.get("user"), c.req.valid("json"))),
    );
}
