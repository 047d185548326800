// Provisioning profiles uploaded for signing (docs/signing.md): the CMS envelope and the plist inside it, read
// with the same reader the app metadata uses, plus what signing needs: the UUID (the file name Xcode looks
// for), the application identifier (which bundle ids the profile signs) and the certificates it admits.
import { parsePlist, type PlistValue } from "../artifacts/ipa-metadata.ts";
import { cmsSignedContent, type SigningKind } from "../artifacts/mobileprovision.ts";
import { SigningMaterialError } from "./certificates.ts";

export interface ProfileInfo {
  name: string;
  uuid: string;
  /** With its team prefix: `ABCDE12345.com.example.app` (or `ABCDE12345.*`). */
  app_id: string;
  team_id: string | null;
  kind: SigningKind;
  expires_at: number | null;
  device_count: number | null;
}

export interface ReadProfile {
  info: ProfileInfo;
  /** The bundle id pattern it signs: the app id without its team prefix (`com.example.app`, `com.example.*`). */
  bundleIdPattern: string;
  /** DER of each certificate in DeveloperCertificates. */
  certificates: Uint8Array[];
}

const isDict = (v: unknown): v is Record<string, PlistValue> =>
  typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array) && !(v instanceof Date);

const UUID = /^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$/;

export async function readSigningProfile(bytes: Uint8Array): Promise<ReadProfile> {
  let plist: PlistValue;
  try {
    plist = await parsePlist(cmsSignedContent(bytes));
  } catch {
    throw new SigningMaterialError("not a provisioning profile: no CMS-signed property list");
  }
  if (!isDict(plist)) throw new SigningMaterialError("the profile's property list is not a dictionary");
  const entitlements = isDict(plist.Entitlements) ? plist.Entitlements : {};
  const uuid = typeof plist.UUID === "string" ? plist.UUID.trim() : "";
  // The UUID becomes a file name on the runner: only the canonical form is accepted.
  if (!UUID.test(uuid)) throw new SigningMaterialError("the profile has no valid UUID");
  const appId = entitlements["application-identifier"];
  if (typeof appId !== "string" || !/^[A-Za-z0-9]+\.[A-Za-z0-9.*-]+$/.test(appId))
    throw new SigningMaterialError("the profile has no application identifier");
  const certificates = Array.isArray(plist.DeveloperCertificates)
    ? plist.DeveloperCertificates.filter((c): c is Uint8Array => c instanceof Uint8Array)
    : [];
  const teams = Array.isArray(plist.TeamIdentifier) ? plist.TeamIdentifier.filter((t): t is string => typeof t === "string") : [];
  const devices = Array.isArray(plist.ProvisionedDevices) ? plist.ProvisionedDevices : null;
  const kind: SigningKind =
    plist.ProvisionsAllDevices === true ? "enterprise" : devices ? (entitlements["get-task-allow"] === true ? "development" : "ad_hoc") : "app_store";
  const expiry = plist.ExpirationDate;
  const name = typeof plist.Name === "string" && plist.Name.trim() !== "" ? plist.Name.trim() : uuid;
  return {
    info: {
      name,
      uuid: uuid.toUpperCase(),
      app_id: appId,
      team_id: teams[0] ?? appId.split(".")[0] ?? null,
      kind,
      expires_at: expiry instanceof Date && !Number.isNaN(expiry.getTime()) ? Math.floor(expiry.getTime() / 1000) : null,
      device_count: devices ? devices.length : null,
    },
    bundleIdPattern: appId.slice(appId.indexOf(".") + 1),
    certificates,
  };
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** True when the profile admits the certificate (its DER is one of DeveloperCertificates). */
export function profileListsCertificate(profile: ReadProfile, certificateDer: Uint8Array): boolean {
  return profile.certificates.some((c) => sameBytes(c, certificateDer));
}
