import { Hono } from "hono";
import { z } from "zod";
import { ASSIGNABLE_ROLES } from "../../db/schema/constants.ts";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { listAuditEvents } from "../../domain/common/audit.ts";
import { signInUrl } from "../../domain/events/mail.ts";
import { changeUserRole, disableUser, enableUser, inviteUser, listUsers, toUserJson, transferOwnership } from "../../domain/auth/users.ts";
import { signInLink } from "../../domain/auth/sign-in-link.ts";
import { requireUser, ROLES } from "../middleware/auth.ts";
import { jsonBody, queryParams } from "../validate.ts";
import { emailSchema } from "./setup.schemas.ts";
import { apiDoc } from "../route-docs.ts";
import * as json from "../responses.ts";

const inviteSchema = z.object({ email: emailSchema, role: z.enum(ASSIGNABLE_ROLES) });
const roleSchema = z.object({ role: z.enum(ASSIGNABLE_ROLES) });
const transferSchema = z.object({ email: z.string() });
const auditQuerySchema = z.object({ limit: z.coerce.number().int().min(1).max(500).default(50) });

export function userRoutes(deps: AppDeps) {
  const user = requireUser(deps);
  const managers = requireUser(deps, { roles: ROLES.managers });
  return new Hono<AppEnv>()
    .get("/v1/users/me", apiDoc({ summary: "The signed-in user", responses: { 200: json.UserJson } }), user, (c) => c.json(toUserJson(c.get("user"))))
    .get("/v1/users", apiDoc({ summary: "List users", responses: { 200: z.array(json.UserJson) } }), managers, async (c) =>
      c.json((await listUsers(deps)).map(toUserJson)),
    )
    .post(
      "/v1/users/invite",
      apiDoc({
        summary: "Invite a user by email with a role",
        responses: { 200: json.InvitedUserJson },
        errors: { 409: ["already_exists"] },
        example: { body: { email: "dev@example.com", role: "developer" } },
      }),
      managers,
      jsonBody(inviteSchema),
      async (c) => {
        const body = c.req.valid("json");
        const link = await signInLink(deps);
        // The link to pass on (or why there is none yet): docs/api.md §21. The mail falls back to this request's origin.
        const mailLink = link.sign_in_url ?? (await signInUrl(deps, new URL(c.req.url).origin));
        const invited = await inviteUser(deps, c.get("user"), body.email, body.role, { signInUrl: mailLink });
        return c.json({ ...toUserJson(invited), ...link });
      },
    )
    .post(
      "/v1/users/transfer-owner",
      apiDoc({
        summary: "Make another active user the owner (the owner becomes an admin)",
        responses: { 200: json.OwnershipTransferJson },
        errors: { 400: ["invalid_input", "invalid_email"], 404: ["user_not_found"], 409: ["user_not_active"] },
        example: { body: { email: "admin@example.com" } },
      }),
      requireUser(deps, { roles: ROLES.owner }),
      jsonBody(transferSchema),
      async (c) => {
        const email = c.req.valid("json").email;
        if (!emailSchema.safeParse(email).success) throw new ApiError("invalid_email", "the target email is not valid");
        return c.json(await transferOwnership(deps, c.get("user"), email));
      },
    )
    .patch(
      "/v1/users/:user_id/role",
      apiDoc({ summary: "Change a user's role", responses: { 200: json.UserJson }, example: { body: { role: "qa_viewer" } } }),
      managers,
      jsonBody(roleSchema),
      async (c) => c.json(toUserJson(await changeUserRole(deps, c.get("user"), c.req.param("user_id"), c.req.valid("json").role))),
    )
    .delete(
      "/v1/users/:user_id",
      apiDoc({ summary: "Disable a user (their sessions end)", responses: { 200: json.UserJson } }),
      managers,
      async (c) => c.json(toUserJson(await disableUser(deps, c.get("user"), c.req.param("user_id")))),
    )
    .post("/v1/users/:user_id/enable", apiDoc({ summary: "Enable a disabled user", responses: { 200: json.UserJson } }), managers, async (c) =>
      c.json(toUserJson(await enableUser(deps, c.get("user"), c.req.param("user_id")))),
    )
    .get(
      "/v1/audit-events",
      apiDoc({ summary: "The latest audit events", responses: { 200: z.array(json.AuditEventJson) }, example: { query: { limit: "50" } } }),
      managers,
      queryParams(auditQuerySchema),
      async (c) => c.json(await listAuditEvents(deps, c.req.valid("query").limit)),
    );
}
