import { and, desc, eq } from "drizzle-orm";
import { z } from "zod";
import { NOTIFICATION_EVENTS, NOTIFICATION_KINDS } from "../../db/schema/constants.ts";
import { notifications, outboxAttempts } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { auditStatement } from "../common/audit.ts";
import { newStandardWebhookSecret } from "./messages.ts";
import { parseBaseUrl } from "../settings/network-settings.ts";
import { sendNotificationTest } from "./outbox.ts";
import { getProject } from "../projects/projects.ts";
import type { UserRow } from "../auth/users.ts";
import { assertDestinationAllowed, publicBase } from "./webhooks.ts";

export type NotificationRow = typeof notifications.$inferSelect;

const DELIVERIES_LISTED = 100;

export const createNotificationSchema = z.object({
  kind: z.enum(NOTIFICATION_KINDS),
  url: z
    .string()
    .max(2048)
    .refine(
      (u) => URL.canParse(u) && parseBaseUrl(new URL(u).origin) !== null && !new URL(u).username && !new URL(u).password,
      "must be an absolute http(s) URL without credentials",
    ),
  on: z.array(z.enum(NOTIFICATION_EVENTS)).min(1).max(NOTIFICATION_EVENTS.length),
  branches: z.array(z.string().min(1).max(255)).max(100).optional(),
});

export function toNotificationJson(n: NotificationRow) {
  return {
    id: n.id,
    project_id: n.projectId,
    kind: n.kind,
    on: n.on as string[],
    branches: (n.branches as string[] | null) ?? null,
    has_url: true as const,
    disabled: n.disabledAt !== null,
    created_at: n.createdAt,
  };
}

export async function createNotification(
  deps: Pick<AppDeps, "db" | "clock" | "secrets" | "checkDestination" | "config">,
  actor: UserRow,
  projectId: string,
  input: z.infer<typeof createNotificationSchema>,
  requestOrigin: string,
) {
  await getProject(deps, projectId);
  await assertDestinationAllowed(deps, input.url);
  const secret = input.kind === "webhook" ? newStandardWebhookSecret() : null;
  const now = deps.clock.now();
  const row: NotificationRow = {
    id: crypto.randomUUID(),
    projectId,
    kind: input.kind,
    urlSealed: await deps.secrets.seal(input.url),
    on: [...new Set(input.on)],
    branches: input.branches ?? null,
    secretSealed: secret ? await deps.secrets.seal(secret) : null,
    baseUrl: await publicBase(deps, requestOrigin),
    disabledAt: null,
    createdBy: actor.id,
    createdAt: now,
    updatedAt: now,
  };
  await deps.db.batch([
    deps.db.insert(notifications).values(row),
    auditStatement(deps, {
      action: "notification.create",
      actor,
      targetType: "notification",
      targetId: row.id,
      details: { project_id: projectId, kind: row.kind },
    }),
  ]);
  // The URL (it often is the credential: Slack, Discord, Teams) is never answered; the signing secret only now.
  return secret ? { ...toNotificationJson(row), secret } : toNotificationJson(row);
}

export async function listNotifications(deps: Pick<AppDeps, "db">, projectId: string): Promise<NotificationRow[]> {
  await getProject(deps, projectId);
  return deps.db.select().from(notifications).where(eq(notifications.projectId, projectId)).orderBy(notifications.createdAt, notifications.id);
}

export async function getProjectNotification(deps: Pick<AppDeps, "db">, projectId: string, notificationId: string): Promise<NotificationRow> {
  await getProject(deps, projectId);
  const row = await deps.db
    .select()
    .from(notifications)
    .where(and(eq(notifications.id, notificationId), eq(notifications.projectId, projectId)))
    .get();
  if (!row) throw new ApiError("not_found", "no such notification in this project");
  return row;
}

export async function deleteNotification(
  deps: Pick<AppDeps, "db" | "clock">,
  actor: UserRow,
  projectId: string,
  notificationId: string,
): Promise<void> {
  await getProjectNotification(deps, projectId, notificationId);
  await deps.db.batch([
    deps.db.delete(notifications).where(eq(notifications.id, notificationId)),
    auditStatement(deps, {
      action: "notification.delete",
      actor,
      targetType: "notification",
      targetId: notificationId,
      details: { project_id: projectId },
    }),
  ]);
}

export function toAttemptJson(a: typeof outboxAttempts.$inferSelect) {
  return { id: a.id, attempt: a.attempt, status_code: a.statusCode, error: a.error, created_at: a.createdAt };
}

export async function listNotificationDeliveries(deps: Pick<AppDeps, "db">, projectId: string, notificationId: string) {
  await getProjectNotification(deps, projectId, notificationId);
  const rows = await deps.db
    .select()
    .from(outboxAttempts)
    .where(and(eq(outboxAttempts.targetKind, "notification"), eq(outboxAttempts.targetId, notificationId)))
    .orderBy(desc(outboxAttempts.seq))
    .limit(DELIVERIES_LISTED);
  return rows.map(toAttemptJson);
}

/** POST .../notifications/{nid}/test: one message now, through the same sender and guard; answers the attempt. */
export async function testNotification(deps: AppDeps, projectId: string, notificationId: string) {
  const row = await getProjectNotification(deps, projectId, notificationId);
  return toAttemptJson(await sendNotificationTest(deps, row));
}
