import { validate } from "@readme/openapi-parser";
import { Ajv2020 } from "ajv/dist/2020.js";
import { describe, expect, it } from "vitest";
import { makeTestApp } from "../helpers/app.ts";
import { completeLocalSetup } from "../helpers/factories.ts";

describe("GET /v1/openapi.json", () => {
  it("is a valid OpenAPI 3.1 document listing every /v1/ route of the app with the schemas the routes validate with", async () => {
    const t = await makeTestApp();
    const r = await t.call("GET", "/v1/openapi.json");
    expect(r.status).toBe(200);
    expect(r.headers.get("cache-control")).toBe("no-store");
    const doc = r.body;
    expect(doc.openapi).toBe("3.1.0");
    const result = await validate(structuredClone(doc));
    expect(result.valid, JSON.stringify(result, null, 1).slice(0, 3000)).toBe(true);

    // Every route the app answers under /v1/ is documented, with its method: nothing can be added undocumented.
    const registered = t.app.routes
      .filter((route) => route.method !== "ALL" && route.path.startsWith("/v1/"))
      .map((route) => `${route.method.toLowerCase()} ${route.path.replace(/:([A-Za-z0-9_]+)/g, "{$1}")}`);
    const documented = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, ops]) =>
      Object.keys(ops).map((method) => `${method} ${path}`),
    );
    expect(new Set(documented)).toEqual(new Set(registered));
    expect(documented.length).toBeGreaterThan(50);

    // Request bodies come from the routes' own zod schemas.
    const createProject = doc.paths["/v1/projects"].post.requestBody.content["application/json"].schema;
    expect(Object.keys(createProject.properties)).toEqual(expect.arrayContaining(["name", "repo_url", "default_branch"]));
    expect(createProject.required).toEqual(expect.arrayContaining(["name", "repo_url"]));
    const build = doc.paths["/v1/builds/{build_id}"].get;
    expect(build.parameters).toContainEqual({ name: "build_id", in: "path", required: true, schema: { type: "string" } });
    expect(doc.paths["/v1/public/setup-status"].get.security).toEqual([]);
    expect(doc.paths["/v1/projects"].post.security).toEqual([{ userSession: [] }]);
  });

  it("documents only real operations, and every error they answer matches the documented Error schema", async () => {
    const t = await makeTestApp();
    const { ownerToken } = await completeLocalSetup(t);
    const doc = (await t.call("GET", "/v1/openapi.json")).body;
    const ajv = new Ajv2020({ strict: false });
    const checkError = ajv.compile(doc.components.schemas.Error);
    let calls = 0;
    for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, { requestBody?: unknown }>>)) {
      for (const [method, op] of Object.entries(ops)) {
        const concrete = path.replace(/\{[^}]+\}/g, "nonexistent-id");
        const res = await t.call(method.toUpperCase(), concrete, { token: ownerToken, body: op.requestBody ? {} : undefined });
        calls++;
        // The router knows the path: a 404 here is the resource's, never "no such route".
        expect(res.body?.message, `${method} ${path}`).not.toBe("no such route");
        if (res.status >= 400) expect(checkError(res.body), `${method} ${path}: ${res.text}`).toBe(true);
      }
    }
    expect(calls).toBeGreaterThan(50);
  });
});
