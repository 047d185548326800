import type { NotificationEvent } from "../../db/schema/constants.ts";
import { base64UrlToBytes, bytesToBase64Url } from "../common/crypto.ts";

/** What every message names (docs/api.md §12): project, pipeline, build number, branch, commit, actor, result, link. */
export interface BuildMessageContext {
  event: NotificationEvent;
  project: { id: string; name: string };
  pipeline: { id: string; name: string };
  build: Record<string, unknown> & {
    id: string;
    build_number: number;
    branch: string;
    commit_sha: string;
    trigger_actor: string | null;
    status: string;
  };
  url: string;
  /** "3 tests failed: A.a, B.b, C.c" when the build's test reports hold failures (docs/test-reports.md), else absent. */
  tests?: string | null;
}

const RESULT_WORDS: Record<NotificationEvent, string> = {
  started: "started",
  succeeded: "succeeded",
  failed: "failed",
  fixed: "is fixed (succeeded after a failure)",
  canceled: "was canceled",
  timed_out: "timed out",
  expired: "expired in the queue",
  signing_expiring: "has signing material expiring",
  published: "was published to the store",
  publish_failed: "could not be published to the store",
};

function summary(m: BuildMessageContext): string {
  const tests = m.tests ? ` (${m.tests})` : "";
  return `${m.project.name} / ${m.pipeline.name} #${m.build.build_number} ${RESULT_WORDS[m.event]}${tests}`;
}

function facts(m: BuildMessageContext): Array<[string, string]> {
  return [
    ["Branch", m.build.branch],
    ["Commit", m.build.commit_sha.slice(0, 12)],
    ["By", m.build.trigger_actor ?? "unknown"],
    ["Result", m.build.status],
  ];
}

/** Slack mrkdwn: &, < and > are the only characters it wants escaped (a link is <url|text>). */
function slackEscape(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

export function slackMessage(m: BuildMessageContext) {
  const text = `${summary(m)}: ${m.url}`;
  const body = `*<${m.url}|${slackEscape(summary(m))}>*\n${facts(m)
    .map(([k, v]) => `${k}: \`${slackEscape(v)}\``)
    .join("  ")}`;
  return { text: slackEscape(text), blocks: [{ type: "section", text: { type: "mrkdwn", text: body } }] };
}

const DISCORD_COLORS: Record<NotificationEvent, number> = {
  started: 0x3b82f6,
  succeeded: 0x22c55e,
  fixed: 0x22c55e,
  failed: 0xef4444,
  timed_out: 0xef4444,
  expired: 0x9ca3af,
  canceled: 0x9ca3af,
  signing_expiring: 0xf59e0b,
  published: 0x22c55e,
  publish_failed: 0xef4444,
};

/** Discord: mentions are never parsed, so a branch named `@everyone` pings nobody. */
export function discordMessage(m: BuildMessageContext) {
  return {
    content: summary(m),
    embeds: [
      {
        title: summary(m).slice(0, 256),
        url: m.url,
        color: DISCORD_COLORS[m.event],
        fields: facts(m).map(([name, value]) => ({ name, value: value.slice(0, 1024) || "-", inline: true })),
      },
    ],
    allowed_mentions: { parse: [] as string[] },
  };
}

/** Teams: an Adaptive Card as a Workflows ("When a Teams webhook request is received") webhook expects it. */
export function teamsMessage(m: BuildMessageContext) {
  return {
    type: "message",
    attachments: [
      {
        contentType: "application/vnd.microsoft.card.adaptive",
        contentUrl: null,
        content: {
          $schema: "http://adaptivecards.io/schemas/adaptive-card.json",
          type: "AdaptiveCard",
          version: "1.4",
          body: [
            { type: "TextBlock", text: summary(m), weight: "Bolder", size: "Medium", wrap: true },
            { type: "FactSet", facts: facts(m).map(([title, value]) => ({ title, value })) },
          ],
          actions: [{ type: "Action.OpenUrl", title: "Open build", url: m.url }],
        },
      },
    ],
  };
}

export function webhookMessage(m: BuildMessageContext, timestampS: number) {
  return {
    type: `build.${m.event}`,
    timestamp: new Date(timestampS * 1000).toISOString(),
    data: { build: m.build, project: m.project, pipeline: m.pipeline, url: m.url },
  };
}

/** A fresh Standard Webhooks secret: `whsec_` + base64 of 32 random bytes. */
export function newStandardWebhookSecret(): string {
  const bytes = new Uint8Array(32);
  crypto.getRandomValues(bytes);
  return `whsec_${btoa(String.fromCharCode(...bytes))}`;
}

/**
 * The Standard Webhooks signature: `v1,` + base64 HMAC-SHA256 over `<id>.<timestamp>.<body>` keyed by the
 * secret's base64-decoded bytes (the part after `whsec_`).
 */
export async function standardWebhookHeaders(secret: string, messageId: string, timestampS: number, body: string): Promise<Record<string, string>> {
  const keyText = secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret;
  const keyBytes = base64UrlToBytes(keyText.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, ""));
  const key = await crypto.subtle.importKey("raw", keyBytes, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`${messageId}.${timestampS}.${body}`)));
  const signature = bytesToBase64Url(mac).replace(/-/g, "+").replace(/_/g, "/");
  const padded = signature + "=".repeat((4 - (signature.length % 4)) % 4);
  return { "webhook-id": messageId, "webhook-timestamp": String(timestampS), "webhook-signature": `v1,${padded}` };
}

/** A signing health notice (docs/signing.md): the project and the item that expires or has expired. */
export interface SigningNoticeContext {
  type: "signing.expiring" | "signing.expired";
  project: { id: string; name: string };
  item: { kind: string; name: string; expires_at: number; state: string; uuid?: string; serial?: string };
  url: string;
}

const ITEM_WORDS: Record<string, string> = {
  ios_certificate: "iOS certificate",
  ios_profile: "iOS provisioning profile",
  android_certificate: "Android signing certificate",
};

function signingSummary(n: SigningNoticeContext, nowS: number): string {
  const what = `${n.project.name}: ${ITEM_WORDS[n.item.kind] ?? n.item.kind} "${n.item.name}"`;
  const date = new Date(n.item.expires_at * 1000).toISOString().slice(0, 10);
  if (n.type === "signing.expired") return `${what} expired on ${date}`;
  const days = Math.max(0, Math.ceil((n.item.expires_at - nowS) / 86_400));
  return `${what} expires in ${days} day${days === 1 ? "" : "s"} (${date})`;
}

/** The body a target of `kind` gets for a signing notice; webhooks get `{type, timestamp, data: {project, item}}`. */
export function signingNoticeMessage(kind: "slack" | "discord" | "teams" | "webhook", n: SigningNoticeContext, nowS: number) {
  const text = signingSummary(n, nowS);
  switch (kind) {
    case "slack":
      return {
        text: slackEscape(`${text}: ${n.url}`),
        blocks: [{ type: "section", text: { type: "mrkdwn", text: `*<${n.url}|${slackEscape(text)}>*` } }],
      };
    case "discord":
      return {
        content: text,
        embeds: [{ title: text.slice(0, 256), url: n.url, color: n.type === "signing.expired" ? 0xef4444 : 0xf59e0b }],
        allowed_mentions: { parse: [] as string[] },
      };
    case "teams":
      return {
        type: "message",
        attachments: [
          {
            contentType: "application/vnd.microsoft.card.adaptive",
            contentUrl: null,
            content: {
              $schema: "http://adaptivecards.io/schemas/adaptive-card.json",
              type: "AdaptiveCard",
              version: "1.4",
              body: [{ type: "TextBlock", text, weight: "Bolder", size: "Medium", wrap: true }],
              actions: [{ type: "Action.OpenUrl", title: "Open project", url: n.url }],
            },
          },
        ],
      };
    case "webhook":
      return { type: n.type, timestamp: new Date(nowS * 1000).toISOString(), data: { project: n.project, item: n.item } };
  }
}
