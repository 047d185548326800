import { z } from "zod";
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
import { apiDoc } from "../route-docs.ts";
import * as json from "../responses.ts";

/** Build notifications of a project (docs/api.md §12): Slack, Discord, Teams and signed webhooks. Builders only. */
export function notificationsRoutes(deps: AppDeps) {
  const builders = requireUser(deps, { roles: ROLES.builders });
  const path = "/v1/projects/:project_id/notifications";
  return new Hono<AppEnv>()
    .post(
      path,
      apiDoc({
        summary: "Add a build notification (Slack, Discord, Teams or a signed webhook)",
        responses: { 200: json.NotificationCreatedJson },
        errors: { 400: ["invalid_input", "destination_not_allowed"] },
        example: { body: { kind: "webhook", url: "https://ci-events.example.com/hangar", on: ["failed", "fixed"], branches: ["main"] } },
      }),
      builders,
      jsonBody(createNotificationSchema),
      async (c) => c.json(await createNotification(deps, c.get("user"), c.req.param("project_id"), c.req.valid("json"), new URL(c.req.url).origin)),
    )
    .get(path, apiDoc({ summary: "List a project's notifications", responses: { 200: z.array(json.NotificationJson) } }), builders, async (c) =>
      c.json((await listNotifications(deps, c.req.param("project_id"))).map(toNotificationJson)),
    )
    .delete(
      `${path}/:notification_id`,
      apiDoc({ summary: "Remove a notification", responses: { 204: { noBody: "Removed" } } }),
      builders,
      async (c) => {
        await deleteNotification(deps, c.get("user"), c.req.param("project_id"), c.req.param("notification_id"));
        return c.body(null, 204);
      },
    )
    .post(
      `${path}/:notification_id/test`,
      apiDoc({ summary: "Send a test message now and answer the attempt", responses: { 200: json.DeliveryAttemptJson } }),
      builders,
      async (c) => c.json(await testNotification(deps, c.req.param("project_id"), c.req.param("notification_id"))),
    )
    .get(
      `${path}/:notification_id/deliveries`,
      apiDoc({ summary: "The latest 100 delivery attempts", responses: { 200: z.array(json.DeliveryAttemptJson) } }),
      builders,
      async (c) => c.json(await listNotificationDeliveries(deps, c.req.param("project_id"), c.req.param("notification_id"))),
    );
}
