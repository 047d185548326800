import { describe, expect, it } from "vitest";
import { runMaintenance } from "../../src/domain/setup/maintenance.ts";
import type { StoreTarget } from "../../src/storage/types.ts";
import { openNodeArtifactStore } from "../../src/storage/node-stores.ts";
import { makeTestApp } from "../helpers/app.ts";
import { artifactWorld, pathOf } from "../helpers/artifact-world.ts";

describe("maintenance", () => {
  it("a job stuck on storage is abandoned after its time limit, so later passes still run", async () => {
    const t = await makeTestApp({
      deps: {
        // A store whose deletions never answer: an object store that hangs.
        openArtifactStore: (target: StoreTarget) => ({
          ...openNodeArtifactStore(target, fetch, { now: () => 0 }),
          remove: () => new Promise<void>(() => {}),
        }),
      },
    });
    const w = await artifactWorld(t);
    const created = await t.call("POST", w.jobPath, {
      token: w.runner.token,
      body: { filename: "orphan.apk", size_bytes: 4, content_type: "application/octet-stream" },
    });
    expect((await t.call("PUT", pathOf(created.body.upload.url), { rawBody: new Uint8Array(4) })).status).toBe(200);
    t.clock.advance(3 * 3600);

    const started = performance.now();
    await runMaintenance(t.deps, { jobTimeoutMs: 200 });
    await runMaintenance(t.deps, { jobTimeoutMs: 200 });
    expect(performance.now() - started).toBeLessThan(5_000);
    const failures = t.logs.filter((l) => l.msg === "maintenance job failed");
    expect(failures.length).toBeGreaterThanOrEqual(1);
    expect(new Set(failures.map((l) => l.job))).toEqual(new Set(["deleteOrphanArtifacts"]));
    expect(String(failures[0]?.error)).toContain("timed out");
  });
});
