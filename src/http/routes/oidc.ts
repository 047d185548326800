import { Hono } from "hono";
import { z } from "zod";
import type { AppDeps, AppEnv } from "../../deps.ts";
import {
  completeOidcSignIn,
  configureOidcSettings,
  configureSetupOidc,
  startOidcSignIn,
  startSetupOwnerOidc,
  verifySetupOwnerOidc,
} from "../../domain/auth/oidc.ts";
import { requireSetupSession, requireUser, ROLES } from "../middleware/auth.ts";
import { oidcClientOf } from "../oidc-client.ts";
import { requireReady } from "../middleware/ready.ts";
import { jsonBody, queryParams } from "../validate.ts";

// The https/loopback rule and the discovery are the domain's; the edge checks shape and size only.
const configureSchema = z.object({
  issuer_url: z.string().min(1).max(2048),
  client_id: z.string().min(1).max(512),
  client_secret: z.string().min(1).max(4096).optional(),
  trust_unverified_email: z.boolean().optional(),
});

const settingsSchema = configureSchema.extend({ client_secret: z.string().min(1).max(4096).nullable().optional() });

const startSchema = z.object({ redirect_uri: z.string().min(1).max(4096) });
const startQuerySchema = z.object({ redirect_uri: z.string().min(1).max(4096).optional() });
const callbackSchema = z.object({ code: z.string().min(1).max(4096), state: z.string().min(1).max(512) });

/** Every OIDC path of the spec: setup configure/start/verify, sign-in start/callback, post-setup configure. */
export function oidcRoutes(deps: AppDeps) {
  const session = requireSetupSession(deps);
  const ready = requireReady(deps);
  return new Hono<AppEnv>()
    .post("/v1/setup/oidc/configure", session, jsonBody(configureSchema), async (c) => {
      const result = await configureSetupOidc(deps, c.req.valid("json"));
      return c.json({ ...result, session_expires_at: c.get("setupSessionExpiresAt") });
    })
    .post("/v1/setup/owner/start-oidc", session, jsonBody(startSchema), async (c) =>
      c.json(await startSetupOwnerOidc(deps, c.req.valid("json"))),
    )
    .post("/v1/setup/owner/verify-oidc", session, jsonBody(callbackSchema), async (c) => {
      const result = await verifySetupOwnerOidc(deps, c.req.valid("json"));
      return c.json({ ...result, session_expires_at: c.get("setupSessionExpiresAt") });
    })
    .get("/v1/auth/oidc/start", ready, queryParams(startQuerySchema), async (c) =>
      c.json(
        await startOidcSignIn(deps, {
          redirect_uri: c.req.valid("query").redirect_uri,
          requestOrigin: new URL(c.req.url).origin,
          client: await oidcClientOf(deps, c),
        }),
      ),
    )
    .post("/v1/auth/oidc/callback", ready, jsonBody(callbackSchema), async (c) =>
      c.json(await completeOidcSignIn(deps, { ...c.req.valid("json"), client: await oidcClientOf(deps, c) })),
    )
    .put(
      "/v1/settings/external-access/oidc",
      requireUser(deps, { roles: ROLES.owner, code: "external_access_owner_required" }),
      jsonBody(settingsSchema),
      async (c) => c.json(await configureOidcSettings(deps, c.get("user"), c.req.valid("json"))),
    );
}
