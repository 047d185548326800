// Secret variables and credential protection (docs/api.md §5, §6): sealed, never answered, masked in stored logs,
// released to a runner only for builds of protected branches, and every hand-out audited.
import { eq } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { projectSecrets } from "../../src/db/schema/index.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { appendLog, buildWorld, claim, queueBuild, reportStatus } from "../helpers/builds.ts";
import { userWithRole } from "../helpers/factories.ts";
import { androidSigningBody, iosSigningBody } from "../helpers/signing-material.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON
type Json = any;

async function auditEvents(t: TestApp, token: string): Promise<Json[]> {
  const res = await t.call("GET", "/v1/audit-events?limit=500", { token });
  expect(res.status).toBe(200);
  return res.body.events ?? res.body;
}

async function finish(t: TestApp, runner: Json, buildId: string) {
  await reportStatus(t, runner, buildId, { status: "running" });
  await reportStatus(t, runner, buildId, { status: "succeeded" });
}

describe("secret variables", () => {
  let t: TestApp;
  let w: Awaited<ReturnType<typeof buildWorld>>;
  beforeAll(async () => {
    t = await makeTestApp();
    w = await buildWorld(t);
  });
  const path = (name: string) => `/v1/projects/${w.project.id}/secrets/${name}`;

  it("stores a value sealed, lists names only, never answers the value, and deletes", async () => {
    const value = "asc-api-key-0123456789";
    const put = await t.call("PUT", path("ASC_KEY"), { token: w.ownerToken, body: { value } });
    expect(put.status).toBe(200);
    expect(put.body).toEqual({ name: "ASC_KEY", updated_at: expect.any(Number) });
    expect(put.text).not.toContain(value);
    const row = await t.deps.db.select().from(projectSecrets).where(eq(projectSecrets.name, "ASC_KEY")).get();
    expect(row?.valueSealed).toBeTruthy();
    expect(row?.valueSealed).not.toContain(value);
    expect(await t.deps.secrets.open(row!.valueSealed)).toBe(value);
    // Replacing keeps one row.
    expect((await t.call("PUT", path("ASC_KEY"), { token: w.ownerToken, body: { value: `${value}-2` } })).status).toBe(200);
    await t.call("PUT", path("_OTHER_1"), { token: w.ownerToken, body: { value: "other-value" } });
    const list = await t.call("GET", `/v1/projects/${w.project.id}/secrets`, { token: w.ownerToken });
    expect(list.status).toBe(200);
    expect(list.body).toEqual([
      { name: "ASC_KEY", updated_at: expect.any(Number) },
      { name: "_OTHER_1", updated_at: expect.any(Number) },
    ]);
    expect(list.text).not.toContain(value);
    const project = await t.call("GET", `/v1/projects/${w.project.id}`, { token: w.ownerToken });
    expect(project.text).not.toContain(value);
    const audit = await auditEvents(t, w.ownerToken);
    expect(audit.map((e: Json) => e.action)).toContain("project.secret.set");
    expect(JSON.stringify(audit)).not.toContain(value);
    expect((await t.call("DELETE", path("_OTHER_1"), { token: w.ownerToken })).status).toBe(204);
    const again = await t.call("DELETE", path("_OTHER_1"), { token: w.ownerToken });
    expect([again.status, again.body.code]).toEqual([404, "not_found"]);
    expect((await auditEvents(t, w.ownerToken)).filter((e: Json) => e.action === "project.secret.delete")).toHaveLength(1);
  });

  it("refuses bad names and values with 400 invalid_input", async () => {
    for (const name of ["lower", "1ABC", "A-B", `A${"B".repeat(64)}`, "%00"]) {
      const res = await t.call("PUT", path(name), { token: w.ownerToken, body: { value: "v" } });
      expect([name, res.status, res.body.code]).toEqual([name, 400, "invalid_input"]);
      const del = await t.call("DELETE", path(name), { token: w.ownerToken });
      expect([name, del.status, del.body.code]).toEqual([name, 400, "invalid_input"]);
    }
    expect((await t.call("PUT", path(`A${"B".repeat(63)}`), { token: w.ownerToken, body: { value: "v" } })).status).toBe(200);
    for (const body of [{}, { value: 5 }, { value: "x".repeat(64 * 1024 + 1) }, { value: "a\u0000b" }, { value: "v", extra: 1 }]) {
      const res = await t.call("PUT", path("GOOD"), { token: w.ownerToken, body });
      const label = JSON.stringify(body).slice(0, 40);
      expect([label, res.status, res.body.code]).toEqual([label, 400, "invalid_input"]);
    }
    expect((await t.call("PUT", path("GOOD"), { token: w.ownerToken, body: { value: "é".repeat(32 * 1024) } })).status).toBe(200);
  });

  it("answers 404 not_found for an unknown project; 403 forbidden for qa_viewer; developers may write", async () => {
    const missing = await t.call("PUT", `/v1/projects/${crypto.randomUUID()}/secrets/X_1`, { token: w.ownerToken, body: { value: "v" } });
    expect([missing.status, missing.body.code]).toEqual([404, "not_found"]);
    const list404 = await t.call("GET", `/v1/projects/${crypto.randomUUID()}/secrets`, { token: w.ownerToken });
    expect([list404.status, list404.body.code]).toEqual([404, "not_found"]);
    const qa = await userWithRole(t, "qa_viewer");
    for (const [method, p, body] of [
      ["PUT", path("X_1"), { value: "v" }],
      ["GET", `/v1/projects/${w.project.id}/secrets`],
      ["DELETE", path("X_1")],
    ] as const) {
      const res = await t.call(method, p, { token: qa.token, body });
      expect([method, res.status, res.body.code]).toEqual([method, 403, "forbidden"]);
    }
    const dev = await userWithRole(t, "developer");
    expect((await t.call("PUT", path("DEV_1"), { token: dev.token, body: { value: "dev-value" } })).status).toBe(200);
    const none = await t.call("GET", `/v1/projects/${w.project.id}/secrets`);
    expect([none.status, none.body.code]).toEqual([401, "missing_auth"]);
  });
});

describe("secret variable caps: 100 per project, 1 MiB of values in all", () => {
  it("refuses the 101st variable with 400 invalid_input, lets one at the cap be replaced, and holds under concurrent PUTs", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const path = (name: string) => `/v1/projects/${w.project.id}/secrets/${name}`;
    for (let i = 0; i < 90; i++)
      expect((await t.call("PUT", path(`VAR_${i}`), { token: w.ownerToken, body: { value: `value-${i}` } })).status).toBe(200);
    // 20 racing PUTs for the last 10 places: exactly 10 land.
    const racing = await Promise.all(
      Array.from({ length: 20 }, (_, i) => t.call("PUT", path(`RACE_${i}`), { token: w.ownerToken, body: { value: `race-${i}` } })),
    );
    expect(racing.filter((r) => r.status === 200)).toHaveLength(10);
    for (const r of racing.filter((r) => r.status !== 200)) expect([r.status, r.body.code]).toEqual([400, "invalid_input"]);
    const list = await t.call("GET", `/v1/projects/${w.project.id}/secrets`, { token: w.ownerToken });
    expect(list.body.secrets ?? list.body).toHaveLength(100);
    const over = await t.call("PUT", path("ONE_MORE"), { token: w.ownerToken, body: { value: "x" } });
    expect([over.status, over.body.code]).toEqual([400, "invalid_input"]);
    expect(over.body.message).toContain("100");
    // Replacing one at the cap is not a new variable; after a delete there is room again.
    expect((await t.call("PUT", path("VAR_0"), { token: w.ownerToken, body: { value: "changed" } })).status).toBe(200);
    expect((await t.call("DELETE", path("VAR_1"), { token: w.ownerToken })).status).toBe(204);
    expect((await t.call("PUT", path("ONE_MORE"), { token: w.ownerToken, body: { value: "x" } })).status).toBe(200);
  });

  it("refuses values beyond 1 MiB in all (multi-byte characters counted as bytes); the value replaced does not count", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const path = (name: string) => `/v1/projects/${w.project.id}/secrets/${name}`;
    const full = "k".repeat(64 * 1024);
    for (let i = 0; i < 15; i++) expect((await t.call("PUT", path(`BIG_${i}`), { token: w.ownerToken, body: { value: full } })).status).toBe(200);
    // 15 × 64 KiB = 960 KiB; 64 KiB - 2 more leaves room for 2 bytes.
    expect((await t.call("PUT", path("BIG_15"), { token: w.ownerToken, body: { value: "k".repeat(64 * 1024 - 2) } })).status).toBe(200);
    // One character but 3 bytes: does not fit; 2 bytes do.
    const euro = await t.call("PUT", path("EURO"), { token: w.ownerToken, body: { value: "€" } });
    expect([euro.status, euro.body.code]).toEqual([400, "invalid_input"]);
    expect((await t.call("PUT", path("E_ACUTE"), { token: w.ownerToken, body: { value: "é" } })).status).toBe(200);
    const tiny = await t.call("PUT", path("TINY"), { token: w.ownerToken, body: { value: "abcd" } });
    expect([tiny.status, tiny.body.code]).toEqual([400, "invalid_input"]);
    // Same name, smaller value: fits, and frees room.
    expect((await t.call("PUT", path("BIG_0"), { token: w.ownerToken, body: { value: "small" } })).status).toBe(200);
    expect((await t.call("PUT", path("TINY"), { token: w.ownerToken, body: { value: "abcd" } })).status).toBe(200);
  });
});

describe("the runner's secrets call, protection and the hand-out audit", () => {
  let t: TestApp;
  let w: Awaited<ReturnType<typeof buildWorld>>;
  beforeAll(async () => {
    t = await makeTestApp();
    w = await buildWorld(t);
  });
  const jobPath = (id: string) => `/v1/runners/${w.runner.id}/jobs/${id}`;

  it("answers {} without secrets, then every secret while the job is active, then 409 job_not_active", async () => {
    // A project holding no credential queues open builds: the secrets call withholds rather than answering {}.
    const open = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    await claim(t, w.runner);
    const withheld = await t.call("GET", `${jobPath(open.id)}/secrets`, { token: w.runner.token });
    expect([withheld.status, withheld.body.code]).toEqual([403, "secrets_withheld"]);
    await finish(t, w.runner, open.id);
    // Signing material alone makes the project's builds protected: the secrets call answers, with nothing in it.
    const signing = await t.call("PUT", `/v1/projects/${w.project.id}/signing/android`, {
      token: w.ownerToken,
      body: androidSigningBody(),
    });
    expect(signing.status).toBe(200);
    const first = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    await claim(t, w.runner);
    const empty = await t.call("GET", `${jobPath(first.id)}/secrets`, { token: w.runner.token });
    expect([empty.status, empty.body]).toEqual([200, {}]);
    await finish(t, w.runner, first.id);

    await t.call("PUT", `/v1/projects/${w.project.id}/secrets/API_TOKEN`, { token: w.ownerToken, body: { value: "tok-abcdef-123" } });
    await t.call("PUT", `/v1/projects/${w.project.id}/secrets/MULTI`, { token: w.ownerToken, body: { value: "line1\nline2 'quoted' $HOME" } });
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    const job = await claim(t, w.runner);
    expect(job.trigger_event).toBeNull();
    const res = await t.call("GET", `${jobPath(b.id)}/secrets`, { token: w.runner.token });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ API_TOKEN: "tok-abcdef-123", MULTI: "line1\nline2 'quoted' $HOME" });
    const events = (await auditEvents(t, w.ownerToken)).filter((e: Json) => e.action === "runner.credentials_fetched" && e.target_id === b.id);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ target_type: "build", details: { kind: "secrets", actor_runner_id: w.runner.id, actor_type: "runner" } });
    expect(JSON.stringify(events)).not.toContain("tok-abcdef-123");

    // The stored log masks secret variables.
    expect((await appendLog(t, w.runner, b.id, 0, "using tok-abcdef-123 now\n")).status).toBe(200);
    const log = await t.call("GET", `/v1/builds/${b.id}/logs`, { token: w.ownerToken });
    expect(log.text).toBe("using *** now\n");
    await finish(t, w.runner, b.id);
    const after = await t.call("GET", `${jobPath(b.id)}/secrets`, { token: w.runner.token });
    expect([after.status, after.body.code]).toEqual([409, "job_not_active"]);
  });

  it("audits every hand-out: checkout, android_signing, ios_signing, secrets", async () => {
    await t.call("PUT", `/v1/projects/${w.project.id}/source-credentials`, { token: w.ownerToken, body: { token: "ghp_source_token" } });
    const android = await t.call("PUT", `/v1/projects/${w.project.id}/signing/android`, {
      token: w.ownerToken,
      body: androidSigningBody({ storePassword: "store-pass", keyPassword: "key-pass", alias: "k" }),
    });
    const ios = await t.call("PUT", `/v1/projects/${w.project.id}/signing/ios`, {
      token: w.ownerToken,
      body: iosSigningBody("p12-pass"),
    });
    expect([android.status, ios.status]).toEqual([200, 200]);
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    await claim(t, w.runner);
    for (const kind of ["checkout-auth", "android-signing", "ios-signing", "secrets"]) {
      expect((await t.call("GET", `${jobPath(b.id)}/${kind}`, { token: w.runner.token })).status).toBe(200);
    }
    const kinds = (await auditEvents(t, w.ownerToken))
      .filter((e: Json) => e.action === "runner.credentials_fetched" && e.target_id === b.id)
      .map((e: Json) => e.details.kind)
      .sort();
    expect(kinds).toEqual(["android_signing", "checkout", "ios_signing", "secrets"]);
    expect(JSON.stringify(await auditEvents(t, w.ownerToken))).not.toMatch(/ghp_source_token|store-pass|key-pass|p12-pass/);
    await finish(t, w.runner, b.id);
  });

  it("withholds signing and secrets from an unprotected branch (403 secrets_withheld), not checkout", async () => {
    const get = await t.call("GET", `/v1/projects/${w.project.id}/protection`, { token: w.ownerToken });
    expect(get.body).toEqual({ branches: ["**"], tags: ["**"] });
    const put = await t.call("PUT", `/v1/projects/${w.project.id}/protection`, { token: w.ownerToken, body: { branches: ["main", "release/**"] } });
    expect([put.status, put.body]).toEqual([200, { branches: ["main", "release/**"], tags: ["**"] }]);
    expect((await auditEvents(t, w.ownerToken)).map((e: Json) => e.action)).toContain("project.protection.set");

    const cases: Array<[string, boolean]> = [
      ["main", true],
      ["release/1.0", true],
      ["release/2026/rc-1", true],
      ["feature/x", false],
      ["mainline", false],
      // `release/**` also matches `release` itself: `**` matches zero or more segments.
      ["release", true],
      ["releases/1.0", false],
    ];
    for (const [branch, released] of cases) {
      const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id, { branch });
      const job = await claim(t, w.runner);
      expect(job.build_id).toBe(b.id);
      const checkout = await t.call("GET", `${jobPath(b.id)}/checkout-auth`, { token: w.runner.token });
      expect([branch, checkout.status]).toEqual([branch, 200]);
      for (const kind of ["android-signing", "ios-signing", "secrets"]) {
        const res = await t.call("GET", `${jobPath(b.id)}/${kind}`, { token: w.runner.token });
        expect([branch, kind, res.status, res.body.code]).toEqual(
          released ? [branch, kind, 200, undefined] : [branch, kind, 403, "secrets_withheld"],
        );
      }
      await finish(t, w.runner, b.id);
    }
    // No hand-out was recorded for a refused call.
    const withheld = (await auditEvents(t, w.ownerToken)).filter(
      (e: Json) => e.action === "runner.credentials_fetched" && e.details.branch === "feature/x",
    );
    expect(withheld.map((e: Json) => e.details.kind)).toEqual(["checkout"]);
    // An empty list protects nothing: every build is withheld.
    expect((await t.call("PUT", `/v1/projects/${w.project.id}/protection`, { token: w.ownerToken, body: { branches: [] } })).status).toBe(200);
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id, { branch: "main" });
    await claim(t, w.runner);
    const res = await t.call("GET", `${jobPath(b.id)}/secrets`, { token: w.runner.token });
    expect([res.status, res.body.code]).toEqual([403, "secrets_withheld"]);
    await finish(t, w.runner, b.id);
    await t.call("PUT", `/v1/projects/${w.project.id}/protection`, { token: w.ownerToken, body: { branches: ["**"] } });
  });

  it("protection: 400 invalid_input for bad bodies, 403 forbidden for a developer, 404 for an unknown project", async () => {
    for (const body of [
      {},
      { branches: "main" },
      { branches: [""] },
      { branches: ["a b"] },
      { branches: [1] },
      { branches: ["{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}{o,p}{q,r}"] },
    ]) {
      const res = await t.call("PUT", `/v1/projects/${w.project.id}/protection`, { token: w.ownerToken, body });
      expect([JSON.stringify(body).slice(0, 30), res.status, res.body.code]).toEqual([JSON.stringify(body).slice(0, 30), 400, "invalid_input"]);
    }
    const dev = await userWithRole(t, "developer");
    const res = await t.call("PUT", `/v1/projects/${w.project.id}/protection`, { token: dev.token, body: { branches: ["**"] } });
    expect([res.status, res.body.code]).toEqual([403, "forbidden"]);
    const missing = await t.call("PUT", `/v1/projects/${crypto.randomUUID()}/protection`, { token: w.ownerToken, body: { branches: ["**"] } });
    expect([missing.status, missing.body.code]).toEqual([404, "not_found"]);
    const qa = await userWithRole(t, "qa_viewer");
    expect((await t.call("GET", `/v1/projects/${w.project.id}/protection`, { token: qa.token })).status).toBe(200);
  });

  it("the secrets call answers 401/403/404 like the other runner calls", async () => {
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    await claim(t, w.runner);
    const none = await t.call("GET", `${jobPath(b.id)}/secrets`);
    expect([none.status, none.body.code]).toEqual([401, "missing_auth"]);
    const bad = await t.call("GET", `${jobPath(b.id)}/secrets`, { token: "z".repeat(43) });
    expect([bad.status, bad.body.code]).toEqual([401, "invalid_runner_token"]);
    const session = await t.call("GET", `${jobPath(b.id)}/secrets`, { token: w.ownerToken });
    expect([session.status, session.body.code]).toEqual([401, "invalid_runner_token"]);
    const unknown = await t.call("GET", `${jobPath(crypto.randomUUID())}/secrets`, { token: w.runner.token });
    expect([unknown.status, unknown.body.code]).toEqual([404, "not_found"]);
    await finish(t, w.runner, b.id);
  });
});
