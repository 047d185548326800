// The pipeline keys `cache` and `workspace` (docs/api.md §16, docs/caches.md) as the daemon checks them: in a stored
// pipeline's config and in the repository's pipeline file (the validate endpoint).
import { beforeAll, describe, expect, it } from "vitest";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { createProject } from "../helpers/builds.ts";
import { completeLocalSetup } from "../helpers/factories.ts";

let t: TestApp;
let owner: string;
let projectId: string;

beforeAll(async () => {
  t = await makeTestApp();
  owner = (await completeLocalSetup(t)).ownerToken;
  projectId = (await createProject(t, owner)).id;
});

const steps = [{ name: "build", run: "make" }];

describe("cache and workspace in a stored pipeline", () => {
  it("accepts entries with placeholders, restore keys, ~/ paths and both workspace kinds, and keeps them in the config", async () => {
    const cache = [
      {
        key: 'gradle-{{ os }}-{{ arch }}-{{ hash "**/*.gradle*" "gradle/wrapper/gradle-wrapper.properties" }}',
        paths: ["~/.gradle/caches", ".gradle"],
        restore_keys: ["gradle-{{ os }}-{{ arch }}-"],
      },
      { key: "{{pipeline}}-{{ branch }}-{{ platform }}", paths: ["node_modules"] },
    ];
    for (const workspace of ["persistent", "fresh"]) {
      const res = await t.call("POST", `/v1/projects/${projectId}/pipelines`, {
        token: owner,
        body: { name: `p-${workspace}`, config: { platform: "android", steps, cache, workspace } },
      });
      expect(res.status).toBe(200);
      expect(res.body.config.cache).toEqual(cache);
      expect(res.body.config.workspace).toBe(workspace);
    }
  });

  it("refuses unknown placeholders, bad paths and unknown keys with 400 invalid_input", async () => {
    const bad: unknown[] = [
      { cache: [{ key: "k-{{ commit }}", paths: ["a"] }] },
      { cache: [{ key: "k-{{ hash }}", paths: ["a"] }] },
      { cache: [{ key: "k-{{ branch", paths: ["a"] }] },
      { cache: [{ key: "k", paths: ["a"], restore_keys: ["{{ nope }}"] }] },
      { cache: [{ key: "k", paths: ["/etc"] }] },
      { cache: [{ key: "k", paths: ["../outside"] }] },
      { cache: [{ key: "k", paths: ["~root/x"] }] },
      { cache: [{ key: "k", paths: ["~/"] }] },
      { cache: [{ key: "k", paths: [] }] },
      { cache: [{ key: "", paths: ["a"] }] },
      { cache: [{ key: "k", paths: ["a"], ttl: 3 }] },
      { workspace: "shared" },
    ];
    for (const extra of bad) {
      const res = await t.call("POST", `/v1/projects/${projectId}/pipelines`, {
        token: owner,
        body: { name: "bad", config: { platform: "any", steps, ...(extra as object) } },
      });
      expect([JSON.stringify(extra), res.status, res.body.code]).toEqual([JSON.stringify(extra), 400, "invalid_input"]);
    }
  });
});

describe("cache and workspace in the pipeline file", () => {
  it("validates them with located issues", async () => {
    const good = [
      "pipelines:",
      "  android:",
      "    platform: android",
      "    workspace: fresh",
      "    steps: [./gradlew assembleDebug]",
      "    cache:",
      '      - key: gradle-{{ hash "**/*.gradle" }}',
      "        paths: [~/.gradle/caches]",
      "        restore_keys: [gradle-]",
      "",
    ].join("\n");
    const ok = await t.call("POST", `/v1/projects/${projectId}/pipeline-config/validate`, { token: owner, body: { content: good } });
    expect([ok.status, ok.body.ok, ok.body.issues]).toEqual([200, true, []]);

    const bad = good.replace("{{ hash", "{{ sha");
    const refused = await t.call("POST", `/v1/projects/${projectId}/pipeline-config/validate`, { token: owner, body: { content: bad } });
    expect([refused.status, refused.body.ok]).toEqual([200, false]);
    expect(refused.body.issues[0].path).toBe("pipelines.android.cache.0.key");
    expect(refused.body.issues[0].message).toContain("unknown placeholder");
  });
});
