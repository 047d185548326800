import { Hono } from "hono";
import { z } from "zod";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { localLogin } from "../../domain/local-login.ts";
import { revokeSessionStatement } from "../../domain/sessions.ts";
import { requireUser } from "../middleware/auth.ts";
import { requireReady } from "../middleware/ready.ts";
import { jsonBody } from "../validate.ts";
import { emailSchema } from "./setup.schemas.ts";

const localLoginSchema = z.object({ email: emailSchema.optional() });

/** Local login and logout; OIDC and trusted-proxy sign-in live in auth-oidc.ts and auth-trusted-proxy.ts. */
export function authRoutes(deps: AppDeps) {
  const ready = requireReady(deps);
  return new Hono<AppEnv>()
    // Covers every /v1/auth/* route of every area (app.route keeps the order). Local login decides for itself:
    // in remote mode before ready it answers the spec's 403 mode_restricted row instead.
    .use("/v1/auth/*", async (c, next) => (c.req.path === "/v1/auth/local/login" ? next() : ready(c, next)))
    .post("/v1/auth/local/login", jsonBody(localLoginSchema), async (c) =>
      c.json(await localLogin(deps, { email: c.req.valid("json").email, isLoopback: c.get("isLoopback") })),
    )
    .post("/v1/auth/logout", requireUser(deps), async (c) => {
      await revokeSessionStatement(deps, c.get("userSessionId"));
      return c.json({ ok: true });
    });
}
