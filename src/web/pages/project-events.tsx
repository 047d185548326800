// The project page's "Builds on push" and "Notifications" sections (docs/api.md §11, §12, §15 "The rest"): webhooks
// per forge with the URL and secret shown once and the steps to paste them, notification targets with a test
// send, and the recent deliveries of each, in and out. Builders only, as the /v1/ routes: a qa_viewer gets
// neither the sections nor the routes (403 page).
import { Hono, type Context } from "hono";
import type { Child } from "hono/jsx";
import type { AppDeps, AppEnv } from "../../deps.ts";
import {
  createNotification,
  createNotificationSchema,
  deleteNotification,
  listNotifications,
  testNotification,
} from "../../domain/events/notifications.ts";
import { listTargetAttempts } from "../../domain/events/outbox.ts";
import {
  createWebhook,
  createWebhookSchema,
  deleteWebhook,
  listWebhookDeliveries,
  listWebhooks,
  toWebhookJson,
} from "../../domain/events/webhooks.ts";
import type { ProjectRow } from "../../domain/projects/projects.ts";
import { buildNumbersOf } from "../../domain/builds/builds.ts";
import { ApiError } from "../../errors.ts";
import { ROLES } from "../../http/middleware/auth.ts";
import { sentence } from "../errors.tsx";
import { setFlash } from "../flash.ts";
import { checkForm, fieldErrors } from "../form.ts";
import type { PageCtx } from "../layout.tsx";
import { requireBrowserUser } from "../session.tsx";
import { KIND_LABELS, type EventsState, type EventsView, ProjectEvents } from "../views/project-events.tsx";

/** Recent deliveries shown per webhook or notification; the /v1/ listings answer up to 100. */
const RECENT = 10;

/** Everything the two sections list, with the build numbers the deliveries link to. */
export async function loadProjectEvents(deps: Pick<AppDeps, "db">, projectId: string): Promise<EventsView> {
  const hookRows = await listWebhooks(deps, projectId);
  const webhooks = await Promise.all(
    hookRows.map(async (row) => ({
      row,
      url: toWebhookJson(row).url,
      deliveries: (await listWebhookDeliveries(deps, projectId, row.id)).slice(0, RECENT),
      statuses: await listTargetAttempts(deps, "commit_status", row.id, RECENT),
    })),
  );
  const notifications = await Promise.all(
    (await listNotifications(deps, projectId)).map(async (row) => ({
      row,
      attempts: await listTargetAttempts(deps, "notification", row.id, RECENT),
    })),
  );
  const ids = [...new Set(webhooks.flatMap((w) => w.deliveries.flatMap((d) => d.build_ids)))];
  return { webhooks, notifications, buildNumbers: await buildNumbersOf(deps, ids) };
}

/** Renders the project page with this section state and status (the project pages' own renderer). */
export type ShowProject = (c: Context<AppEnv>, projectId: string, state: EventsState, status: 200 | 400) => Promise<Response>;

type Body = Record<string, string | File | (string | File)[]>;
function formStrings(form: Body, name: string): string[] {
  const v = form[name];
  return (Array.isArray(v) ? v : v === undefined ? [] : [v]).filter((x): x is string => typeof x === "string");
}
const one = (form: Body, name: string) => formStrings(form, name)[0]?.trim() ?? "";

/** The refusals a builder can fix in the form (a bad URL, a destination the guard refuses); the rest are thrown. */
function formError(err: unknown): string | null {
  if (err instanceof ApiError && err.status === 400) return sentence(err.message);
  return null;
}

/** POST routes of the two sections, mounted by the project pages. */
export function projectEventPages(deps: AppDeps, show: ShowProject) {
  const builders = requireBrowserUser(deps, { roles: ROLES.builders });
  return new Hono<AppEnv>()
    .post("/projects/:project_id/webhooks", builders, async (c) => {
      const id = c.req.param("project_id");
      const form = (await c.req.parseBody({ all: true })) as Body;
      const values = { provider: one(form, "provider"), api_url: one(form, "api_url"), report_status: one(form, "report_status") };
      const checked = checkForm(createWebhookSchema, {
        provider: values.provider,
        api_url: values.api_url || undefined,
        report_status: values.report_status === "1",
      });
      if (!checked.ok)
        return show(
          c,
          id,
          { webhookForm: { values, errors: fieldErrors(checked.issues, { wording: { provider: "Choose one of the forges listed." } }) } },
          400,
        );
      try {
        const created = await createWebhook(deps, c.get("user"), id, checked.data, new URL(c.req.url).origin);
        return show(c, id, { createdWebhook: { id: created.id, provider: checked.data.provider, url: created.url, secret: created.secret } }, 200);
      } catch (err) {
        const message = formError(err);
        if (message === null) throw err;
        return show(c, id, { webhookForm: { values, errors: { api_url: message } } }, 400);
      }
    })
    .post("/projects/:project_id/webhooks/:webhook_id/delete", builders, async (c) => {
      const id = c.req.param("project_id");
      await deleteWebhook(deps, c.get("user"), id, c.req.param("webhook_id"));
      setFlash(c, "ok", "Webhook deleted. Remove it from the forge too: its deliveries are now refused.");
      return c.redirect(`/projects/${id}#webhooks`, 303);
    })
    .post("/projects/:project_id/notifications", builders, async (c) => {
      const id = c.req.param("project_id");
      const form = (await c.req.parseBody({ all: true })) as Body;
      const branchText = one(form, "branches");
      const values = { kind: one(form, "kind"), url: one(form, "url"), on: formStrings(form, "on"), branches: branchText };
      const branches = branchText.split(/[\s,]+/).filter((b) => b !== "");
      const input = { kind: values.kind, url: values.url, on: values.on, ...(branches.length > 0 ? { branches } : {}) };
      const checked = checkForm(createNotificationSchema, input);
      if (!checked.ok) {
        const errors = fieldErrors(checked.issues, {
          wording: {
            kind: "Choose where to send.",
            on: "Choose at least one event.",
            url: "Enter an absolute http(s) URL without a user name or password.",
          },
        });
        return show(c, id, { notificationForm: { values, errors } }, 400);
      }
      try {
        const created = await createNotification(deps, c.get("user"), id, checked.data, new URL(c.req.url).origin);
        if ("secret" in created) return show(c, id, { createdNotification: { id: created.id, kind: created.kind, secret: created.secret } }, 200);
        setFlash(c, "ok", `${KIND_LABELS[created.kind]} notification added. Use “Send test” to check it.`);
        return c.redirect(`/projects/${id}#notification-${created.id}`, 303);
      } catch (err) {
        const message = formError(err);
        if (message === null) throw err;
        return show(c, id, { notificationForm: { values, errors: { url: message } } }, 400);
      }
    })
    .post("/projects/:project_id/notifications/:notification_id/delete", builders, async (c) => {
      const id = c.req.param("project_id");
      await deleteNotification(deps, c.get("user"), id, c.req.param("notification_id"));
      setFlash(c, "ok", "Notification deleted.");
      return c.redirect(`/projects/${id}#notifications`, 303);
    })
    .post("/projects/:project_id/notifications/:notification_id/test", builders, async (c) => {
      const id = c.req.param("project_id");
      const nid = c.req.param("notification_id");
      const attempt = await testNotification(deps, id, nid);
      const status = attempt.status_code !== null ? `HTTP ${attempt.status_code}` : "no answer";
      if (attempt.error === null) setFlash(c, "ok", `Test message delivered (${status}).`);
      else setFlash(c, "error", `Test message not delivered: ${attempt.error} (${status}).`);
      return c.redirect(`/projects/${id}#notification-${nid}`, 303);
    });
}

/** The sections as the project page places them: nothing for a role that may not manage webhooks. */
export async function projectEventsSlot(deps: Pick<AppDeps, "db">, ctx: PageCtx, project: ProjectRow, state: EventsState): Promise<Child> {
  if (!ctx.user || !(ROLES.builders as readonly string[]).includes(ctx.user.role)) return null;
  return <ProjectEvents ctx={ctx} project={project} view={await loadProjectEvents(deps, project.id)} state={state} />;
}
