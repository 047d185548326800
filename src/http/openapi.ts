import type { Hono } from "hono";
import { z, type ZodType } from "zod";
import type { AppEnv } from "../deps.ts";
import { ERROR_CODES } from "../errors.ts";
import { VALIDATOR_SCHEMAS } from "./validate.ts";

/**
 * The OpenAPI 3.1 document of every `/v1/` route (CONTRACT §13), generated at run time from the app's own route
 * table and the zod schemas its validator middleware carry (`VALIDATOR_SCHEMAS`), so a route or a field added to
 * the code appears here without a second, hand-written copy that could drift.
 */

type JsonSchema = Record<string, unknown>;

interface Operation {
  method: string;
  path: string;
  body?: ZodType;
  query?: ZodType;
}

/** Routes that need no credentials, or a credential other than a user session. */
function securityFor(path: string): Array<Record<string, string[]>> {
  if (path.startsWith("/v1/public/") || path === "/v1/openapi.json") return [];
  if (/^\/v1\/(artifacts\/(download|local-upload)|hooks)\//.test(path)) return [];
  if (path.startsWith("/v1/setup/bootstrap-token/verify") || path.startsWith("/v1/auth/")) return [];
  if (path.startsWith("/v1/setup/")) return [{ setupSession: [] }];
  if (/^\/v1\/runners\/\{runner_id\}\/(claim|heartbeat|jobs)/.test(path)) return [{ runnerToken: [] }];
  return [{ userSession: [] }];
}

function toJsonSchema(schema: ZodType): JsonSchema {
  // io "input": what a client sends (before defaults and transforms); anything zod cannot express becomes {}.
  const out = z.toJSONSchema(schema, { io: "input", unrepresentable: "any", target: "draft-2020-12" }) as JsonSchema;
  delete out.$schema;
  return out;
}

function queryParameters(schema: ZodType): JsonSchema[] {
  const json = toJsonSchema(schema);
  const properties = (json.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((json.required ?? []) as string[]);
  return Object.entries(properties).map(([name, s]) => ({ name, in: "query", required: required.has(name), schema: s }));
}

/** Hono's `/v1/builds/:build_id` as OpenAPI's `/v1/builds/{build_id}`, with its path parameters. */
function openApiPath(path: string): { path: string; params: string[] } {
  const params: string[] = [];
  const converted = path.replace(/:([A-Za-z0-9_]+)(\{[^}]*\})?/g, (_, name: string) => {
    params.push(name);
    return `{${name}}`;
  });
  return { path: converted, params };
}

function summaryOf(method: string, path: string): string {
  const parts = path.split("/").filter((p) => p && p !== "v1" && !p.startsWith("{"));
  return `${method.toUpperCase()} ${parts.join(" ")}`;
}

export function buildOpenApiDocument(app: Hono<AppEnv>, info: { version: string }): JsonSchema {
  const operations = new Map<string, Operation>();
  for (const route of app.routes) {
    if (route.method === "ALL" || !route.path.startsWith("/v1/")) continue;
    const key = `${route.method} ${route.path}`;
    const op = operations.get(key) ?? { method: route.method.toLowerCase(), path: route.path };
    const validator = VALIDATOR_SCHEMAS.get(route.handler);
    if (validator?.target === "json") op.body = validator.schema;
    if (validator?.target === "query") op.query = validator.schema;
    operations.set(key, op);
  }

  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const op of [...operations.values()].sort((a, b) => a.path.localeCompare(b.path) || a.method.localeCompare(b.method))) {
    const { path, params } = openApiPath(op.path);
    const parameters: JsonSchema[] = params.map((name) => ({ name, in: "path", required: true, schema: { type: "string" } }));
    if (op.query) parameters.push(...queryParameters(op.query));
    const operation: JsonSchema = {
      operationId: `${op.method}_${path.replace(/^\/v1\//, "").replace(/[{}]/g, "").replace(/[^A-Za-z0-9]+/g, "_")}`,
      summary: summaryOf(op.method, path),
      tags: [path.split("/")[2] ?? "v1"],
      security: securityFor(path),
      parameters,
      responses: {
        "200": { description: "Success", content: { "application/json": { schema: {} } } },
        "400": { $ref: "#/components/responses/Error" },
        default: { $ref: "#/components/responses/Error" },
      },
    };
    if (op.body) {
      operation.requestBody = { required: true, content: { "application/json": { schema: toJsonSchema(op.body) } } };
    }
    (paths[path] ??= {})[op.method] = operation;
  }

  return {
    openapi: "3.1.0",
    info: {
      title: "Hangar API",
      version: info.version,
      description: "Self-hosted CI for mobile apps. Every error body is {code, message[, issues]} (see components.schemas.Error).",
    },
    servers: [{ url: "/" }],
    paths,
    components: {
      securitySchemes: {
        userSession: { type: "http", scheme: "bearer", description: "A user session token (hgu_…)" },
        setupSession: { type: "http", scheme: "bearer", description: "A setup session token (hgs_…)" },
        runnerToken: { type: "http", scheme: "bearer", description: "A runner token (hgr_…)" },
      },
      schemas: {
        Error: {
          type: "object",
          required: ["code", "message"],
          properties: {
            code: { type: "string", enum: [...ERROR_CODES] },
            message: { type: "string" },
            issues: {
              type: "array",
              items: { type: "object", required: ["path", "message"], properties: { path: { type: "string" }, message: { type: "string" } } },
            },
          },
        },
      },
      responses: {
        Error: { description: "An error", content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } } },
      },
    },
  };
}
