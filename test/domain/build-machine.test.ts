import { describe, expect, it } from "vitest";
import { BUILD_STATUSES, FINAL_BUILD_STATUSES, type BuildStatus } from "../../src/db/schema/constants.ts";
import { ApiError } from "../../src/errors.ts";
import { assertRunnerReport, BUILD_TRANSITIONS, canTransition, isFinalStatus, REPORTABLE_STATUSES } from "../../src/domain/builds/build-machine.ts";

// The whole table, written out independently of the implementation: [from, to] pairs that are allowed.
const ALLOWED = new Set([
  "queued>assigned",
  "queued>canceled",
  "queued>expired",
  "assigned>running",
  "assigned>queued",
  "assigned>failed",
  "assigned>canceled",
  "running>running",
  "running>succeeded",
  "running>failed",
  "running>canceled",
  "running>timed_out",
]);

describe("build state machine", () => {
  it("allows exactly the listed transitions", () => {
    for (const from of BUILD_STATUSES) {
      for (const to of BUILD_STATUSES) {
        expect([from, to, canTransition(from, to)]).toEqual([from, to, ALLOWED.has(`${from}>${to}`)]);
      }
    }
    expect(Object.keys(BUILD_TRANSITIONS).sort()).toEqual([...BUILD_STATUSES].sort());
  });

  it("makes final statuses terminal", () => {
    for (const s of BUILD_STATUSES) expect(isFinalStatus(s)).toBe((FINAL_BUILD_STATUSES as readonly string[]).includes(s));
    for (const s of FINAL_BUILD_STATUSES) expect(BUILD_TRANSITIONS[s]).toEqual([]);
  });

  const codeOf = (from: BuildStatus, cancel: boolean, next: (typeof REPORTABLE_STATUSES)[number]) => {
    try {
      assertRunnerReport(from, cancel, next);
      return "ok";
    } catch (err) {
      return err instanceof ApiError ? `${err.status} ${err.code}` : "other";
    }
  };

  it("accepts runner reports assigned → running → final only", () => {
    for (const from of BUILD_STATUSES) {
      for (const next of REPORTABLE_STATUSES) {
        const ok = (from === "assigned" && next === "running") || from === "running";
        const expected = ok ? "ok" : "409 invalid_transition";
        expect([from, next, codeOf(from, false, next)]).toEqual([from, next, expected]);
      }
    }
  });

  it("answers 409 build_canceled to any report on a build the user canceled", () => {
    for (const next of REPORTABLE_STATUSES) expect(codeOf("canceled", true, next)).toBe("409 build_canceled");
    // A build the runner itself canceled is simply final.
    expect(codeOf("canceled", false, "running")).toBe("409 invalid_transition");
  });
});
