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
import { apiDoc } from "../route-docs.ts";
import * as json from "../responses.ts";

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
  // "read/write on instance_settings" is owner or admin (docs/api.md §3); a refusal is insufficient_role.
  const settingsUser = requireUser(deps, { roles: ROLES.managers, code: "insufficient_role" });
  const owner = requireUser(deps, { roles: ROLES.owner, code: "external_access_owner_required" });
  return (
    new Hono<AppEnv>()
      .get(
        "/v1/settings/preferences",
        apiDoc({ summary: "Read the instance preferences", responses: { 200: json.PreferencesJson } }),
        settingsUser,
        async (c) => c.json(await readPreferences(deps)),
      )
      .put(
        "/v1/settings/preferences",
        apiDoc({
          summary: "Change the runtime mode (remote needs External Access's preflight to pass)",
          responses: { 200: json.PreferencesUpdatedJson },
          errors: { 400: ["invalid_input", "unsupported_key_storage_mode", "external_access_preflight_failed"] },
          example: { body: { runtime_mode: "local" } },
        }),
        settingsUser,
        jsonBody(preferencesSchema),
        async (c) => c.json(await updatePreferences(deps, c.get("user"), c.req.valid("json"))),
      )
      .get(
        "/v1/settings/external-access/network",
        apiDoc({ summary: "Read the public URL, artifact delivery URL and allowed origins", responses: { 200: json.NetworkSettingsAnswerJson } }),
        settingsUser,
        async (c) => c.json({ settings: await readNetworkSettings(deps) }),
      )
      .put(
        "/v1/settings/external-access/network",
        apiDoc({
          summary: "Set the public URL, artifact delivery URL and allowed origins (owner, from loopback in local mode)",
          responses: { 200: json.NetworkSettingsAnswerJson },
          errors: {
            400: ["invalid_input", "artifact_delivery_url_invalid", "artifact_delivery_public_url_required"],
            403: ["external_access_loopback_required"],
          },
          example: { body: { public_url: "https://ci.example.com", artifact_delivery_url: null, allowed_origins: ["https://ci.example.com"] } },
        }),
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
      .get(
        "/v1/settings/external-access/preflight",
        apiDoc({ summary: "The checks remote mode needs, each passed or failed", responses: { 200: json.PreflightJson } }),
        settingsUser,
        async (c) => c.json(await runPreflight(deps)),
      )
      // Owner only, read and write: it decides who on this machine can become the owner (docs/api.md §3).
      .get(
        "/v1/settings/local-login",
        apiDoc({ summary: "Who may sign in locally (owner)", responses: { 200: json.LocalLoginSettingJson } }),
        owner,
        async (c) => c.json(await readLocalLoginSetting(deps)),
      )
      .put(
        "/v1/settings/local-login",
        apiDoc({
          summary: "Allow local sign-in from loopback, or only through `hangar login` (owner)",
          responses: { 200: json.LocalLoginSettingJson },
          example: { body: { mode: "loopback" } },
        }),
        owner,
        jsonBody(localLoginSchema),
        async (c) => c.json(await updateLocalLoginSetting(deps, c.get("user"), c.req.valid("json").mode)),
      )
  );
}
