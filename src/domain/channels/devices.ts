// Device registration for ad-hoc iOS builds (docs/api.md §18). An ad-hoc build installs only on the devices its
// provisioning profile lists, so a tester must first hand over the device's UDID. Apple's Profile Service does it
// without a cable: the tester page offers a .mobileconfig whose payload asks the device for its attributes, the
// device POSTs them to the callback as a CMS-signed property list, and the project keeps the device. The file
// Apple's developer portal takes for bulk device uploads is made from the stored devices.
import { and, asc, eq } from "drizzle-orm";
import { devices, testers } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { parsePlist, type PlistValue } from "../artifacts/ipa-metadata.ts";
import { cmsSignedContent } from "../artifacts/mobileprovision.ts";
import { getProject } from "../projects/projects.ts";
import { resolveTesterLink } from "./channels.ts";

export type DeviceRow = typeof devices.$inferSelect;

/** The device's answer is a few KiB (a property list and the device's certificate chain). */
export const MAX_ENROLL_BODY_BYTES = 64 * 1024;

/** A UDID: 40 hex digits (before iPhone XS) or 8-16 hex digits with a dash (since). */
const UDID = /^(?:[0-9A-Fa-f]{40}|[0-9A-Fa-f]{8}-[0-9A-Fa-f]{16})$/;

const escapeXml = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/**
 * The Profile Service payload (Apple's "Over-the-Air Profile Delivery and Configuration", phase 1): installing it
 * makes the device POST the listed attributes to `URL`, signed by the device, then open the URL it is redirected to.
 */
export async function enrollmentProfile(deps: Pick<AppDeps, "db">, token: string, base: string): Promise<string> {
  const { channel } = await resolveTesterLink(deps, token);
  const project = await getProject(deps, channel.projectId);
  const callback = `${base}/apps/${token}/enroll/callback`;
  const name = `${project.name} (${channel.name})`;
  return `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
  <key>PayloadContent</key>
  <dict>
    <key>URL</key>
    <string>${escapeXml(callback)}</string>
    <key>DeviceAttributes</key>
    <array>
      <string>UDID</string>
      <string>PRODUCT</string>
      <string>VERSION</string>
      <string>SERIAL</string>
    </array>
  </dict>
  <key>PayloadOrganization</key>
  <string>Hangar</string>
  <key>PayloadDisplayName</key>
  <string>${escapeXml(`Register this device for ${name}`.slice(0, 200))}</string>
  <key>PayloadDescription</key>
  <string>Sends this device's identifier (UDID), model and iOS version to the team, so that their test builds can include it. Nothing is installed.</string>
  <key>PayloadVersion</key>
  <integer>1</integer>
  <key>PayloadUUID</key>
  <string>${crypto.randomUUID().toUpperCase()}</string>
  <key>PayloadIdentifier</key>
  <string>hangar.enroll.${channel.id}</string>
  <key>PayloadType</key>
  <string>Profile Service</string>
</dict>
</plist>
`;
}

const isDict = (v: unknown): v is Record<string, PlistValue> =>
  typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array) && !(v instanceof Date);

/** A short printable attribute (a model such as iPhone15,2, a version such as 17.4), or null. */
function attribute(v: PlistValue | undefined): string | null {
  if (typeof v !== "string") return null;
  const text = v.replace(/[\u0000-\u001f\u007f]/g, "").trim();
  return text === "" ? null : text.slice(0, 64);
}

export interface DeviceAnswer {
  udid: string;
  product: string | null;
  version: string | null;
  serial: string | null;
}

/**
 * The attributes in the device's answer: a CMS SignedData (RFC 5652) around a property list. Only the content is
 * read; the device's signature is not checked (docs/decisions.md "Device registration"). 400 invalid_input when it
 * is not such a container or names no valid UDID.
 */
export async function readDeviceAnswer(body: Uint8Array): Promise<DeviceAnswer> {
  let plist: PlistValue;
  try {
    plist = await parsePlist(cmsSignedContent(body));
  } catch {
    throw new ApiError("invalid_input", "the body is not a signed device answer (CMS SignedData around a property list)");
  }
  if (!isDict(plist)) throw new ApiError("invalid_input", "the device answer is not a dictionary");
  const udid = typeof plist.UDID === "string" ? plist.UDID.trim() : "";
  if (!UDID.test(udid)) throw new ApiError("invalid_input", "the device answer carries no valid UDID");
  return { udid: udid.toUpperCase(), product: attribute(plist.PRODUCT), version: attribute(plist.VERSION), serial: attribute(plist.SERIAL) };
}

/** Stores the device for the tester's project: one row per project and UDID, updated when it enrols again. */
export async function registerDevice(deps: Pick<AppDeps, "db" | "clock">, token: string, body: Uint8Array): Promise<DeviceRow> {
  const { tester, channel } = await resolveTesterLink(deps, token);
  const answer = await readDeviceAnswer(body);
  const now = deps.clock.now();
  const [row] = await deps.db
    .insert(devices)
    .values({ id: crypto.randomUUID(), projectId: channel.projectId, ...answer, testerId: tester.id, createdAt: now, updatedAt: now })
    .onConflictDoUpdate({
      target: [devices.projectId, devices.udid],
      set: { product: answer.product, version: answer.version, serial: answer.serial, testerId: tester.id, updatedAt: now },
    })
    .returning();
  return row!;
}

export interface DeviceJson {
  id: string;
  udid: string;
  product: string | null;
  version: string | null;
  tester: { id: string; email: string; name: string | null } | null;
  created_at: number;
  updated_at: number;
}

/** GET /v1/projects/{id}/devices: the project's registered devices, oldest first. */
export async function listDevices(deps: Pick<AppDeps, "db">, projectId: string): Promise<DeviceJson[]> {
  await getProject(deps, projectId);
  const rows = await deps.db
    .select({ device: devices, tester: { id: testers.id, email: testers.email, name: testers.name } })
    .from(devices)
    .leftJoin(testers, eq(testers.id, devices.testerId))
    .where(eq(devices.projectId, projectId))
    .orderBy(asc(devices.createdAt), asc(devices.udid));
  return rows.map(({ device, tester }) => ({
    id: device.id,
    udid: device.udid,
    product: device.product,
    version: device.version,
    tester: tester ?? null,
    created_at: device.createdAt,
    updated_at: device.updatedAt,
  }));
}

/** Apple's device names are at most 50 characters; tabs and line breaks would break the file's columns. */
function deviceName(d: DeviceJson): string {
  const who = d.tester?.name ?? d.tester?.email ?? "Device";
  return `${who} ${d.product ?? ""}`
    .replace(/[\t\r\n\u0000-\u001f\u007f]+/g, " ")
    .replace(/\s+/g, " ")
    .trim()
    .slice(0, 50);
}

/**
 * Apple's "multiple devices" upload file for the developer portal: a header line, then one tab-separated line per
 * device (UDID, name, platform `ios`), LF line ends.
 */
export async function devicesExport(deps: Pick<AppDeps, "db">, projectId: string): Promise<string> {
  const list = await listDevices(deps, projectId);
  return ["Device ID\tDevice Name\tDevice Platform", ...list.map((d) => `${d.udid}\t${deviceName(d)}\tios`)].join("\n") + "\n";
}

/** The UDIDs this tester registered in the channel's project (the tester page's hint): one indexed read. */
export async function testerDeviceUdids(deps: Pick<AppDeps, "db">, projectId: string, testerId: string): Promise<string[]> {
  const rows = await deps.db
    .select({ udid: devices.udid })
    .from(devices)
    .where(and(eq(devices.testerId, testerId), eq(devices.projectId, projectId)));
  return rows.map((r) => r.udid);
}
