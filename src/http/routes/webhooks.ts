import { z } from "zod";
import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import {
  createWebhook,
  createWebhookSchema,
  deleteWebhook,
  listWebhookDeliveries,
  listWebhooks,
  MAX_WEBHOOK_BODY_BYTES,
  receiveWebhook,
  findWebhookForDelivery,
  toWebhookJson,
} from "../../domain/events/webhooks.ts";
import { readStreamCapped } from "../../domain/common/streams.ts";
import { requireUser, ROLES } from "../middleware/auth.ts";
import { jsonBody } from "../validate.ts";
import { apiDoc } from "../route-docs.ts";
import * as json from "../responses.ts";

/**
 * Reads a request body whole, refusing it (413) as soon as it passes `max` bytes: a declared length is checked
 * first, and the stream is counted as it arrives, so a body that lies about its length is cut off too.
 */
export async function readBodyCapped(req: Request, max: number): Promise<Uint8Array> {
  return readStreamCapped(
    req.body,
    req.headers.get("content-length"),
    max,
    () => new ApiError("payload_too_large", `request body exceeds ${max} bytes`),
  );
}

/** Inbound webhooks (docs/api.md §11): the project's webhook settings for builders, and the public receiver. */
export function webhooksRoutes(deps: AppDeps) {
  const builders = requireUser(deps, { roles: ROLES.builders });
  return (
    new Hono<AppEnv>()
      .post(
        "/v1/projects/:project_id/webhooks",
        apiDoc({
          summary: "Add an inbound webhook for a forge; its secret is in this answer only",
          responses: { 200: json.WebhookCreatedJson },
          errors: { 400: ["invalid_input", "destination_not_allowed"] },
          example: { body: { provider: "github", report_status: true } },
        }),
        builders,
        jsonBody(createWebhookSchema),
        async (c) => c.json(await createWebhook(deps, c.get("user"), c.req.param("project_id"), c.req.valid("json"), new URL(c.req.url).origin)),
      )
      .get(
        "/v1/projects/:project_id/webhooks",
        apiDoc({ summary: "List a project's webhooks (no secrets)", responses: { 200: z.array(json.WebhookJson) } }),
        builders,
        async (c) => c.json((await listWebhooks(deps, c.req.param("project_id"))).map(toWebhookJson)),
      )
      .delete(
        "/v1/projects/:project_id/webhooks/:webhook_id",
        apiDoc({ summary: "Remove a webhook", responses: { 204: { noBody: "Removed" } } }),
        builders,
        async (c) => {
          await deleteWebhook(deps, c.get("user"), c.req.param("project_id"), c.req.param("webhook_id"));
          return c.body(null, 204);
        },
      )
      .get(
        "/v1/projects/:project_id/webhooks/:webhook_id/deliveries",
        apiDoc({ summary: "The latest 100 deliveries received", responses: { 200: z.array(json.WebhookDeliveryJson) } }),
        builders,
        async (c) => c.json(await listWebhookDeliveries(deps, c.req.param("project_id"), c.req.param("webhook_id"))),
      )
      // Public: the forge proves itself with the webhook's secret, never with a session.
      .post(
        "/v1/hooks/:webhook_id",
        apiDoc({
          summary: "Receive a forge's event (verified by the provider's signature; public)",
          responses: { 200: json.HookAnswerJson },
          errors: { 401: ["invalid_signature"], 404: ["not_found"], 413: ["payload_too_large"] },
          example: {
            headers: {
              "X-GitHub-Event": "ping",
              "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
              "X-Hub-Signature-256": "sha256=<hex HMAC-SHA256 of the body with the secret>",
            },
            body: { zen: "Design for failure.", hook_id: 1 },
          },
        }),
        async (c) => {
          // The id first: an unknown one is answered before any of the body is read.
          const hook = await findWebhookForDelivery(deps, c.req.param("webhook_id"));
          const body = await readBodyCapped(c.req.raw, MAX_WEBHOOK_BODY_BYTES);
          return c.json(await receiveWebhook(deps, hook, c.req.raw.headers, body));
        },
      )
  );
}
