import { sql } from "drizzle-orm";
import { index, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { lifecycleDates } from "./_columns.ts";
import { AUTH_METHODS, USER_ROLES, USER_STATUSES } from "./constants.ts";

export const users = sqliteTable(
  "users",
  {
    id: text("id").primaryKey(),
    /** Stored lower-cased: emails are matched case-insensitively. */
    email: text("email").notNull(),
    displayName: text("display_name"),
    role: text("role", { enum: USER_ROLES }).notNull(),
    status: text("status", { enum: USER_STATUSES }).notNull(),
    avatarUrl: text("avatar_url"),
    oidcSubject: text("oidc_subject"),
    /** The issuer of `oidcSubject`: a user is bound to (iss, sub) at its first OIDC sign-in (docs/api.md §3). */
    oidcIssuer: text("oidc_issuer"),
    ...lifecycleDates,
  },
  (t) => [
    uniqueIndex("users_email_unique").on(t.email),
    // The owner is a singleton: the database itself refuses a second one, whatever races above it.
    uniqueIndex("users_single_owner").on(t.role).where(sql`role = 'owner'`),
  ],
);

export const userSessions = sqliteTable(
  "user_sessions",
  {
    id: text("id").primaryKey(),
    tokenHash: text("token_hash").notNull(),
    userId: text("user_id")
      .notNull()
      .references(() => users.id),
    authMethod: text("auth_method", { enum: AUTH_METHODS }).notNull(),
    expiresAt: integer("expires_at").notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [uniqueIndex("user_sessions_token_hash_unique").on(t.tokenHash), index("user_sessions_user_id").on(t.userId)],
);

export const setupSessions = sqliteTable(
  "setup_sessions",
  {
    id: text("id").primaryKey(),
    tokenHash: text("token_hash").notNull(),
    expiresAt: integer("expires_at").notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [uniqueIndex("setup_sessions_token_hash_unique").on(t.tokenHash)],
);

export const auditEvents = sqliteTable(
  "audit_events",
  {
    // An autoincrement key orders events that share a second.
    seq: integer("seq").primaryKey({ autoIncrement: true }),
    id: text("id").notNull(),
    action: text("action").notNull(),
    actorUserId: text("actor_user_id"),
    actorEmail: text("actor_email"),
    targetType: text("target_type"),
    targetId: text("target_id"),
    details: text("details", { mode: "json" }),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [uniqueIndex("audit_events_id_unique").on(t.id)],
);

/**
 * One-time codes of `hangar login` (docs/api.md §3): single use, 5 minutes. Only the SHA-256 of the code is kept;
 * `consumedAt` tells a used code from an unknown one.
 */
export const localLoginCodes = sqliteTable(
  "local_login_codes",
  {
    id: text("id").primaryKey(),
    codeHash: text("code_hash").notNull(),
    userId: text("user_id")
      .notNull()
      .references(() => users.id),
    expiresAt: integer("expires_at").notNull(),
    consumedAt: integer("consumed_at"),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [uniqueIndex("local_login_codes_code_hash_unique").on(t.codeHash), index("local_login_codes_expires_at").on(t.expiresAt)],
);
