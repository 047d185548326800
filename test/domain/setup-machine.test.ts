import { describe, expect, it } from "vitest";
import { SETUP_STATES, type SetupState } from "../../src/db/schema/constants.ts";
import { assertSetupOperation } from "../../src/domain/setup/setup.ts";
import { allowedFrom, nextSetupState, SETUP_TRANSITIONS, type SetupOperation } from "../../src/domain/setup/setup-machine.ts";
import type { InstanceRow } from "../../src/domain/setup/instance.ts";

const _ = null;

/** The whole table: for each operation, the state it leads to from each state (null = refused). */
const EXPECTED: Record<SetupOperation, Record<SetupState, SetupState | null>> = {
  //                          uninitialized          bootstrap_pending                 idp_configured                  owner_created                 ready
  issue_bootstrap_token: {
    uninitialized: "bootstrap_pending",
    bootstrap_pending: "bootstrap_pending",
    idp_configured: "idp_configured",
    owner_created: "owner_created",
    ready: _,
  },
  set_preferences: {
    uninitialized: "uninitialized",
    bootstrap_pending: "bootstrap_pending",
    idp_configured: "idp_configured",
    owner_created: _,
    ready: _,
  },
  configure_oidc: { uninitialized: _, bootstrap_pending: "idp_configured", idp_configured: "idp_configured", owner_created: _, ready: _ },
  configure_trusted_proxy: { uninitialized: _, bootstrap_pending: "idp_configured", idp_configured: "idp_configured", owner_created: _, ready: _ },
  verify_oidc_owner: { uninitialized: _, bootstrap_pending: _, idp_configured: "owner_created", owner_created: _, ready: _ },
  claim_trusted_proxy_owner: { uninitialized: _, bootstrap_pending: _, idp_configured: "owner_created", owner_created: _, ready: _ },
  create_local_owner: { uninitialized: _, bootstrap_pending: "owner_created", idp_configured: _, owner_created: _, ready: _ },
  complete: { uninitialized: _, bootstrap_pending: _, idp_configured: _, owner_created: "ready", ready: _ },
};

const OPERATIONS = Object.keys(EXPECTED) as SetupOperation[];

function instanceIn(state: SetupState): InstanceRow {
  return {
    id: 1,
    instanceId: "i",
    state,
    runtimeMode: "local",
    remoteAuthMode: "oidc",
    keyStorageMode: "file",
    ownerUserId: null,
    preferencesUpdatedAt: 0,
    setupCompletedAt: null,
    createdAt: 0,
    updatedAt: 0,
  };
}

describe("setup state machine", () => {
  it("knows exactly the operations of the table", () => {
    expect(Object.keys(SETUP_TRANSITIONS).sort()).toEqual([...OPERATIONS].sort());
  });

  for (const operation of OPERATIONS) {
    for (const state of SETUP_STATES) {
      const expected = EXPECTED[operation][state];
      it(`${operation} from ${state} → ${expected ?? "refused"}`, () => {
        expect(nextSetupState(state, operation)).toBe(expected);
        expect(allowedFrom(operation).includes(state)).toBe(expected !== null);
        if (expected === null) {
          const code = state === "ready" ? "already_configured" : "invalid_state";
          expect(() => assertSetupOperation(instanceIn(state), operation)).toThrow(expect.objectContaining({ status: 409, code }));
        } else {
          expect(assertSetupOperation(instanceIn(state), operation)).toBe(expected);
        }
      });
    }
  }

  it("never leaves ready, and only complete reaches it", () => {
    for (const operation of OPERATIONS) {
      expect(nextSetupState("ready", operation)).toBeNull();
      for (const state of SETUP_STATES) {
        if (nextSetupState(state, operation) === "ready") expect(operation).toBe("complete");
      }
    }
  });

  it("never goes back to uninitialized from another state", () => {
    for (const operation of OPERATIONS) {
      for (const state of SETUP_STATES.filter((s) => s !== "uninitialized")) {
        expect(nextSetupState(state, operation)).not.toBe("uninitialized");
      }
    }
  });
});
