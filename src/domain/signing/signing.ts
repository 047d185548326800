// Signing material of a project (docs/signing.md): checked on upload, stored sealed beside a description without
// secrets, described on `GET …/signing`, and handed to runners with every profile and its bundle id pattern.
import { eq } from "drizzle-orm";
import { z } from "zod";
import { projects, type AndroidSigningInfo, type IosSigningInfo } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError, type ValidationIssue } from "../../errors.ts";
import { auditStatement } from "../common/audit.ts";
import type { UserRow } from "../auth/users.ts";
import { getProject, openAndroidSigning, openIosSigning, toProjectJson, type ProjectRow } from "../projects/projects.ts";
import { openAndroidKeystore, openSigningIdentity, SigningMaterialError } from "./certificates.ts";
import { profileListsCertificate, readSigningProfile, type ReadProfile } from "./profiles.ts";

const base64 = () =>
  z
    .string()
    .min(1)
    .regex(/^[A-Za-z0-9+/]+={0,2}$/, "must be base64");
/** One profile per app and extension; more than this is a sign of a wrong upload, not a bigger app. */
export const MAX_PROFILES = 20;

/** The iOS upload: several profiles, or the single profile of the first version of this call. */
export const iosSigningUploadSchema = z.lazy(() =>
  z
    .object({
      certificate_p12_base64: base64(),
      certificate_password: z.string().max(1024),
      provisioning_profiles_base64: z.array(base64()).min(1).max(MAX_PROFILES).optional(),
      provisioning_profile_base64: base64().optional(),
    })
    .refine((v) => v.provisioning_profiles_base64 !== undefined || v.provisioning_profile_base64 !== undefined, {
      message: "give provisioning_profiles_base64 (one or more profiles)",
      path: ["provisioning_profiles_base64"],
    }),
);
export type IosSigningUpload = z.infer<typeof iosSigningUploadSchema>;

function decodeBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

function encodeBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

function materialError(
  code: "invalid_certificate" | "invalid_profile" | "certificate_not_in_profile" | "invalid_keystore",
  err: unknown,
  issue?: ValidationIssue,
): never {
  if (!(err instanceof SigningMaterialError)) throw err;
  throw new ApiError(code, err.message, issue ? [issue] : undefined);
}

/** The profiles of an upload, old single field included, in the order given. */
function uploadedProfiles(input: IosSigningUpload): string[] {
  return input.provisioning_profiles_base64 ?? [input.provisioning_profile_base64!];
}

/**
 * Opens the certificate with its password and reads each profile; every profile must list the certificate.
 * Throws 400 invalid_certificate, invalid_profile or certificate_not_in_profile with the failing field's path.
 */
export async function checkIosSigning(input: IosSigningUpload): Promise<{ info: IosSigningInfo; profiles: string[] }> {
  let certificate;
  try {
    certificate = openSigningIdentity(decodeBase64(input.certificate_p12_base64), input.certificate_password);
  } catch (err) {
    materialError("invalid_certificate", err, { path: "certificate_p12_base64", message: err instanceof Error ? err.message : "cannot be opened" });
  }
  const field = input.provisioning_profiles_base64 ? "provisioning_profiles_base64" : "provisioning_profile_base64";
  const profiles = uploadedProfiles(input);
  const read: ReadProfile[] = [];
  for (const [i, profile] of profiles.entries()) {
    const path = input.provisioning_profiles_base64 ? `${field}.${i}` : field;
    let parsed: ReadProfile;
    try {
      parsed = await readSigningProfile(decodeBase64(profile));
    } catch (err) {
      materialError("invalid_profile", err, { path, message: err instanceof Error ? err.message : "cannot be read" });
    }
    if (!profileListsCertificate(parsed, certificate.der)) {
      throw new ApiError(
        "certificate_not_in_profile",
        `the profile "${parsed.info.name}" does not list the certificate ${certificate.serial}: download it again after adding the certificate in the developer portal`,
        [{ path, message: "the profile does not list the uploaded certificate" }],
      );
    }
    read.push(parsed);
  }
  const { der: _der, ...described } = certificate;
  return {
    info: {
      certificate: { subject: described.subject, team_id: described.team_id, serial: described.serial, expires_at: described.expires_at },
      profiles: read.map((p) => p.info),
    },
    profiles,
  };
}

export const androidSigningUploadSchema = z.lazy(() =>
  z.object({
    keystore_base64: base64(),
    keystore_password: z.string().min(1).max(1024),
    key_alias: z.string().min(1).max(256),
    key_password: z.string().min(1).max(1024),
  }),
);
export type AndroidSigningUpload = z.infer<typeof androidSigningUploadSchema>;

export function checkAndroidSigning(input: AndroidSigningUpload): AndroidSigningInfo {
  try {
    const certificate = openAndroidKeystore(decodeBase64(input.keystore_base64), input.keystore_password, input.key_alias, input.key_password);
    return {
      key_alias: input.key_alias,
      certificate: { subject: certificate.subject, serial: certificate.serial, expires_at: certificate.expires_at },
    };
  } catch (err) {
    materialError("invalid_keystore", err, { path: "keystore_base64", message: err instanceof Error ? err.message : "cannot be opened" });
  }
}

/** What `GET …/signing` and the signing PUTs answer: descriptions only, never a secret. */
export function toSigningJson(project: ProjectRow) {
  const ios = project.iosSigningInfo;
  const android = project.androidSigningInfo;
  return {
    ios: ios ? { certificate: { ...ios.certificate }, profiles: ios.profiles.map((p) => ({ ...p })) } : null,
    android: android
      ? { key_alias: android.key_alias, certificate: { subject: android.certificate.subject, expires_at: android.certificate.expires_at } }
      : null,
  };
}

/** A PUT's answer: the project (its has_* flags, as before) with the description of what is stored. */
export function toSigningAnswer(project: ProjectRow) {
  return { ...toProjectJson(project), ...toSigningJson(project) };
}

type StoreDeps = Pick<AppDeps, "db" | "clock" | "secrets">;

export async function storeIosSigning(deps: StoreDeps, actor: UserRow, projectId: string, input: IosSigningUpload): Promise<ProjectRow> {
  await getProject(deps, projectId);
  const checked = await checkIosSigning(input);
  const document = {
    certificate_p12_base64: input.certificate_p12_base64,
    certificate_password: input.certificate_password,
    provisioning_profiles_base64: checked.profiles,
  };
  const sealed = await deps.secrets.seal(JSON.stringify(document));
  const now = deps.clock.now();
  await deps.db.batch([
    deps.db.update(projects).set({ iosSigningSealed: sealed, iosSigningInfo: checked.info, updatedAt: now }).where(eq(projects.id, projectId)),
    auditStatement(deps, {
      action: "project.iosSigning.set",
      actor,
      targetType: "project",
      targetId: projectId,
      details: { serial: checked.info.certificate.serial, profiles: checked.info.profiles.map((p) => p.uuid) },
    }),
  ]);
  return getProject(deps, projectId);
}

export async function storeAndroidSigning(deps: StoreDeps, actor: UserRow, projectId: string, input: AndroidSigningUpload): Promise<ProjectRow> {
  await getProject(deps, projectId);
  const info = checkAndroidSigning(input);
  const sealed = await deps.secrets.seal(JSON.stringify(input));
  const now = deps.clock.now();
  await deps.db.batch([
    deps.db.update(projects).set({ androidSigningSealed: sealed, androidSigningInfo: info, updatedAt: now }).where(eq(projects.id, projectId)),
    auditStatement(deps, {
      action: "project.androidSigning.set",
      actor,
      targetType: "project",
      targetId: projectId,
      details: { key_alias: info.key_alias },
    }),
  ]);
  return getProject(deps, projectId);
}

/**
 * Describes material stored before descriptions existed (or whose description was lost), from the sealed
 * documents; stores what it finds so it is done once. Material that no longer opens stays undescribed.
 */
export async function describeStoredSigning(deps: StoreDeps, project: ProjectRow): Promise<ProjectRow> {
  const set: Partial<Pick<ProjectRow, "iosSigningInfo" | "androidSigningInfo">> = {};
  if (project.iosSigningSealed && !project.iosSigningInfo) {
    const doc = await openIosSigning(deps, project);
    if (doc) {
      const input = {
        certificate_p12_base64: doc.certificate_p12_base64,
        certificate_password: doc.certificate_password,
        provisioning_profiles_base64: doc.provisioning_profiles_base64,
      };
      set.iosSigningInfo = await checkIosSigning(input).then(
        (c) => c.info,
        () => null,
      );
    }
  }
  if (project.androidSigningSealed && !project.androidSigningInfo) {
    const doc = await openAndroidSigning(deps, project);
    if (doc) {
      try {
        set.androidSigningInfo = checkAndroidSigning(doc);
      } catch {
        // A keystore that no longer opens keeps no description; the runner still gets it as stored.
      }
    }
  }
  if (!set.iosSigningInfo && !set.androidSigningInfo) return project;
  await deps.db.update(projects).set(set).where(eq(projects.id, project.id));
  return { ...project, ...set };
}

export async function readSigning(deps: StoreDeps, projectId: string) {
  return toSigningJson(await describeStoredSigning(deps, await getProject(deps, projectId)));
}

/** The runner's iOS answer: the first profile in the old field, and every profile with its bundle id pattern. */
export async function iosSigningForRunner(deps: Pick<AppDeps, "secrets">, project: ProjectRow) {
  const doc = await openIosSigning(deps, project);
  if (!doc) return null;
  const profiles = [];
  for (const profile of doc.provisioning_profiles_base64) {
    const read = await readSigningProfile(decodeBase64(profile)).catch(() => null);
    // Stored profiles were read on upload; one that no longer reads is still handed over under its position.
    profiles.push({
      uuid: read?.info.uuid ?? null,
      name: read?.info.name ?? null,
      bundle_id_pattern: read?.bundleIdPattern ?? null,
      profile_base64: profile,
    });
  }
  return {
    certificate_p12_base64: doc.certificate_p12_base64,
    certificate_password: doc.certificate_password,
    provisioning_profile_base64: doc.provisioning_profiles_base64[0] ?? "",
    provisioning_profiles: profiles,
  };
}

export { encodeBase64 };
