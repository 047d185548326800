import { sql } from "drizzle-orm";
import { instanceSettings } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { auditStatement } from "../common/audit.ts";
import { loadInstance } from "../setup/instance.ts";
import { readSetting, writeSettingStatement } from "../settings/instance-settings.ts";
import { countActiveUsers, signIn, type UserRow } from "./users.ts";

export const LOCAL_LOGIN_MODES = ["loopback", "cli_only"] as const;
export type LocalLoginMode = (typeof LOCAL_LOGIN_MODES)[number];

/** Settings key of the local-login document in instance_settings. */
export const LOCAL_LOGIN_SETTING = "local_login";

interface StoredLocalLoginSetting {
  mode: LocalLoginMode;
  /**
   * The owner set `loopback` while in remote mode: only then does the endpoint answer in remote mode (docs/api.md §3).
   * Every runtime-mode change clears it (resetRemoteLocalLoginStatement), so a switch to remote always starts refused.
   */
  allowed_in_remote: boolean;
}

type DbDeps = Pick<AppDeps, "db" | "clock">;

async function readStored(deps: Pick<AppDeps, "db">): Promise<StoredLocalLoginSetting> {
  const stored = await readSetting<StoredLocalLoginSetting>(deps, LOCAL_LOGIN_SETTING);
  return { mode: stored?.value.mode ?? "loopback", allowed_in_remote: stored?.value.allowed_in_remote === true };
}

export async function readLocalLoginSetting(deps: Pick<AppDeps, "db">): Promise<{ mode: LocalLoginMode }> {
  return { mode: (await readStored(deps)).mode };
}

/** PUT /v1/settings/local-login (owner only: the route checks the role). Audited. */
export async function updateLocalLoginSetting(deps: DbDeps, actor: Pick<UserRow, "id" | "email">, mode: LocalLoginMode) {
  const inst = await loadInstance(deps);
  const value: StoredLocalLoginSetting = { mode, allowed_in_remote: mode === "loopback" && inst.runtimeMode === "remote" };
  await deps.db.batch([
    writeSettingStatement(deps, LOCAL_LOGIN_SETTING, value),
    auditStatement(deps, {
      action: "settings.local_login_changed",
      actor,
      targetType: "instance",
      targetId: inst.instanceId,
      details: { mode, runtime_mode: inst.runtimeMode },
    }),
  ]);
  return { mode };
}

/** For the runtime-mode change's batch: local login must be re-enabled by the owner after every switch. */
export function resetRemoteLocalLoginStatement(deps: Pick<AppDeps, "db">) {
  return deps.db.run(
    sql`update ${instanceSettings} set value = json_set(value, '$.allowed_in_remote', json('false')) where ${instanceSettings.key} = ${LOCAL_LOGIN_SETTING}`,
  );
}

/**
 * Local login (docs/spec.md local login rules, hardened by docs/api.md §3). Before setup is ready it is refused with
 * mode_restricted in remote mode and setup_incomplete otherwise. After that: refused in `cli_only`; refused in
 * remote mode unless the owner set `loopback` after the switch (a proxy on this host makes every visitor look
 * local); and only loopback callers may use it.
 */
export async function localLogin(deps: Pick<AppDeps, "db" | "clock">, input: { email?: string; isLoopback: boolean }) {
  const inst = await loadInstance(deps);
  if (inst.state !== "ready") {
    if (inst.runtimeMode === "remote") throw new ApiError("mode_restricted", "local login is refused while setup is incomplete in remote mode");
    throw new ApiError("setup_incomplete", "setup is not complete yet");
  }
  const setting = await readStored(deps);
  if (setting.mode === "cli_only") {
    throw new ApiError("local_login_disabled", "local login is turned off on this instance: run `hangar login` on the daemon's machine");
  }
  if (inst.runtimeMode === "remote" && !setting.allowed_in_remote) {
    throw new ApiError(
      "mode_restricted",
      "local login is off in remote mode: run `hangar login` on the daemon's machine, or have the owner turn it back on",
    );
  }
  // Only the socket decides this (docs/api.md §3): a proxy on this machine must not turn outside traffic local.
  if (!input.isLoopback) throw new ApiError("local_login_loopback_required", "local login is only available from this machine");
  let email = input.email;
  if (email === undefined) {
    const active = await countActiveUsers(deps);
    if (active.length !== 1 || !active[0]) throw new ApiError("email_required", "several users are active; give an email");
    email = active[0].email;
  }
  return signIn(deps, { email, method: "local" });
}
