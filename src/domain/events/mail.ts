// Mail through the instance's SMTP server (docs/api.md §18): tester links, release mails and invites. Every mail is
// an outbox row (target kind `mail`), so it is sent at least once, retried with the outbox's backoff and survives
// a restart (docs/api.md §12). Sending itself needs TCP, which the core has not: the host passes a MailSender
// (Node: src/runtime/mail.ts, nodemailer); where there is none (Workers) a mail fails with `mail_unsupported`.
import { eq } from "drizzle-orm";
import { builds, channels, type outbox, projects, testers, users } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { randomToken, sha256Hex } from "../common/crypto.ts";
import { readSetting } from "../settings/instance-settings.ts";
import { readNetworkSettings } from "../settings/network-settings.ts";

/** The SMTP server as a sender needs it: the password opened. */
export interface SmtpServer {
  host: string;
  port: number;
  secure: boolean;
  username: string | null;
  password: string | null;
  from: string;
}

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  /** Extra headers (List-Unsubscribe on release mails). */
  headers?: Record<string, string>;
}

/**
 * Sends one message through `server` and answers the server's reply code, or throws: a MailSendError when the
 * server refused it, DestinationNotAllowedError when the outbound guard refused the host (docs/api.md §12).
 */
export type MailSender = (server: SmtpServer, message: MailMessage) => Promise<{ code: number | null }>;

export class MailSendError extends Error {
  constructor(
    message: string,
    readonly code: number | null,
  ) {
    super(message);
  }
}

/** The setting's key; its shape is src/domain/settings/smtp-settings.ts's. */
const SMTP_SETTING = "smtp";

interface StoredSmtp {
  host: string;
  port: number;
  secure: boolean;
  username: string | null;
  password_sealed: string | null;
  from: string;
}

export async function smtpConfigured(deps: Pick<AppDeps, "db">): Promise<boolean> {
  return (await readSetting<StoredSmtp>(deps, SMTP_SETTING)) !== null;
}

export async function readSmtpServer(deps: Pick<AppDeps, "db" | "secrets">): Promise<SmtpServer | null> {
  const stored = await readSetting<StoredSmtp>(deps, SMTP_SETTING);
  if (!stored) return null;
  const v = stored.value;
  return {
    host: v.host,
    port: v.port,
    secure: v.secure,
    username: v.username,
    password: v.password_sealed ? await deps.secrets.open(v.password_sealed) : null,
    from: v.from,
  };
}

export type MailEvent = "tester_link" | "release" | "invite";

/** What a mail row carries when the message needs more than its target: the tester's link sealed, an invite's URL. */
export type MailPayload = { link_sealed: string } | { sign_in_url: string } | null;

/** One mail in the outbox, sent by the outbox loop like any delivery. */
export function mailOutboxRow(
  deps: Pick<AppDeps, "clock">,
  input: { event: MailEvent; targetId: string; payload: MailPayload; buildId?: string; eventSeq?: number },
): typeof outbox.$inferInsert {
  const now = deps.clock.now();
  return {
    eventSeq: input.eventSeq ?? null,
    buildId: input.buildId ?? null,
    targetKind: "mail",
    targetId: input.targetId,
    event: input.event,
    messageId: `msg_${crypto.randomUUID().replace(/-/g, "")}`,
    status: "pending",
    attempts: 0,
    nextAttemptAtMs: Date.now(),
    payload: input.payload,
    createdAt: now,
    updatedAt: now,
  };
}

/**
 * The instance's sign-in page: `{public URL}/login`, else where the caller reached us (the same base as every link
 * the daemon hands out, src/domain/events/webhooks.ts publicBase).
 */
export async function signInUrl(deps: Pick<AppDeps, "db">, requestOrigin: string): Promise<string> {
  const network = await readNetworkSettings(deps);
  return `${(network.public_url ?? requestOrigin).replace(/\/+$/, "")}/login`;
}

/** Where opt-out links point: the base the tester's link was made on, else the delivery URL or the public URL. */
async function linkBase(deps: Pick<AppDeps, "db">, tester: typeof testers.$inferSelect): Promise<string> {
  if (tester.linkBase) return tester.linkBase;
  const network = await readNetworkSettings(deps);
  return (network.artifact_delivery_url || network.public_url || "").replace(/\/+$/, "");
}

export const optOutPath = (token: string) => `/apps/opt-out/${token}`;

/** A tester's opt-out token, made (and stored hashed and sealed) the first time a release mail needs it. */
async function optOutToken(deps: Pick<AppDeps, "db" | "secrets" | "clock">, tester: typeof testers.$inferSelect): Promise<string> {
  if (tester.optOutTokenSealed) return deps.secrets.open(tester.optOutTokenSealed);
  const token = randomToken();
  await deps.db
    .update(testers)
    .set({ optOutTokenHash: await sha256Hex(token), optOutTokenSealed: await deps.secrets.seal(token), updatedAt: deps.clock.now() })
    .where(eq(testers.id, tester.id));
  return token;
}

/** A new tester's opt-out token and its stored forms, made with the tester. */
export async function newOptOutToken(deps: Pick<AppDeps, "secrets">) {
  const token = randomToken();
  return { optOutTokenHash: await sha256Hex(token), optOutTokenSealed: await deps.secrets.seal(token) };
}

/** Header values never carry a line break: names come from users and builds. */
const oneLine = (text: string) => text.replace(/[\r\n]+/g, " ").slice(0, 200);

export type PreparedMail = { mail: MailMessage } | { skip: "failed" | "disabled"; error: string };

/** The message a mail row stands for, read at send time (a removed tester or user gets nothing). */
export async function prepareMail(
  deps: Pick<AppDeps, "db" | "secrets" | "clock">,
  row: { event: string; targetId: string; payload: unknown; buildId: string | null },
): Promise<PreparedMail> {
  const payload = (row.payload ?? {}) as Record<string, unknown>;
  if (row.event === "invite") {
    const user = await deps.db.select().from(users).where(eq(users.id, row.targetId)).get();
    if (!user || user.status === "disabled") return { skip: "disabled", error: "user removed or disabled" };
    const url = typeof payload.sign_in_url === "string" ? payload.sign_in_url : null;
    return {
      mail: {
        to: user.email,
        subject: "You are invited to Hangar",
        text: [`You were invited to Hangar as ${user.role.replace("_", " ")}.`, "", url ? `Sign in here: ${url}` : "", ""].join("\n"),
      },
    };
  }
  const tester = await deps.db.select().from(testers).where(eq(testers.id, row.targetId)).get();
  if (!tester) return { skip: "disabled", error: "tester removed" };
  const channel = await deps.db.select().from(channels).where(eq(channels.id, tester.channelId)).get();
  if (!channel) return { skip: "disabled", error: "channel removed" };
  const project = await deps.db.select({ name: projects.name }).from(projects).where(eq(projects.id, channel.projectId)).get();
  const what = `${project?.name ?? "an app"} (${channel.name})`;
  const greeting = tester.name ? `Hello ${tester.name},` : "Hello,";
  if (row.event === "tester_link") {
    if (typeof payload.link_sealed !== "string") return { skip: "failed", error: "the link was dropped" };
    const link = await deps.secrets.open(payload.link_sealed);
    return {
      mail: {
        to: tester.email,
        subject: oneLine(`Test builds of ${what}`),
        text: [
          greeting,
          "",
          `You can now install test builds of ${what}.`,
          "Your personal page, with the latest build and the earlier ones:",
          "",
          link,
          "",
          "Keep this link to yourself: anyone who has it can install these builds.",
          "",
        ].join("\n"),
      },
    };
  }
  if (row.event === "release") {
    if (tester.mailOptOutAt !== null) return { skip: "disabled", error: "the tester turned release mails off" };
    const optOut = `${await linkBase(deps, tester)}${optOutPath(await optOutToken(deps, tester))}`;
    const build = row.buildId ? await deps.db.select({ n: builds.buildNumber }).from(builds).where(eq(builds.id, row.buildId)).get() : undefined;
    return {
      mail: {
        to: tester.email,
        subject: oneLine(`A new build of ${what}`),
        text: [
          greeting,
          "",
          `A new build of ${what} is ready${build ? ` (build #${build.n})` : ""}.`,
          "Open your personal page (the link Hangar sent you when you were added) to install it.",
          "",
          `No more of these mails: ${optOut}`,
          "",
        ].join("\n"),
        headers: { "List-Unsubscribe": `<${optOut}>` },
      },
    };
  }
  return { skip: "failed", error: `unknown mail ${row.event}` };
}
