import { Hono } from "hono";
import { z } from "zod";
import { ASSIGNABLE_ROLES } from "../../db/schema/constants.ts";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { listAuditEvents } from "../../domain/common/audit.ts";
import {
  changeUserRole,
  disableUser,
  enableUser,
  inviteUser,
  listUsers,
  toUserJson,
  transferOwnership,
} from "../../domain/auth/users.ts";
import { requireUser, ROLES } from "../middleware/auth.ts";
import { jsonBody, queryParams } from "../validate.ts";
import { emailSchema } from "./setup.schemas.ts";

const inviteSchema = z.object({ email: emailSchema, role: z.enum(ASSIGNABLE_ROLES) });
const roleSchema = z.object({ role: z.enum(ASSIGNABLE_ROLES) });
const transferSchema = z.object({ email: z.string() });
const auditQuerySchema = z.object({ limit: z.coerce.number().int().min(1).max(500).default(50) });

export function userRoutes(deps: AppDeps) {
  const user = requireUser(deps);
  const managers = requireUser(deps, { roles: ROLES.managers });
  return new Hono<AppEnv>()
    .get("/v1/users/me", user, (c) => c.json(toUserJson(c.get("user"))))
    .get("/v1/users", managers, async (c) => c.json((await listUsers(deps)).map(toUserJson)))
    .post("/v1/users/invite", managers, jsonBody(inviteSchema), async (c) => {
      const body = c.req.valid("json");
      return c.json(toUserJson(await inviteUser(deps, c.get("user"), body.email, body.role)));
    })
    .post("/v1/users/transfer-owner", requireUser(deps, { roles: ROLES.owner }), jsonBody(transferSchema), async (c) => {
      const email = c.req.valid("json").email;
      if (!emailSchema.safeParse(email).success) throw new ApiError(400, "invalid_email", "the target email is not valid");
      return c.json(await transferOwnership(deps, c.get("user"), email));
    })
    .patch("/v1/users/:user_id/role", managers, jsonBody(roleSchema), async (c) =>
      c.json(toUserJson(await changeUserRole(deps, c.get("user"), c.req.param("user_id"), c.req.valid("json").role))),
    )
    .delete("/v1/users/:user_id", managers, async (c) => c.json(toUserJson(await disableUser(deps, c.get("user"), c.req.param("user_id")))))
    .post("/v1/users/:user_id/enable", managers, async (c) => c.json(toUserJson(await enableUser(deps, c.get("user"), c.req.param("user_id")))))
    .get("/v1/audit-events", managers, queryParams(auditQuerySchema), async (c) => c.json(await listAuditEvents(deps, c.req.valid("query").limit)));
}
