import type { SetupState } from "../../db/schema/constants.ts";

/** The setup state machine as data (STYLE habit 8): each operation, the states it may start from, and where it goes. */
export const SETUP_TRANSITIONS = {
  /** `hangar setup-token`: only the first token moves the state; later ones keep it. */
  issue_bootstrap_token: { from: ["uninitialized", "bootstrap_pending", "idp_configured", "owner_created"], to: null },
  configure_oidc: { from: ["bootstrap_pending", "idp_configured"], to: "idp_configured" },
  configure_trusted_proxy: { from: ["bootstrap_pending", "idp_configured"], to: "idp_configured" },
  verify_oidc_owner: { from: ["idp_configured"], to: "owner_created" },
  claim_trusted_proxy_owner: { from: ["idp_configured"], to: "owner_created" },
  create_local_owner: { from: ["bootstrap_pending"], to: "owner_created" },
  set_preferences: { from: ["uninitialized", "bootstrap_pending", "idp_configured"], to: null },
  complete: { from: ["owner_created"], to: "ready" },
} as const satisfies Record<string, { from: readonly SetupState[]; to: SetupState | null }>;

export type SetupOperation = keyof typeof SETUP_TRANSITIONS;

/** The state after `operation` from `state`, or null when the operation is not allowed there. */
export function nextSetupState(state: SetupState, operation: SetupOperation): SetupState | null {
  const rule = SETUP_TRANSITIONS[operation];
  if (!(rule.from as readonly SetupState[]).includes(state)) return null;
  if (operation === "issue_bootstrap_token" && state === "uninitialized") return "bootstrap_pending";
  return rule.to ?? state;
}

export function allowedFrom(operation: SetupOperation): readonly SetupState[] {
  return SETUP_TRANSITIONS[operation].from;
}
