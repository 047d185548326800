import { and, eq, gt, inArray, isNull, lt, sql } from "drizzle-orm";
import type { RemoteAuthMode, RuntimeMode, SetupState } from "../../db/schema/constants.ts";
import { bootstrapTokens, instance, users } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { auditStatementWhen } from "../common/audit.ts";
import { constantTimeEqual, randomHexToken, sha256Hex } from "../common/crypto.ts";
import { loadInstance, type InstanceRow } from "./instance.ts";
import { createSetupSession, deleteAllSetupSessionsStatement } from "../auth/sessions.ts";
import { allowedFrom, nextSetupState, type SetupOperation } from "./setup-machine.ts";
import { newOwnerValues } from "../auth/users.ts";

type DbDeps = Pick<AppDeps, "db" | "clock">;

export const MAX_BOOTSTRAP_FAILURES = 5;
export const DEFAULT_BOOTSTRAP_TTL_S = 3600;

export async function setupStatus(deps: DbDeps) {
  const inst = await loadInstance(deps);
  return { instance_id: inst.instanceId, state: inst.state, setup_mode: inst.state !== "ready", is_configured: inst.state === "ready" };
}

/** Guard that opens every setup operation (STYLE habit 8). */
export function assertSetupOperation(inst: InstanceRow, operation: SetupOperation): SetupState {
  if (inst.state === "ready") throw new ApiError("already_configured", "setup is complete");
  const next = nextSetupState(inst.state, operation);
  if (!next) throw new ApiError("invalid_state", `not allowed in state ${inst.state}`);
  return next;
}

/**
 * The state change of a setup operation as one conditional statement: it lands only if the state is still
 * one the operation may start from, which is what makes two racing owner creations produce one owner.
 */
export function transitionStatement(deps: DbDeps, operation: SetupOperation, to: SetupState, extra: Partial<InstanceRow> = {}) {
  return deps.db
    .update(instance)
    .set({ ...extra, state: to, updatedAt: deps.clock.now() })
    .where(and(eq(instance.id, 1), inArray(instance.state, [...allowedFrom(operation)])))
    .returning({ state: instance.state });
}

/** `hangar setup-token`: a fresh token replaces any earlier one and resets the failure counter (docs/api.md §1). */
export async function issueBootstrapToken(deps: DbDeps, ttlS: number = DEFAULT_BOOTSTRAP_TTL_S): Promise<{ token: string; expiresAt: number }> {
  const inst = await loadInstance(deps);
  const next = assertSetupOperation(inst, "issue_bootstrap_token");
  const token = randomHexToken();
  const now = deps.clock.now();
  const row = { id: 1, tokenHash: await sha256Hex(token), expiresAt: now + ttlS, consumedAt: null, failedAttempts: 0, createdAt: now };
  const [moved] = await deps.db.batch([
    transitionStatement(deps, "issue_bootstrap_token", next),
    deps.db.insert(bootstrapTokens).values(row).onConflictDoUpdate({ target: bootstrapTokens.id, set: row }),
  ]);
  if (moved.length === 0) {
    // Setup completed between the read and the write: the token must not stay usable.
    await deps.db.delete(bootstrapTokens);
    throw new ApiError("already_configured", "setup is complete");
  }
  return { token, expiresAt: row.expiresAt };
}

/**
 * Bootstrap verification. Failures are counted per token across all callers with one atomic increment, so
 * parallel guesses never get more than the limit; from the fifth failure on everything answers 429.
 */
export async function verifyBootstrapToken(deps: DbDeps, token: string): Promise<{ session_token: string; expires_at: number }> {
  const inst = await loadInstance(deps);
  if (inst.state === "ready") throw new ApiError("already_configured", "setup is complete");
  const stored = await deps.db.select().from(bootstrapTokens).where(eq(bootstrapTokens.id, 1)).get();
  if (!stored) throw new ApiError("no_bootstrap_token", "no bootstrap token has been generated; run `npx hangar setup-token`");
  if (stored.failedAttempts >= MAX_BOOTSTRAP_FAILURES) throw tooManyAttempts();
  const now = deps.clock.now();
  const hash = await sha256Hex(token.toLowerCase());
  if (!constantTimeEqual(hash, stored.tokenHash)) {
    const counted = await deps.db
      .update(bootstrapTokens)
      .set({ failedAttempts: sql`${bootstrapTokens.failedAttempts} + 1` })
      .where(
        and(eq(bootstrapTokens.id, 1), eq(bootstrapTokens.tokenHash, stored.tokenHash), lt(bootstrapTokens.failedAttempts, MAX_BOOTSTRAP_FAILURES)),
      )
      .returning({ failedAttempts: bootstrapTokens.failedAttempts })
      .get();
    if (!counted || counted.failedAttempts >= MAX_BOOTSTRAP_FAILURES) throw tooManyAttempts();
    throw new ApiError("invalid_token", "the bootstrap token does not match");
  }
  if (stored.consumedAt !== null)
    throw new ApiError("token_consumed", "the bootstrap token was already used; run `npx hangar setup-token` for a new one");
  if (stored.expiresAt <= now) throw new ApiError("token_expired", "the bootstrap token has expired; run `npx hangar setup-token` for a new one");
  // Consume with every condition repeated, so exactly one of several racing verifications wins.
  const consumed = await deps.db
    .update(bootstrapTokens)
    .set({ consumedAt: now })
    .where(
      and(
        eq(bootstrapTokens.id, 1),
        eq(bootstrapTokens.tokenHash, hash),
        isNull(bootstrapTokens.consumedAt),
        gt(bootstrapTokens.expiresAt, now),
        lt(bootstrapTokens.failedAttempts, MAX_BOOTSTRAP_FAILURES),
      ),
    )
    .returning({ id: bootstrapTokens.id })
    .get();
  if (!consumed) {
    const again = await deps.db.select().from(bootstrapTokens).where(eq(bootstrapTokens.id, 1)).get();
    if (again && again.failedAttempts >= MAX_BOOTSTRAP_FAILURES) throw tooManyAttempts();
    throw new ApiError("token_consumed", "the bootstrap token was already used");
  }
  const session = await createSetupSession(deps);
  return { session_token: session.token, expires_at: session.expiresAt };
}

function tooManyAttempts(): ApiError {
  return new ApiError("too_many_attempts", "too many failed attempts; run `npx hangar setup-token` for a new token");
}

export async function setSetupPreferences(deps: DbDeps, input: { runtime_mode?: RuntimeMode; remote_auth_mode?: RemoteAuthMode }) {
  const inst = await loadInstance(deps);
  if (inst.state === "owner_created") throw new ApiError("invalid_state", "preferences are fixed once the owner exists");
  const next = assertSetupOperation(inst, "set_preferences");
  const runtimeMode = input.runtime_mode ?? inst.runtimeMode;
  const remoteAuthMode = input.remote_auth_mode ?? inst.remoteAuthMode;
  const [moved] = await deps.db.batch([
    transitionStatement(deps, "set_preferences", next, { runtimeMode, remoteAuthMode, preferencesUpdatedAt: deps.clock.now() }),
  ]);
  if (moved.length === 0) throw new ApiError("invalid_state", "the setup state changed; read setup-status again");
  return { runtime_mode: runtimeMode, remote_auth_mode: remoteAuthMode };
}

/** Local owner creation: local mode, state bootstrap_pending only (docs/api.md §3). */
export async function createLocalOwner(deps: DbDeps, email: string) {
  const inst = await loadInstance(deps);
  if (inst.state === "ready") throw new ApiError("already_configured", "setup is complete");
  if (inst.runtimeMode !== "local") throw new ApiError("mode_restricted", "local owner creation needs runtime_mode=local");
  const next = assertSetupOperation(inst, "create_local_owner");
  return createOwner(deps, "create_local_owner", next, newOwnerValues(deps, email));
}

/**
 * Creates the owner and moves the state in one batch. The state change comes first and the user insert is
 * conditional on it having happened; the single-owner index backs that up.
 */
export async function createOwner(
  deps: DbDeps,
  operation: SetupOperation,
  to: SetupState,
  owner: ReturnType<typeof newOwnerValues>,
): Promise<{ state: SetupState; owner_email: string; owner_id: string }> {
  try {
    const [moved] = await deps.db.batch([
      transitionStatement(deps, operation, to, { ownerUserId: owner.id }),
      deps.db.insert(users).select(
        sql`select ${owner.id}, ${owner.email}, ${owner.displayName}, ${owner.role}, ${owner.status}, ${owner.avatarUrl}, ${owner.oidcSubject}, ${owner.oidcIssuer}, ${owner.createdAt}, ${owner.updatedAt}
            where exists (select 1 from ${instance} where ${instance.id} = 1 and ${instance.ownerUserId} = ${owner.id})`,
      ),
      auditStatementWhen(
        deps,
        {
          action: "setup.owner_created",
          actor: { id: owner.id, email: owner.email },
          targetType: "user",
          targetId: owner.id,
          details: { method: operation },
        },
        sql`exists (select 1 from ${users} where ${users.id} = ${owner.id})`,
      ),
    ]);
    if (moved.length === 0) throw new ApiError("invalid_state", "the owner was already created");
  } catch (err) {
    if (err instanceof ApiError) throw err;
    // A unique-index violation (a racing owner creation): the batch rolled back as a whole.
    throw new ApiError("invalid_state", "the owner was already created");
  }
  return { state: "owner_created", owner_email: owner.email, owner_id: owner.id };
}

export async function completeSetup(deps: DbDeps) {
  const inst = await loadInstance(deps);
  const next = assertSetupOperation(inst, "complete");
  const now = deps.clock.now();
  // The clean-up only applies if this batch's own transition landed.
  const isReady = sql`exists (select 1 from ${instance} where ${instance.id} = 1 and ${instance.state} = 'ready')`;
  const actor = inst.ownerUserId ? { id: inst.ownerUserId, email: await ownerEmail(deps, inst.ownerUserId) } : null;
  const [moved] = await deps.db.batch([
    transitionStatement(deps, "complete", next, { setupCompletedAt: now }),
    // changes() is the row count of the statement just before, on the same connection: the audit event is
    // written only by the completion that actually moved the state.
    auditStatementWhen(deps, { action: "setup.completed", actor, targetType: "instance", targetId: inst.instanceId }, sql`changes() = 1`),
    deleteAllSetupSessionsStatement(deps).where(isReady),
    deps.db.delete(bootstrapTokens).where(isReady),
  ]);
  if (moved.length === 0) throw new ApiError("invalid_state", "setup is not in owner_created");
  return { state: "ready" as const, instance_id: inst.instanceId };
}

async function ownerEmail(deps: Pick<AppDeps, "db">, id: string): Promise<string> {
  const row = await deps.db.select({ email: users.email }).from(users).where(eq(users.id, id)).get();
  return row?.email ?? "";
}
