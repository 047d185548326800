// Free disk in heartbeats (docs/api.md §16): the runner reports `free_disk_bytes` and `low_disk`, the runner JSON
// carries the last ones (null before any), and an empty heartbeat body keeps working.
import { describe, expect, it } from "vitest";
import { makeTestApp } from "../helpers/app.ts";
import { buildWorld } from "../helpers/builds.ts";

describe("free disk in heartbeats", () => {
  it("stores the last report and gives it in the runner JSON; null before any, kept by a heartbeat without it", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const path = `/v1/runners/${w.runner.id}/heartbeat`;
    expect(w.runner).toMatchObject({ free_disk_bytes: null, low_disk: null });
    const listed = async () => (await t.call("GET", "/v1/runners", { token: w.ownerToken })).body.find((r: { id: string }) => r.id === w.runner.id);

    // No body at all, and an empty object: both still heartbeats.
    const bare = await t.app.request(path, { method: "POST", headers: { authorization: `Bearer ${w.runner.token}` } });
    expect(bare.status).toBe(200);
    expect((await t.call("POST", path, { token: w.runner.token, body: {} })).status).toBe(200);
    expect(await listed()).toMatchObject({ free_disk_bytes: null, low_disk: null });

    const low = await t.call("POST", path, { token: w.runner.token, body: { free_disk_bytes: 5 * 2 ** 30, low_disk: true } });
    expect(low.status).toBe(200);
    expect(low.body.runner).toMatchObject({ free_disk_bytes: 5 * 2 ** 30, low_disk: true });
    expect(await listed()).toMatchObject({ free_disk_bytes: 5 * 2 ** 30, low_disk: true });

    // A heartbeat without the fields keeps the last report; a new one replaces it.
    await t.call("POST", path, { token: w.runner.token, body: { status: "online" } });
    expect(await listed()).toMatchObject({ free_disk_bytes: 5 * 2 ** 30, low_disk: true });
    await t.call("POST", path, { token: w.runner.token, body: { free_disk_bytes: 80 * 2 ** 30, low_disk: false } });
    expect(await listed()).toMatchObject({ free_disk_bytes: 80 * 2 ** 30, low_disk: false });
  });

  it("refuses malformed disk fields with 400 invalid_input", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    for (const body of [{ free_disk_bytes: -1 }, { free_disk_bytes: 1.5 }, { free_disk_bytes: "10" }, { low_disk: "yes" }, { low_disk: 1 }]) {
      const r = await t.call("POST", `/v1/runners/${w.runner.id}/heartbeat`, { token: w.runner.token, body });
      expect([JSON.stringify(body), r.status, r.body.code]).toEqual([JSON.stringify(body), 400, "invalid_input"]);
    }
  });
});
