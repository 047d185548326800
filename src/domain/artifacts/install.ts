// Over-the-air installs (docs/spec.md install-link rules 1–4, docs/api.md §7). One install token per session serves the
// manifest and the IPA for an hour and stays reusable until then, because the installer fetches them
// separately (rule 2). Every installer URL is under the public /install/ prefix (rule 3).
import { eq } from "drizzle-orm";
import { builds, installs } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import type { StorageLocation } from "../../storage/types.ts";
import {
  DOWNLOAD_TTL_S,
  contentDisposition,
  loadAvailableArtifact,
  openStoreAt,
  serveArtifactBytes,
  type ArtifactRow,
  type ByteResponse,
  type InstallMetadata,
  loadArtifactIcon,
} from "./artifacts.ts";
import type { AppMetadata } from "./app-metadata.ts";
import { loadInstance } from "../setup/instance.ts";
import { buildManifestPlist } from "./ios-manifest.ts";
import { readNetworkSettings } from "../settings/network-settings.ts";
import { GATEWAY_USER_HEADER, readTrustedProxySettings } from "../auth/trusted-proxy.ts";
import { newUrlToken, resolveUrlToken } from "../auth/url-tokens.ts";

/** Install sessions last one hour (docs/spec.md limits). */
export const INSTALL_TTL_S = 3600;
const TICKET_PARAM = "gateway-ticket";

type Deps = Pick<AppDeps, "db" | "clock" | "config" | "secrets" | "openArtifactStore">;
type Platform = "ios" | "android";

/** What an install token remembers: the base its URLs were built on and the sealed gateway ticket, if any. */
interface InstallDetails {
  platform: Platform;
  base_url: string;
  gateway_ticket_sealed: string | null;
  /** Set when the session was made from a tester's page, so its install counts for that tester. */
  tester_id?: string;
}

function platformOf(artifact: ArtifactRow): Platform {
  if (/\.ipa$/i.test(artifact.filename)) return "ios";
  if (/\.apk$/i.test(artifact.filename)) return "android";
  throw new ApiError("unsupported_artifact", "only .ipa and .apk artifacts can be installed over the air");
}

function completeMetadata(value: unknown): InstallMetadata | null {
  const m = value as Partial<InstallMetadata> | null;
  if (!m || !m.bundle_identifier || !m.bundle_version || !m.title) return null;
  return { bundle_identifier: m.bundle_identifier, bundle_version: m.bundle_version, title: m.title };
}

/**
 * Rule 4: the ticket travels only when the instance runs remote trusted-proxy auth keyed on the gateway's
 * identity header and holds a ticket for it. OIDC, local mode and generic proxies never get one.
 */
async function gatewayTicket(deps: Deps): Promise<string | null> {
  const inst = await loadInstance(deps);
  if (inst.runtimeMode !== "remote" || inst.remoteAuthMode !== "trusted_proxy") return null;
  const proxy = await readTrustedProxySettings(deps);
  if (!proxy || proxy.userEmailHeader.toLowerCase() !== GATEWAY_USER_HEADER) return null;
  return proxy.gatewayAccessTicket;
}

const ticketQuery = (ticket: string | null): string => (ticket ? `?${TICKET_PARAM}=${encodeURIComponent(ticket)}` : "");

/** POST /v1/artifacts/{id}/install-link. */
export async function createInstallLink(deps: Deps, input: { artifactId: string; testerId?: string }) {
  const artifact = await loadAvailableArtifact(deps, input.artifactId);
  const platform = platformOf(artifact);
  // Rule 1: the delivery URL when set, else the public URL.
  const network = await readNetworkSettings(deps);
  const base = (network.artifact_delivery_url || network.public_url || "").replace(/\/+$/, "");
  if (!base) throw new ApiError("install_base_url_missing", "set a public URL or an artifact delivery URL in External Access first");
  // iOS installs only from HTTPS manifests and packages.
  if (platform === "ios" && !base.startsWith("https://")) {
    throw new ApiError("install_https_required", "iOS installs need an HTTPS delivery URL");
  }
  const metadata = completeMetadata(artifact.installMetadata);
  if (platform === "ios" && !metadata) {
    throw new ApiError("install_metadata_missing", "this IPA has no bundle identifier, version and title to install with");
  }
  if (platform === "ios") refuseUninstallable(artifact, deps.clock.now());
  const ticket = platform === "ios" ? await gatewayTicket(deps) : null;
  const details: InstallDetails = {
    platform,
    base_url: base,
    gateway_ticket_sealed: ticket ? await deps.secrets.seal(ticket) : null,
    ...(input.testerId ? { tester_id: input.testerId } : {}),
  };
  const { token, expiresAt, statement } = await newUrlToken(deps, { kind: "install", artifactId: artifact.id, ttlS: INSTALL_TTL_S, details });
  await statement;
  return { platform, ...installUrls(details, token, ticket), expires_at: expiresAt };
}

/**
 * docs/api.md §7: an IPA no phone will install over the air is refused when the link is asked for, in words,
 * rather than after a tester's "Unable to install".
 */
function refuseUninstallable(artifact: ArtifactRow, now: number): void {
  const signing = (artifact.appMetadata as AppMetadata | null)?.signing;
  if (!signing) return;
  if (signing.kind === "app_store") {
    throw new ApiError(
      "install_not_possible",
      "this IPA is signed for the App Store: devices install it only from the App Store or TestFlight; export it with an ad-hoc, development or enterprise profile to install it over the air",
    );
  }
  if (signing.expires_at !== null && signing.expires_at <= now) {
    const when = new Date(signing.expires_at * 1000).toISOString().slice(0, 10);
    throw new ApiError(
      "install_not_possible",
      `the provisioning profile ${signing.profile_name ? `"${signing.profile_name}" ` : ""}expired on ${when}: devices refuse to install this IPA; sign it again with a current profile`,
    );
  }
}

/** The URLs of one install session (the same on every call, so the page can show them again). */
function installUrls(details: InstallDetails, token: string, ticket: string | null) {
  const base = details.base_url;
  const query = ticketQuery(ticket);
  const downloadUrl = `${base}/install/artifact/${token}${query}`;
  const pageUrl = `${base}/install/${token}`;
  if (details.platform === "android") return { install_url: downloadUrl, download_url: downloadUrl, page_url: pageUrl };
  const manifestUrl = `${base}/install/ios/${token}/manifest.plist${query}`;
  return {
    install_url: `itms-services://?action=download-manifest&url=${encodeURIComponent(manifestUrl)}`,
    download_url: downloadUrl,
    manifest_url: manifestUrl,
    page_url: pageUrl,
  };
}

/** A live install session: 404 not_found when unknown, 410 link_expired after its hour. */
async function resolveInstall(deps: Deps, token: string) {
  const row = await resolveUrlToken(deps, "install", token, "link_expired");
  const artifact = await loadAvailableArtifact(deps, row.artifactId);
  const details = row.details as InstallDetails;
  const ticket = details.gateway_ticket_sealed ? await deps.secrets.open(details.gateway_ticket_sealed) : null;
  return { row, artifact, details, ticket };
}

/** GET /install/ios/{token}/manifest.plist. */
export async function installManifest(deps: Deps, input: { token: string }): Promise<string> {
  const { artifact, details, ticket } = await resolveInstall(deps, input.token);
  const metadata = completeMetadata(artifact.installMetadata);
  if (details.platform !== "ios" || !metadata) throw new ApiError("not_found", "no manifest for this install link");
  return buildManifestPlist({
    softwarePackageUrl: `${details.base_url}/install/artifact/${input.token}${ticketQuery(ticket)}`,
    bundleIdentifier: metadata.bundle_identifier,
    bundleVersion: metadata.bundle_version,
    title: metadata.title,
  });
}

/**
 * GET /install/artifact/{token}: one redirect, to the daemon's /install/download/{token} for local storage
 * or to a presigned GET for S3/R2. The gateway ticket stays on the daemon URL (rule 4); the value comes from
 * the session, never from the request, so the redirect cannot be made to carry arbitrary text.
 */
export async function installArtifactRedirect(deps: Deps, input: { token: string }): Promise<string> {
  const { row, artifact, details, ticket } = await resolveInstall(deps, input.token);
  const location = artifact.storageLocation as StorageLocation;
  if (location.provider === "local") return `${details.base_url}/install/download/${input.token}${ticketQuery(ticket)}`;
  // The bytes come from the bucket: handing out the presigned GET is the download this session counts for.
  await countInstall(deps, row, details);
  return presignedInstallUrl(deps, artifact, location, row.expiresAt);
}

async function presignedInstallUrl(deps: Deps, artifact: ArtifactRow, location: StorageLocation, sessionEnd: number): Promise<string> {
  const now = deps.clock.now();
  const store = await openStoreAt(deps, location);
  return store.presignDownload!(location.key, {
    contentDisposition: contentDisposition(artifact.filename),
    contentType: artifact.contentType,
    expiresInS: Math.max(60, Math.min(DOWNLOAD_TTL_S, sessionEnd - now)),
    now,
  });
}

/** GET /install/download/{token}: the bytes (local), or the presigned GET when the artifact lives in S3/R2. */
export async function installDownload(deps: Deps, input: { token: string; range: string | undefined }): Promise<ByteResponse | { redirect: string }> {
  const { row, artifact, details } = await resolveInstall(deps, input.token);
  await countInstall(deps, row, details);
  const location = artifact.storageLocation as StorageLocation;
  if (location.provider !== "local") return { redirect: await presignedInstallUrl(deps, artifact, location, row.expiresAt) };
  return serveArtifactBytes(deps, artifact, input.range);
}

/**
 * Install counts (docs/decisions.md "Tester distribution"): an install session and its downloads count once
 * together, per artifact and tester: the session's token hash is the key, so a resumed or repeated download of
 * the same session (the installer retries, byte ranges) adds nothing.
 */
async function countInstall(deps: Deps, row: { tokenHash: string; artifactId: string }, details: InstallDetails): Promise<void> {
  await deps.db
    .insert(installs)
    .values({ sessionTokenHash: row.tokenHash, artifactId: row.artifactId, testerId: details.tester_id ?? null, createdAt: deps.clock.now() })
    .onConflictDoNothing();
}

export interface InstallPageData {
  platform: Platform;
  app: AppMetadata | null;
  /** Name to show: the app's, else the install title, else the file name. */
  title: string;
  filename: string;
  size_bytes: number;
  install_url: string;
  page_url: string;
  expires_at: number;
  has_icon: boolean;
  build: { number: number; branch: string | null; commit_sha: string | null } | null;
}

/** What the public install page `/install/{token}` shows. 404 not_found / 410 link_expired like the other paths. */
export async function installPage(deps: Deps, input: { token: string }): Promise<InstallPageData> {
  const { row, artifact, details, ticket } = await resolveInstall(deps, input.token);
  const app = (artifact.appMetadata as AppMetadata | null) ?? null;
  const build = await deps.db
    .select({ number: builds.buildNumber, branch: builds.branch, commitSha: builds.commitSha })
    .from(builds)
    .where(eq(builds.id, artifact.buildId))
    .get();
  const urls = installUrls(details, input.token, ticket);
  return {
    platform: details.platform,
    app,
    title: app?.name ?? completeMetadata(artifact.installMetadata)?.title ?? artifact.filename,
    filename: artifact.filename,
    size_bytes: artifact.sizeBytes,
    install_url: urls.install_url,
    page_url: urls.page_url,
    expires_at: row.expiresAt,
    has_icon: app?.has_icon ?? false,
    build: build ? { number: build.number, branch: build.branch, commit_sha: build.commitSha } : null,
  };
}

/** GET /install/icon/{token}: the app icon of a live install session (the page is public, so is its icon). */
export async function installIcon(deps: Deps, input: { token: string }): Promise<Uint8Array> {
  const { artifact } = await resolveInstall(deps, input.token);
  const png = await loadArtifactIcon(deps, artifact.id);
  if (!png) throw new ApiError("not_found", "this app has no icon");
  return png;
}
