import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { completeSetup, createLocalOwner, setSetupPreferences, verifyBootstrapToken } from "../../domain/setup/setup.ts";
import { requireSetupOpen, requireSetupSession } from "../middleware/auth.ts";
import { jsonBody } from "../validate.ts";
import { localOwnerSchema, setupPreferencesSchema, verifyBootstrapSchema } from "./setup.schemas.ts";
import { apiDoc } from "../route-docs.ts";
import * as json from "../responses.ts";

/** Setup endpoints (docs/spec.md, Setup); OIDC and trusted-proxy setup live in oidc.ts and trusted-proxy.ts. */
export function setupRoutes(deps: AppDeps) {
  const session = requireSetupSession(deps);
  return (
    new Hono<AppEnv>()
      // Registered before every other setup route (app.route keeps the order), so it also covers the OIDC and
      // trusted-proxy setup endpoints and runs before body validation.
      .use("/v1/setup/*", requireSetupOpen(deps))
      .post(
        "/v1/setup/bootstrap-token/verify",
        apiDoc({
          summary: "Setup: exchange the bootstrap token printed by the daemon for a setup session",
          responses: { 200: json.SessionTokenJson },
          errors: {
            401: ["invalid_token"],
            409: ["already_configured"],
            410: ["token_consumed", "token_expired"],
            429: ["too_many_attempts"],
            500: ["no_bootstrap_token"],
          },
          example: { body: { token: "9f2c4e7a1b3d5f60718293a4b5c6d7e8f9012a3b4c5d6e7f8091a2b3c4d5e6f7" } },
        }),
        jsonBody(verifyBootstrapSchema),
        async (c) => c.json(await verifyBootstrapToken(deps, c.req.valid("json").token)),
      )
      .post(
        "/v1/setup/preferences",
        apiDoc({
          summary: "Setup: choose local or remote mode (and remote sign-in)",
          responses: { 200: json.SetupPreferencesJson },
          errors: { 409: ["invalid_state"] },
          example: { body: { runtime_mode: "local" } },
        }),
        session,
        jsonBody(setupPreferencesSchema),
        async (c) => {
          const prefs = await setSetupPreferences(deps, c.req.valid("json"));
          return c.json({ ...prefs, session_expires_at: c.get("setupSessionExpiresAt") });
        },
      )
      .post(
        "/v1/setup/local-owner/create",
        apiDoc({
          summary: "Setup: create the owner (local mode)",
          responses: { 200: json.OwnerCreatedJson },
          errors: { 403: ["mode_restricted"], 409: ["invalid_state"] },
          example: { body: { email: "owner@example.com" } },
        }),
        session,
        jsonBody(localOwnerSchema),
        async (c) => {
          const created = await createLocalOwner(deps, c.req.valid("json").email);
          return c.json({ state: created.state, owner_email: created.owner_email, session_expires_at: c.get("setupSessionExpiresAt") });
        },
      )
      .post(
        "/v1/setup/complete",
        apiDoc({ summary: "Setup: finish; the instance is ready", responses: { 200: json.SetupCompleteJson }, errors: { 409: ["invalid_state"] } }),
        session,
        async (c) => c.json(await completeSetup(deps)),
      )
  );
}
