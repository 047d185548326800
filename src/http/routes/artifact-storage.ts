import { Hono } from "hono";
import { z } from "zod";
import { STORAGE_PROVIDERS } from "../../db/schema/constants.ts";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { readArtifactStorageSettings, updateArtifactStorageSettings } from "../../domain/settings/artifact-storage-update.ts";
import { requireUser, ROLES } from "../middleware/auth.ts";
import { jsonBody } from "../validate.ts";

const optionalText = (max: number) => z.string().max(max).nullable().optional();

// The GET answer's read-only fields (`has_secret_access_key`, `updated_at`) are accepted and ignored, so a
// client can send back what it read with one field changed.
const storageSchema = z.object({
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
});

export function artifactStorageRoutes(deps: AppDeps) {
  const settingsUser = requireUser(deps, { roles: ROLES.managers, code: "insufficient_role" });
  return new Hono<AppEnv>()
    .get("/v1/settings/artifact-storage", settingsUser, async (c) => c.json(await readArtifactStorageSettings(deps)))
    .put("/v1/settings/artifact-storage", settingsUser, jsonBody(storageSchema), async (c) =>
      c.json(await updateArtifactStorageSettings(deps, c.get("user"), c.req.valid("json"))),
    );
}
