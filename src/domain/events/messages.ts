import type { NotificationEvent } from "../../db/schema/constants.ts";
import { base64UrlToBytes, bytesToBase64Url } from "../common/crypto.ts";

/** What every message names (CONTRACT §12): project, pipeline, build number, branch, commit, actor, result, link. */
export interface BuildMessageContext {
  event: NotificationEvent;
  project: { id: string; name: string };
  pipeline: { id: string; name: string };
  build: Record<string, unknown> & { id: string; build_number: number; branch: string; commit_sha: string; trigger_actor: string | null; status: string };
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
  const body = `*<${m.url}|${slackEscape(summary(m))}>*\n${facts(m).map(([k, v]) => `${k}: \`${slackEscape(v)}\``).join("  ")}`;
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
