import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import {
  createNotification,
  createNotificationSchema,
  deleteNotification,
  listNotificationDeliveries,
  listNotifications,
  testNotification,
  toNotificationJson,
} from "../../domain/events/notifications.ts";
import { requireUser, ROLES } from "../middleware/auth.ts";
import { jsonBody } from "../validate.ts";

/** Build notifications of a project (CONTRACT §12): Slack, Discord, Teams and signed webhooks. Builders only. */
export function notificationsRoutes(deps: AppDeps) {
  const builders = requireUser(deps, { roles: ROLES.builders });
  const path = "/v1/projects/:project_id/notifications";
  return new Hono<AppEnv>()
    .post(path, builders, jsonBody(createNotificationSchema), async (c) =>
      c.json(await createNotification(deps, c.get("user"), c.req.param("project_id"), c.req.valid("json"), new URL(c.req.url).origin)),
    )
    .get(path, builders, async (c) => c.json((await listNotifications(deps, c.req.param("project_id"))).map(toNotificationJson)))
    .delete(`${path}/:notification_id`, builders, async (c) => {
      await deleteNotification(deps, c.get("user"), c.req.param("project_id"), c.req.param("notification_id"));
      return c.body(null, 204);
    })
    .post(`${path}/:notification_id/test`, builders, async (c) =>
      c.json(await testNotification(deps, c.req.param("project_id"), c.req.param("notification_id"))),
    )
    .get(`${path}/:notification_id/deliveries`, builders, async (c) =>
      c.json(await listNotificationDeliveries(deps, c.req.param("project_id"), c.req.param("notification_id"))),
    );
}
