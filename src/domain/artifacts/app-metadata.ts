// App metadata read when an artifact completes (docs/api.md §7): name, identifiers, versions, minimum OS, icon and,
// for an IPA, the provisioning profile. Only the zip's directory and a handful of small entries are read
// (ranged reads through the store), each under a size limit, and the whole read under a deadline: a hostile or
// broken archive yields absent metadata, never a stalled completion.
import { ResourceTable, readBinaryManifest, type ManifestInfo } from "./apk-metadata.ts";
import type { InstallMetadata } from "./artifacts.ts";
import {
  installMetadataFromInfoPlist,
  parsePlist,
  readZipDirectory,
  readZipEntry,
  type PlistValue,
  type RangeReader,
  type ZipEntry,
} from "./ipa-metadata.ts";
import { readProvisioningProfile, type AppSigning } from "./mobileprovision.ts";
import { MAX_ICON_BYTES, normalizeIconPng } from "./png.ts";

export type { AppSigning, SigningKind } from "./mobileprovision.ts";

export interface AppMetadata {
  platform: "ios" | "android";
  name: string | null;
  bundle_identifier: string | null;
  version: string | null;
  build: string | null;
  min_os: string | null;
  has_icon: boolean;
  signing: AppSigning | null;
}

export interface ExtractedApp {
  app: AppMetadata;
  /** A standard PNG, or null. */
  icon: Uint8Array | null;
  /** What the iOS manifest needs, when the Info.plist had it. */
  install: InstallMetadata | null;
}

const MAX_INFO_PLIST = 4 * 1024 * 1024;
const MAX_PROFILE = 2 * 1024 * 1024;
const MAX_MANIFEST = 4 * 1024 * 1024;
/** resources.arsc of large apps reaches several MiB; past this the label and icon are left out. */
const MAX_RESOURCE_TABLE = 32 * 1024 * 1024;
/** The whole read: long enough for a slow S3 round trip per entry, short enough not to hold a runner up. */
export const METADATA_DEADLINE_MS = 20_000;

export type ArtifactPlatform = "ios" | "android";

export function artifactPlatform(filename: string): ArtifactPlatform | null {
  if (/\.ipa$/i.test(filename)) return "ios";
  if (/\.apk$/i.test(filename)) return "android";
  return null;
}

/**
 * The app inside an .ipa or .apk, or null when the archive is not readable as one. Never throws: a broken
 * archive is the runner's problem, reported as absent metadata.
 */
export async function extractAppMetadata(read: RangeReader, size: number, platform: ArtifactPlatform): Promise<ExtractedApp | null> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), METADATA_DEADLINE_MS);
  });
  const work = (platform === "ios" ? readIpa(read, size) : readApk(read, size)).catch(() => null);
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

const isDict = (v: unknown): v is Record<string, PlistValue> =>
  typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array) && !(v instanceof Date);
const textOf = (v: PlistValue | undefined): string | null => (typeof v === "string" && v.trim() !== "" ? v.trim() : null);

// ---------------------------------------------------------------------------------------------------------
// iOS

const APP_DIR = /^Payload\/[^/]+\.app\//;

async function readIpa(read: RangeReader, size: number): Promise<ExtractedApp | null> {
  // Only the top level of the .app: Info.plist, the profile and the icon files live there.
  const entries = await readZipDirectory(read, size, (name) => APP_DIR.test(name) && !name.slice(name.indexOf(".app/") + 5).includes("/"));
  const infoEntry = [...entries.values()].find((e) => e.name.endsWith(".app/Info.plist"));
  if (!infoEntry) return null;
  const appDir = infoEntry.name.slice(0, -"Info.plist".length);
  const plist = await parsePlist(await readZipEntry(read, infoEntry, MAX_INFO_PLIST));
  if (!isDict(plist)) return null;
  const signing = await optional(async () => {
    const entry = entries.get(`${appDir}embedded.mobileprovision`);
    return entry ? await readProvisioningProfile(await readZipEntry(read, entry, MAX_PROFILE)) : null;
  });
  const icon = await optional(() => readIpaIcon(read, entries, appDir, plist));
  const app: AppMetadata = {
    platform: "ios",
    name: textOf(plist.CFBundleDisplayName) ?? textOf(plist.CFBundleName),
    bundle_identifier: textOf(plist.CFBundleIdentifier),
    version: textOf(plist.CFBundleShortVersionString),
    build: textOf(plist.CFBundleVersion),
    min_os: textOf(plist.MinimumOSVersion),
    has_icon: icon !== null,
    signing,
  };
  return { app, icon, install: installMetadataFromInfoPlist(plist) };
}

/** A part that may be missing or broken without costing the rest. */
async function optional<T>(fn: () => Promise<T | null>): Promise<T | null> {
  try {
    return await fn();
  } catch {
    return null;
  }
}

/** The icon names Info.plist declares (CFBundleIcons, its ~ipad twin, the old CFBundleIconFiles/CFBundleIconFile). */
function declaredIconNames(plist: Record<string, PlistValue>): string[] {
  const names: string[] = [];
  for (const key of ["CFBundleIcons", "CFBundleIcons~ipad"]) {
    const icons = plist[key];
    const primary = isDict(icons) ? icons.CFBundlePrimaryIcon : undefined;
    if (isDict(primary)) {
      if (Array.isArray(primary.CFBundleIconFiles)) names.push(...primary.CFBundleIconFiles.filter((n): n is string => typeof n === "string"));
      if (typeof primary.CFBundleIconName === "string") names.push(primary.CFBundleIconName);
    }
  }
  if (Array.isArray(plist.CFBundleIconFiles)) names.push(...plist.CFBundleIconFiles.filter((n): n is string => typeof n === "string"));
  if (typeof plist.CFBundleIconFile === "string") names.push(plist.CFBundleIconFile);
  return names.map((n) => n.replace(/\.png$/i, "")).filter((n) => n !== "" && !n.includes("/"));
}

/** The largest PNG named after a declared icon (AppIcon60x60@3x.png beats AppIcon60x60@2x.png), restored. */
async function readIpaIcon(
  read: RangeReader,
  entries: Map<string, ZipEntry>,
  appDir: string,
  plist: Record<string, PlistValue>,
): Promise<Uint8Array | null> {
  const bases = declaredIconNames(plist);
  if (bases.length === 0) bases.push("AppIcon", "Icon");
  const candidates = [...entries.values()].filter((e) => {
    const file = e.name.slice(appDir.length);
    return /\.png$/i.test(file) && bases.some((b) => file.startsWith(b)) && e.uncompressedSize <= MAX_ICON_BYTES;
  });
  candidates.sort((a, b) => b.uncompressedSize - a.uncompressedSize);
  for (const entry of candidates.slice(0, 3)) {
    const png = await optional(async () => normalizeIconPng(await readZipEntry(read, entry, MAX_ICON_BYTES)));
    if (png) return png;
  }
  return null;
}

// ---------------------------------------------------------------------------------------------------------
// Android

async function readApk(read: RangeReader, size: number): Promise<ExtractedApp | null> {
  const entries = await readZipDirectory(
    read,
    size,
    (name) => name === "AndroidManifest.xml" || name === "resources.arsc" || name.startsWith("res/"),
  );
  const manifestEntry = entries.get("AndroidManifest.xml");
  if (!manifestEntry) return null;
  const manifest: ManifestInfo = readBinaryManifest(await readZipEntry(read, manifestEntry, MAX_MANIFEST));
  const tableEntry = entries.get("resources.arsc");
  const table = await optional(async () => (tableEntry ? new ResourceTable(await readZipEntry(read, tableEntry, MAX_RESOURCE_TABLE)) : null));
  const label = manifest.label ? (table ? table.resolveString(manifest.label) : manifest.label.raw) : null;
  const versionName = manifest.versionName ? (table ? table.resolveString(manifest.versionName) : manifest.versionName.raw) : null;
  let icon: Uint8Array | null = null;
  if (manifest.icon) {
    const paths = table ? table.resolveFiles(manifest.icon) : manifest.icon.raw ? [manifest.icon.raw] : [];
    for (const path of paths.filter((p) => /\.png$/i.test(p)).slice(0, 3)) {
      const entry = entries.get(path);
      if (!entry || entry.uncompressedSize > MAX_ICON_BYTES) continue;
      icon = await optional(async () => normalizeIconPng(await readZipEntry(read, entry, MAX_ICON_BYTES)));
      if (icon) break;
    }
  }
  const app: AppMetadata = {
    platform: "android",
    name: label?.trim() || null,
    bundle_identifier: manifest.packageName,
    version: versionName?.trim() || null,
    build: manifest.versionCode,
    min_os: manifest.minSdk,
    has_icon: icon !== null,
    signing: null,
  };
  return { app, icon, install: null };
}
