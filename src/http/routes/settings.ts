import { Hono } from "hono";
import { z } from "zod";
import { RUNTIME_MODES } from "../../db/schema/constants.ts";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { assertNetworkChangeAllowed, readNetworkSettings, updateNetworkSettings } from "../../domain/settings/network-settings.ts";
import { LOCAL_LOGIN_MODES, readLocalLoginSetting, updateLocalLoginSetting } from "../../domain/auth/local-login.ts";
import { readPreferences, updatePreferences } from "../../domain/auth/preferences.ts";
import { runPreflight } from "../../domain/setup/preflight.ts";
import { requireUser, ROLES } from "../middleware/auth.ts";
import { jsonBody } from "../validate.ts";

const preferencesSchema = z.object({
  // Any string: a value other than `file` is the spec's 400 unsupported_key_storage_mode, not invalid_input.
  key_storage_mode: z.string().optional(),
  runtime_mode: z.enum(RUNTIME_MODES).optional(),
});

const networkSchema = z.object({
  public_url: z.string().max(2048),
  artifact_delivery_url: z.string().max(2048).nullable().optional(),
  allowed_origins: z.array(z.string().max(2048)).max(50),
});

const localLoginSchema = z.object({ mode: z.enum(LOCAL_LOGIN_MODES) });

/** Instance preferences (runtime mode) and External Access network settings and preflight. OIDC is in oidc.ts. */
export function settingsRoutes(deps: AppDeps) {
  // "read/write on instance_settings" is owner or admin (CONTRACT §3); a refusal is insufficient_role.
  const settingsUser = requireUser(deps, { roles: ROLES.managers, code: "insufficient_role" });
  const owner = requireUser(deps, { roles: ROLES.owner, code: "external_access_owner_required" });
  return new Hono<AppEnv>()
    .get("/v1/settings/preferences", settingsUser, async (c) => c.json(await readPreferences(deps)))
    .put("/v1/settings/preferences", settingsUser, jsonBody(preferencesSchema), async (c) =>
      c.json(await updatePreferences(deps, c.get("user"), c.req.valid("json"))),
    )
    .get("/v1/settings/external-access/network", settingsUser, async (c) => c.json({ settings: await readNetworkSettings(deps) }))
    .put(
      "/v1/settings/external-access/network",
      owner,
      async (c, next) => {
        await assertNetworkChangeAllowed(deps, c.get("isLoopback"));
        await next();
      },
      jsonBody(networkSchema),
      async (c) => {
        const settings = await updateNetworkSettings(deps, c.get("user"), { ...c.req.valid("json"), isLoopback: c.get("isLoopback") });
        return c.json({ settings });
      },
    )
    .get("/v1/settings/external-access/preflight", settingsUser, async (c) => c.json(await runPreflight(deps)))
    // Owner only, read and write: it decides who on this machine can become the owner (CONTRACT §3).
    .get("/v1/settings/local-login", owner, async (c) => c.json(await readLocalLoginSetting(deps)))
    .put("/v1/settings/local-login", owner, jsonBody(localLoginSchema), async (c) =>
      c.json(await updateLocalLoginSetting(deps, c.get("user"), c.req.valid("json").mode)),
    );
}
