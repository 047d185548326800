import type { Context } from "hono";
import type { AppDeps, AppEnv } from "../deps.ts";
import { isBusyError } from "../db/busy.ts";
import { ApiError, databaseBusyError, describeError } from "../errors.ts";
import { ErrorPage } from "./layout.tsx";
import { pageContext, renderPage } from "./session.tsx";

type PageStatus = 400 | 403 | 404 | 409 | 410 | 429 | 500 | 502 | 503;
const PAGE_STATUSES: readonly number[] = [400, 403, 404, 409, 410, 429, 500, 502, 503];

/** An error a page did not handle itself: the domain's message for an ApiError, a generic one otherwise. */
export async function renderErrorPage(deps: AppDeps, c: Context<AppEnv>, err: unknown) {
  // Still busy after src/db/busy.ts's retries: a 503 page saying to try again, never a 500 (docs/api.md §8).
  if (isBusyError(err)) {
    c.header("Retry-After", "1");
    err = databaseBusyError();
  }
  if (err instanceof ApiError) {
    const status = (PAGE_STATUSES.includes(err.status) ? err.status : 400) as PageStatus;
    const title = err.status === 404 ? "Not found" : err.status === 403 ? "Not allowed" : "That did not work";
    return renderPage(c, <ErrorPage ctx={pageContext(c, deps)} title={title} message={sentence(err.message)} />, status);
  }
  deps.log({
    time: new Date().toISOString(),
    level: "error",
    request_id: c.get("requestId"),
    msg: "unhandled error in a page",
    error: describeError(err),
  });
  return renderPage(
    c,
    <ErrorPage ctx={pageContext(c, deps)} title="Something went wrong" message="Hangar hit an internal error. The daemon's log has the details." />,
    500,
  );
}

/** The domain's messages are lower-case clauses; a page shows them as sentences. */
export function sentence(message: string): string {
  const s = message.trim();
  if (s === "") return s;
  const first = s.charAt(0).toUpperCase() + s.slice(1);
  return /[.!?]$/.test(first) ? first : `${first}.`;
}
