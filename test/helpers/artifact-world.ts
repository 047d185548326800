// Rows the artifact tests stand on: a ready instance, a project, a pipeline, a runner and a build claimed by
// that runner. Inserted directly (the schema is the contract), so these tests do not depend on the claim flow.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { builds, pipelines, projects, runners } from "../../src/db/schema/index.ts";
import type { BuildStatus } from "../../src/db/schema/constants.ts";
import { randomToken, sha256Hex } from "../../src/domain/common/crypto.ts";
import { ARTIFACT_STORAGE_SETTING } from "../../src/domain/settings/artifact-storage-settings.ts";
import { writeSetting } from "../../src/domain/settings/instance-settings.ts";
import type { TestApp } from "./app.ts";
import { completeLocalSetup } from "./factories.ts";

export interface Runner {
  id: string;
  token: string;
}

export interface ArtifactWorld {
  ownerToken: string;
  projectId: string;
  pipelineId: string;
  runner: Runner;
  buildId: string;
  /** Path of the runner's artifacts collection for the world's build. */
  jobPath: string;
}

export async function insertRunner(t: TestApp, registeredBy: string): Promise<Runner> {
  const token = randomToken();
  const now = t.clock.now();
  const id = crypto.randomUUID();
  await t.deps.db.insert(runners).values({
    id,
    name: "mac-mini",
    tokenHash: await sha256Hex(token),
    status: "busy",
    capabilities: { platforms: ["ios", "android"] },
    lastHeartbeatAt: now,
    registeredBy,
    createdAt: now,
    updatedAt: now,
  });
  return { id, token };
}

export async function insertBuild(
  t: TestApp,
  projectId: string,
  pipelineId: string,
  runnerId: string | null,
  status: BuildStatus = "running",
  overrides: { buildNumber?: number; commitSha?: string; branch?: string } = {},
): Promise<string> {
  const now = t.clock.now();
  const id = crypto.randomUUID();
  const number = overrides.buildNumber ?? Math.floor(Math.random() * 1e9);
  await t.deps.db.insert(builds).values({
    id,
    projectId,
    pipelineId,
    buildNumber: number,
    status,
    platform: "any",
    triggerType: "manual",
    commitSha: overrides.commitSha ?? "0123456789abcdef0123456789abcdef01234567",
    branch: overrides.branch ?? "main",
    configSnapshot: { platform: "any", steps: [{ name: "build", run: "true" }] },
    timeoutS: 3600,
    runnerId,
    queuedAt: now,
    startedAt: now,
    createdAt: now,
    updatedAt: now,
  });
  return id;
}

/** A ready local instance with one running build on one runner. */
export async function artifactWorld(t: TestApp): Promise<ArtifactWorld> {
  const { ownerToken, owner } = await completeLocalSetup(t);
  const now = t.clock.now();
  const projectId = crypto.randomUUID();
  const pipelineId = crypto.randomUUID();
  await t.deps.db
    .insert(projects)
    .values({ id: projectId, name: "app", repoUrl: "https://git.example.com/app.git", defaultBranch: "main", createdAt: now, updatedAt: now });
  await t.deps.db.insert(pipelines).values({
    id: pipelineId,
    projectId,
    name: "build",
    config: { platform: "any", steps: [{ name: "b", run: "true" }] },
    createdAt: now,
    updatedAt: now,
  });
  const runner = await insertRunner(t, owner.id);
  const buildId = await insertBuild(t, projectId, pipelineId, runner.id);
  return { ownerToken, projectId, pipelineId, runner, buildId, jobPath: `/v1/runners/${runner.id}/jobs/${buildId}/artifacts` };
}

/** The path part of an absolute URL the API handed out, for app.request(). */
export const pathOf = (url: string): string => {
  const u = new URL(url);
  return u.pathname + u.search;
};

export function sha256Of(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** Creates, uploads (local PUT) and completes an artifact; answers the completed artifact JSON. */
export async function uploadArtifact(
  t: TestApp,
  w: ArtifactWorld,
  filename: string,
  bytes: Uint8Array,
  extra: Record<string, unknown> = {},
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON
): Promise<any> {
  const created = await t.call("POST", w.jobPath, {
    token: w.runner.token,
    body: { filename, size_bytes: bytes.length, content_type: "application/octet-stream", ...extra },
  });
  if (created.status !== 200) throw new Error(`create: ${created.status} ${created.text}`);
  const put = await t.call("PUT", pathOf(created.body.upload.url), { rawBody: bytes });
  if (put.status !== 200) throw new Error(`put: ${put.status} ${put.text}`);
  const done = await t.call("POST", `${w.jobPath}/${created.body.artifact.id}/complete`, { token: w.runner.token });
  if (done.status !== 200) throw new Error(`complete: ${done.status} ${done.text}`);
  return done.body.artifact;
}

/** Switches the active storage to the S3 endpoint (the settings document as the settings endpoint stores it). */
export async function useS3Storage(t: TestApp, endpoint: string, bucket: string, prefix = "ci/", provider: "s3" | "r2" = "s3"): Promise<void> {
  await writeSetting(t.deps, ARTIFACT_STORAGE_SETTING, {
    provider,
    local: { base_dir: null },
    s3: {
      endpoint,
      // R2 leaves the region unset: the daemon signs for "auto".
      region: provider === "r2" ? null : "us-east-1",
      bucket,
      prefix,
      access_key_id: "S3RVER",
      force_path_style: true,
      secret_access_key_sealed: await t.deps.secrets.seal("S3RVER"),
    },
  });
}

/** Switches the active storage back to local disk (the default directory). */
export async function useLocalStorage(t: TestApp): Promise<void> {
  await writeSetting(t.deps, ARTIFACT_STORAGE_SETTING, {
    provider: "local",
    local: { base_dir: null },
    s3: { endpoint: null, region: null, bucket: null, prefix: null, access_key_id: null, force_path_style: false, secret_access_key_sealed: null },
  });
}

/**
 * An IPA made with python3's zipfile: Payload/<App>.app/Info.plist (XML, or binary written by plistlib) beside
 * a filler of `fillerBytes` random bytes stored uncompressed, so reading the whole archive would show.
 */
export function makeIpa(options: { plist: Record<string, string> | null; binary?: boolean; fillerBytes?: number; appName?: string }): Uint8Array {
  const dir = mkdtempSync(join(tmpdir(), "hangar-ipa-"));
  try {
    const out = join(dir, "app.ipa");
    const script = `
import json, os, plistlib, sys, zipfile
spec = json.loads(sys.argv[1])
with zipfile.ZipFile(sys.argv[2], "w") as z:
    z.writestr(zipfile.ZipInfo("Payload/"), b"")
    z.writestr("Payload/%s.app/Frameworks/filler.bin" % spec["app"], os.urandom(spec["filler"]), compress_type=zipfile.ZIP_STORED)
    if spec["plist"] is not None:
        fmt = plistlib.FMT_BINARY if spec["binary"] else plistlib.FMT_XML
        z.writestr("Payload/%s.app/Info.plist" % spec["app"], plistlib.dumps(spec["plist"], fmt=fmt), compress_type=zipfile.ZIP_DEFLATED)
    z.writestr("Payload/%s.app/Watch/W.app/Info.plist" % spec["app"], plistlib.dumps({"CFBundleIdentifier": "wrong.nested"}), compress_type=zipfile.ZIP_DEFLATED)
`;
    const spec = JSON.stringify({
      plist: options.plist,
      binary: options.binary ?? false,
      filler: options.fillerBytes ?? 1024,
      app: options.appName ?? "Demo",
    });
    execFileSync("python3", ["-c", script, spec, out]);
    return new Uint8Array(readFileSync(out));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function writeTemp(bytes: Uint8Array): { path: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), "hangar-bytes-"));
  const path = join(dir, "blob");
  writeFileSync(path, bytes);
  return { path, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
