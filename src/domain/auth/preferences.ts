import { and, eq, sql } from "drizzle-orm";
import { KEY_STORAGE_MODES, type RuntimeMode } from "../../db/schema/constants.ts";
import { instance } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { auditStatementWhen } from "../common/audit.ts";
import { isLoopbackHostname, isUnspecifiedAddress } from "../common/addresses.ts";
import { loadInstance, type InstanceRow } from "../setup/instance.ts";
import { resetRemoteLocalLoginStatement } from "./local-login.ts";
import { runPreflight } from "../setup/preflight.ts";
import { revokeAllUserSessionsStatement } from "./sessions.ts";
import type { UserRow } from "./users.ts";

type Deps = Pick<AppDeps, "db" | "clock" | "config">;

/** Wildcard binds (an unspecified address, or none) accept loopback and network clients alike. */
function isWildcardBind(host: string): boolean {
  return host === "" || isUnspecifiedAddress(host);
}

/**
 * Whether the running listener suits the mode (docs/api.md §4): remote mode needs a bind other devices can reach,
 * local mode one that loopback clients can reach. Only a restart with another HANGAR_HOST changes the bind.
 */
export function restartRequired(mode: RuntimeMode, host: string): boolean {
  if (mode === "remote") return isLoopbackHostname(host);
  return !isLoopbackHostname(host) && !isWildcardBind(host);
}

function toPreferencesJson(inst: InstanceRow, host: string) {
  return {
    key_storage_mode: inst.keyStorageMode,
    runtime_mode: inst.runtimeMode,
    restart_required: restartRequired(inst.runtimeMode, host),
    updated_at: inst.preferencesUpdatedAt,
  };
}

export async function readPreferences(deps: Deps) {
  return { preferences: toPreferencesJson(await loadInstance(deps), deps.config.host) };
}

export interface PreferencesInput {
  key_storage_mode?: string;
  runtime_mode?: RuntimeMode;
}

/**
 * PUT preferences with the spec's four runtime-mode rules: only `file` key storage; a mode change is
 * owner-only; enabling remote runs the preflight and fails with the first failing check's code; any mode
 * change revokes every user session (the caller's too), in the same batch as the change.
 */
export async function updatePreferences(deps: Deps, actor: Pick<UserRow, "id" | "email" | "role">, input: PreferencesInput) {
  if (input.key_storage_mode !== undefined && !(KEY_STORAGE_MODES as readonly string[]).includes(input.key_storage_mode)) {
    throw new ApiError("unsupported_key_storage_mode", "only key_storage_mode=file is supported");
  }
  const inst = await loadInstance(deps);
  const target = input.runtime_mode ?? inst.runtimeMode;
  if (target === inst.runtimeMode) return { preferences: toPreferencesJson(inst, deps.config.host), sessions_revoked: false };

  if (actor.role !== "owner") throw new ApiError("external_access_owner_required", "only the owner can change the runtime mode");
  if (target === "remote") {
    const preflight = await runPreflight(deps);
    const failed = preflight.checks.find((c) => !c.ok && c.required);
    if (failed) throw new ApiError(failed.failure_code, `External Access preflight failed: ${failed.message}`);
  }
  const now = deps.clock.now();
  // Conditional on the mode we read. A racing change to the same mode loses the update, but its sessions
  // still go: with two modes, the mode is then the target anyway.
  const [updated] = await deps.db.batch([
    deps.db
      .update(instance)
      .set({ runtimeMode: target, preferencesUpdatedAt: now, updatedAt: now })
      .where(and(eq(instance.id, 1), eq(instance.runtimeMode, inst.runtimeMode)))
      .returning(),
    // Only the change that landed is audited (changes() is the row count of the update just before).
    auditStatementWhen(
      deps,
      {
        action: "settings.runtime_mode_changed",
        actor,
        targetType: "instance",
        targetId: inst.instanceId,
        details: { from: inst.runtimeMode, to: target, sessions_revoked: true },
      },
      sql`changes() = 1`,
    ),
    revokeAllUserSessionsStatement(deps),
    // Local login answers in remote mode only once the owner turns it back on after this switch (docs/api.md §3).
    resetRemoteLocalLoginStatement(deps),
  ]);
  const row = updated[0] ?? (await loadInstance(deps));
  return { preferences: toPreferencesJson(row, deps.config.host), sessions_revoked: true };
}
