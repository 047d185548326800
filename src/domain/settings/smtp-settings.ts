// SMTP settings for tester mail (docs/spec.md §18): the server Hangar sends tester links and release mails through.
// The password is write-only and stored sealed like every other secret; the host must pass the outbound guard
// when it is saved (and again when a mail is sent), as notification URLs do.
import { z } from "zod";
import type { AppDeps } from "../../deps.ts";
import type { UserRow } from "../auth/users.ts";
import { auditStatement } from "../common/audit.ts";
import { assertDestinationAllowed } from "../events/webhooks.ts";
import { readSetting, writeSetting } from "./instance-settings.ts";

export const SMTP_SETTING = "smtp";

const HOST =
  /^(?=.{1,253}$)(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$|^\[[0-9A-Fa-f:.]+\]$/;

export const smtpSettingsSchema = z.object({
  host: z.string().regex(HOST, "a host name or IP address"),
  port: z.number().int().min(1).max(65535),
  secure: z.boolean(),
  username: z.string().min(1).max(320).nullable().optional(),
  /** Omitted: the stored password stays; null: removed. */
  password: z.string().min(1).max(1024).nullable().optional(),
  from: z
    .string()
    .trim()
    .min(3)
    .max(320)
    // The length is checked again here because zod runs a refinement even after `max` failed, and this pattern
    // backtracks quadratically: a 100 KiB value held the request for over a minute.
    .refine((v) => v.length <= 320 && /^[^\r\n]*<?[^\s<>@]+@[^\s<>@]+>?$/.test(v), "an address such as Hangar <ci@example.com>"),
});

interface StoredSmtp {
  host: string;
  port: number;
  secure: boolean;
  username: string | null;
  password_sealed: string | null;
  from: string;
}

export async function readSmtpSettings(deps: Pick<AppDeps, "db">) {
  const stored = await readSetting<StoredSmtp>(deps, SMTP_SETTING);
  if (!stored) return { host: null, port: null, secure: false, username: null, from: null, has_password: false, updated_at: null };
  const v = stored.value;
  return {
    host: v.host,
    port: v.port,
    secure: v.secure,
    username: v.username,
    from: v.from,
    has_password: v.password_sealed !== null,
    updated_at: stored.updatedAt,
  };
}

export async function updateSmtpSettings(
  deps: Pick<AppDeps, "db" | "clock" | "secrets" | "checkDestination" | "config">,
  actor: UserRow,
  input: z.infer<typeof smtpSettingsSchema>,
) {
  const bareHost = input.host.replace(/^\[|\]$/g, "");
  await assertDestinationAllowed(deps, `https://${bareHost.includes(":") ? `[${bareHost}]` : bareHost}:${input.port}/`);
  const before = await readSetting<StoredSmtp>(deps, SMTP_SETTING);
  const passwordSealed =
    input.password === undefined ? (before?.value.password_sealed ?? null) : input.password === null ? null : await deps.secrets.seal(input.password);
  const value: StoredSmtp = {
    host: input.host,
    port: input.port,
    secure: input.secure,
    username: input.username ?? null,
    password_sealed: passwordSealed,
    from: input.from,
  };
  await writeSetting(deps, SMTP_SETTING, value);
  await auditStatement(deps, {
    action: "settings.smtp_update",
    actor,
    targetType: "settings",
    targetId: SMTP_SETTING,
    details: { host: input.host, port: input.port },
  });
  return readSmtpSettings(deps);
}
