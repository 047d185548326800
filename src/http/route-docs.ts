import type { MiddlewareHandler } from "hono";
import type { ZodType } from "zod";
import type { UserRole } from "../db/schema/constants.ts";
import type { ErrorCode } from "../errors.ts";

/**
 * What the OpenAPI document (src/http/openapi.ts) and the /api page say about each route, registered by the route
 * itself the way `jsonBody`/`queryParams` register their schemas: `apiDoc({...})` is a pass-through middleware in
 * the route's chain, and the document reads it back from `app.routes`. A route without one is still listed, but
 * the contract test (test/http/openapi-contract.test.ts) refuses an operation without a success schema.
 */

/** A JSON answer (its zod schema), a body of another media type, or no body at all. */
export type ResponseDoc = ZodType | { contentType: string; description: string } | { noBody: string };

export interface RouteDoc {
  summary: string;
  description?: string;
  /** The success answers by status (200, 201, 204, 206, 302). */
  responses: Partial<Record<200 | 201 | 204 | 206 | 302, ResponseDoc>>;
  /**
   * Error statuses this operation answers beyond the ones its middleware imply (401/403 from the credential,
   * 400 from a validated body or query, 404 for a path with an id), each with the codes it can carry.
   */
  errors?: Partial<Record<number, readonly ErrorCode[]>>;
  /** A documented example request: the JSON body and/or query string sent with it. */
  example?: { body?: unknown; query?: Record<string, string>; headers?: Record<string, string>; contentType?: string; rawBody?: string };
}

export const ROUTE_DOCS = new WeakMap<object, RouteDoc>();

/** Documents the route it sits in (does nothing at request time). */
export function apiDoc(doc: RouteDoc): MiddlewareHandler {
  // Not async: passing on next()'s promise spares an async frame per request on every documented route.
  const middleware: MiddlewareHandler = (_c, next) => next();
  ROUTE_DOCS.set(middleware, doc);
  return middleware;
}

export type AuthScheme = "userSession" | "setupSession" | "runnerToken" | "jobToken";

export interface AuthDoc {
  schemes: AuthScheme[];
  /** The roles a user session must have; absent = any signed-in user. */
  roles?: readonly UserRole[];
  /** The 403 code for a wrong role (or the runner mismatch). */
  forbiddenCodes?: readonly ErrorCode[];
  /** Codes of the 401 answer. */
  unauthorizedCodes: readonly ErrorCode[];
  /** Other statuses the credential check itself answers (409 already_configured of setup routes). */
  extraErrors?: Partial<Record<number, readonly ErrorCode[]>>;
}

/** The credential each auth middleware (src/http/middleware/auth.ts) demands, registered when it is built. */
export const AUTH_DOCS = new WeakMap<object, AuthDoc>();
