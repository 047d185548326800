import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import type { AppEnv } from "../../src/deps.ts";
import { isoNow, jsonBodyCap, requestContext } from "../../src/http/middleware/context.ts";
import { ApiError } from "../../src/errors.ts";
import { makeTestApp } from "../helpers/app.ts";

/** The middleware pair on a bare app, logging into an array. */
function contextApp() {
  const lines: Array<Record<string, unknown>> = [];
  const app = new Hono<AppEnv>();
  app.use(
    "*",
    requestContext((r) => lines.push(r), true),
  );
  app.use("*", jsonBodyCap(16));
  app.onError((err, c) => (err instanceof ApiError ? c.json({ code: err.code }, err.status) : c.json({ code: "internal_error" }, 500)));
  app.get("/v1/own-response", () => new Response("plain", { headers: { "cache-control": "max-age=60" } }));
  app.get("/v1/own-cache-control", (c) => c.json({ ok: true }, 200, { "Cache-Control": "public, max-age=60" }));
  app.get("/install/abc", (c) => c.html("<p>hi</p>"));
  app.post("/v1/echo", async (c) => c.json(await c.req.json()));
  return { app, lines };
}

describe("request context (docs/benchmarks.md: headers set before the response exists)", () => {
  it("formats log times exactly as Date.toISOString, across seconds, minutes and days", () => {
    const base = Date.UTC(2026, 10, 23, 23, 58, 58, 991);
    for (let step = 0; step < 200_000; step += 7) {
      const t = base + step * 13;
      expect(isoNow(t)).toBe(new Date(t).toISOString());
    }
    // Going back in time (a clock step) is handled too.
    expect(isoNow(base - 3_600_000)).toBe(new Date(base - 3_600_000).toISOString());
    const now = Date.now();
    expect(Date.parse(isoNow())).toBeGreaterThanOrEqual(now);
  });

  it("still puts the headers on a Response a handler built itself, and overrides a handler's Cache-Control on /v1/", async () => {
    const { app, lines } = contextApp();
    const own = await app.request("/v1/own-response", { headers: { "x-request-id": "req-1" } });
    expect(own.status).toBe(200);
    expect(await own.text()).toBe("plain");
    expect(own.headers.get("x-request-id")).toBe("req-1");
    expect(own.headers.get("cache-control")).toBe("no-store");
    const cc = await app.request("/v1/own-cache-control");
    expect(cc.headers.get("cache-control")).toBe("no-store");
    expect(cc.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const install = await app.request("/install/abc");
    expect(install.headers.get("referrer-policy")).toBe("no-referrer");
    expect(install.headers.get("cache-control")).toBeNull();
    expect(lines.map((l) => [l.method, l.path, l.status, l.level])).toEqual([
      ["GET", "/v1/own-response", 200, "info"],
      ["GET", "/v1/own-cache-control", 200, "info"],
      ["GET", "/install/abc", 200, "info"],
    ]);
    expect(Object.keys(lines[0]!)).toEqual(["time", "level", "request_id", "method", "path", "status", "duration_ms"]);
    expect(lines[0]!.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it("caps JSON bodies on POST but lets a GET through without reading a body", async () => {
    const { app } = contextApp();
    const small = await app.request("/v1/echo", { method: "POST", headers: { "content-type": "application/json" }, body: '{"a":1}' });
    expect(small.status).toBe(200);
    expect(await small.json()).toEqual({ a: 1 });
    const big = await app.request("/v1/echo", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ a: "x".repeat(32) }),
    });
    expect(big.status).toBe(413);
    expect(await big.json()).toEqual({ code: "payload_too_large" });
    expect(big.headers.get("cache-control")).toBe("no-store");
  });

  it("answers the app's JSON, errors and 404s with the request id and no-store", async () => {
    const t = await makeTestApp();
    for (const [path, status] of [
      ["/v1/public/setup-status", 200],
      ["/v1/users/me", 401],
      ["/v1/no-such-route", 404],
    ] as const) {
      const res = await t.call("GET", path, { headers: { "x-request-id": `id-${status}` } });
      expect(res.status).toBe(status);
      expect(res.headers.get("x-request-id")).toBe(`id-${status}`);
      expect(res.headers.get("cache-control")).toBe("no-store");
    }
  });
});
