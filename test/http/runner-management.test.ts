// Runner management (docs/api.md §6): removal and token rotation that take effect at once on every daemon sharing
// the database, capabilities only a runner can narrow, and the platform list.
import { eq } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../../src/app.ts";
import { openDb } from "../../src/db/client.ts";
import { builds } from "../../src/db/schema/index.ts";
import { makeTestApp, toCallResult, type TestApp } from "../helpers/app.ts";
import { buildWorld, claim, queueBuild, registerRunner, reportStatus } from "../helpers/builds.ts";
import { userWithRole } from "../helpers/factories.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON
type Json = any;

/** A second app (a second daemon) on the same database file, with its own connection. */
async function secondDaemon(t: TestApp) {
  const opened = await openDb(`file:${t.dbPath}`);
  const app = createApp({ ...t.deps, db: opened.db });
  const call = async (method: string, path: string, token: string, body?: unknown) =>
    toCallResult(
      await app.request(
        path,
        {
          method,
          headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
          body: body ? JSON.stringify(body) : undefined,
        },
        { peerAddress: "127.0.0.1" },
      ),
    );
  return { call, close: () => opened.close() };
}

async function auditActions(t: TestApp, token: string, targetId: string): Promise<string[]> {
  const res = await t.call("GET", "/v1/audit-events?limit=500", { token });
  return (res.body.events ?? res.body).filter((e: Json) => e.target_id === targetId).map((e: Json) => e.action);
}

describe("DELETE /v1/runners/{id}", () => {
  let t: TestApp;
  let w: Awaited<ReturnType<typeof buildWorld>>;
  beforeAll(async () => {
    t = await makeTestApp();
    w = await buildWorld(t);
  });

  it("removes a runner: its token fails at once on this daemon and on another one (401 invalid_runner_token)", async () => {
    const other = await secondDaemon(t);
    try {
      const r = await registerRunner(t, w.ownerToken);
      // Both daemons have just accepted the token (a cache, if there were one, would now hold it).
      for (const call of [(p: string) => t.call("POST", p, { token: r.token, body: {} }), (p: string) => other.call("POST", p, r.token, {})]) {
        expect((await call(`/v1/runners/${r.id}/heartbeat`)).status).toBe(200);
      }
      const del = await t.call("DELETE", `/v1/runners/${r.id}`, { token: w.ownerToken });
      expect(del.status).toBe(204);
      const here = await t.call("POST", `/v1/runners/${r.id}/heartbeat`, { token: r.token, body: {} });
      expect([here.status, here.body.code]).toEqual([401, "invalid_runner_token"]);
      const there = await other.call("POST", `/v1/runners/${r.id}/claim`, r.token);
      expect([there.status, there.body.code]).toEqual([401, "invalid_runner_token"]);
      const list = await t.call("GET", "/v1/runners", { token: w.ownerToken });
      expect(list.body.map((x: Json) => x.id)).not.toContain(r.id);
      expect(await auditActions(t, w.ownerToken, r.id)).toContain("runner.remove");
    } finally {
      other.close();
    }
  });

  it("returns an assigned build to the queue and fails a running one with runner_removed", async () => {
    const r = await registerRunner(t, w.ownerToken);
    const first = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    const second = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    expect((await claim(t, r)).build_id).toBe(first.id);
    expect((await claim(t, r)).build_id).toBe(second.id);
    expect((await reportStatus(t, r, first.id, { status: "running" })).status).toBe(200);
    expect((await t.call("DELETE", `/v1/runners/${r.id}`, { token: w.ownerToken })).status).toBe(204);
    const running = await t.call("GET", `/v1/builds/${first.id}`, { token: w.ownerToken });
    expect(running.body).toMatchObject({ status: "failed", failure_reason: "runner_removed" });
    expect(typeof running.body.finished_at).toBe("number");
    const assigned = await t.deps.db.select().from(builds).where(eq(builds.id, second.id)).get();
    expect(assigned).toMatchObject({ status: "queued", runnerId: null });
    // Another runner picks it up.
    expect((await claim(t, w.runner))?.build_id).toBe(second.id);
    await reportStatus(t, w.runner, second.id, { status: "running" });
    await reportStatus(t, w.runner, second.id, { status: "succeeded" });
  });

  it("answers 404 not_found for an unknown runner, 403 forbidden for developer and qa_viewer, 401 without a session", async () => {
    const missing = await t.call("DELETE", `/v1/runners/${crypto.randomUUID()}`, { token: w.ownerToken });
    expect([missing.status, missing.body.code]).toEqual([404, "not_found"]);
    const r = await registerRunner(t, w.ownerToken);
    for (const role of ["developer", "qa_viewer"] as const) {
      const u = await userWithRole(t, role);
      const res = await t.call("DELETE", `/v1/runners/${r.id}`, { token: u.token });
      expect([role, res.status, res.body.code]).toEqual([role, 403, "forbidden"]);
    }
    const none = await t.call("DELETE", `/v1/runners/${r.id}`);
    expect([none.status, none.body.code]).toEqual([401, "missing_auth"]);
    // A runner cannot remove itself or another runner with its token.
    const self = await t.call("DELETE", `/v1/runners/${r.id}`, { token: r.token });
    expect([self.status, self.body.code]).toEqual([401, "invalid_session"]);
    const admin = await userWithRole(t, "admin");
    expect((await t.call("DELETE", `/v1/runners/${r.id}`, { token: admin.token })).status).toBe(204);
  });
});

describe("POST /v1/runners/{id}/rotate-token", () => {
  let t: TestApp;
  let w: Awaited<ReturnType<typeof buildWorld>>;
  beforeAll(async () => {
    t = await makeTestApp();
    w = await buildWorld(t);
  });

  it("answers a new token; the old one fails at once on every daemon, the new one works", async () => {
    const other = await secondDaemon(t);
    try {
      const r = await registerRunner(t, w.ownerToken);
      expect((await other.call("POST", `/v1/runners/${r.id}/heartbeat`, r.token, {})).status).toBe(200);
      const rot = await t.call("POST", `/v1/runners/${r.id}/rotate-token`, { token: w.ownerToken });
      expect(rot.status).toBe(200);
      expect(rot.body.token).toMatch(/^hgr_[A-Za-z0-9_-]{43}$/);
      expect(rot.body.token).not.toBe(r.token);
      for (const res of [
        await t.call("POST", `/v1/runners/${r.id}/heartbeat`, { token: r.token, body: {} }),
        await other.call("POST", `/v1/runners/${r.id}/heartbeat`, r.token, {}),
      ]) {
        expect([res.status, res.body.code]).toEqual([401, "invalid_runner_token"]);
      }
      expect((await other.call("POST", `/v1/runners/${r.id}/heartbeat`, rot.body.token, {})).status).toBe(200);
      expect((await t.call("POST", `/v1/runners/${r.id}/heartbeat`, { token: rot.body.token, body: {} })).status).toBe(200);
      const list = await t.call("GET", "/v1/runners", { token: w.ownerToken });
      expect(list.text).not.toContain(rot.body.token);
      expect(await auditActions(t, w.ownerToken, r.id)).toContain("runner.rotate_token");
      // The audit log never holds the token.
      expect((await t.call("GET", "/v1/audit-events?limit=500", { token: w.ownerToken })).text).not.toContain(rot.body.token);
    } finally {
      other.close();
    }
  });

  it("answers 404 not_found for an unknown runner, 403 forbidden for developer, 401 invalid_session with a runner token", async () => {
    const missing = await t.call("POST", `/v1/runners/${crypto.randomUUID()}/rotate-token`, { token: w.ownerToken });
    expect([missing.status, missing.body.code]).toEqual([404, "not_found"]);
    const dev = await userWithRole(t, "developer");
    const res = await t.call("POST", `/v1/runners/${w.runner.id}/rotate-token`, { token: dev.token });
    expect([res.status, res.body.code]).toEqual([403, "forbidden"]);
    const self = await t.call("POST", `/v1/runners/${w.runner.id}/rotate-token`, { token: w.runner.token });
    expect([self.status, self.body.code]).toEqual([401, "invalid_session"]);
  });
});

describe("capabilities: granted at registration, narrowed only by the runner", () => {
  let t: TestApp;
  let w: Awaited<ReturnType<typeof buildWorld>>;
  beforeAll(async () => {
    t = await makeTestApp();
    w = await buildWorld(t);
  });

  it("lets a runner narrow its platforms and refuses widening with 403 forbidden", async () => {
    const r = await registerRunner(t, w.ownerToken, { platforms: ["ios", "android"] });
    const narrow = await t.call("PATCH", `/v1/runners/${r.id}`, { token: r.token, body: { capabilities: { platforms: ["android"] } } });
    expect(narrow.status).toBe(200);
    expect(narrow.body.capabilities.platforms).toEqual(["android"]);
    // A platform it dropped does not come back through its own token, nor does a new one.
    for (const platforms of [["android", "ios"], ["macos"], ["android", "macos"]]) {
      const widen = await t.call("PATCH", `/v1/runners/${r.id}`, { token: r.token, body: { capabilities: { platforms } } });
      expect([platforms, widen.status, widen.body.code]).toEqual([platforms, 403, "forbidden"]);
    }
    const row = await t.call("GET", "/v1/runners", { token: w.ownerToken });
    expect(row.body.find((x: Json) => x.id === r.id).capabilities.platforms).toEqual(["android"]);
    // An owner or admin may set any.
    const admin = await userWithRole(t, "admin");
    const widened = await t.call("PATCH", `/v1/runners/${r.id}`, {
      token: admin.token,
      body: { capabilities: { platforms: ["ios", "android", "macos"] } },
    });
    expect(widened.status).toBe(200);
    expect(widened.body.capabilities.platforms).toEqual(["ios", "android", "macos"]);
    expect(await auditActions(t, w.ownerToken, r.id)).toEqual(expect.arrayContaining(["runner.update"]));
  });

  it("a widened claim is not possible: a narrowed runner does not get a build of a dropped platform", async () => {
    const r = await registerRunner(t, w.ownerToken, { platforms: ["ios", "android"] });
    expect((await t.call("PATCH", `/v1/runners/${r.id}`, { token: r.token, body: { capabilities: { platforms: ["android"] } } })).status).toBe(200);
    const iosPipeline = await t.call("POST", `/v1/projects/${w.project.id}/pipelines`, {
      token: w.ownerToken,
      body: { name: "ios-only", config: { platform: "ios", steps: [{ name: "s", run: "true" }] } },
    });
    const b = await queueBuild(t, w.ownerToken, w.project.id, iosPipeline.body.id);
    expect(await claim(t, r)).toBeNull();
    const cancel = await t.call("POST", `/v1/builds/${b.id}/cancel`, { token: w.ownerToken });
    expect(cancel.status).toBe(200);
  });

  it("accepts only ios, android and macos (400 invalid_input), at registration and in PATCH", async () => {
    for (const platforms of [["any"], ["windows"], ["IOS"], ["ios", "linux"]]) {
      const reg = await t.call("POST", "/v1/runners/register", { token: w.ownerToken, body: { capabilities: { platforms } } });
      expect([platforms, reg.status, reg.body.code]).toEqual([platforms, 400, "invalid_input"]);
      const patch = await t.call("PATCH", `/v1/runners/${w.runner.id}`, { token: w.ownerToken, body: { capabilities: { platforms } } });
      expect([platforms, patch.status, patch.body.code]).toEqual([platforms, 400, "invalid_input"]);
    }
  });

  it("an owner or admin edits name, platforms and trust in one PATCH, but cannot empty the platforms (400 invalid_input)", async () => {
    const r = await registerRunner(t, w.ownerToken, { name: "old-name", platforms: ["android"] });
    const admin = await userWithRole(t, "admin");
    const edited = await t.call("PATCH", `/v1/runners/${r.id}`, {
      token: admin.token,
      body: { name: "mac-mini-2", trust: "open", capabilities: { platforms: ["ios", "macos"] } },
    });
    expect(edited.status).toBe(200);
    expect(edited.body).toMatchObject({ name: "mac-mini-2", trust: "open", capabilities: { platforms: ["ios", "macos"] } });
    // A user's edit is not a sign of life: the runner is still not started.
    expect(edited.body.last_heartbeat_at).toBeNull();
    const emptied = await t.call("PATCH", `/v1/runners/${r.id}`, { token: admin.token, body: { capabilities: { platforms: [] } } });
    expect([emptied.status, emptied.body.code]).toEqual([400, "invalid_input"]);
    expect(emptied.body.issues).toEqual([{ path: "capabilities.platforms", message: "at least one platform is required" }]);
    const row = (await t.call("GET", "/v1/runners", { token: w.ownerToken })).body.find((x: Json) => x.id === r.id);
    expect(row.capabilities.platforms).toEqual(["ios", "macos"]);
  });

  it("PATCH by a developer is 403 forbidden; by another runner's token 403 runner_mismatch; unknown runner 404", async () => {
    const dev = await userWithRole(t, "developer");
    const res = await t.call("PATCH", `/v1/runners/${w.runner.id}`, { token: dev.token, body: { name: "x" } });
    expect([res.status, res.body.code]).toEqual([403, "forbidden"]);
    const other = await registerRunner(t, w.ownerToken);
    const mismatch = await t.call("PATCH", `/v1/runners/${w.runner.id}`, { token: other.token, body: { name: "x" } });
    expect([mismatch.status, mismatch.body.code]).toEqual([403, "runner_mismatch"]);
    const missing = await t.call("PATCH", `/v1/runners/${crypto.randomUUID()}`, { token: w.ownerToken, body: { name: "x" } });
    expect([missing.status, missing.body.code]).toEqual([404, "not_found"]);
    const bogus = await t.call("PATCH", `/v1/runners/${w.runner.id}`, { token: "y".repeat(43), body: { name: "x" } });
    expect([bogus.status, bogus.body.code]).toEqual([401, "invalid_runner_token"]);
  });
});
