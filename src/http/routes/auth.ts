import { Hono } from "hono";
import { z } from "zod";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { localLogin } from "../../domain/auth/local-login.ts";
import { revokeSessionStatement } from "../../domain/auth/sessions.ts";
import { requireUser } from "../middleware/auth.ts";
import { isLocalUserRequest } from "../middleware/loopback.ts";
import { jsonBody } from "../validate.ts";
import { emailSchema } from "./setup.schemas.ts";
import { apiDoc } from "../route-docs.ts";
import * as json from "../responses.ts";

const localLoginSchema = z.object({ email: emailSchema.optional() });

/** Local login and logout; OIDC and trusted-proxy sign-in live in oidc.ts and trusted-proxy.ts. */
export function authRoutes(deps: AppDeps) {
  // Before `ready`, /v1/auth/* answers 409 setup_incomplete: authPathsRequireReady, mounted in createApp.
  return new Hono<AppEnv>()
    .post(
      "/v1/auth/local/login",
      apiDoc({
        summary: "Sign in as a local user (loopback clients of a local-mode instance)",
        responses: { 200: json.SignedInJson },
        errors: { 403: ["local_login_disabled", "mode_restricted", "local_login_loopback_required", "user_not_found"], 409: ["setup_incomplete"] },
        example: { body: { email: "owner@example.com" } },
      }),
      jsonBody(localLoginSchema),
      async (c) => c.json(await localLogin(deps, { email: c.req.valid("json").email, isLoopback: await isLocalUserRequest(deps, c) })),
    )
    .post("/v1/auth/logout", apiDoc({ summary: "Revoke the calling session", responses: { 200: json.OkJson } }), requireUser(deps), async (c) => {
      await revokeSessionStatement(deps, c.get("userSessionId"));
      return c.json({ ok: true });
    });
}
