// SMTP settings for tester mail (docs/spec.md §18): owner and admin only, password write-only and sealed, the host
// under the outbound guard.
import { beforeAll, describe, expect, it } from "vitest";
import { readSetting } from "../../src/domain/settings/instance-settings.ts";
import { SMTP_SETTING } from "../../src/domain/settings/smtp-settings.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { completeLocalSetup, userWithRole } from "../helpers/factories.ts";

const BODY = { host: "127.0.0.1", port: 2525, secure: false, username: "ci", password: "s3cret-Pass", from: "Hangar <ci@example.com>" };

describe("SMTP settings", () => {
  let t: TestApp;
  let owner: string;
  beforeAll(async () => {
    t = await makeTestApp();
    owner = (await completeLocalSetup(t)).ownerToken;
  });

  it("answers nulls before any PUT, then the settings without the password, which is stored sealed and kept when omitted", async () => {
    const empty = await t.call("GET", "/v1/settings/smtp", { token: owner });
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual({ host: null, port: null, secure: false, username: null, from: null, has_password: false, updated_at: null });
    const put = await t.call("PUT", "/v1/settings/smtp", { token: owner, body: BODY });
    expect(put.status, put.text).toBe(200);
    expect(put.body).toMatchObject({
      host: "127.0.0.1",
      port: 2525,
      secure: false,
      username: "ci",
      from: "Hangar <ci@example.com>",
      has_password: true,
    });
    expect(put.text).not.toContain("s3cret");
    const stored = await readSetting<Record<string, unknown>>(t.deps, SMTP_SETTING);
    expect(JSON.stringify(stored)).not.toContain("s3cret");
    expect(await t.deps.secrets.open(stored!.value.password_sealed as string)).toBe("s3cret-Pass");
    const { password: _password, ...withoutPassword } = BODY;
    const kept = await t.call("PUT", "/v1/settings/smtp", { token: owner, body: { ...withoutPassword, port: 587 } });
    expect(kept.body).toMatchObject({ port: 587, has_password: true });
    const cleared = await t.call("PUT", "/v1/settings/smtp", { token: owner, body: { ...BODY, password: null } });
    expect(cleared.body.has_password).toBe(false);
    const admin = (await userWithRole(t, "admin")).token;
    expect((await t.call("GET", "/v1/settings/smtp", { token: admin })).status).toBe(200);
  });

  it("refuses other roles, bad input and hosts the outbound guard refuses, each with its code", async () => {
    const dev = (await userWithRole(t, "developer")).token;
    const qa = (await userWithRole(t, "qa_viewer")).token;
    const cases: Array<[string, string | undefined, unknown, number, string]> = [
      ["GET", dev, undefined, 403, "insufficient_role"],
      ["PUT", qa, BODY, 403, "insufficient_role"],
      ["PUT", undefined, BODY, 401, "missing_auth"],
      ["PUT", owner, { ...BODY, port: 0 }, 400, "invalid_input"],
      ["PUT", owner, { ...BODY, host: "smtp.example.com\r\nRCPT TO:x" }, 400, "invalid_input"],
      ["PUT", owner, { ...BODY, from: "not an address" }, 400, "invalid_input"],
      ["PUT", owner, { ...BODY, host: "10.0.0.5" }, 400, "destination_not_allowed"],
      ["PUT", owner, { ...BODY, host: "169.254.169.254" }, 400, "destination_not_allowed"],
      ["PUT", owner, { ...BODY, host: "[::ffff:10.0.0.1]" }, 400, "destination_not_allowed"],
    ];
    for (const [method, token, body, status, code] of cases) {
      const r = await t.call(method, "/v1/settings/smtp", { token, body });
      expect([method, JSON.stringify(body)?.slice(0, 60), r.status, r.body.code]).toEqual([method, JSON.stringify(body)?.slice(0, 60), status, code]);
    }
  });
});
