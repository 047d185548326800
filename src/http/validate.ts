import { zValidator } from "@hono/zod-validator";
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import type { ZodType } from "zod";
import { ApiError } from "../errors.ts";
import { toIssues } from "../domain/common/issues.ts";

export { toIssues };

/**
 * The schema behind each validator middleware, so the OpenAPI document (src/http/openapi.ts) is generated from the
 * very schemas the routes validate with and cannot drift from them.
 */
export const VALIDATOR_SCHEMAS = new WeakMap<object, { target: "json" | "query"; schema: ZodType }>();

const JSON_CONTENT_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/** A body that is not empty must say it is JSON (docs/api.md §2: a wrong content type is invalid_input). */
async function assertJsonContentType(c: Context): Promise<void> {
  const contentType = c.req.header("content-type");
  if (contentType && JSON_CONTENT_TYPE.test(contentType)) return;
  const text = await c.req.text();
  if (text.length > 0) throw new ApiError("invalid_input", "the body must be JSON (Content-Type: application/json)");
}

/**
 * zod validation of a JSON body at the edge (STYLE habit 5). A failure becomes 400 invalid_input with
 * the zod issues; malformed JSON becomes 400 invalid_input through onError.
 */
export function jsonBody<T extends ZodType>(schema: T) {
  const inner = zValidator("json", schema, (result) => {
    if (!result.success) throw new ApiError("invalid_input", "request body failed validation", toIssues(result.error.issues));
  });
  const middleware = createMiddleware(async (c, next) => {
    await assertJsonContentType(c);
    return inner(c, next);
  }) as unknown as typeof inner;
  VALIDATOR_SCHEMAS.set(middleware, { target: "json", schema });
  return middleware;
}

/** The same for the query string. */
export function queryParams<T extends ZodType>(schema: T) {
  const middleware = zValidator("query", schema, (result) => {
    if (!result.success) throw new ApiError("invalid_input", "query parameters failed validation", toIssues(result.error.issues));
  });
  VALIDATOR_SCHEMAS.set(middleware, { target: "query", schema });
  return middleware;
}
