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
import { apiDoc } from "../route-docs.ts";
import * as json from "../responses.ts";

// The https/loopback rule and the discovery are the domain's; the edge checks shape and size only. Each schema is
// built on first use (z.lazy), not at every daemon start (docs/benchmarks.md).
const configureFields = () => ({
  issuer_url: z.string().min(1).max(2048),
  client_id: z.string().min(1).max(512),
  client_secret: z.string().min(1).max(4096).optional(),
  trust_unverified_email: z.boolean().optional(),
});
const configureSchema = z.lazy(() => z.object(configureFields()));

const settingsSchema = z.lazy(() => z.object({ ...configureFields(), client_secret: z.string().min(1).max(4096).nullable().optional() }));

const startSchema = z.lazy(() => z.object({ redirect_uri: z.string().min(1).max(4096) }));
const startQuerySchema = z.lazy(() => z.object({ redirect_uri: z.string().min(1).max(4096).optional() }));
const callbackSchema = z.lazy(() => z.object({ code: z.string().min(1).max(4096), state: z.string().min(1).max(512) }));

/** Every OIDC path of the spec: setup configure/start/verify, sign-in start/callback, post-setup configure. */
export function oidcRoutes(deps: AppDeps) {
  const session = requireSetupSession(deps);
  const ready = requireReady(deps);
  return new Hono<AppEnv>()
    .post(
      "/v1/setup/oidc/configure",
      apiDoc({
        summary: "Setup: configure the OIDC identity provider (discovered now)",
        responses: { 200: json.OidcConfiguredJson },
        errors: { 400: ["invalid_input", "oidc_discovery_failed", "destination_not_allowed"], 409: ["invalid_state"], 502: ["oidc_discovery_error"] },
        example: { body: { issuer_url: "https://id.example.com", client_id: "hangar", client_secret: "client-secret" } },
      }),
      session,
      jsonBody(configureSchema),
      async (c) => {
        const result = await configureSetupOidc(deps, c.req.valid("json"));
        return c.json({ ...result, session_expires_at: c.get("setupSessionExpiresAt") });
      },
    )
    .post(
      "/v1/setup/owner/start-oidc",
      apiDoc({
        summary: "Setup: start the owner's OIDC sign-in",
        responses: { 200: json.AuthorizationJson },
        errors: { 400: ["invalid_input", "invalid_redirect_uri"], 409: ["invalid_state"] },
        example: { body: { redirect_uri: "http://127.0.0.1:8080/setup/oidc/callback" } },
      }),
      session,
      jsonBody(startSchema),
      async (c) => c.json(await startSetupOwnerOidc(deps, c.req.valid("json"))),
    )
    .post(
      "/v1/setup/owner/verify-oidc",
      apiDoc({
        summary: "Setup: finish the owner's OIDC sign-in; the signed-in identity becomes the owner",
        responses: { 200: json.OidcOwnerVerifiedJson },
        errors: {
          400: ["invalid_input", "auth_expired", "invalid_state"],
          409: ["invalid_state"],
          502: ["token_exchange_error", "missing_id_token", "id_token_verification_error", "missing_email"],
        },
        example: { body: { code: "authorization-code-from-the-idp", state: "state-from-start-oidc" } },
      }),
      session,
      jsonBody(callbackSchema),
      async (c) => {
        const result = await verifySetupOwnerOidc(deps, c.req.valid("json"));
        return c.json({ ...result, session_expires_at: c.get("setupSessionExpiresAt") });
      },
    )
    .get(
      "/v1/auth/oidc/start",
      apiDoc({
        summary: "Start an OIDC sign-in",
        responses: { 200: json.AuthorizationJson },
        errors: {
          400: ["invalid_input", "invalid_redirect_uri"],
          409: ["setup_incomplete"],
          429: ["too_many_pending"],
          500: ["oidc_not_configured"],
        },
        example: { query: { redirect_uri: "http://127.0.0.1:8080/login/oidc/callback" } },
      }),
      ready,
      queryParams(startQuerySchema),
      async (c) =>
        c.json(
          await startOidcSignIn(deps, {
            redirect_uri: c.req.valid("query").redirect_uri,
            requestOrigin: new URL(c.req.url).origin,
            client: await oidcClientOf(deps, c),
          }),
        ),
    )
    .post(
      "/v1/auth/oidc/callback",
      apiDoc({
        summary: "Finish an OIDC sign-in and get a session",
        responses: { 200: json.SignedInJson },
        errors: {
          400: ["invalid_input", "auth_expired", "invalid_state"],
          403: ["user_not_found"],
          409: ["setup_incomplete"],
          500: ["oidc_not_configured"],
          502: ["token_exchange_error", "missing_id_token", "id_token_verification_error", "missing_email"],
        },
        example: { body: { code: "authorization-code-from-the-idp", state: "state-from-start" } },
      }),
      ready,
      jsonBody(callbackSchema),
      async (c) => c.json(await completeOidcSignIn(deps, { ...c.req.valid("json"), client: await oidcClientOf(deps, c) })),
    )
    .put(
      "/v1/settings/external-access/oidc",
      apiDoc({
        summary: "Configure OIDC sign-in after setup (owner)",
        responses: { 200: json.OidcSettingsJson },
        errors: { 400: ["invalid_input", "oidc_discovery_failed", "destination_not_allowed"], 502: ["oidc_discovery_error"] },
        example: { body: { issuer_url: "https://id.example.com", client_id: "hangar", client_secret: "client-secret" } },
      }),
      requireUser(deps, { roles: ROLES.owner, code: "external_access_owner_required" }),
      jsonBody(settingsSchema),
      async (c) => c.json(await configureOidcSettings(deps, c.get("user"), c.req.valid("json"))),
    );
}
