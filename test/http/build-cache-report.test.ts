// The runner's per-entry cache report (docs/api.md §16): sent with the final status as `caches`, validated (at most
// 50 entries, bounded strings), stored with the build and given as `caches` in the build's JSON.
import { describe, expect, it } from "vitest";
import type { CacheEntryReport } from "../../src/cli/runner/cache-remote-types.ts";
import { makeTestApp } from "../helpers/app.ts";
import { buildWorld, claim, queueBuild, reportStatus } from "../helpers/builds.ts";

const entry: CacheEntryReport = {
  key: "gradle-linux-3f2a",
  result: "partial",
  restored_key: "gradle-linux-0000",
  source: "shared",
  size_bytes: 1234,
  restore_ms: 850,
  save_ms: 1200,
  saved: true,
};

describe("the build's cache report", () => {
  it("is stored from the final status and given in the build's JSON; [] before", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    await claim(t, w.runner);
    expect((await t.call("GET", `/v1/builds/${b.id}`, { token: w.ownerToken })).body.caches).toEqual([]);
    // A running report's caches are not kept: only the final report says what happened.
    expect((await reportStatus(t, w.runner, b.id, { status: "running", caches: [entry] } as never)).status).toBe(200);
    expect((await t.call("GET", `/v1/builds/${b.id}`, { token: w.ownerToken })).body.caches).toEqual([]);
    const miss: CacheEntryReport = { ...entry, key: "pods", result: "miss", restored_key: null, source: null, restore_ms: null };
    const done = await reportStatus(t, w.runner, b.id, { status: "succeeded", caches: [entry, miss] } as never);
    expect(done.status).toBe(200);
    expect((await t.call("GET", `/v1/builds/${b.id}`, { token: w.ownerToken })).body.caches).toEqual([entry, miss]);
    const listed = (await t.call("GET", "/v1/builds", { token: w.ownerToken })).body;
    expect(JSON.stringify(listed)).toContain("gradle-linux-3f2a");
  });

  it("refuses a malformed report with 400 invalid_input and keeps the build as it was", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    await claim(t, w.runner);
    await reportStatus(t, w.runner, b.id, { status: "running" });
    for (const caches of [
      Array.from({ length: 51 }, (_, i) => ({ ...entry, key: `k${i}` })),
      [{ ...entry, key: "k".repeat(513) }],
      [{ ...entry, key: "" }],
      [{ ...entry, restored_key: "r".repeat(513) }],
      [{ ...entry, result: "hit" }],
      [{ ...entry, source: "cloud" }],
      [{ ...entry, size_bytes: -1 }],
      [{ ...entry, restore_ms: 1.5 }],
      [{ ...entry, save_ms: 86_400_001 }],
      [{ ...entry, saved: "yes" }],
      [{ ...entry, extra: undefined, key: 5 }],
      "not a list",
    ]) {
      const r = await reportStatus(t, w.runner, b.id, { status: "succeeded", caches } as never);
      expect([JSON.stringify(caches).slice(0, 50), r.status, r.body.code]).toEqual([JSON.stringify(caches).slice(0, 50), 400, "invalid_input"]);
    }
    const build = (await t.call("GET", `/v1/builds/${b.id}`, { token: w.ownerToken })).body;
    expect([build.status, build.caches]).toEqual(["running", []]);
    // Fifty entries are fine.
    const fifty = Array.from({ length: 50 }, (_, i) => ({ ...entry, key: `k${i}` }));
    expect((await reportStatus(t, w.runner, b.id, { status: "succeeded", caches: fifty } as never)).status).toBe(200);
    expect((await t.call("GET", `/v1/builds/${b.id}`, { token: w.ownerToken })).body.caches).toHaveLength(50);
  });
});
