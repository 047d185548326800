import { and, eq, gt, lte, sql } from "drizzle-orm";
import { lookupSessionByTokenHash } from "../../db/queries/sessions.ts";
import type { AuthMethod } from "../../db/schema/constants.ts";
import { localLoginCodes, setupSessions, userSessions, users } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { prefixedToken, sha256Hex, TOKEN_PREFIXES } from "../common/crypto.ts";
import type { UserRow } from "./users.ts";

export const SETUP_SESSION_TTL_S = 30 * 60;
export const USER_SESSION_TTL_S = 24 * 60 * 60;

type DbDeps = Pick<AppDeps, "db" | "clock">;

/** A setup session: only the SHA-256 of the token is stored (Lucia). */
export async function createSetupSession(deps: DbDeps): Promise<{ token: string; expiresAt: number }> {
  const token = prefixedToken(TOKEN_PREFIXES.setupSession);
  const now = deps.clock.now();
  const expiresAt = now + SETUP_SESSION_TTL_S;
  await deps.db.insert(setupSessions).values({ id: crypto.randomUUID(), tokenHash: await sha256Hex(token), expiresAt, createdAt: now });
  return { token, expiresAt };
}

/**
 * Validates a setup session and slides its window: every authenticated request renews it to 30 minutes
 * from now. The renewal is conditional on the session still being live, so an expired one never revives.
 */
export async function touchSetupSession(deps: DbDeps, token: string): Promise<{ id: string; expiresAt: number }> {
  const tokenHash = await sha256Hex(token);
  const now = deps.clock.now();
  const expiresAt = now + SETUP_SESSION_TTL_S;
  const renewed = await deps.db
    .update(setupSessions)
    .set({ expiresAt })
    .where(and(eq(setupSessions.tokenHash, tokenHash), gt(setupSessions.expiresAt, now)))
    .returning({ id: setupSessions.id })
    .get();
  if (renewed) return { id: renewed.id, expiresAt };
  const existing = await deps.db.select({ id: setupSessions.id }).from(setupSessions).where(eq(setupSessions.tokenHash, tokenHash)).get();
  if (existing) throw new ApiError("session_expired", "the setup session has expired; verify a new bootstrap token");
  throw new ApiError("invalid_session", "the setup session is not valid");
}

export function deleteAllSetupSessionsStatement(deps: Pick<AppDeps, "db">) {
  return deps.db.delete(setupSessions);
}

/**
 * A user session of 24 hours, for every kind of sign-in (docs/api.md §3). The insert is conditional on the user
 * not being disabled: a disable that lands between a sign-in's checks and this insert (its batch revokes the
 * sessions that exist then) must not leave a session behind that a later re-enable would bring back.
 */
export async function createUserSession(deps: DbDeps, userId: string, authMethod: AuthMethod): Promise<{ token: string; expiresAt: number }> {
  const token = prefixedToken(TOKEN_PREFIXES.userSession);
  const now = deps.clock.now();
  const expiresAt = now + USER_SESSION_TTL_S;
  const inserted = await deps.db.run(sql`INSERT INTO ${userSessions} (id, token_hash, user_id, auth_method, expires_at, created_at)
    SELECT ${crypto.randomUUID()}, ${await sha256Hex(token)}, ${userId}, ${authMethod}, ${expiresAt}, ${now}
    FROM ${users} WHERE ${users.id} = ${userId} AND ${users.status} != 'disabled'`);
  if (inserted.rowsAffected !== 1) throw new ApiError("user_not_found", "no active or invited user has this email");
  return { token, expiresAt };
}

/** The user behind a session token; disabled users and expired sessions are refused alike. */
export async function validateUserSession(deps: DbDeps, token: string): Promise<{ sessionId: string; user: UserRow }> {
  const tokenHash = await sha256Hex(token);
  const row = await lookupSessionByTokenHash(deps.db, tokenHash);
  if (!row || row.expiresAt <= deps.clock.now() || row.user.status === "disabled") {
    throw new ApiError("invalid_session", "the session is invalid or has expired");
  }
  return { sessionId: row.sessionId, user: row.user };
}

export function revokeSessionStatement(deps: Pick<AppDeps, "db">, sessionId: string) {
  return deps.db.delete(userSessions).where(eq(userSessions.id, sessionId));
}

export function revokeUserSessionsStatement(deps: Pick<AppDeps, "db">, userId: string) {
  return deps.db.delete(userSessions).where(eq(userSessions.userId, userId));
}

export function revokeAllUserSessionsStatement(deps: Pick<AppDeps, "db">) {
  return deps.db.delete(userSessions);
}

/** Housekeeping for the sweeper: expired sessions and `hangar login` codes serve nobody. */
export async function deleteExpiredSessions(deps: DbDeps): Promise<void> {
  const now = deps.clock.now();
  await deps.db.batch([
    deps.db.delete(userSessions).where(lte(userSessions.expiresAt, now)),
    deps.db.delete(setupSessions).where(lte(setupSessions.expiresAt, now)),
    deps.db.delete(localLoginCodes).where(lte(localLoginCodes.expiresAt, now)),
  ]);
}
