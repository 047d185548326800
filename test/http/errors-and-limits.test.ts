import { describe, expect, it } from "vitest";
import { issueBootstrapToken } from "../../src/domain/setup/setup.ts";
import { makeTestApp } from "../helpers/app.ts";
import { completeLocalSetup, startSetup } from "../helpers/factories.ts";

const MIB = 1024 * 1024;

describe("JSON body cap (1 MiB)", () => {
  it("answers 413 payload_too_large for a JSON body over 1 MiB, with or without Content-Length", async () => {
    const t = await makeTestApp();
    await issueBootstrapToken(t.deps);
    const big = JSON.stringify({ token: "0".repeat(64), padding: "x".repeat(MIB) });
    const cases: Array<Record<string, string>> = [
      { "content-type": "application/json" },
      { "content-type": "application/json", "content-length": String(Buffer.byteLength(big)) },
    ];
    for (const headers of cases) {
      const res = await t.call("POST", "/v1/setup/bootstrap-token/verify", { rawBody: big, headers });
      expect(res.status).toBe(413);
      expect(res.body.code).toBe("payload_too_large");
      expect(res.headers.get("cache-control")).toBe("no-store");
    }
    // The refused body was never looked at: no failed attempt was counted.
    const wrong = await t.call("POST", "/v1/setup/bootstrap-token/verify", { body: { token: "0".repeat(64) } });
    expect(wrong.status).toBe(401);
  });

  it("accepts a body just under the cap", async () => {
    const t = await makeTestApp();
    await issueBootstrapToken(t.deps);
    const padding = "x".repeat(MIB - 200);
    const res = await t.call("POST", "/v1/setup/bootstrap-token/verify", { body: { token: "0".repeat(64), padding } });
    expect(res.status).toBe(401);
    expect(res.body.code).toBe("invalid_token");
  });
});

describe("malformed requests", () => {
  it("answers 400 invalid_input for malformed JSON", async () => {
    const t = await makeTestApp();
    const session = await startSetup(t);
    for (const rawBody of ["{", '{"runtime_mode": }', "null", "[1,2]", '"text"']) {
      const res = await t.call("POST", "/v1/setup/preferences", { token: session, rawBody, headers: { "content-type": "application/json" } });
      expect(res.status, rawBody).toBe(400);
      expect(res.body.code, rawBody).toBe("invalid_input");
    }
  });

  it("answers 400 invalid_input for a body that is not declared as JSON", async () => {
    const t = await makeTestApp();
    await issueBootstrapToken(t.deps);
    const json = JSON.stringify({ token: "0".repeat(64) });
    for (const headers of [{ "content-type": "text/plain" }, { "content-type": "application/x-www-form-urlencoded" }, {}] as Array<
      Record<string, string>
    >) {
      const res = await t.call("POST", "/v1/setup/bootstrap-token/verify", { rawBody: json, headers });
      expect(res.status, JSON.stringify(headers)).toBe(400);
      expect(res.body.code).toBe("invalid_input");
      expect(res.body.message).toEqual(expect.any(String));
    }
  });

  it("lists the failing fields of a schema error in issues", async () => {
    const t = await makeTestApp();
    const { ownerToken } = await completeLocalSetup(t);
    const res = await t.call("POST", "/v1/users/invite", { token: ownerToken, body: { email: "bad", role: "boss" } });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe("invalid_input");
    expect(res.body.issues.map((i: { path: string }) => i.path).sort()).toEqual(["email", "role"]);
    for (const issue of res.body.issues) expect(issue.message).toEqual(expect.any(String));
  });

  it("answers 404 not_found for an unknown route", async () => {
    const t = await makeTestApp();
    for (const [method, path] of [
      ["GET", "/v1/nothing-here"],
      ["GET", "/nothing"],
      ["POST", "/v1/public/setup-status"],
      ["DELETE", "/v1/users"],
    ] as const) {
      const res = await t.call(method, path);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body).toEqual({ code: "not_found", message: expect.any(String) });
    }
  });
});

describe("response headers", () => {
  it("sets Cache-Control: no-store on every /v1/ answer, success or error", async () => {
    const t = await makeTestApp();
    const { ownerToken } = await completeLocalSetup(t);
    for (const [method, path, token] of [
      ["GET", "/v1/public/setup-status", undefined],
      ["GET", "/v1/users/me", ownerToken],
      ["GET", "/v1/users/me", undefined],
      ["GET", "/v1/unknown", undefined],
      ["POST", "/v1/setup/complete", undefined],
    ] as const) {
      const res = await t.call(method, path, { token });
      expect(res.headers.get("cache-control"), `${method} ${path} ${res.status}`).toBe("no-store");
    }
  });

  it("echoes a well-formed X-Request-Id and makes one otherwise", async () => {
    const t = await makeTestApp();
    const given = await t.call("GET", "/healthz", { headers: { "x-request-id": "abc-123" } });
    expect(given.headers.get("x-request-id")).toBe("abc-123");
    const made = await t.call("GET", "/healthz", { headers: { "x-request-id": "bad id with spaces" } });
    expect(made.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe("failures", () => {
  it("answers 500 internal_error without the failure's message, and logs it", async () => {
    const t = await makeTestApp({
      deps: {
        clock: {
          now() {
            throw new Error("secret-detail-at-/etc/hangar");
          },
        },
      },
    });
    const res = await t.call("GET", "/v1/public/setup-status");
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ code: "internal_error", message: expect.any(String) });
    expect(res.text).not.toContain("secret-detail");
    expect(res.text).not.toContain("at ");
    expect(t.logs.some((l) => l.level === "error" && String(l.error).includes("secret-detail"))).toBe(true);
  });

  it("GET /healthz answers 200 {ok: true} while the database answers, 503 once it does not", async () => {
    const t = await makeTestApp();
    const ok = await t.call("GET", "/healthz");
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ ok: true });
    t.opened.client.close();
    const down = await t.call("GET", "/healthz");
    expect(down.status).toBe(503);
    expect(down.body).toEqual({ ok: false });
  });
});

describe("request log", () => {
  it("writes one JSON record per request with time, id, method, path, status and duration, and never a token", async () => {
    const t = await makeTestApp({ config: { HANGAR_LOG_REQUESTS: "1" } });
    const { token: bootstrap } = await issueBootstrapToken(t.deps);
    const verify = await t.call("POST", "/v1/setup/bootstrap-token/verify", { body: { token: bootstrap } });
    const setupSession = verify.body.session_token as string;
    await t.call("POST", "/v1/setup/local-owner/create", { token: setupSession, body: { email: "o@example.com" } });
    await t.call("POST", "/v1/setup/complete", { token: setupSession });
    const login = await t.call("POST", "/v1/auth/local/login", { body: {} });
    const userSession = login.body.session_token as string;
    await t.call("GET", "/v1/audit-events?limit=2&ticket=secret-ticket", { token: userSession });
    // Token-bearing paths are redacted, whatever the route answers.
    await t.call("GET", `/v1/artifacts/download/${userSession}`);
    await t.call("GET", `/install/ios/${bootstrap}/manifest.plist`);

    expect(t.logs).toHaveLength(7);
    for (const record of t.logs) {
      expect(record).toEqual({
        time: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        level: "info",
        request_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        method: expect.stringMatching(/^(GET|POST)$/),
        path: expect.stringMatching(/^\//),
        status: expect.any(Number),
        duration_ms: expect.any(Number),
      });
    }
    expect(t.logs.map((r) => [r.method, r.path, r.status])).toEqual([
      ["POST", "/v1/setup/bootstrap-token/verify", 200],
      ["POST", "/v1/setup/local-owner/create", 200],
      ["POST", "/v1/setup/complete", 200],
      ["POST", "/v1/auth/local/login", 200],
      ["GET", "/v1/audit-events", 200],
      ["GET", "/v1/artifacts/download/:token", expect.any(Number)],
      ["GET", "/install/ios/:token/manifest.plist", expect.any(Number)],
    ]);
    const all = JSON.stringify(t.logs);
    for (const secret of [bootstrap, setupSession, userSession, "secret-ticket", "o@example.com"]) {
      expect(all).not.toContain(secret);
    }
  });

  it("is silent when HANGAR_LOG_REQUESTS=0", async () => {
    const t = await makeTestApp({ config: { HANGAR_LOG_REQUESTS: "0" } });
    await t.call("GET", "/healthz");
    expect(t.logs).toHaveLength(0);
  });
});
