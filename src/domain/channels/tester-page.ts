// What the public tester page `/apps/{token}` needs (docs/spec.md §18): the channel's releases and the tester, and
// the two actions the page offers: an install session for one of those releases, and the app icon.
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import type { AppMetadata } from "../artifacts/app-metadata.ts";
import { loadArtifactIcon } from "../artifacts/artifacts.ts";
import { createInstallLink } from "../artifacts/install.ts";
import { channelReleases, resolveTesterLink, type ReleaseEntry } from "./channels.ts";
import { testerDeviceUdids } from "./devices.ts";

type Deps = Pick<AppDeps, "db" | "clock" | "config" | "secrets" | "openArtifactStore">;

export interface TesterPageData {
  channel_name: string;
  tester_name: string | null;
  /** UDIDs this tester registered for the channel's project (docs/api.md §18). */
  tester_devices: string[];
  releases: Array<ReleaseEntry & { app_metadata: AppMetadata | null; size_bytes: number; has_icon: boolean }>;
}

export async function testerPage(deps: Pick<AppDeps, "db">, token: string): Promise<TesterPageData> {
  const { tester, channel } = await resolveTesterLink(deps, token);
  const releases = await channelReleases(deps, channel);
  return {
    channel_name: channel.name,
    tester_name: tester.name,
    tester_devices: await testerDeviceUdids(deps, tester.id),
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
