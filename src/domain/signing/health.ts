// Signing health (docs/signing.md): every certificate and profile a project holds, with its expiry state, and
// the `signing_expiring` notifications: once a day per item while it expires within 30 days, once when expired.
import { and, asc, eq, isNull, or, isNotNull, sql } from "drizzle-orm";
import { projects, signingNotices } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { describeError } from "../../errors.ts";
import { describeStoredSigning } from "./signing.ts";
import type { ProjectRow } from "../projects/projects.ts";

export const EXPIRING_WITHIN_S = 30 * 86_400;
/** An expiring item is announced again after this long. */
const EXPIRING_NOTICE_EVERY_S = 86_400;

export type SigningHealthState = "ok" | "expiring" | "expired";

export interface SigningHealthItem {
  project_id: string;
  kind: "ios_certificate" | "ios_profile" | "android_certificate";
  uuid?: string;
  serial?: string;
  name: string;
  expires_at: number;
  state: SigningHealthState;
}

export function healthState(expiresAt: number, now: number): SigningHealthState {
  if (expiresAt <= now) return "expired";
  return expiresAt - now <= EXPIRING_WITHIN_S ? "expiring" : "ok";
}

/** A certificate's everyday name: its CN (`Apple Distribution: Example (ABCDE12345)`), else the whole subject. */
function commonName(subject: string): string {
  return /(?:^|, )CN=([^,]+)/.exec(subject)?.[1] ?? subject;
}

/** The items of one project, in a stable order: iOS certificate, its profiles, Android certificate. */
export function projectHealthItems(project: Pick<ProjectRow, "id" | "iosSigningInfo" | "androidSigningInfo">, now: number): SigningHealthItem[] {
  const items: SigningHealthItem[] = [];
  const ios = project.iosSigningInfo;
  if (ios) {
    const c = ios.certificate;
    items.push({
      project_id: project.id,
      kind: "ios_certificate",
      serial: c.serial,
      name: commonName(c.subject),
      expires_at: c.expires_at,
      state: healthState(c.expires_at, now),
    });
    for (const p of ios.profiles) {
      // A profile without an expiry date never expires as far as anyone can tell; it has no health to show.
      if (p.expires_at === null) continue;
      items.push({
        project_id: project.id,
        kind: "ios_profile",
        uuid: p.uuid,
        name: p.name,
        expires_at: p.expires_at,
        state: healthState(p.expires_at, now),
      });
    }
  }
  const android = project.androidSigningInfo;
  if (android) {
    const c = android.certificate;
    items.push({
      project_id: project.id,
      kind: "android_certificate",
      serial: c.serial,
      name: `${android.key_alias} (${commonName(c.subject)})`,
      expires_at: c.expires_at,
      state: healthState(c.expires_at, now),
    });
  }
  return items;
}

function liveProjectsWithSigning(deps: Pick<AppDeps, "db">, projectId?: string) {
  const hasSigning = or(isNotNull(projects.iosSigningSealed), isNotNull(projects.androidSigningSealed));
  const where = projectId ? and(eq(projects.id, projectId), isNull(projects.deletedAt), hasSigning) : and(isNull(projects.deletedAt), hasSigning);
  return deps.db.select().from(projects).where(where).orderBy(asc(projects.name));
}

/** `GET /v1/signing/health`: every live project's items, soonest expiry first. */
export async function signingHealth(deps: Pick<AppDeps, "db" | "clock">): Promise<{ items: SigningHealthItem[] }> {
  const now = deps.clock.now();
  const rows = await liveProjectsWithSigning(deps);
  const items = rows.flatMap((p) => projectHealthItems(p, now));
  items.sort((a, b) => a.expires_at - b.expires_at || a.project_id.localeCompare(b.project_id));
  return { items };
}

export function healthItemKey(item: SigningHealthItem): string {
  return `${item.kind}:${item.uuid ?? item.serial ?? item.name}`;
}

/**
 * One pass: describes material stored without a description, then queues a `signing_expiring` notice for each
 * expiring or expired item that is due one. The notice row and the outbox rows are one batch whose outbox insert
 * runs only when the notice row changed (`changes()`), so daemons sharing a database announce an item once.
 */
export async function runSigningHealthPass(
  deps: Pick<AppDeps, "db" | "clock" | "secrets" | "log">,
  options: { projectId?: string } = {},
): Promise<number> {
  let queued = 0;
  const now = deps.clock.now();
  for (const row of await liveProjectsWithSigning(deps, options.projectId)) {
    let project = row;
    try {
      project = await describeStoredSigning(deps, row);
    } catch (err) {
      deps.log({
        time: new Date().toISOString(),
        level: "error",
        msg: "signing material cannot be described",
        project_id: row.id,
        error: describeError(err),
      });
    }
    for (const item of projectHealthItems(project, now)) {
      if (item.state === "ok") continue;
      queued += await queueNotice(deps, project, item, now);
    }
  }
  return queued;
}

async function queueNotice(deps: Pick<AppDeps, "db">, project: ProjectRow, item: SigningHealthItem, now: number): Promise<number> {
  const wants = sql`n.project_id = ${project.id} AND n.disabled_at IS NULL AND EXISTS (SELECT 1 FROM json_each(n."on") WHERE value = 'signing_expiring')`;
  const targets = await deps.db.all<{ id: string }>(sql`SELECT n.id FROM notifications n WHERE ${wants}`);
  // Nobody to tell now: nothing is recorded, so a target added later still hears of it.
  if (targets.length === 0) return 0;
  const key = healthItemKey(item);
  const due =
    item.state === "expired"
      ? sql`${signingNotices.state} <> 'expired'`
      : sql`${signingNotices.state} = 'expiring' AND ${signingNotices.notifiedAt} <= ${now - EXPIRING_NOTICE_EVERY_S}`;
  const payload = JSON.stringify({ project: { id: project.id, name: project.name }, item });
  const event = item.state === "expired" ? "signing.expired" : "signing.expiring";
  const nowMs = Date.now();
  const [, inserted] = await deps.db.batch([
    deps.db
      .insert(signingNotices)
      .values({ projectId: project.id, itemKey: key, state: item.state as "expiring" | "expired", notifiedAt: now })
      .onConflictDoUpdate({
        target: [signingNotices.projectId, signingNotices.itemKey],
        set: { state: item.state as "expiring" | "expired", notifiedAt: now },
        setWhere: due,
      }),
    deps.db.run(sql`INSERT INTO outbox (event_seq, build_id, target_kind, target_id, event, message_id, status, attempts, next_attempt_at_ms, payload, created_at, updated_at)
      SELECT NULL, NULL, 'notification', n.id, ${event}, 'msg_' || lower(hex(randomblob(16))), 'pending', 0, ${nowMs}, ${payload}, ${now}, ${now}
      FROM notifications n WHERE changes() = 1 AND ${wants}`),
  ]);
  return inserted.rowsAffected;
}

/**
 * The pass after an upload: the upload is stored whatever happens here, so a failure is logged, not answered
 * (the periodic pass catches up).
 */
export async function runSigningHealthPassAfterUpload(deps: Pick<AppDeps, "db" | "clock" | "secrets" | "log">, projectId: string): Promise<void> {
  try {
    await runSigningHealthPass(deps, { projectId });
  } catch (err) {
    deps.log({ time: new Date().toISOString(), level: "error", msg: "signing health pass failed", project_id: projectId, error: describeError(err) });
  }
}

/** When the last periodic pass ran, per app instance: the maintenance loop runs a pass when one is due. */
const lastPass = new WeakMap<object, number>();

/** The periodic pass (every HANGAR_SIGNING_CHECK_INTERVAL_S; the first at start), called by the maintenance loop. */
export async function signingHealthPassIfDue(deps: Pick<AppDeps, "db" | "clock" | "secrets" | "log" | "config">): Promise<void> {
  const now = deps.clock.now();
  const last = lastPass.get(deps.db);
  if (last !== undefined && now - last < deps.config.signingCheckIntervalS) return;
  lastPass.set(deps.db, now);
  await runSigningHealthPass(deps);
}
