import { and, eq, gt, isNull, lte } from "drizzle-orm";
import { localLoginCodes, users } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { auditStatement } from "../common/audit.ts";
import { randomToken, sha256Hex } from "../common/crypto.ts";
import { loadInstance } from "../setup/instance.ts";
import { findUserByEmail, signIn, type UserRow } from "./users.ts";

/** A `hangar login` link lives 5 minutes and works once (docs/api.md §3). */
export const LOCAL_LOGIN_CODE_TTL_S = 5 * 60;

type DbDeps = Pick<AppDeps, "db" | "clock">;

/**
 * The user `hangar login` signs in: the one with `email`, or the owner when none is given. Whoever runs the CLI
 * can read the data directory (database and key file), so it already holds every power the owner has.
 */
export async function resolveCliLoginUser(deps: DbDeps, email?: string): Promise<UserRow> {
  const inst = await loadInstance(deps);
  if (inst.state !== "ready") throw new ApiError("setup_incomplete", "setup is not complete yet: finish it first (see `hangar setup-token`)");
  const user =
    email !== undefined
      ? await findUserByEmail(deps, email)
      : inst.ownerUserId
        ? await deps.db.select().from(users).where(eq(users.id, inst.ownerUserId)).get()
        : undefined;
  if (!user || user.status === "disabled") throw new ApiError("user_not_found", "no active or invited user has this email");
  return user;
}

/**
 * A one-time sign-in code for `hangar login`: the browser opens `/login/local/<code>`. Only its hash is stored;
 * the code itself goes to the caller once. Expired codes are swept here too.
 */
export async function createLocalLoginCode(
  deps: DbDeps,
  input: { email?: string } = {},
): Promise<{ code: string; expiresAt: number; user: UserRow }> {
  const user = await resolveCliLoginUser(deps, input.email);
  const code = randomToken();
  const now = deps.clock.now();
  const expiresAt = now + LOCAL_LOGIN_CODE_TTL_S;
  await deps.db.batch([
    deps.db.delete(localLoginCodes).where(lte(localLoginCodes.expiresAt, now)),
    deps.db.insert(localLoginCodes).values({ id: crypto.randomUUID(), codeHash: await sha256Hex(code), userId: user.id, expiresAt, createdAt: now }),
    auditStatement(deps, {
      action: "auth.local_login_link_created",
      actor: { id: user.id, email: user.email },
      targetType: "user",
      targetId: user.id,
      details: { expires_at: expiresAt },
    }),
  ]);
  return { code, expiresAt, user };
}

/**
 * Redeems a code once: a conditional UPDATE marks it used, so two browsers racing with one link get one
 * session between them. Answers the LocalLoginResponse shape (docs/api.md §3) with a 24-hour user session; the
 * sign-in is audited (method `local`, via `cli_link`). A used or expired code → 410 token_expired, an unknown
 * one → 404 not_found.
 */
export async function redeemLocalLoginCode(deps: DbDeps, code: string) {
  const now = deps.clock.now();
  const codeHash = await sha256Hex(code);
  const claimed = await deps.db
    .update(localLoginCodes)
    .set({ consumedAt: now })
    .where(and(eq(localLoginCodes.codeHash, codeHash), isNull(localLoginCodes.consumedAt), gt(localLoginCodes.expiresAt, now)))
    .returning({ userId: localLoginCodes.userId })
    .get();
  if (!claimed) {
    const known = await deps.db.select({ id: localLoginCodes.id }).from(localLoginCodes).where(eq(localLoginCodes.codeHash, codeHash)).get();
    if (known) throw new ApiError("token_expired", "this sign-in link was already used or has expired; run `hangar login` again");
    throw new ApiError("not_found", "this sign-in link is not valid; run `hangar login` again");
  }
  const user = await deps.db.select().from(users).where(eq(users.id, claimed.userId)).get();
  if (!user) throw new ApiError("user_not_found", "no active or invited user has this email");
  return signIn(deps, { email: user.email, method: "local", via: "cli_link" });
}

/** `hangar login --print-token`: a user session straight away, audited like every sign-in (via `cli`). */
export async function createCliSession(deps: DbDeps, input: { email?: string } = {}) {
  const user = await resolveCliLoginUser(deps, input.email);
  return signIn(deps, { email: user.email, method: "local", via: "cli" });
}
