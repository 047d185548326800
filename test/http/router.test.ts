import { describe, expect, it } from "vitest";
import { MemoRouter } from "../../src/http/router.ts";
import { makeTestApp } from "../helpers/app.ts";
import { completeLocalSetup } from "../helpers/factories.ts";

describe("the app's router (MemoRouter)", () => {
  it("matches like Hono's own router and remembers answers, but not for paths that may carry a token", () => {
    const router = new MemoRouter<string>(3);
    router.add("ALL", "/*", "log");
    router.add("POST", "/v1/users/invite", "invite");
    router.add("POST", "/v1/users/:user_id/enable", "enable");
    router.add("GET", "/install/:token", "install");
    const handlers = (method: string, path: string) => {
      const [matched] = router.match(method, path) as [[string, Record<string, string>][]];
      return matched.map(([h, params]) => `${h}${JSON.stringify(params)}`);
    };
    expect(handlers("POST", "/v1/users/invite")).toEqual(["log{}", "invite{}"]);
    expect(handlers("POST", "/v1/users/usr_1/enable")).toEqual(["log{}", 'enable{"user_id":"usr_1"}']);
    expect(handlers("POST", "/v1/users/usr_2/enable")).toEqual(["log{}", 'enable{"user_id":"usr_2"}']);
    // The same question gets the same (remembered) answer.
    expect(router.match("POST", "/v1/users/usr_1/enable")).toBe(router.match("POST", "/v1/users/usr_1/enable"));
    const token = "A".repeat(43);
    expect(handlers("GET", `/install/${token}`)).toEqual(["log{}", `install{"token":"${token}"}`]);
    expect(router.match("GET", `/install/${token}`)).not.toBe(router.match("GET", `/install/${token}`));
    // Bounded: past the limit the memory starts over, answers stay right.
    for (let i = 0; i < 10; i++) expect(handlers("POST", `/v1/users/u${i}/enable`)).toEqual(["log{}", `enable{"user_id":"u${i}"}`]);
    // Like Hono's own router, the table is closed once requests flow.
    expect(() => router.add("GET", "/late", "late")).toThrow(/already built/);
  });

  it("serves the whole app: routes with parameters answer for each id, unknown paths 404, HEAD works", async () => {
    const t = await makeTestApp();
    const { ownerToken } = await completeLocalSetup(t);
    for (let i = 0; i < 3; i++) expect((await t.call("GET", "/v1/users/me", { token: ownerToken })).status).toBe(200);
    for (const id of ["bld_missing_1", "bld_missing_2"]) {
      const r = await t.call("GET", `/v1/builds/${id}`, { token: ownerToken });
      expect([r.status, r.body.code]).toEqual([404, "not_found"]);
    }
    const unknown = await t.call("GET", "/v1/nothing-here", { token: ownerToken });
    expect([unknown.status, unknown.body.code]).toEqual([404, "not_found"]);
    const head = await t.app.request("/v1/public/setup-status", { method: "HEAD" }, { peerAddress: "127.0.0.1" });
    expect(head.status).toBe(200);
    expect(t.app.router.name).toMatch(/^MemoRouter\(SmartRouter \+ \w+Router\)$/);
  });
});
