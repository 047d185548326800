// Store keys per project (docs/publishing.md): checked on save, sealed, answered only as what they are
// (issuer and key id, service account e-mail), opened only by the daemon's own publisher, never by a runner.
import { eq } from "drizzle-orm";
import { importPKCS8 } from "jose";
import { z } from "zod";
import { projects, type StoreCredentialsInfo } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { auditStatement } from "../common/audit.ts";
import { getProject, type ProjectRow } from "../projects/projects.ts";
import type { UserRow } from "../auth/users.ts";

const MAX_KEY_CHARS = 16 * 1024;

export const appStoreConnectKeySchema = z.strictObject({
  issuer_id: z.string().trim().min(1).max(100),
  key_id: z
    .string()
    .trim()
    .regex(/^[A-Za-z0-9]{1,64}$/, "a key id is letters and digits"),
  private_key_p8: z.string().min(1).max(MAX_KEY_CHARS),
});

export const googlePlayKeySchema = z.strictObject({
  service_account_json: z.string().min(1).max(MAX_KEY_CHARS),
});

export interface AppStoreConnectKey {
  issuer_id: string;
  key_id: string;
  private_key_p8: string;
}

/** The fields of a Google service account key file the publisher uses. */
export interface GooglePlayKey {
  client_email: string;
  project_id: string;
  private_key: string;
  private_key_id: string | null;
  token_uri: string;
}

function invalid(message: string): ApiError {
  return new ApiError("invalid_store_credentials", message);
}

/** An App Store Connect API key: an EC P-256 private key in PKCS#8 PEM (the `.p8` file). */
export async function checkAppStoreConnectKey(input: z.infer<typeof appStoreConnectKeySchema>): Promise<AppStoreConnectKey> {
  try {
    await importPKCS8(input.private_key_p8.trim(), "ES256");
  } catch {
    throw invalid("private_key_p8 is not an App Store Connect API key (an EC P-256 private key in a PEM .p8 file)");
  }
  return { issuer_id: input.issuer_id, key_id: input.key_id, private_key_p8: input.private_key_p8.trim() };
}

const serviceAccountFile = z.object({
  type: z.literal("service_account"),
  client_email: z.string().min(3).max(320),
  project_id: z.string().min(1).max(200),
  private_key: z.string().min(1),
  private_key_id: z.string().max(200).optional(),
  token_uri: z
    .string()
    .url()
    .refine((u) => /^https?:\/\//.test(u), "token_uri is an http(s) URL"),
});

/** A Google service account key file (JSON) with an RSA private key that signs RS256. */
export async function checkGooglePlayKey(input: z.infer<typeof googlePlayKeySchema>): Promise<GooglePlayKey> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(input.service_account_json);
  } catch {
    throw invalid("service_account_json is not JSON: paste the whole key file Google Cloud made");
  }
  const file = serviceAccountFile.safeParse(parsed);
  if (!file.success) {
    const issue = file.error.issues[0];
    throw invalid(`service_account_json is not a service account key file (${issue?.path.join(".") || "file"}: ${issue?.message ?? "invalid"})`);
  }
  try {
    await importPKCS8(file.data.private_key, "RS256");
  } catch {
    throw invalid("service_account_json's private_key is not an RSA private key in PEM");
  }
  return {
    client_email: file.data.client_email,
    project_id: file.data.project_id,
    private_key: file.data.private_key,
    private_key_id: file.data.private_key_id ?? null,
    token_uri: file.data.token_uri,
  };
}

export function toStoresJson(project: Pick<ProjectRow, "appStoreConnectSealed" | "googlePlaySealed" | "storeCredentialsInfo">) {
  const info: StoreCredentialsInfo = project.storeCredentialsInfo ?? {};
  return {
    app_store_connect:
      project.appStoreConnectSealed !== null && info.app_store_connect
        ? { issuer_id: info.app_store_connect.issuer_id, key_id: info.app_store_connect.key_id, has_private_key: true }
        : null,
    google_play:
      project.googlePlaySealed !== null && info.google_play
        ? { client_email: info.google_play.client_email, project_id: info.google_play.project_id, has_service_account: true }
        : null,
  };
}

type StoreDeps = Pick<AppDeps, "db" | "clock" | "secrets">;

export async function getStores(deps: Pick<AppDeps, "db">, projectId: string) {
  return toStoresJson(await getProject(deps, projectId));
}

export async function putAppStoreConnectKey(deps: StoreDeps, actor: UserRow, projectId: string, input: z.infer<typeof appStoreConnectKeySchema>) {
  const project = await getProject(deps, projectId);
  const key = await checkAppStoreConnectKey(input);
  const info: StoreCredentialsInfo = { ...(project.storeCredentialsInfo ?? {}), app_store_connect: { issuer_id: key.issuer_id, key_id: key.key_id } };
  const sealed = await deps.secrets.seal(JSON.stringify(key));
  const now = deps.clock.now();
  await deps.db.batch([
    deps.db.update(projects).set({ appStoreConnectSealed: sealed, storeCredentialsInfo: info, updatedAt: now }).where(eq(projects.id, projectId)),
    auditStatement(deps, {
      action: "project.store.set",
      actor,
      targetType: "project",
      targetId: projectId,
      details: { store: "app_store_connect", key_id: key.key_id },
    }),
  ]);
  return getStores(deps, projectId);
}

export async function putGooglePlayKey(deps: StoreDeps, actor: UserRow, projectId: string, input: z.infer<typeof googlePlayKeySchema>) {
  const project = await getProject(deps, projectId);
  const key = await checkGooglePlayKey(input);
  const info: StoreCredentialsInfo = {
    ...(project.storeCredentialsInfo ?? {}),
    google_play: { client_email: key.client_email, project_id: key.project_id },
  };
  const sealed = await deps.secrets.seal(JSON.stringify(key));
  const now = deps.clock.now();
  await deps.db.batch([
    deps.db.update(projects).set({ googlePlaySealed: sealed, storeCredentialsInfo: info, updatedAt: now }).where(eq(projects.id, projectId)),
    auditStatement(deps, {
      action: "project.store.set",
      actor,
      targetType: "project",
      targetId: projectId,
      details: { store: "google_play", client_email: key.client_email },
    }),
  ]);
  return getStores(deps, projectId);
}

export async function openAppStoreConnectKey(
  deps: Pick<AppDeps, "secrets">,
  project: Pick<ProjectRow, "appStoreConnectSealed">,
): Promise<AppStoreConnectKey | null> {
  return project.appStoreConnectSealed === null ? null : (JSON.parse(await deps.secrets.open(project.appStoreConnectSealed)) as AppStoreConnectKey);
}

export async function openGooglePlayKey(
  deps: Pick<AppDeps, "secrets">,
  project: Pick<ProjectRow, "googlePlaySealed">,
): Promise<GooglePlayKey | null> {
  return project.googlePlaySealed === null ? null : (JSON.parse(await deps.secrets.open(project.googlePlaySealed)) as GooglePlayKey);
}
