import type { Hono } from "hono";
import { z, type ZodType } from "zod";
import type { AppEnv } from "../deps.ts";
import { ErrorJson } from "./responses.ts";
import { AUTH_DOCS, ROUTE_DOCS, type AuthDoc, type ResponseDoc, type RouteDoc } from "./route-docs.ts";
import { VALIDATOR_SCHEMAS } from "./validate.ts";

/**
 * The OpenAPI 3.1 document of every `/v1/` route (docs/api.md §13), generated at run time from the app's own route
 * table and the zod schemas its validator middleware carry (`VALIDATOR_SCHEMAS`), so a route or a field added to
 * the code appears here without a second, hand-written copy that could drift.
 */

type JsonSchema = Record<string, unknown>;

/** One documented operation: what the route table, its validators, its credential check and its apiDoc say. */
export interface Operation {
  method: string;
  /** Hono's pattern, `/v1/builds/:build_id`. */
  honoPath: string;
  /** OpenAPI's, `/v1/builds/{build_id}`. */
  path: string;
  pathParams: string[];
  tag: string;
  body?: ZodType;
  query?: ZodType;
  auth?: AuthDoc;
  doc?: RouteDoc;
}

/** Every `/v1/` operation of the app, sorted by path then method. */
export function collectOperations(app: Hono<AppEnv>): Operation[] {
  const operations = new Map<string, Operation>();
  for (const route of app.routes) {
    if (route.method === "ALL" || !route.path.startsWith("/v1/")) continue;
    const key = `${route.method} ${route.path}`;
    let op = operations.get(key);
    if (!op) {
      const { path, params } = openApiPath(route.path);
      op = { method: route.method.toLowerCase(), honoPath: route.path, path, pathParams: params, tag: tagOf(path) };
      operations.set(key, op);
    }
    const validator = VALIDATOR_SCHEMAS.get(route.handler);
    if (validator?.target === "json") op.body = validator.schema;
    if (validator?.target === "query") op.query = validator.schema;
    op.auth = AUTH_DOCS.get(route.handler) ?? op.auth;
    op.doc = ROUTE_DOCS.get(route.handler) ?? op.doc;
  }
  return [...operations.values()].sort((a, b) => a.path.localeCompare(b.path) || a.method.localeCompare(b.method));
}

/** The area an operation is listed under (the /api page's groups, the document's tags). */
function tagOf(path: string): string {
  if (/\/jobs(\/|$)/.test(path)) return "jobs";
  if (path.includes("artifacts")) return "artifacts";
  if (/\/builds(\/|$)/.test(path)) return "builds";
  if (/\/(webhooks|hooks)(\/|$)/.test(path)) return "webhooks";
  if (path.includes("/notifications")) return "notifications";
  const first = path.split("/")[2] ?? "v1";
  return ({ public: "setup", "audit-events": "users", "openapi.json": "meta" } as Record<string, string>)[first] ?? first;
}

export function toJsonSchema(schema: ZodType, io: "input" | "output" = "input"): JsonSchema {
  // io "input": what a client sends (before defaults and transforms); "output": what the daemon answers, objects
  // closed (additionalProperties false). Anything zod cannot express becomes {}.
  const out = z.toJSONSchema(schema, { io, unrepresentable: "any", target: "draft-2020-12" }) as JsonSchema;
  delete out.$schema;
  return out;
}

function queryParameters(schema: ZodType, examples: Record<string, string> = {}): JsonSchema[] {
  const json = toJsonSchema(schema);
  const properties = (json.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((json.required ?? []) as string[]);
  return Object.entries(properties).map(([name, s]) => ({
    name,
    in: "query",
    required: required.has(name),
    schema: s,
    ...(examples[name] !== undefined ? { example: examples[name] } : {}),
  }));
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

function isZod(doc: ResponseDoc): doc is ZodType {
  return doc instanceof z.ZodType;
}

/** The error statuses an operation answers, with their codes: its credential, validation, path ids, its own. */
export function errorStatuses(op: Operation): Map<number, Set<string>> {
  const errors = new Map<number, Set<string>>();
  const add = (status: number, codes: readonly string[]) => {
    const set = errors.get(status) ?? new Set<string>();
    for (const code of codes) set.add(code);
    errors.set(status, set);
  };
  if (op.body || op.query) add(400, ["invalid_input"]);
  if (op.auth) {
    add(401, op.auth.unauthorizedCodes);
    if (op.auth.forbiddenCodes) add(403, op.auth.forbiddenCodes);
    for (const [status, codes] of Object.entries(op.auth.extraErrors ?? {})) add(Number(status), codes ?? []);
  }
  if (op.pathParams.length > 0) add(404, ["not_found"]);
  for (const [status, codes] of Object.entries(op.doc?.errors ?? {})) add(Number(status), codes ?? []);
  return errors;
}

function successResponses(op: Operation): Record<string, JsonSchema> {
  const out: Record<string, JsonSchema> = {};
  for (const [status, response] of Object.entries(op.doc?.responses ?? {})) {
    if (!response) continue;
    if (isZod(response)) {
      out[status] = { description: "Success", content: { "application/json": { schema: toJsonSchema(response, "output") } } };
    } else if ("noBody" in response) {
      out[status] = { description: response.noBody };
    } else {
      out[status] = { description: response.description, content: { [response.contentType]: { schema: {} } } };
    }
  }
  return out;
}

function requestBody(op: Operation): JsonSchema | undefined {
  const example = op.doc?.example;
  if (op.body) {
    const media: JsonSchema = { schema: toJsonSchema(op.body) };
    if (example?.body !== undefined) media.example = example.body;
    return { required: true, content: { "application/json": media } };
  }
  if (example?.body !== undefined) {
    // A JSON body the route reads itself (a forge's event payload): any object.
    return { required: true, content: { "application/json": { schema: { type: "object" }, example: example.body } } };
  }
  if (example?.rawBody !== undefined) {
    const type = example.contentType ?? "application/octet-stream";
    return { required: true, content: { [type]: { schema: { type: "string" }, example: example.rawBody } } };
  }
  return undefined;
}

export function buildOpenApiDocument(app: Hono<AppEnv>, info: { version: string }): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const op of collectOperations(app)) {
    const parameters: JsonSchema[] = op.pathParams.map((name) => ({ name, in: "path", required: true, schema: { type: "string" } }));
    if (op.query) parameters.push(...queryParameters(op.query, op.doc?.example?.query));
    for (const [name, value] of Object.entries(op.doc?.example?.headers ?? {})) {
      parameters.push({ name, in: "header", required: false, schema: { type: "string" }, example: value });
    }
    const responses: Record<string, JsonSchema> = successResponses(op);
    for (const [status, codes] of errorStatuses(op)) {
      responses[String(status)] = {
        description: `Error: ${[...codes].join(", ")}`,
        content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
        "x-error-codes": [...codes],
      };
    }
    responses.default = { $ref: "#/components/responses/Error" };
    const roles = op.auth?.roles;
    const operation: JsonSchema = {
      operationId: operationId(op),
      summary: op.doc?.summary ?? `${op.method.toUpperCase()} ${op.path}`,
      tags: [op.tag],
      security: (op.auth?.schemes ?? []).map((scheme) => ({ [scheme]: [] })),
      parameters,
      responses,
    };
    if (roles) {
      operation.description = `Roles: ${roles.join(", ")}.${op.doc?.description ? ` ${op.doc.description}` : ""}`;
      operation["x-roles"] = [...roles];
    } else if (op.doc?.description) {
      operation.description = op.doc.description;
    }
    const body = requestBody(op);
    if (body) operation.requestBody = body;
    (paths[op.path] ??= {})[op.method] = operation;
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
        jobToken: { type: "http", scheme: "bearer", description: "A job token (hgj_…), handed out with the claimed job, for that job's calls only" },
      },
      schemas: { Error: toJsonSchema(ErrorJson, "output") },
      responses: {
        Error: { description: "An error", content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } } },
      },
    },
  };
}

export function operationId(op: Pick<Operation, "method" | "path">): string {
  return `${op.method}_${op.path
    .replace(/^\/v1\//, "")
    .replace(/[{}]/g, "")
    .replace(/[^A-Za-z0-9]+/g, "_")}`;
}
