import { createHmac } from "node:crypto";
import type { CallResult } from "./app.ts";
import type { Caller } from "./builds.ts";

export type Provider = "github" | "gitlab" | "gitea" | "forgejo" | "bitbucket";

/** The headers a forge sends with a delivery, signed the forge's way with `secret` (docs/api.md §11). */
export function forgeHeaders(
  provider: Provider,
  secret: string,
  event: string,
  body: string | Buffer,
  deliveryId: string = crypto.randomUUID(),
): Record<string, string> {
  const hex = createHmac("sha256", secret).update(body).digest("hex");
  const base = { "content-type": "application/json" };
  switch (provider) {
    case "github":
      return { ...base, "x-github-event": event, "x-github-delivery": deliveryId, "x-hub-signature-256": `sha256=${hex}` };
    case "gitlab":
      return { ...base, "x-gitlab-event": event, "x-gitlab-event-uuid": deliveryId, "x-gitlab-token": secret };
    case "gitea":
      return { ...base, "x-gitea-event": event, "x-gitea-delivery": deliveryId, "x-gitea-signature": hex };
    case "forgejo":
      // Forgejo sends the Gitea headers too; only its own are read.
      return { ...base, "x-forgejo-event": event, "x-forgejo-delivery": deliveryId, "x-forgejo-signature": hex, "x-gitea-event": event };
    case "bitbucket":
      return { ...base, "x-event-key": event, "x-request-uuid": deliveryId, "x-hub-signature": `sha256=${hex}` };
  }
}

/** POSTs one signed delivery to a webhook. */
export async function deliver(
  c: Caller,
  webhook: { id: string; secret: string; provider: Provider },
  event: string,
  payload: unknown,
  options: { deliveryId?: string; headers?: Record<string, string> } = {},
): Promise<CallResult> {
  const body = typeof payload === "string" ? payload : JSON.stringify(payload);
  const headers = { ...forgeHeaders(webhook.provider, webhook.secret, event, body, options.deliveryId), ...options.headers };
  return c.call("POST", `/v1/hooks/${webhook.id}`, { rawBody: body, headers });
}
