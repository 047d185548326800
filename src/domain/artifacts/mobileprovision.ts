// `embedded.mobileprovision` (docs/api.md §7): a CMS SignedData container (RFC 5652) whose encapsulated content
// is an XML property list. Only the content is read, with a small DER/BER walker: the signature is Apple's
// business, not ours (a forged profile fools no iPhone, and the page only explains what the phone will do).
import { concatBytes } from "../common/bytes.ts";
import { parsePlist, type PlistValue } from "./ipa-metadata.ts";

export type SigningKind = "app_store" | "ad_hoc" | "enterprise" | "development";

export interface AppSigning {
  kind: SigningKind;
  profile_name: string | null;
  team: string | null;
  /** Unix seconds, or null when the profile names none. */
  expires_at: number | null;
  /** ProvisionedDevices' length; null when the profile lists no devices (App Store, enterprise). */
  device_count: number | null;
}

/** The signing as stored with the artifact's metadata: what the API answers, and the profile's device list. */
export interface StoredAppSigning extends AppSigning {
  /**
   * The UDIDs of ProvisionedDevices (upper case), for the tester page's "is my device in it" (docs/api.md §18);
   * stored with the metadata, never answered by the API (src/domain/artifacts/artifacts.ts). Absent in metadata
   * read before it was kept.
   */
  provisioned_devices?: string[] | null;
}

export class CmsFormatError extends Error {}

interface Tlv {
  tag: number;
  constructed: boolean;
  /** Content start and end (exclusive). */
  start: number;
  end: number;
  /** Where the next element starts. */
  next: number;
}

const MAX_DEPTH = 32;

/** One BER element at `at`, within `limit`. Indefinite lengths (what streaming signers write) are followed. */
function readTlv(bytes: Uint8Array, at: number, limit: number, depth = 0): Tlv {
  if (depth > MAX_DEPTH) throw new CmsFormatError("CMS nested too deeply");
  if (at + 2 > limit) throw new CmsFormatError("CMS element runs past the end");
  const first = bytes[at]!;
  if ((first & 0x1f) === 0x1f) throw new CmsFormatError("CMS high tag numbers are not used by profiles");
  const constructed = (first & 0x20) !== 0;
  const lengthByte = bytes[at + 1]!;
  let start = at + 2;
  if (lengthByte === 0x80) {
    if (!constructed) throw new CmsFormatError("indefinite length on a primitive element");
    // Children until the end-of-contents marker (00 00).
    let pos = start;
    for (;;) {
      if (pos + 2 > limit) throw new CmsFormatError("CMS indefinite element runs past the end");
      if (bytes[pos] === 0 && bytes[pos + 1] === 0) return { tag: first, constructed, start, end: pos, next: pos + 2 };
      pos = readTlv(bytes, pos, limit, depth + 1).next;
    }
  }
  let length = lengthByte;
  if (lengthByte & 0x80) {
    const count = lengthByte & 0x7f;
    if (count > 4 || start + count > limit) throw new CmsFormatError("CMS length out of range");
    length = 0;
    for (let i = 0; i < count; i++) length = length * 256 + bytes[start + i]!;
    start += count;
  }
  if (start + length > limit) throw new CmsFormatError("CMS element runs past the end");
  return { tag: first, constructed, start, end: start + length, next: start + length };
}

function children(bytes: Uint8Array, parent: Tlv): Tlv[] {
  const out: Tlv[] = [];
  let pos = parent.start;
  while (pos < parent.end) {
    const child = readTlv(bytes, pos, parent.end);
    out.push(child);
    pos = child.next;
  }
  return out;
}

const OID_SIGNED_DATA = Uint8Array.from([0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x02]);
const OID_DATA = Uint8Array.from([0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x01]);

function isOid(bytes: Uint8Array, tlv: Tlv | undefined, oid: Uint8Array): boolean {
  return !!tlv && tlv.tag === 0x06 && tlv.end - tlv.start === oid.length && oid.every((b, i) => bytes[tlv.start + i] === b);
}

/** An OCTET STRING's bytes, primitive or (BER) constructed from segments. */
function octets(bytes: Uint8Array, tlv: Tlv, depth = 0): Uint8Array[] {
  if (depth > MAX_DEPTH) throw new CmsFormatError("CMS nested too deeply");
  if (tlv.tag === 0x04) return [bytes.subarray(tlv.start, tlv.end)];
  if (tlv.tag === 0x24) return children(bytes, tlv).flatMap((c) => octets(bytes, c, depth + 1));
  throw new CmsFormatError("CMS content is not an OCTET STRING");
}

/** The encapsulated content of a CMS SignedData container. Throws CmsFormatError when it is not one. */
export function cmsSignedContent(bytes: Uint8Array): Uint8Array {
  const contentInfo = readTlv(bytes, 0, bytes.length);
  if (contentInfo.tag !== 0x30) throw new CmsFormatError("not a CMS container");
  const [type, explicit] = children(bytes, contentInfo);
  if (!isOid(bytes, type, OID_SIGNED_DATA) || explicit?.tag !== 0xa0) throw new CmsFormatError("not CMS SignedData");
  const signedData = children(bytes, explicit)[0];
  if (signedData?.tag !== 0x30) throw new CmsFormatError("SignedData is not a SEQUENCE");
  // version, digestAlgorithms, encapContentInfo, …
  const encap = children(bytes, signedData)[2];
  if (encap?.tag !== 0x30) throw new CmsFormatError("SignedData has no encapsulated content");
  const [contentType, content] = children(bytes, encap);
  if (!isOid(bytes, contentType, OID_DATA) || content?.tag !== 0xa0) throw new CmsFormatError("SignedData carries no data (a detached signature?)");
  const inner = children(bytes, content)[0];
  if (!inner) throw new CmsFormatError("SignedData content is empty");
  const parts = octets(bytes, inner);
  if (parts.length === 1) return parts[0]!;
  return concatBytes(parts);
}

const isDict = (v: unknown): v is Record<string, PlistValue> =>
  typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array) && !(v instanceof Date);

/**
 * What the install page and the install link need from a profile. The kind follows Apple's rules:
 * ProvisionsAllDevices is enterprise (in-house); a device list with get-task-allow is development, without it
 * ad hoc; no device list is App Store (which no device installs over the air).
 */
export async function readProvisioningProfile(bytes: Uint8Array): Promise<StoredAppSigning> {
  const plist = await parsePlist(cmsSignedContent(bytes));
  if (!isDict(plist)) throw new CmsFormatError("the profile is not a dictionary");
  const text = (v: PlistValue | undefined): string | null => (typeof v === "string" && v.trim() !== "" ? v.trim() : null);
  const devices = Array.isArray(plist.ProvisionedDevices) ? plist.ProvisionedDevices : null;
  const entitlements = isDict(plist.Entitlements) ? plist.Entitlements : {};
  const kind: SigningKind =
    plist.ProvisionsAllDevices === true ? "enterprise" : devices ? (entitlements["get-task-allow"] === true ? "development" : "ad_hoc") : "app_store";
  const expiry = plist.ExpirationDate;
  const expiresAt = expiry instanceof Date && !Number.isNaN(expiry.getTime()) ? Math.floor(expiry.getTime() / 1000) : null;
  const teamName = text(plist.TeamName);
  return {
    kind,
    profile_name: text(plist.Name),
    team: teamName,
    expires_at: expiresAt,
    device_count: devices ? devices.length : null,
    provisioned_devices: devices ? devices.filter((d): d is string => typeof d === "string").map((d) => d.trim().toUpperCase()) : null,
  };
}
