import { and, asc, eq, inArray, ne, sql, type SQL } from "drizzle-orm";
import type { AuthMethod, UserRole } from "../../db/schema/constants.ts";
import { instance, outbox, userSessions, users } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { auditStatement, auditStatementWhen } from "../common/audit.ts";
import { createUserSession, revokeUserSessionsStatement } from "./sessions.ts";
import { mailOutboxRow, smtpConfigured } from "../events/mail.ts";

export type UserRow = typeof users.$inferSelect;
type DbDeps = Pick<AppDeps, "db" | "clock">;

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

function defaultDisplayName(email: string): string {
  return email.split("@")[0] ?? email;
}

export function toUserJson(u: UserRow) {
  return {
    id: u.id,
    email: u.email,
    display_name: u.displayName ?? defaultDisplayName(u.email),
    role: u.role,
    status: u.status,
    avatar_url: u.avatarUrl,
    created_at: u.createdAt,
    updated_at: u.updatedAt,
  };
}

/** The transfer-owner answer omits display_name and avatar_url (docs/spec.md, User). */
export function toBriefUserJson(u: UserRow) {
  const { display_name: _d, avatar_url: _a, ...brief } = toUserJson(u);
  return brief;
}

export async function findUserByEmail(deps: Pick<AppDeps, "db">, email: string): Promise<UserRow | undefined> {
  return deps.db
    .select()
    .from(users)
    .where(eq(users.email, normalizeEmail(email)))
    .get();
}

export async function findUserById(deps: Pick<AppDeps, "db">, id: string): Promise<UserRow | undefined> {
  return deps.db.select().from(users).where(eq(users.id, id)).get();
}

export async function listUsers(deps: Pick<AppDeps, "db">): Promise<UserRow[]> {
  return deps.db.select().from(users).orderBy(asc(users.createdAt), asc(users.email));
}

export async function countActiveUsers(deps: Pick<AppDeps, "db">): Promise<UserRow[]> {
  return deps.db.select().from(users).where(eq(users.status, "active")).limit(2);
}

/** A new owner row: used by every owner-creating setup path. The partial unique index keeps it single. */
export function newOwnerValues(deps: DbDeps, email: string, extra: { oidcSubject?: string; oidcIssuer?: string; displayName?: string } = {}) {
  const now = deps.clock.now();
  return {
    id: crypto.randomUUID(),
    email: normalizeEmail(email),
    displayName: extra.displayName ?? null,
    role: "owner" as const,
    status: "active" as const,
    avatarUrl: null,
    oidcSubject: extra.oidcSubject ?? null,
    oidcIssuer: extra.oidcIssuer ?? null,
    createdAt: now,
    updatedAt: now,
  };
}

export interface SignInIdentity {
  email: string;
  method: AuthMethod;
  oidcSubject?: string;
  /** With `oidcSubject`: the identity the user is bound to at its first OIDC sign-in (docs/api.md §3). */
  oidcIssuer?: string;
  displayName?: string | null;
  avatarUrl?: string | null;
  /** How a local sign-in arrived, for the audit trail: the HTTP endpoint (none), `cli` or `cli_link` (`hangar login`). */
  via?: "cli" | "cli_link";
}

/**
 * Signs a user in by email for any method (docs/api.md §3): an invited user becomes active, a disabled user or
 * an unknown email gets 403 user_not_found. Answers the LocalLoginResponse / OIDC login result shape.
 */
export async function signIn(deps: DbDeps, identity: SignInIdentity) {
  const user = await findUserByEmail(deps, identity.email);
  if (!user || user.status === "disabled") throw new ApiError("user_not_found", "no active or invited user has this email");
  const now = deps.clock.now();
  const changes: Partial<UserRow> = { updatedAt: now };
  if (user.status === "invited") changes.status = "active";
  // Bound to (iss, sub) at the first OIDC sign-in: another account at the provider that claims the same email
  // (a recycled address, a second tenant) is refused. Disabling the user clears the binding.
  let binding: SQL | undefined;
  if (identity.oidcSubject) {
    if (!matchesBinding(user, identity)) throw new ApiError("user_not_found", "this email belongs to another account at the identity provider");
    changes.oidcSubject = identity.oidcSubject;
    if (identity.oidcIssuer) changes.oidcIssuer = identity.oidcIssuer;
    // Re-checked in the update, so two first sign-ins of different accounts racing cannot both bind.
    binding = sql`(${users.oidcSubject} is null or (${users.oidcSubject} = ${identity.oidcSubject}
      and (${users.oidcIssuer} is null or ${users.oidcIssuer} = ${identity.oidcIssuer ?? null})))`;
  }
  if (identity.displayName) changes.displayName = identity.displayName;
  if (identity.avatarUrl) changes.avatarUrl = identity.avatarUrl;
  // Conditional on not disabled, so a disable racing this sign-in wins.
  const [updated] = await deps.db.batch([
    deps.db
      .update(users)
      .set(changes)
      .where(and(eq(users.id, user.id), ne(users.status, "disabled"), binding))
      .returning(),
    auditStatement(deps, {
      action: "auth.sign_in",
      actor: { id: user.id, email: user.email },
      targetType: "user",
      targetId: user.id,
      details: identity.via ? { method: identity.method, via: identity.via } : { method: identity.method },
    }),
  ]);
  const signedIn = updated[0];
  if (!signedIn) throw new ApiError("user_not_found", "no active or invited user has this email");
  const session = await createUserSession(deps, signedIn.id, identity.method);
  return {
    session_token: session.token,
    expires_at: session.expiresAt,
    user: {
      user_id: signedIn.id,
      email: signedIn.email,
      display_name: signedIn.displayName ?? defaultDisplayName(signedIn.email),
      role: signedIn.role,
      avatar_url: signedIn.avatarUrl,
      oidc_subject: signedIn.oidcSubject,
    },
  };
}

/** Whether an OIDC identity may sign in as `user`: unbound yet, or bound to the same subject (and issuer, once known). */
function matchesBinding(user: UserRow, identity: SignInIdentity): boolean {
  if (user.oidcSubject === null) return true;
  if (user.oidcSubject !== identity.oidcSubject) return false;
  return user.oidcIssuer === null || identity.oidcIssuer === undefined || user.oidcIssuer === identity.oidcIssuer;
}

type Actor = Pick<UserRow, "id" | "email" | "role">;

function assertManager(actor: Actor): void {
  if (actor.role !== "owner" && actor.role !== "admin") throw new ApiError("forbidden", "only the owner or an admin can manage users");
}

/**
 * Invites a user. With SMTP settings and `signInUrl` (src/domain/events/mail.ts signInUrl) an invite mail goes into
 * the outbox in the same batch; a lost race leaves a mail row whose user does not exist, which is skipped at send.
 */
export async function inviteUser(deps: DbDeps, actor: Actor, email: string, role: UserRole, options: { signInUrl?: string } = {}): Promise<UserRow> {
  assertManager(actor);
  const now = deps.clock.now();
  const normalized = normalizeEmail(email);
  const row = {
    id: crypto.randomUUID(),
    email: normalized,
    displayName: null,
    role,
    status: "invited" as const,
    avatarUrl: null,
    oidcSubject: null,
    oidcIssuer: null,
    createdAt: now,
    updatedAt: now,
  };
  const mail =
    options.signInUrl && (await smtpConfigured(deps))
      ? [deps.db.insert(outbox).values(mailOutboxRow(deps, { event: "invite", targetId: row.id, payload: { sign_in_url: options.signInUrl } }))]
      : [];
  // ON CONFLICT DO NOTHING on the unique email: two racing invites make one user and one 409.
  const [inserted] = await deps.db.batch([
    deps.db.insert(users).values(row).onConflictDoNothing().returning(),
    auditStatementWhen(
      deps,
      { action: "user.invited", actor, targetType: "user", targetId: row.id, details: { email: normalized, role } },
      sql`exists (select 1 from ${users} where ${users.id} = ${row.id})`,
    ),
    ...mail,
  ]);
  const created = inserted[0];
  if (!created) {
    throw new ApiError("already_exists", "a user with this email already exists");
  }
  return created;
}

async function loadTarget(deps: Pick<AppDeps, "db">, userId: string): Promise<UserRow> {
  const target = await findUserById(deps, userId);
  if (!target) throw new ApiError("not_found", "user not found");
  return target;
}

export async function changeUserRole(deps: DbDeps, actor: Actor, userId: string, role: UserRole): Promise<UserRow> {
  assertManager(actor);
  const target = await loadTarget(deps, userId);
  // The owner role moves only through transfer-owner, in both directions.
  if (target.role === "owner") throw new ApiError("forbidden", "the owner's role changes only through an ownership transfer");
  const [updated] = await deps.db.batch([
    deps.db
      .update(users)
      .set({ role, updatedAt: deps.clock.now() })
      .where(and(eq(users.id, userId), ne(users.role, "owner")))
      .returning(),
    auditStatementWhen(
      deps,
      { action: "user.role_changed", actor, targetType: "user", targetId: userId, details: { from: target.role, to: role } },
      sql`exists (select 1 from ${users} where ${users.id} = ${userId} and ${users.role} = ${role})`,
    ),
  ]);
  const row = updated[0];
  if (!row) throw new ApiError("forbidden", "the owner's role changes only through an ownership transfer");
  return row;
}

export async function disableUser(deps: DbDeps, actor: Actor, userId: string): Promise<UserRow> {
  assertManager(actor);
  const target = await loadTarget(deps, userId);
  if (target.role === "owner") throw new ApiError("forbidden", "the owner cannot be disabled; transfer ownership first");
  const [updated] = await deps.db.batch([
    // The OIDC binding goes too: enabling the user again lets its next OIDC sign-in bind afresh (docs/api.md §3).
    deps.db
      .update(users)
      .set({ status: "disabled", oidcSubject: null, oidcIssuer: null, updatedAt: deps.clock.now() })
      .where(and(eq(users.id, userId), ne(users.role, "owner")))
      .returning(),
    revokeUserSessionsStatement(deps, userId),
    auditStatementWhen(
      deps,
      { action: "user.disabled", actor, targetType: "user", targetId: userId, details: { email: target.email } },
      sql`exists (select 1 from ${users} where ${users.id} = ${userId} and ${users.status} = 'disabled')`,
    ),
  ]);
  const row = updated[0];
  if (!row) throw new ApiError("forbidden", "the owner cannot be disabled; transfer ownership first");
  return row;
}

export async function enableUser(deps: DbDeps, actor: Actor, userId: string): Promise<UserRow> {
  assertManager(actor);
  const target = await loadTarget(deps, userId);
  const [updated] = await deps.db.batch([
    deps.db.update(users).set({ status: "active", updatedAt: deps.clock.now() }).where(eq(users.id, userId)).returning(),
    auditStatement(deps, { action: "user.enabled", actor, targetType: "user", targetId: userId, details: { email: target.email } }),
  ]);
  return updated[0] ?? target;
}

/** Target becomes owner, previous owner admin, the instance's owner record follows, both users' sessions end. */
export async function transferOwnership(deps: DbDeps, actor: Actor, email: string) {
  if (actor.role !== "owner") throw new ApiError("forbidden", "only the owner can transfer ownership");
  const target = await findUserByEmail(deps, email);
  if (!target) throw ApiError.withSecondStatus("user_not_found", "no user has this email");
  if (target.id === actor.id) throw new ApiError("invalid_email", "this user is already the owner");
  if (target.status !== "active") throw new ApiError("user_not_active", "the target user has not signed in yet or is disabled");
  const now = deps.clock.now();
  // One batch, so both changes land or neither does. The demotion requires the target to still be active;
  // the promotion requires that no owner remains, so it happens exactly when the demotion did. The
  // single-owner index forbids the opposite order.
  const targetActive = sql`exists (select 1 from ${users} where ${users.id} = ${target.id} and ${users.status} = 'active')`;
  const targetIsOwner = sql`exists (select 1 from ${users} where ${users.id} = ${target.id} and ${users.role} = 'owner')`;
  const results = await deps.db.batch([
    deps.db
      .update(users)
      .set({ role: "admin", updatedAt: now })
      .where(and(eq(users.id, actor.id), eq(users.role, "owner"), targetActive))
      .returning(),
    deps.db
      .update(users)
      .set({ role: "owner", updatedAt: now })
      .where(and(eq(users.id, target.id), eq(users.status, "active"), sql`not exists (select 1 from ${users} where ${users.role} = 'owner')`))
      .returning(),
    auditStatementWhen(
      deps,
      { action: "user.ownership_transferred", actor, targetType: "user", targetId: target.id, details: { from: actor.email, to: target.email } },
      targetIsOwner,
    ),
    deps.db
      .update(instance)
      .set({ ownerUserId: target.id, updatedAt: now })
      .where(and(eq(instance.id, 1), targetIsOwner)),
    deps.db.delete(userSessions).where(and(inArray(userSessions.userId, [actor.id, target.id]), targetIsOwner)),
  ]);
  const previous = results[0][0];
  const owner = results[1][0];
  if (!previous || !owner) throw new ApiError("user_not_active", "the target user is no longer active, or ownership already moved");
  return { previous_owner: toBriefUserJson(previous), owner: toBriefUserJson(owner) };
}
