// `publish` entries of a pipeline config (docs/publishing.md): the same strict schema for stored configs and files.
import { beforeAll, describe, expect, it } from "vitest";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { buildWorld } from "../helpers/builds.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON
type Json = any;

describe("publish entries in pipeline configs", () => {
  let t: TestApp;
  let w: Awaited<ReturnType<typeof buildWorld>>;
  beforeAll(async () => {
    t = await makeTestApp();
    w = await buildWorld(t);
  });
  const create = (publish: Json, name: string) =>
    t.call("POST", `/v1/projects/${w.project.id}/pipelines`, {
      token: w.ownerToken,
      body: { name, config: { platform: "any", steps: [{ name: "b", run: "true" }], publish } },
    });

  it("accepts TestFlight and Google Play entries and keeps them", async () => {
    const publish = [
      { to: "testflight", groups: ["QA", "Friends"], what_to_test: "The new login" },
      { to: "google_play", package_name: "com.example.app", track: "beta", status: "completed", user_fraction: 0.1 },
    ];
    const res = await create(publish, "release");
    expect(res.status).toBe(200);
    expect(res.body.config.publish).toEqual(publish);
    const custom = await create([{ to: "google_play", track: "qa-team" }], "custom-track");
    expect(custom.status).toBe(200);
  });

  const bad: Array<[string, Json, string]> = [
    ["an unknown store", [{ to: "appcenter" }], "config.publish.0.to"],
    ["an unknown key", [{ to: "testflight", group: ["QA"] }], "config.publish.0.group"],
    ["no track", [{ to: "google_play" }], "config.publish.0.track"],
    ["a fraction of 1", [{ to: "google_play", track: "production", user_fraction: 1 }], "config.publish.0.user_fraction"],
    ["a fraction of 0", [{ to: "google_play", track: "production", user_fraction: 0 }], "config.publish.0.user_fraction"],
    ["a draft with a fraction", [{ to: "google_play", track: "beta", status: "draft", user_fraction: 0.5 }], "config.publish.0.user_fraction"],
    ["an unknown status", [{ to: "google_play", track: "beta", status: "halted" }], "config.publish.0.status"],
    ["a bad package name", [{ to: "google_play", track: "beta", package_name: "not a package" }], "config.publish.0.package_name"],
    ["two entries for one store", [{ to: "testflight" }, { to: "testflight" }], "config.publish"],
  ];
  it.each(bad)("refuses %s (400 invalid_input naming the path)", async (_name, publish, path) => {
    const res = await create(publish, `bad-${Math.random()}`);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe("invalid_input");
    expect(res.body.issues.map((i: Json) => i.path)).toContain(path);
  });
});
