import { describe, expect, it } from "vitest";
import { makeTestApp } from "../helpers/app.ts";
import { completeLocalSetup } from "../helpers/factories.ts";

describe("local setup happy path", () => {
  it("walks from a bootstrap token to a signed-in owner", async () => {
    const t = await makeTestApp();
    const { ownerToken } = await completeLocalSetup(t);
    const me = await t.call("GET", "/v1/users/me", { token: ownerToken });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ email: "owner@example.com", role: "owner", status: "active" });
    expect(me.headers.get("cache-control")).toBe("no-store");
  });
});
