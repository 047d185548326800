import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { auditEvents, instance, userSessions, users } from "../../src/db/schema/index.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { completeLocalSetup, createUser, sessionFor, userWithRole } from "../helpers/factories.ts";
import { writeSetting } from "../../src/domain/settings/instance-settings.ts";
import { OIDC_SETTING } from "../../src/domain/setup/preflight.ts";

const UNKNOWN_ID = "00000000-0000-4000-8000-000000000000";

async function ready() {
  const t = await makeTestApp();
  const { ownerToken, owner } = await completeLocalSetup(t);
  return { t, ownerToken, owner };
}

async function actions(t: TestApp, action: string) {
  return t.deps.db.select().from(auditEvents).where(eq(auditEvents.action, action)).all();
}

/** The calls of the users area that only the owner and admins may make, against a given target. */
function managerCalls(targetId: string): Array<[string, string, unknown]> {
  return [
    ["GET", "/v1/users", undefined],
    ["POST", "/v1/users/invite", { email: "x@example.com", role: "developer" }],
    ["PATCH", `/v1/users/${targetId}/role`, { role: "admin" }],
    ["DELETE", `/v1/users/${targetId}`, undefined],
    ["POST", `/v1/users/${targetId}/enable`, undefined],
  ];
}

describe("authentication on every users endpoint", () => {
  it("answers 401 missing_auth and invalid_session", async () => {
    const { t } = await ready();
    const calls: Array<[string, string, unknown]> = [
      ["GET", "/v1/users/me", undefined],
      ...managerCalls(UNKNOWN_ID),
      ["POST", "/v1/users/transfer-owner", { email: "x@example.com" }],
      ["GET", "/v1/audit-events", undefined],
    ];
    for (const [method, path, body] of calls) {
      const missing = await t.call(method, path, { body });
      expect(missing.status, `${method} ${path}`).toBe(401);
      expect(missing.body.code).toBe("missing_auth");
      const invalid = await t.call(method, path, { body, token: "A".repeat(43) });
      expect(invalid.status, `${method} ${path}`).toBe(401);
      expect(invalid.body.code).toBe("invalid_session");
    }
  });
});

describe("GET /v1/users/me", () => {
  it("answers the caller for every role", async () => {
    const { t, ownerToken, owner } = await ready();
    const me = await t.call("GET", "/v1/users/me", { token: ownerToken });
    expect(me.body).toEqual({
      id: owner.id,
      email: "owner@example.com",
      display_name: "owner",
      role: "owner",
      status: "active",
      avatar_url: null,
      created_at: t.clock.now(),
      updated_at: t.clock.now(),
    });
    for (const role of ["admin", "developer", "qa_viewer"] as const) {
      const { user, token } = await userWithRole(t, role);
      const res = await t.call("GET", "/v1/users/me", { token });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ id: user.id, role });
    }
  });
});

describe("role matrix", () => {
  it("answers 403 forbidden to developers and QA viewers on every management call", async () => {
    const { t, owner } = await ready();
    for (const role of ["developer", "qa_viewer"] as const) {
      const { token } = await userWithRole(t, role);
      const target = await createUser(t);
      for (const [method, path, body] of [...managerCalls(target.id), ...managerCalls(UNKNOWN_ID)]) {
        const res = await t.call(method, path, { body, token });
        expect(res.status, `${role} ${method} ${path}`).toBe(403);
        expect(res.body.code).toBe("forbidden");
      }
      const transfer = await t.call("POST", "/v1/users/transfer-owner", { token, body: { email: owner.email } });
      expect(transfer.status).toBe(403);
      expect(transfer.body.code).toBe("forbidden");
      const audit = await t.call("GET", "/v1/audit-events", { token });
      expect(audit.status).toBe(403);
      expect(audit.body.code).toBe("forbidden");
      // Nothing was changed by the refused calls.
      expect((await t.deps.db.select().from(users).where(eq(users.id, target.id)).get())?.status).toBe("active");
    }
    expect(await t.deps.db.select().from(users).where(eq(users.email, "x@example.com")).all()).toHaveLength(0);
  });

  it("lets owner and admin list users, including disabled ones", async () => {
    const { t, ownerToken } = await ready();
    const { token: adminToken } = await userWithRole(t, "admin");
    const disabled = await createUser(t, { status: "disabled" });
    for (const token of [ownerToken, adminToken]) {
      const res = await t.call("GET", "/v1/users", { token });
      expect(res.status).toBe(200);
      expect(res.body).toHaveLength(3);
      expect(res.body.find((u: { id: string }) => u.id === disabled.id).status).toBe("disabled");
    }
  });
});

describe("POST /v1/users/invite", () => {
  it("creates an invited user and records it", async () => {
    const { t, ownerToken, owner } = await ready();
    const res = await t.call("POST", "/v1/users/invite", { token: ownerToken, body: { email: "Dev@Example.com", role: "developer" } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ email: "dev@example.com", role: "developer", status: "invited", display_name: "dev" });
    const [event] = await actions(t, "user.invited");
    expect(event).toMatchObject({ actorUserId: owner.id, targetId: res.body.id });
  });

  it("answers sign_in_url null with a sign_in_note while External Access is off, even with a public URL saved", async () => {
    const { t, ownerToken } = await ready();
    const res = await t.call("POST", "/v1/users/invite", { token: ownerToken, body: { email: "local@example.com", role: "developer" } });
    expect(res.status).toBe(200);
    expect(res.body.sign_in_url).toBeNull();
    expect(res.body.sign_in_note).toMatch(/External Access is off/);
    const network = await t.call("PUT", "/v1/settings/external-access/network", {
      token: ownerToken,
      body: { public_url: "https://ci.example.com/", allowed_origins: ["https://ci.example.com"] },
    });
    expect(network.status).toBe(200);
    const still = await t.call("POST", "/v1/users/invite", { token: ownerToken, body: { email: "local2@example.com", role: "developer" } });
    expect([still.body.sign_in_url, typeof still.body.sign_in_note]).toEqual([null, "string"]);
  });

  it("answers the public sign-in page as sign_in_url (and no note) once External Access is on", async () => {
    const { t, ownerToken, owner } = await ready();
    const network = await t.call("PUT", "/v1/settings/external-access/network", {
      token: ownerToken,
      body: { public_url: "https://ci.example.com/hangar/", allowed_origins: ["https://ci.example.com"] },
    });
    expect(network.status).toBe(200);
    await writeSetting(t.deps, OIDC_SETTING, { issuer_url: "https://id.example.com" });
    const mode = await t.call("PUT", "/v1/settings/preferences", { token: ownerToken, body: { runtime_mode: "remote" } });
    expect(mode.status, mode.text).toBe(200);
    // Changing the mode ended the owner's sessions.
    const token = await sessionFor(t, owner);
    const res = await t.call("POST", "/v1/users/invite", { token, body: { email: "far@example.com", role: "qa_viewer" } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      email: "far@example.com",
      status: "invited",
      sign_in_url: "https://ci.example.com/hangar/login",
      sign_in_note: null,
    });
  });

  it("lets an admin invite", async () => {
    const { t } = await ready();
    const { token } = await userWithRole(t, "admin");
    const res = await t.call("POST", "/v1/users/invite", { token, body: { email: "qa@example.com", role: "qa_viewer" } });
    expect(res.status).toBe(200);
  });

  it("answers 400 invalid_input for an invalid email or role", async () => {
    const { t, ownerToken } = await ready();
    for (const body of [
      { email: "nope", role: "developer" },
      { email: "a@example.com", role: "owner" },
      { email: "a@example.com", role: "boss" },
      { email: "a@example.com" },
      { role: "developer" },
    ]) {
      const res = await t.call("POST", "/v1/users/invite", { token: ownerToken, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.code).toBe("invalid_input");
    }
  });

  it("answers 409 already_exists for an email that has a user, in any case and any status", async () => {
    const { t, ownerToken } = await ready();
    const disabled = await createUser(t, { status: "disabled" });
    for (const email of ["OWNER@example.com", disabled.email]) {
      const res = await t.call("POST", "/v1/users/invite", { token: ownerToken, body: { email, role: "admin" } });
      expect(res.status, email).toBe(409);
      expect(res.body.code).toBe("already_exists");
    }
    expect(await actions(t, "user.invited")).toHaveLength(0);
  });

  it("makes one user from two parallel invites of the same email: one 200, one 409", async () => {
    const { t, ownerToken } = await ready();
    const { token: adminToken } = await userWithRole(t, "admin");
    const [a, b] = await Promise.all([
      t.call("POST", "/v1/users/invite", { token: ownerToken, body: { email: "same@example.com", role: "developer" } }),
      t.call("POST", "/v1/users/invite", { token: adminToken, body: { email: "same@example.com", role: "qa_viewer" } }),
    ]);
    expect([a!.status, b!.status].sort()).toEqual([200, 409]);
    expect([a, b].find((r) => r!.status === 409)!.body.code).toBe("already_exists");
    expect(await t.deps.db.select().from(users).where(eq(users.email, "same@example.com")).all()).toHaveLength(1);
    // Only the invite that happened is in the audit log.
    expect(await actions(t, "user.invited")).toHaveLength(1);
  });
});

describe("PATCH /v1/users/{id}/role", () => {
  it("changes the role and records from and to", async () => {
    const { t, ownerToken } = await ready();
    const dev = await createUser(t, { role: "developer" });
    t.clock.advance(10);
    const res = await t.call("PATCH", `/v1/users/${dev.id}/role`, { token: ownerToken, body: { role: "admin" } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: dev.id, role: "admin", updated_at: t.clock.now() });
    const [event] = await actions(t, "user.role_changed");
    expect(event?.details).toEqual({ from: "developer", to: "admin" });
  });

  it("answers 400 invalid_input for an invalid role, including owner", async () => {
    const { t, ownerToken } = await ready();
    const dev = await createUser(t);
    for (const role of ["owner", "root", undefined]) {
      const res = await t.call("PATCH", `/v1/users/${dev.id}/role`, { token: ownerToken, body: { role } });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe("invalid_input");
    }
  });

  it("answers 404 not_found for an unknown user", async () => {
    const { t, ownerToken } = await ready();
    const res = await t.call("PATCH", `/v1/users/${UNKNOWN_ID}/role`, { token: ownerToken, body: { role: "admin" } });
    expect(res.status).toBe(404);
    expect(res.body.code).toBe("not_found");
  });

  it("answers 403 forbidden when anyone tries to change the owner's role", async () => {
    const { t, ownerToken, owner } = await ready();
    const { token: adminToken } = await userWithRole(t, "admin");
    for (const token of [adminToken, ownerToken]) {
      const res = await t.call("PATCH", `/v1/users/${owner.id}/role`, { token, body: { role: "developer" } });
      expect(res.status).toBe(403);
      expect(res.body.code).toBe("forbidden");
    }
    expect((await t.deps.db.select().from(users).where(eq(users.id, owner.id)).get())?.role).toBe("owner");
    expect(await actions(t, "user.role_changed")).toHaveLength(0);
  });
});

describe("DELETE /v1/users/{id} and POST /v1/users/{id}/enable", () => {
  it("disables (keeping the record), ends the user's sessions, and enables again", async () => {
    const { t, ownerToken } = await ready();
    const { user, token } = await userWithRole(t, "developer");
    const second = await sessionFor(t, user);
    const other = await userWithRole(t, "qa_viewer");

    const res = await t.call("DELETE", `/v1/users/${user.id}`, { token: ownerToken });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: user.id, status: "disabled", role: "developer" });
    for (const tok of [token, second]) {
      const me = await t.call("GET", "/v1/users/me", { token: tok });
      expect(me.status).toBe(401);
      expect(me.body.code).toBe("invalid_session");
    }
    expect(await t.deps.db.select().from(userSessions).where(eq(userSessions.userId, user.id)).all()).toHaveLength(0);
    expect((await t.call("GET", "/v1/users/me", { token: other.token })).status).toBe(200);
    expect(await t.deps.db.select().from(users).where(eq(users.id, user.id)).get()).toBeDefined();
    const login = await t.call("POST", "/v1/auth/local/login", { body: { email: user.email } });
    expect(login.body.code).toBe("user_not_found");

    const enabled = await t.call("POST", `/v1/users/${user.id}/enable`, { token: ownerToken });
    expect(enabled.status).toBe(200);
    expect(enabled.body).toMatchObject({ id: user.id, status: "active" });
    // Old sessions stay dead; a new sign-in works.
    expect((await t.call("GET", "/v1/users/me", { token })).status).toBe(401);
    expect((await t.call("POST", "/v1/auth/local/login", { body: { email: user.email } })).status).toBe(200);

    expect(await actions(t, "user.disabled")).toHaveLength(1);
    expect(await actions(t, "user.enabled")).toHaveLength(1);
  });

  it("lets an admin disable and enable another admin", async () => {
    const { t } = await ready();
    const { token } = await userWithRole(t, "admin");
    const { user } = await userWithRole(t, "admin");
    expect((await t.call("DELETE", `/v1/users/${user.id}`, { token })).status).toBe(200);
    expect((await t.call("POST", `/v1/users/${user.id}/enable`, { token })).status).toBe(200);
  });

  it("answers 404 not_found for an unknown user", async () => {
    const { t, ownerToken } = await ready();
    for (const [method, path] of [
      ["DELETE", `/v1/users/${UNKNOWN_ID}`],
      ["POST", `/v1/users/${UNKNOWN_ID}/enable`],
    ] as const) {
      const res = await t.call(method, path, { token: ownerToken });
      expect(res.status).toBe(404);
      expect(res.body.code).toBe("not_found");
    }
  });

  it("answers 403 forbidden to an admin disabling the owner", async () => {
    const { t, ownerToken, owner } = await ready();
    const { token } = await userWithRole(t, "admin");
    const res = await t.call("DELETE", `/v1/users/${owner.id}`, { token });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe("forbidden");
    expect((await t.call("GET", "/v1/users/me", { token: ownerToken })).status).toBe(200);
    expect(await actions(t, "user.disabled")).toHaveLength(0);
  });
});

describe("POST /v1/users/transfer-owner", () => {
  it("makes the target owner and the previous owner admin, moves the owner record, and ends both users' sessions", async () => {
    const { t, ownerToken, owner } = await ready();
    const { user: target, token: targetToken } = await userWithRole(t, "developer");
    const bystander = await userWithRole(t, "qa_viewer");
    const res = await t.call("POST", "/v1/users/transfer-owner", { token: ownerToken, body: { email: target.email.toUpperCase() } });
    expect(res.status).toBe(200);
    expect(res.body.previous_owner).toMatchObject({ id: owner.id, role: "admin", status: "active" });
    expect(res.body.owner).toMatchObject({ id: target.id, role: "owner", status: "active" });
    for (const u of [res.body.previous_owner, res.body.owner]) {
      expect(u).not.toHaveProperty("display_name");
      expect(u).not.toHaveProperty("avatar_url");
      expect(Object.keys(u).sort()).toEqual(["created_at", "email", "id", "role", "status", "updated_at"]);
    }
    expect((await t.deps.db.select().from(instance).get())?.ownerUserId).toBe(target.id);
    for (const token of [ownerToken, targetToken]) {
      const me = await t.call("GET", "/v1/users/me", { token });
      expect(me.status).toBe(401);
      expect(me.body.code).toBe("invalid_session");
    }
    expect((await t.call("GET", "/v1/users/me", { token: bystander.token })).status).toBe(200);
    const [event] = await actions(t, "user.ownership_transferred");
    expect(event).toMatchObject({ actorUserId: owner.id, targetId: target.id });

    // The new owner signs in and holds the owner's powers; the old one no longer does.
    const newOwner = (await t.call("POST", "/v1/auth/local/login", { body: { email: target.email } })).body.session_token;
    const oldOwner = (await t.call("POST", "/v1/auth/local/login", { body: { email: owner.email } })).body.session_token;
    expect((await t.call("POST", "/v1/users/transfer-owner", { token: oldOwner, body: { email: owner.email } })).body.code).toBe("forbidden");
    expect((await t.call("POST", "/v1/users/transfer-owner", { token: newOwner, body: { email: owner.email } })).status).toBe(200);
    expect(await t.deps.db.select().from(users).where(eq(users.role, "owner")).all()).toHaveLength(1);
  });

  it("answers 400 invalid_email for an invalid target email", async () => {
    const { t, ownerToken } = await ready();
    for (const email of ["not-an-email", "", "a@"]) {
      const res = await t.call("POST", "/v1/users/transfer-owner", { token: ownerToken, body: { email } });
      expect(res.status, email).toBe(400);
      expect(res.body.code).toBe("invalid_email");
    }
  });

  it("answers 403 forbidden to an admin", async () => {
    const { t } = await ready();
    const { user, token } = await userWithRole(t, "admin");
    const res = await t.call("POST", "/v1/users/transfer-owner", { token, body: { email: user.email } });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe("forbidden");
  });

  it("answers 404 user_not_found for an unknown target", async () => {
    const { t, ownerToken } = await ready();
    const res = await t.call("POST", "/v1/users/transfer-owner", { token: ownerToken, body: { email: "ghost@example.com" } });
    expect(res.status).toBe(404);
    expect(res.body.code).toBe("user_not_found");
  });

  it("answers 409 user_not_active for an invited or a disabled target, and changes nothing", async () => {
    const { t, ownerToken, owner } = await ready();
    for (const status of ["invited", "disabled"] as const) {
      const target = await createUser(t, { status, role: "admin" });
      const res = await t.call("POST", "/v1/users/transfer-owner", { token: ownerToken, body: { email: target.email } });
      expect(res.status, status).toBe(409);
      expect(res.body.code).toBe("user_not_active");
    }
    expect((await t.deps.db.select().from(users).where(eq(users.role, "owner")).all()).map((u) => u.id)).toEqual([owner.id]);
    expect((await t.call("GET", "/v1/users/me", { token: ownerToken })).status).toBe(200);
  });

  it("leaves exactly one owner when two transfers race", async () => {
    const { t, ownerToken } = await ready();
    const a = await createUser(t, { role: "admin" });
    const b = await createUser(t, { role: "developer" });
    const answers = await Promise.all([a, b].map((u) => t.call("POST", "/v1/users/transfer-owner", { token: ownerToken, body: { email: u.email } })));
    expect(answers.filter((r) => r.status === 200)).toHaveLength(1);
    const owners = await t.deps.db.select().from(users).where(eq(users.role, "owner")).all();
    expect(owners).toHaveLength(1);
    expect((await t.deps.db.select().from(instance).get())?.ownerUserId).toBe(owners[0]!.id);
    expect(await actions(t, "user.ownership_transferred")).toHaveLength(1);
  });
});
