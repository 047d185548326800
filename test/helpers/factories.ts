import { eq } from "drizzle-orm";
import { instance, users } from "../../src/db/schema/index.ts";
import type { UserRole, UserStatus } from "../../src/db/schema/constants.ts";
import { issueBootstrapToken } from "../../src/domain/setup/setup.ts";
import { createUserSession } from "../../src/domain/auth/sessions.ts";
import type { UserRow } from "../../src/domain/auth/users.ts";
import type { TestApp } from "./app.ts";

/** Runs the real setup API in local mode: token → session → owner → complete. Returns the owner's session. */
export async function completeLocalSetup(t: TestApp, email = "owner@example.com"): Promise<{ ownerToken: string; owner: UserRow }> {
  const setupToken = await startSetup(t);
  const created = await t.call("POST", "/v1/setup/local-owner/create", { token: setupToken, body: { email } });
  if (created.status !== 200) throw new Error(`local-owner/create: ${created.status} ${created.text}`);
  const done = await t.call("POST", "/v1/setup/complete", { token: setupToken });
  if (done.status !== 200) throw new Error(`complete: ${done.status} ${done.text}`);
  const login = await t.call("POST", "/v1/auth/local/login", { body: { email } });
  if (login.status !== 200) throw new Error(`login: ${login.status} ${login.text}`);
  const owner = await t.deps.db.select().from(users).where(eq(users.email, email)).get();
  if (!owner) throw new Error("owner missing");
  return { ownerToken: login.body.session_token, owner };
}

/** Issues a bootstrap token the way `hangar setup-token` does and verifies it. Returns the setup session token. */
export async function startSetup(t: TestApp): Promise<string> {
  const { token } = await issueBootstrapToken(t.deps);
  const verified = await t.call("POST", "/v1/setup/bootstrap-token/verify", { body: { token } });
  if (verified.status !== 200) throw new Error(`verify: ${verified.status} ${verified.text}`);
  return verified.body.session_token;
}

/** Inserts a user row directly (for tests that need many users or a given status). */
export async function createUser(
  t: TestApp,
  overrides: { email?: string; role?: Exclude<UserRole, "owner">; status?: UserStatus; oidcSubject?: string } = {},
): Promise<UserRow> {
  const now = t.clock.now();
  const row = {
    id: crypto.randomUUID(),
    email: overrides.email ?? `user-${crypto.randomUUID().slice(0, 8)}@example.com`,
    displayName: null,
    role: overrides.role ?? "developer",
    status: overrides.status ?? "active",
    avatarUrl: null,
    oidcSubject: overrides.oidcSubject ?? null,
    oidcIssuer: null,
    createdAt: now,
    updatedAt: now,
  };
  await t.deps.db.insert(users).values(row);
  return row;
}

/** A user session token for a user, without going through a sign-in endpoint. */
export async function sessionFor(t: TestApp, user: Pick<UserRow, "id">): Promise<string> {
  return (await createUserSession(t.deps, user.id, "local")).token;
}

/** A signed-in user of the given role on a ready instance. */
export async function userWithRole(t: TestApp, role: Exclude<UserRole, "owner">): Promise<{ user: UserRow; token: string }> {
  const user = await createUser(t, { role });
  return { user, token: await sessionFor(t, user) };
}

export async function setInstance(t: TestApp, values: Partial<typeof instance.$inferInsert>): Promise<void> {
  await t.deps.db.update(instance).set(values).where(eq(instance.id, 1));
}
