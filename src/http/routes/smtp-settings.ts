import { z } from "zod";
import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { readSmtpSettings, smtpSettingsSchema, updateSmtpSettings } from "../../domain/settings/smtp-settings.ts";
import { requireUser, ROLES } from "../middleware/auth.ts";
import { jsonBody } from "../validate.ts";
import { apiDoc } from "../route-docs.ts";

const SmtpSettingsJson = z.object({
  host: z.string().nullable(),
  port: z.number().int().nullable(),
  secure: z.boolean(),
  username: z.string().nullable(),
  from: z.string().nullable(),
  has_password: z.boolean(),
  updated_at: z.number().int().nullable(),
});

/** SMTP for tester mail (docs/spec.md §18): owner and admin; the password is never answered. */
export function smtpSettingsRoutes(deps: AppDeps) {
  const managers = requireUser(deps, { roles: ROLES.managers, code: "insufficient_role" });
  return new Hono<AppEnv>()
    .get(
      "/v1/settings/smtp",
      apiDoc({ summary: "The SMTP server for tester mail (without its password)", responses: { 200: SmtpSettingsJson } }),
      managers,
      async (c) => c.json(await readSmtpSettings(deps)),
    )
    .put(
      "/v1/settings/smtp",
      apiDoc({
        summary: "Set the SMTP server for tester mail; the password is write-only",
        responses: { 200: SmtpSettingsJson },
        errors: { 400: ["invalid_input", "destination_not_allowed"] },
        example: {
          body: { host: "127.0.0.1", port: 2525, secure: false, username: "ci", password: "app-password", from: "Hangar <ci@example.com>" },
        },
      }),
      managers,
      jsonBody(smtpSettingsSchema),
      async (c) => c.json(await updateSmtpSettings(deps, c.get("user"), c.req.valid("json"))),
    );
}
