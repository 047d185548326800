// What the public tester page `/apps/{token}` needs (docs/spec.md §18): the channel's releases and the tester, and
// the two actions the page offers: an install session for one of those releases, and the app icon.
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import type { AppMetadata } from "../artifacts/app-metadata.ts";
import { loadArtifactIcon } from "../artifacts/artifacts.ts";
import { createInstallLink } from "../artifacts/install.ts";
import { readTesterPageLink } from "../../db/queries/tester-page.ts";
import { sha256Hex } from "../common/crypto.ts";
import { NETWORK_SETTING, type NetworkSettings } from "../settings/network-settings.ts";
import { channelReleases, resolveTesterLink, type ChannelRow, type ReleaseEntry } from "./channels.ts";
import { testerDeviceUdids } from "./devices.ts";

type Deps = Pick<AppDeps, "db" | "clock" | "config" | "secrets" | "openArtifactStore">;

export interface TesterPageData {
  channel_name: string;
  tester_name: string | null;
  /** UDIDs this tester registered for the channel's project (docs/api.md §18). */
  tester_devices: string[];
  releases: Array<ReleaseEntry & { app_metadata: AppMetadata | null; size_bytes: number; has_icon: boolean }>;
}

/**
 * A tester link as a page GET first reads it, in one indexed query (docs/decisions.md "Tester page cache"): the
 * tester, the channel, the network settings the page's QR code needs, and `version`, which changes whenever what
 * `testerPage` would return for this link may have changed (a release or a file of it, the channel's settings, the
 * tester's name, the project's registered devices), whichever daemon wrote it. A page rendered at one version can be
 * sent again while the version read on a later GET is the same.
 */
export interface TesterPageLink {
  tester: { id: string; name: string | null };
  channel: ChannelRow;
  tokenHash: string;
  network: Pick<NetworkSettings, "public_url" | "artifact_delivery_url">;
  version: string;
}

/** The link behind a tester page's token; 404 not_found for an unknown or revoked one (a removed tester or channel). */
export async function resolveTesterPage(deps: Pick<AppDeps, "db">, token: string): Promise<TesterPageLink> {
  if (token.length > 100) throw new ApiError("not_found", "no such link");
  const tokenHash = await sha256Hex(token);
  const row = await readTesterPageLink(deps.db, tokenHash, NETWORK_SETTING);
  if (!row) throw new ApiError("not_found", "no such link");
  const stored = row.networkJson === null ? null : (JSON.parse(row.networkJson) as Partial<NetworkSettings>);
  const network = { public_url: stored?.public_url ?? null, artifact_delivery_url: stored?.artifact_delivery_url ?? null };
  return {
    tester: row.tester,
    channel: row.channel,
    tokenHash,
    network,
    version: JSON.stringify([row.releasesVersion, row.devicesVersion, row.tester.name, row.channel]),
  };
}

/** What the page shows for a resolved link: the channel's releases and the tester's registered devices. */
export async function testerPage(deps: Pick<AppDeps, "db">, link: TesterPageLink): Promise<TesterPageData> {
  const releases = await channelReleases(deps, link.channel);
  return {
    channel_name: link.channel.name,
    tester_name: link.tester.name,
    tester_devices: await testerDeviceUdids(deps, link.channel.projectId, link.tester.id),
    releases: releases.map((r) => {
      const meta = (r.artifact.appMetadata as AppMetadata | null) ?? null;
      return { ...r, app_metadata: meta, size_bytes: r.artifact.sizeBytes, has_icon: meta?.has_icon ?? false };
    }),
  };
}

/** A release of this tester's channel, by its artifact; 404 for anything else (another channel's build included). */
async function releaseOf(deps: Pick<AppDeps, "db">, token: string, artifactId: string) {
  const { tester, channel } = await resolveTesterLink(deps, token);
  const release = (await channelReleases(deps, channel)).find((r) => r.artifact_id === artifactId);
  if (!release) throw new ApiError("not_found", "no such release in this channel");
  return { tester, release };
}

/** The Install button: a fresh install session of that release, counted for this tester once it downloads. */
export async function testerInstall(deps: Deps, token: string, artifactId: string) {
  const { tester, release } = await releaseOf(deps, token, artifactId);
  return createInstallLink(deps, { artifactId: release.artifact_id, testerId: tester.id });
}

export async function testerIcon(deps: Pick<AppDeps, "db">, token: string, artifactId: string): Promise<Uint8Array> {
  const { release } = await releaseOf(deps, token, artifactId);
  const png = await loadArtifactIcon(deps, release.artifact_id);
  if (!png) throw new ApiError("not_found", "this app has no icon");
  return png;
}
