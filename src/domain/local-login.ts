import type { AppDeps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { loadInstance } from "./instance.ts";
import { countActiveUsers, signIn } from "./users.ts";

/**
 * Local login (SPEC local login rules). Before setup is ready it is refused with mode_restricted in remote
 * mode and setup_incomplete otherwise; after that only loopback callers may use it, whatever the mode.
 */
export async function localLogin(deps: Pick<AppDeps, "db" | "clock">, input: { email?: string; isLoopback: boolean }) {
  const inst = await loadInstance(deps);
  if (inst.state !== "ready") {
    if (inst.runtimeMode === "remote") throw new ApiError(403, "mode_restricted", "local login is refused while setup is incomplete in remote mode");
    throw new ApiError(409, "setup_incomplete", "setup is not complete yet");
  }
  // Only the socket decides this (CONTRACT §3): a proxy on this machine must not turn outside traffic local.
  if (!input.isLoopback) throw new ApiError(403, "local_login_loopback_required", "local login is only available from this machine");
  let email = input.email;
  if (email === undefined) {
    const active = await countActiveUsers(deps);
    if (active.length !== 1 || !active[0]) throw new ApiError(400, "email_required", "several users are active; give an email");
    email = active[0].email;
  }
  return signIn(deps, { email, method: "local" });
}
