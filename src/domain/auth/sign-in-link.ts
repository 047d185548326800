import type { AppDeps } from "../../deps.ts";
import { readNetworkSettings } from "../settings/network-settings.ts";
import { loadInstance } from "../setup/instance.ts";

/** What an invite answers so the invited person can be reached (docs/api.md §21): a link to copy or mail, or why none. */
export interface SignInLink {
  /** The instance's public sign-in page; null while External Access is off. */
  sign_in_url: string | null;
  /** What to do instead, when `sign_in_url` is null; null otherwise. */
  sign_in_note: string | null;
}

/** The note when there is no link: a local instance answers this machine only, so nobody else can sign in yet. */
export const NO_EXTERNAL_ACCESS_NOTE =
  "External Access is off: Hangar answers only this machine, so the invited person cannot sign in from theirs yet. " +
  "Turn on External Access in Settings (a public HTTPS URL with OIDC or a trusted proxy, see docs/team-access.md); " +
  "the sign-in link is then shown here to copy.";

/**
 * The sign-in page at the External Access public URL (`{public_url}/login`). A public URL saved while the instance is
 * still local is not yet reachable for sign-in (non-loopback access needs remote mode, docs/spec.md), so it gives no link.
 */
export async function signInLink(deps: Pick<AppDeps, "db" | "clock">): Promise<SignInLink> {
  const [inst, network] = await Promise.all([loadInstance(deps), readNetworkSettings(deps)]);
  if (inst.runtimeMode !== "remote" || !network.public_url) return { sign_in_url: null, sign_in_note: NO_EXTERNAL_ACCESS_NOTE };
  return { sign_in_url: `${network.public_url}/login`, sign_in_note: null };
}
