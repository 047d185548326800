import { Hono } from "hono";
import { z } from "zod";
import type { AppDeps, AppEnv } from "../../deps.ts";
import {
  assertionSchema,
  cidrListSchema,
  claimTrustedProxyOwner,
  configureTrustedProxy,
  gatewayTicketSchema,
  sharedSecretSchema,
  readTrustedProxySettingsJson,
  trustedProxyLogin,
  updateTrustedProxySettings,
  userEmailHeaderSchema,
} from "../../domain/auth/trusted-proxy.ts";
import { requireSetupSession, requireUser, ROLES } from "../middleware/auth.ts";
import { requireReady } from "../middleware/ready.ts";
import { jsonBody } from "../validate.ts";
import { emailSchema } from "./setup.schemas.ts";
import { apiDoc } from "../route-docs.ts";
import * as json from "../responses.ts";

const configureSchema = z.object({
  setup_owner_email: emailSchema.nullable().optional(),
  user_email_header: userEmailHeaderSchema.optional(),
  trusted_proxy_cidrs: cidrListSchema.optional(),
  shared_secret: sharedSecretSchema.nullable().optional(),
  gateway_access_ticket: gatewayTicketSchema.nullable().optional(),
  assertion: assertionSchema.nullable().optional(),
});

/** After setup there is no owner to expect: the owner exists. */
const settingsSchema = configureSchema.omit({ setup_owner_email: true });

const ASSERTION_EXAMPLE = {
  header: "Cf-Access-Jwt-Assertion",
  jwks_url: "https://your-team.cloudflareaccess.com/cdn-cgi/access/certs",
  issuer: "https://your-team.cloudflareaccess.com",
  audience: "application-audience-tag",
};

/** Trusted-proxy setup (configure, owner claim) and sign-in. The peer address comes from the host, never a header. */
export function trustedProxyRoutes(deps: AppDeps) {
  const session = requireSetupSession(deps);
  return new Hono<AppEnv>()
    .post(
      "/v1/setup/trusted-proxy/configure",
      apiDoc({
        summary: "Setup: configure sign-in through a trusted reverse proxy",
        responses: { 200: json.TrustedProxyConfiguredJson },
        errors: { 400: ["invalid_input", "destination_not_allowed"], 409: ["invalid_state"] },
        example: {
          body: {
            setup_owner_email: "owner@example.com",
            user_email_header: "X-Forwarded-Email",
            trusted_proxy_cidrs: ["127.0.0.1/32"],
            shared_secret: "a-long-shared-secret-0123456789",
          },
        },
      }),
      session,
      jsonBody(configureSchema),
      async (c) => {
        const configured = await configureTrustedProxy(deps, c.req.valid("json"));
        return c.json({ ...configured, session_expires_at: c.get("setupSessionExpiresAt") });
      },
    )
    .post(
      "/v1/setup/owner/claim-trusted-proxy",
      apiDoc({
        summary: "Setup: the owner claims the instance through the trusted proxy",
        responses: { 200: json.OwnerCreatedJson },
        errors: {
          401: [
            "trusted_proxy_shared_secret_missing",
            "trusted_proxy_shared_secret_invalid",
            "trusted_proxy_identity_missing",
            "trusted_proxy_identity_invalid",
            "trusted_proxy_assertion_missing",
            "trusted_proxy_assertion_invalid",
          ],
          403: ["trusted_proxy_peer_not_allowed", "trusted_proxy_owner_email_mismatch"],
          409: ["invalid_state"],
        },
        example: { headers: { "X-Forwarded-Email": "owner@example.com", "X-Hangar-Trusted-Proxy-Secret": "a-long-shared-secret-0123456789" } },
      }),
      session,
      async (c) => {
        const claimed = await claimTrustedProxyOwner(deps, { peer: deps.getPeerAddress(c), headers: c.req.raw.headers });
        return c.json({ ...claimed, session_expires_at: c.get("setupSessionExpiresAt") });
      },
    )
    .post(
      "/v1/auth/trusted-proxy/login",
      apiDoc({
        summary: "Sign in through the trusted proxy (its headers name the user)",
        responses: { 200: json.SignedInJson },
        errors: {
          401: [
            "trusted_proxy_shared_secret_missing",
            "trusted_proxy_shared_secret_invalid",
            "trusted_proxy_identity_missing",
            "trusted_proxy_identity_invalid",
            "trusted_proxy_assertion_missing",
            "trusted_proxy_assertion_invalid",
          ],
          403: ["trusted_proxy_peer_not_allowed", "user_not_found"],
          409: ["setup_incomplete", "trusted_proxy_not_configured"],
        },
        example: { headers: { "X-Forwarded-Email": "owner@example.com", "X-Hangar-Trusted-Proxy-Secret": "a-long-shared-secret-0123456789" } },
      }),
      requireReady(deps),
      async (c) => c.json(await trustedProxyLogin(deps, { peer: deps.getPeerAddress(c), headers: c.req.raw.headers })),
    )
    .get(
      "/v1/settings/trusted-proxy",
      apiDoc({ summary: "Read the trusted-proxy configuration (no secrets)", responses: { 200: json.TrustedProxySettingsJson } }),
      requireUser(deps, { roles: ROLES.managers, code: "insufficient_role" }),
      async (c) => c.json(await readTrustedProxySettingsJson(deps)),
    )
    .put(
      "/v1/settings/trusted-proxy",
      apiDoc({
        summary: "Configure sign-in through a trusted proxy after setup, and make it the remote sign-in (owner)",
        responses: { 200: json.TrustedProxySettingsJson },
        errors: { 400: ["invalid_input", "destination_not_allowed"], 409: ["invalid_state"] },
        example: { body: { user_email_header: "Tailscale-User-Login", trusted_proxy_cidrs: [], assertion: ASSERTION_EXAMPLE } },
      }),
      requireUser(deps, { roles: ROLES.owner, code: "external_access_owner_required" }),
      jsonBody(settingsSchema),
      async (c) => c.json(await updateTrustedProxySettings(deps, c.get("user"), c.req.valid("json"))),
    );
}
