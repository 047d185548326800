import { Hono } from "hono";
import { z } from "zod";
import type { AppDeps, AppEnv } from "../../deps.ts";
import {
  cidrListSchema,
  claimTrustedProxyOwner,
  configureTrustedProxy,
  gatewayTicketSchema,
  sharedSecretSchema,
  trustedProxyLogin,
  userEmailHeaderSchema,
} from "../../domain/auth/trusted-proxy.ts";
import { requireSetupSession } from "../middleware/auth.ts";
import { requireReady } from "../middleware/ready.ts";
import { jsonBody } from "../validate.ts";
import { emailSchema } from "./setup.schemas.ts";

const configureSchema = z.object({
  setup_owner_email: emailSchema.nullable().optional(),
  user_email_header: userEmailHeaderSchema.optional(),
  trusted_proxy_cidrs: cidrListSchema.optional(),
  shared_secret: sharedSecretSchema.nullable().optional(),
  gateway_access_ticket: gatewayTicketSchema.nullable().optional(),
});

/** Trusted-proxy setup (configure, owner claim) and sign-in. The peer address comes from the host, never a header. */
export function trustedProxyRoutes(deps: AppDeps) {
  const session = requireSetupSession(deps);
  return new Hono<AppEnv>()
    .post("/v1/setup/trusted-proxy/configure", session, jsonBody(configureSchema), async (c) => {
      const configured = await configureTrustedProxy(deps, c.req.valid("json"));
      return c.json({ ...configured, session_expires_at: c.get("setupSessionExpiresAt") });
    })
    .post("/v1/setup/owner/claim-trusted-proxy", session, async (c) => {
      const claimed = await claimTrustedProxyOwner(deps, { peer: deps.getPeerAddress(c), headers: c.req.raw.headers });
      return c.json({ ...claimed, session_expires_at: c.get("setupSessionExpiresAt") });
    })
    .post("/v1/auth/trusted-proxy/login", requireReady(deps), async (c) =>
      c.json(await trustedProxyLogin(deps, { peer: deps.getPeerAddress(c), headers: c.req.raw.headers })),
    );
}
