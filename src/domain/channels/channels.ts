// Tester channels (docs/spec.md §18): a channel names a pipeline, branch globs and platforms; its releases are the
// succeeded builds of that pipeline on a matching branch that left an installable .ipa or .apk. Testers need no
// account: each gets a personal link `/apps/{token}` (only its SHA-256 hash is stored, as for every URL token).
import { and, count, desc, eq, inArray, isNotNull, like, or, sql } from "drizzle-orm";
import { z } from "zod";
import { artifacts, builds, channels, installs, outbox, pipelines, testers } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import type { AppMetadata } from "../artifacts/app-metadata.ts";
import type { ArtifactRow } from "../artifacts/artifacts.ts";
import type { UserRow } from "../auth/users.ts";
import { auditStatement } from "../common/audit.ts";
import { randomToken, sha256Hex } from "../common/crypto.ts";
import { MAX_REF_GLOB_LENGTH, matchesAnyRefGlob } from "../common/ref-glob.ts";
import { getProject } from "../projects/projects.ts";
import { readNetworkSettings, type NetworkSettings } from "../settings/network-settings.ts";
import { publicBase } from "../events/webhooks.ts";
import { mailOutboxRow, newOptOutToken, smtpConfigured } from "../events/mail.ts";

export type ChannelRow = typeof channels.$inferSelect;
export type TesterRow = typeof testers.$inferSelect;
type Db = Pick<AppDeps, "db">;
type DbClock = Pick<AppDeps, "db" | "clock">;

/** Succeeded builds of the pipeline looked at for releases, newest first: a tester page lists at most this many. */
export const RELEASES_SCANNED = 200;
/** Commit subjects that make up release notes when the pipeline names no release_notes file. */
export const MAX_NOTE_COMMITS = 50;

const CHANNEL_PLATFORMS = ["ios", "android"] as const;
const branchGlobs = z.array(z.string().min(1).max(MAX_REF_GLOB_LENGTH)).min(1).max(50);
const platformList = z.array(z.enum(CHANNEL_PLATFORMS)).min(1).max(2);

export const createChannelSchema = z.object({
  name: z.string().trim().min(1).max(100),
  pipeline_id: z.string().min(1).max(100),
  branches: branchGlobs.optional(),
  platforms: platformList.optional(),
});

export const patchChannelSchema = z.object({
  name: z.string().trim().min(1).max(100).optional(),
  pipeline_id: z.string().min(1).max(100).optional(),
  branches: branchGlobs.nullable().optional(),
  platforms: platformList.nullable().optional(),
});

export const createTesterSchema = z.object({
  email: z.string().trim().toLowerCase().max(320).email(),
  name: z.string().trim().min(1).max(200).optional(),
});

export function toChannelJson(ch: ChannelRow, base: string) {
  return {
    id: ch.id,
    project_id: ch.projectId,
    name: ch.name,
    pipeline_id: ch.pipelineId,
    branches: ch.branches ?? null,
    platforms: ch.platforms ?? null,
    // The channel's own page is its page in the UI, for signed-in users.
    page_url: `${base}/projects/${ch.projectId}/channels/${ch.id}`,
    created_at: ch.createdAt,
    updated_at: ch.updatedAt,
  };
}

async function assertPipelineOfProject(deps: Db, projectId: string, pipelineId: string): Promise<void> {
  const row = await deps.db
    .select({ id: pipelines.id, deletedAt: pipelines.deletedAt })
    .from(pipelines)
    .where(and(eq(pipelines.id, pipelineId), eq(pipelines.projectId, projectId)))
    .get();
  if (!row || row.deletedAt !== null) {
    throw new ApiError("invalid_input", "pipeline_id names no pipeline of this project", [
      { path: "pipeline_id", message: "no such pipeline in this project" },
    ]);
  }
}

const duplicateChannel = (name: string) => new ApiError("already_exists", `a channel named "${name}" already exists in this project`);

function isUniqueViolation(err: unknown): boolean {
  const text = String((err as { message?: string })?.message ?? "") + String((err as { cause?: { message?: string } })?.cause?.message ?? "");
  return /UNIQUE constraint failed/i.test(text);
}

export async function createChannel(
  deps: DbClock,
  actor: UserRow,
  projectId: string,
  input: z.infer<typeof createChannelSchema>,
): Promise<ChannelRow> {
  await getProject(deps, projectId);
  await assertPipelineOfProject(deps, projectId, input.pipeline_id);
  const now = deps.clock.now();
  const row: ChannelRow = {
    id: crypto.randomUUID(),
    projectId,
    pipelineId: input.pipeline_id,
    name: input.name,
    branches: input.branches ? [...new Set(input.branches)] : null,
    platforms: input.platforms ? [...new Set(input.platforms)] : null,
    createdBy: actor.id,
    createdAt: now,
    updatedAt: now,
  };
  try {
    await deps.db.batch([
      deps.db.insert(channels).values(row),
      auditStatement(deps, {
        action: "channel.create",
        actor,
        targetType: "channel",
        targetId: row.id,
        details: { project_id: projectId, name: row.name },
      }),
    ]);
  } catch (err) {
    if (isUniqueViolation(err)) throw duplicateChannel(row.name);
    throw err;
  }
  return row;
}

export async function listChannels(deps: Db, projectId: string): Promise<ChannelRow[]> {
  await getProject(deps, projectId);
  return deps.db.select().from(channels).where(eq(channels.projectId, projectId)).orderBy(channels.name, channels.id);
}

export async function getChannel(deps: Db, projectId: string, channelId: string): Promise<ChannelRow> {
  await getProject(deps, projectId);
  const row = await deps.db
    .select()
    .from(channels)
    .where(and(eq(channels.id, channelId), eq(channels.projectId, projectId)))
    .get();
  if (!row) throw new ApiError("not_found", "no such channel");
  return row;
}

export async function updateChannel(
  deps: DbClock,
  actor: UserRow,
  projectId: string,
  channelId: string,
  input: z.infer<typeof patchChannelSchema>,
): Promise<ChannelRow> {
  const before = await getChannel(deps, projectId, channelId);
  if (input.pipeline_id !== undefined) await assertPipelineOfProject(deps, projectId, input.pipeline_id);
  const set: Partial<ChannelRow> = { updatedAt: deps.clock.now() };
  if (input.name !== undefined) set.name = input.name;
  if (input.pipeline_id !== undefined) set.pipelineId = input.pipeline_id;
  if (input.branches !== undefined) set.branches = input.branches ? [...new Set(input.branches)] : null;
  if (input.platforms !== undefined) set.platforms = input.platforms ? [...new Set(input.platforms)] : null;
  try {
    await deps.db.batch([
      deps.db.update(channels).set(set).where(eq(channels.id, before.id)),
      auditStatement(deps, { action: "channel.update", actor, targetType: "channel", targetId: before.id, details: { fields: Object.keys(input) } }),
    ]);
  } catch (err) {
    if (isUniqueViolation(err)) throw duplicateChannel(input.name ?? before.name);
    throw err;
  }
  return getChannel(deps, projectId, channelId);
}

/** Removes a channel and its testers: every tester link of it answers 404 from then on. */
export async function deleteChannel(deps: DbClock, actor: UserRow, projectId: string, channelId: string): Promise<void> {
  const ch = await getChannel(deps, projectId, channelId);
  await deps.db.batch([
    deps.db.delete(testers).where(eq(testers.channelId, ch.id)),
    deps.db.delete(channels).where(eq(channels.id, ch.id)),
    auditStatement(deps, { action: "channel.delete", actor, targetType: "channel", targetId: ch.id, details: { project_id: projectId } }),
  ]);
}

// ---- releases ----

export interface Release {
  build_id: string;
  build_number: number;
  branch: string;
  commit_sha: string;
  artifact_id: string;
  platform: "ios" | "android";
  app: { name: string | null; version: string | null; build: string | null };
  release_notes: string | null;
  installs: number;
  created_at: number;
}

/** A release row before its notes are made: the artifact is kept for the tester page (icon, signing, size). */
export interface ReleaseEntry extends Release {
  artifact: Pick<ArtifactRow, "sizeBytes" | "appMetadata">;
}

type ReleaseArtifact = Pick<ArtifactRow, "id" | "buildId" | "filename" | "sizeBytes" | "appMetadata" | "installMetadata"> & { installs: number };

function installablePlatform(filename: string): "ios" | "android" | null {
  if (/\.ipa$/i.test(filename)) return "ios";
  if (/\.apk$/i.test(filename)) return "android";
  return null;
}

/**
 * Release notes: the pipeline's release_notes file when the runner sent one; else the subjects of the commits the
 * runner reported down to (not including) the previous release's commit, at most MAX_NOTE_COMMITS. A runner's
 * clone is shallow, so the list may stop early (docs/decisions.md "Tester distribution").
 */
function notesOf(
  build: { releaseNotes: string | null; commits: Array<{ sha: string; subject: string }> | null },
  previousSha: string | null,
): string | null {
  if (build.releaseNotes !== null && build.releaseNotes.trim() !== "") return build.releaseNotes;
  if (!build.commits || build.commits.length === 0) return null;
  const subjects: string[] = [];
  for (const commit of build.commits) {
    if (previousSha !== null && (previousSha.startsWith(commit.sha) || commit.sha.startsWith(previousSha))) break;
    subjects.push(commit.subject);
    if (subjects.length >= MAX_NOTE_COMMITS) break;
  }
  return subjects.length ? subjects.join("\n") : null;
}

/** The channel's releases, newest first (GET …/channels/{cid}/releases and the tester page). */
export async function channelReleases(deps: Db, ch: ChannelRow): Promise<ReleaseEntry[]> {
  // One query whatever the number of releases, with fixed parameters: the installable files of the scanned builds
  // joined with their build, install counts inside the same row, and only the columns a release shows. At 100
  // releases a query per build, or every artifact column, was most of the tester page's time (docs/benchmarks.md
  // "Tester page").
  const scannedIds = deps.db
    .select({ id: builds.id })
    .from(builds)
    .where(and(eq(builds.pipelineId, ch.pipelineId), eq(builds.status, "succeeded")))
    .orderBy(desc(builds.createdAt), desc(builds.buildNumber))
    .limit(RELEASES_SCANNED);
  const rows = await deps.db
    .select({
      build: {
        id: builds.id,
        buildNumber: builds.buildNumber,
        branch: builds.branch,
        commitSha: builds.commitSha,
        releaseNotes: builds.releaseNotes,
        commits: builds.commits,
        createdAt: builds.createdAt,
      },
      file: {
        id: artifacts.id,
        buildId: artifacts.buildId,
        filename: artifacts.filename,
        sizeBytes: artifacts.sizeBytes,
        appMetadata: artifacts.appMetadata,
        installMetadata: artifacts.installMetadata,
        installs: sql<number>`(select count(*) from ${installs} where ${installs.artifactId} = ${artifacts.id})`,
      },
    })
    .from(artifacts)
    .innerJoin(builds, eq(builds.id, artifacts.buildId))
    .where(
      and(
        inArray(artifacts.buildId, scannedIds),
        eq(artifacts.status, "available"),
        // LIKE ignores ASCII case, as installablePlatform does; the check below stays the rule.
        or(like(artifacts.filename, "%.ipa"), like(artifacts.filename, "%.apk")),
      ),
    )
    .orderBy(desc(builds.createdAt), desc(builds.buildNumber), artifacts.createdAt, artifacts.id);
  const candidates: Array<(typeof rows)[number]["build"]> = [];
  const files: ReleaseArtifact[] = [];
  for (const row of rows) {
    if (candidates[candidates.length - 1]?.id !== row.build.id) candidates.push(row.build);
    files.push(row.file);
  }
  const onBranch = candidates.filter((b) => !ch.branches || matchesAnyRefGlob(ch.branches, b.branch));
  if (onBranch.length === 0) return [];
  const platforms = ch.platforms ?? CHANNEL_PLATFORMS;
  const firstInstallable = new Map<string, ReleaseArtifact>();
  for (const file of files) {
    const platform = installablePlatform(file.filename);
    if (platform && platforms.includes(platform) && !firstInstallable.has(file.buildId)) firstInstallable.set(file.buildId, file);
  }
  const released = onBranch.filter((b) => firstInstallable.has(b.id));
  return released.map((b, i) => {
    const artifact = firstInstallable.get(b.id)!;
    const app = artifact.appMetadata as AppMetadata | null;
    const meta = artifact.installMetadata as { title?: string; bundle_version?: string } | null;
    return {
      build_id: b.id,
      build_number: b.buildNumber,
      branch: b.branch,
      commit_sha: b.commitSha,
      artifact_id: artifact.id,
      platform: installablePlatform(artifact.filename)!,
      app: { name: app?.name ?? meta?.title ?? null, version: app?.version ?? null, build: app?.build ?? meta?.bundle_version ?? null },
      release_notes: notesOf(b, released[i + 1]?.commitSha ?? null),
      installs: Number(artifact.installs),
      created_at: b.createdAt,
      artifact: { sizeBytes: artifact.sizeBytes, appMetadata: artifact.appMetadata },
    };
  });
}

export function toReleaseJson(r: ReleaseEntry): Release {
  const { artifact: _artifact, ...json } = r;
  return json;
}

// ---- testers ----

/** Where tester links point: the artifact delivery URL, else the public URL, else where the caller reached us. */
export async function deliveryBase(deps: Db, requestOrigin: string): Promise<string> {
  return deliveryBaseOf(await readNetworkSettings(deps), requestOrigin);
}

/** deliveryBase with the network settings already read. */
export function deliveryBaseOf(network: Pick<NetworkSettings, "public_url" | "artifact_delivery_url">, requestOrigin: string): string {
  return (network.artifact_delivery_url || network.public_url || requestOrigin).replace(/\/+$/, "");
}

export const testerPageUrl = (base: string, token: string) => `${base}/apps/${token}`;

export function toTesterJson(t: TesterRow, installCount: number) {
  return {
    id: t.id,
    channel_id: t.channelId,
    email: t.email,
    name: t.name,
    installs: installCount,
    mail_opt_out: t.mailOptOutAt !== null,
    created_at: t.createdAt,
  };
}

/**
 * Adds a tester. With SMTP settings the link also goes out by mail: the outbox row is written with the tester and
 * carries the link sealed, dropped once the mail is sent or given up (docs/decisions.md "Tester mail").
 */
export async function addTester(
  deps: Pick<AppDeps, "db" | "clock" | "secrets">,
  actor: UserRow,
  projectId: string,
  channelId: string,
  input: z.infer<typeof createTesterSchema>,
  requestOrigin: string,
) {
  const ch = await getChannel(deps, projectId, channelId);
  const token = randomToken();
  const now = deps.clock.now();
  const base = await deliveryBase(deps, requestOrigin);
  const pageUrl = testerPageUrl(base, token);
  const row: TesterRow = {
    id: crypto.randomUUID(),
    channelId: ch.id,
    email: input.email,
    name: input.name ?? null,
    tokenHash: await sha256Hex(token),
    mailOptOutAt: null,
    ...(await newOptOutToken(deps)),
    linkBase: base,
    createdAt: now,
    updatedAt: now,
  };
  const mailed = await smtpConfigured(deps);
  const mail = mailed
    ? [
        deps.db
          .insert(outbox)
          .values(mailOutboxRow(deps, { event: "tester_link", targetId: row.id, payload: { link_sealed: await deps.secrets.seal(pageUrl) } })),
      ]
    : [];
  try {
    await deps.db.batch([
      deps.db.insert(testers).values(row),
      ...mail,
      auditStatement(deps, { action: "tester.create", actor, targetType: "tester", targetId: row.id, details: { channel_id: ch.id } }),
    ]);
  } catch (err) {
    if (isUniqueViolation(err)) throw new ApiError("already_exists", "this email is already a tester of this channel");
    throw err;
  }
  // The link is shown this once; only its hash is kept.
  return { tester: row, token, page_url: pageUrl, mailed };
}

export async function listTesters(deps: Db, projectId: string, channelId: string) {
  const ch = await getChannel(deps, projectId, channelId);
  const rows = await deps.db.select().from(testers).where(eq(testers.channelId, ch.id)).orderBy(testers.email);
  if (rows.length === 0) return [];
  const counted = await deps.db
    .select({ testerId: installs.testerId, n: count() })
    .from(installs)
    .where(
      and(
        isNotNull(installs.testerId),
        inArray(
          installs.testerId,
          rows.map((r) => r.id),
        ),
      ),
    )
    .groupBy(installs.testerId);
  const byTester = new Map(counted.map((c) => [c.testerId, c.n]));
  return rows.map((r) => toTesterJson(r, byTester.get(r.id) ?? 0));
}

/** Revokes a tester's link: from then on it answers 404. */
export async function removeTester(deps: DbClock, actor: UserRow, projectId: string, channelId: string, testerId: string): Promise<void> {
  const ch = await getChannel(deps, projectId, channelId);
  const removed = await deps.db
    .delete(testers)
    .where(and(eq(testers.id, testerId), eq(testers.channelId, ch.id)))
    .returning({ id: testers.id });
  if (removed.length === 0) throw new ApiError("not_found", "no such tester");
  await auditStatement(deps, { action: "tester.delete", actor, targetType: "tester", targetId: testerId, details: { channel_id: ch.id } });
}

/** The tester and channel behind a tester link; 404 not_found for an unknown or revoked one. */
export async function resolveTesterLink(deps: Db, token: string): Promise<{ tester: TesterRow; channel: ChannelRow }> {
  if (token.length > 100) throw new ApiError("not_found", "no such link");
  const tester = await deps.db
    .select()
    .from(testers)
    .where(eq(testers.tokenHash, await sha256Hex(token)))
    .get();
  if (!tester) throw new ApiError("not_found", "no such link");
  const channel = await deps.db.select().from(channels).where(eq(channels.id, tester.channelId)).get();
  if (!channel) throw new ApiError("not_found", "no such link");
  return { tester, channel };
}

export { publicBase };

/** The tester behind a release mail's opt-out link; 404 not_found for an unknown one (or a removed tester). */
export async function testerByOptOutToken(deps: Db, token: string): Promise<TesterRow> {
  if (token.length > 100) throw new ApiError("not_found", "no such link");
  const tester = await deps.db
    .select()
    .from(testers)
    .where(eq(testers.optOutTokenHash, await sha256Hex(token)))
    .get();
  if (!tester) throw new ApiError("not_found", "no such link");
  return tester;
}

/** Turns a tester's release mails off (the opt-out link; no account needed). Idempotent. */
export async function optOutOfReleaseMail(deps: DbClock, token: string): Promise<TesterRow> {
  const tester = await testerByOptOutToken(deps, token);
  if (tester.mailOptOutAt !== null) return tester;
  const now = deps.clock.now();
  await deps.db.update(testers).set({ mailOptOutAt: now, updatedAt: now }).where(eq(testers.id, tester.id));
  return { ...tester, mailOptOutAt: now };
}

/** The channel name a tester belongs to, for the opt-out page. */
export async function channelOfTester(deps: Db, tester: TesterRow): Promise<string> {
  const channel = await deps.db.select({ name: channels.name }).from(channels).where(eq(channels.id, tester.channelId)).get();
  return channel?.name ?? "this channel";
}
