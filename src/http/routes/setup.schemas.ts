import { z } from "zod";
import { REMOTE_AUTH_MODES, RUNTIME_MODES } from "../../db/schema/constants.ts";

export const verifyBootstrapSchema = z.object({
  token: z.string().regex(/^[0-9a-fA-F]{64}$/, "must be 64 hex characters"),
});

export const setupPreferencesSchema = z.object({
  runtime_mode: z.enum(RUNTIME_MODES).optional(),
  remote_auth_mode: z.enum(REMOTE_AUTH_MODES).optional(),
});

export const emailSchema = z.email().max(320);

export const localOwnerSchema = z.object({ email: emailSchema });
