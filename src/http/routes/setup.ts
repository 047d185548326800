import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { completeSetup, createLocalOwner, setSetupPreferences, verifyBootstrapToken } from "../../domain/setup/setup.ts";
import { requireSetupOpen, requireSetupSession } from "../middleware/auth.ts";
import { jsonBody } from "../validate.ts";
import { localOwnerSchema, setupPreferencesSchema, verifyBootstrapSchema } from "./setup.schemas.ts";

/** Setup endpoints of issue 2; OIDC and trusted-proxy setup live in oidc.ts and trusted-proxy.ts. */
export function setupRoutes(deps: AppDeps) {
  const session = requireSetupSession(deps);
  return new Hono<AppEnv>()
    // Registered before every other setup route (app.route keeps the order), so it also covers the OIDC and
    // trusted-proxy setup endpoints and runs before body validation.
    .use("/v1/setup/*", requireSetupOpen(deps))
    .post("/v1/setup/bootstrap-token/verify", jsonBody(verifyBootstrapSchema), async (c) =>
      c.json(await verifyBootstrapToken(deps, c.req.valid("json").token)),
    )
    .post("/v1/setup/preferences", session, jsonBody(setupPreferencesSchema), async (c) => {
      const prefs = await setSetupPreferences(deps, c.req.valid("json"));
      return c.json({ ...prefs, session_expires_at: c.get("setupSessionExpiresAt") });
    })
    .post("/v1/setup/local-owner/create", session, jsonBody(localOwnerSchema), async (c) => {
      const created = await createLocalOwner(deps, c.req.valid("json").email);
      return c.json({ state: created.state, owner_email: created.owner_email, session_expires_at: c.get("setupSessionExpiresAt") });
    })
    .post("/v1/setup/complete", session, async (c) => c.json(await completeSetup(deps)));
}
