import { describe, expect, it } from "vitest";
import { makeTestApp } from "../helpers/app.ts";
import { buildWorld, claim, queueBuild } from "../helpers/builds.ts";
import { completeLocalSetup, createUser, userWithRole } from "../helpers/factories.ts";

describe("GET /v1/audit-events", () => {
  it("records every user-management action with actor, target and time, newest first", async () => {
    const t = await makeTestApp();
    const { ownerToken, owner } = await completeLocalSetup(t);
    const tick = () => t.clock.advance(5);

    tick();
    const invited = await t.call("POST", "/v1/users/invite", { token: ownerToken, body: { email: "dev@example.com", role: "developer" } });
    const inviteAt = t.clock.now();
    tick();
    await t.call("POST", "/v1/auth/local/login", { body: { email: "dev@example.com" } });
    const signInAt = t.clock.now();
    tick();
    await t.call("PATCH", `/v1/users/${invited.body.id}/role`, { token: ownerToken, body: { role: "admin" } });
    tick();
    await t.call("DELETE", `/v1/users/${invited.body.id}`, { token: ownerToken });
    tick();
    await t.call("POST", `/v1/users/${invited.body.id}/enable`, { token: ownerToken });
    tick();
    await t.call("POST", "/v1/users/transfer-owner", { token: ownerToken, body: { email: "dev@example.com" } });
    const transferAt = t.clock.now();

    const newOwner = (await t.call("POST", "/v1/auth/local/login", { body: { email: "dev@example.com" } })).body.session_token;
    const res = await t.call("GET", "/v1/audit-events", { token: newOwner });
    expect(res.status).toBe(200);
    expect(res.body.map((e: { action: string }) => e.action)).toEqual([
      "auth.sign_in",
      "user.ownership_transferred",
      "user.enabled",
      "user.disabled",
      "user.role_changed",
      "auth.sign_in",
      "user.invited",
      "auth.sign_in",
      "setup.completed",
      "setup.owner_created",
    ]);
    const byAction = (action: string) => res.body.filter((e: { action: string }) => e.action === action);
    expect(byAction("user.invited")[0]).toEqual({
      id: expect.any(String),
      action: "user.invited",
      actor_user_id: owner.id,
      actor_email: owner.email,
      target_type: "user",
      target_id: invited.body.id,
      details: { email: "dev@example.com", role: "developer" },
      created_at: inviteAt,
    });
    expect(byAction("auth.sign_in")[1]).toMatchObject({
      actor_user_id: invited.body.id,
      target_id: invited.body.id,
      created_at: signInAt,
      details: { method: "local" },
    });
    expect(byAction("user.role_changed")[0]).toMatchObject({
      actor_user_id: owner.id,
      target_id: invited.body.id,
      details: { from: "developer", to: "admin" },
    });
    expect(byAction("user.disabled")[0]).toMatchObject({ actor_user_id: owner.id, target_id: invited.body.id });
    expect(byAction("user.enabled")[0]).toMatchObject({ actor_user_id: owner.id, target_id: invited.body.id });
    expect(byAction("user.ownership_transferred")[0]).toMatchObject({ actor_user_id: owner.id, target_id: invited.body.id, created_at: transferAt });
    expect(byAction("setup.completed")[0]).toMatchObject({ actor_user_id: owner.id, target_type: "instance" });
    expect(byAction("setup.owner_created")[0]).toMatchObject({ actor_user_id: owner.id, target_id: owner.id });
    // No event carries a token.
    expect(JSON.stringify(res.body)).not.toContain(newOwner);
  });

  it("keeps the order of events within one second and honours limit", async () => {
    const t = await makeTestApp();
    const { ownerToken } = await completeLocalSetup(t);
    for (let i = 0; i < 60; i++) {
      await t.call("POST", "/v1/users/invite", { token: ownerToken, body: { email: `u${i}@example.com`, role: "qa_viewer" } });
    }
    const all = await t.call("GET", "/v1/audit-events", { token: ownerToken });
    expect(all.body).toHaveLength(50);
    expect(all.body[0].details.email).toBe("u59@example.com");
    expect(all.body[49].details.email).toBe("u10@example.com");

    const three = await t.call("GET", "/v1/audit-events?limit=3", { token: ownerToken });
    expect(three.body.map((e: { details: { email: string } }) => e.details.email)).toEqual(["u59@example.com", "u58@example.com", "u57@example.com"]);
    expect((await t.call("GET", "/v1/audit-events?limit=500", { token: ownerToken })).body).toHaveLength(63);
  });

  it("answers 400 invalid_input for a bad limit", async () => {
    const t = await makeTestApp();
    const { ownerToken } = await completeLocalSetup(t);
    for (const limit of ["0", "501", "abc", "1.5", "-1"]) {
      const res = await t.call("GET", `/v1/audit-events?limit=${limit}`, { token: ownerToken });
      expect(res.status, limit).toBe(400);
      expect(res.body.code).toBe("invalid_input");
    }
  });

  it("is readable by admins and refused to developers and QA viewers with 403 forbidden", async () => {
    const t = await makeTestApp();
    await completeLocalSetup(t);
    await createUser(t);
    const { token: admin } = await userWithRole(t, "admin");
    expect((await t.call("GET", "/v1/audit-events", { token: admin })).status).toBe(200);
    for (const role of ["developer", "qa_viewer"] as const) {
      const { token } = await userWithRole(t, role);
      const res = await t.call("GET", "/v1/audit-events", { token });
      expect(res.status).toBe(403);
      expect(res.body.code).toBe("forbidden");
    }
    const missing = await t.call("GET", "/v1/audit-events");
    expect(missing.status).toBe(401);
    expect(missing.body.code).toBe("missing_auth");
  });
});

describe("audit events follow only the changes that landed", () => {
  it("parallel cancels of one build leave one build.cancel event, and cancelling a finished build none", async () => {
    const t = await makeTestApp();
    const { ownerToken, project, pipeline, runner } = await buildWorld(t);
    const build = await queueBuild(t, ownerToken, project.id, pipeline.id);
    expect(await claim(t, runner)).not.toBeNull();
    const answers = await Promise.all(Array.from({ length: 5 }, () => t.call("POST", `/v1/builds/${build.id}/cancel`, { token: ownerToken })));
    expect(answers.map((a) => [a.status, a.body.status])).toEqual(Array.from({ length: 5 }, () => [200, "canceled"]));
    await t.call("POST", `/v1/builds/${build.id}/cancel`, { token: ownerToken });
    const events = (await t.call("GET", "/v1/audit-events", { token: ownerToken })).body as Array<{ action: string; target_id: string }>;
    expect(events.filter((e) => e.action === "build.cancel" && e.target_id === build.id)).toHaveLength(1);
    const runnerRow = (await t.call("GET", "/v1/runners", { token: ownerToken })).body.find((r: { id: string }) => r.id === runner.id);
    expect(runnerRow.status).toBe("online");
  });

  it("two racing ownership transfers leave one owner and one transfer event", async () => {
    const t = await makeTestApp();
    const { ownerToken } = await completeLocalSetup(t);
    await createUser(t, { email: "a@example.com", role: "admin" });
    await createUser(t, { email: "b@example.com", role: "admin" });
    const answers = await Promise.all(
      ["a@example.com", "b@example.com"].map((email) => t.call("POST", "/v1/users/transfer-owner", { token: ownerToken, body: { email } })),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409]);
    const admin = await userWithRole(t, "admin");
    const events = (await t.call("GET", "/v1/audit-events", { token: admin.token })).body as Array<{ action: string }>;
    expect(events.filter((e) => e.action === "user.ownership_transferred")).toHaveLength(1);
    const owners = (await t.call("GET", "/v1/users", { token: admin.token })).body.filter((u: { role: string }) => u.role === "owner");
    expect(owners).toHaveLength(1);
  });
});
