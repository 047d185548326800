import type { Context, Next } from "hono";
import { createMiddleware } from "hono/factory";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { loadInstance } from "../../domain/setup/instance.ts";
import { readNetworkSettings } from "../../domain/settings/network-settings.ts";

const ALLOW_METHODS = "GET, POST, PUT, PATCH, DELETE, OPTIONS";
const ALLOW_HEADERS = "Authorization, Content-Type, X-Request-Id";
const EXPOSE_HEADERS = "Content-Disposition, Content-Length, X-Request-Id";
const PREFLIGHT_MAX_AGE_S = "600";

const TESTER_LINK_POST = /^\/apps\/(?:[A-Za-z0-9_-]{1,100}\/(?:install|enroll\/callback)|opt-out\/[A-Za-z0-9_-]{1,100})$/;

/**
 * The tester page's Install form, the device's enrolment answer and the release mail's opt-out (docs/decisions.md
 * "Tester distribution", "Tester mail"). The page is served with
 * `Referrer-Policy: no-referrer`, under which browsers send `Origin: null` on every POST it makes, so the Origin
 * check cannot tell it apart; it needs none: the credential is the token in the path, not a cookie, so another
 * site cannot forge the request without already holding the link.
 */
export function isTesterLinkPost(method: string, path: string): boolean {
  return method === "POST" && TESTER_LINK_POST.test(path);
}

const ORIGINLESS_POST = /^\/apps\/(?:[A-Za-z0-9_-]{1,100}\/enroll\/callback|opt-out\/[A-Za-z0-9_-]{1,100})$/;

/**
 * Posts that arrive with no Origin at all and need none: a device's enrolment answer (sent by iOS, not a page) and
 * a mail provider's one-click opt-out (RFC 8058). The token in the path is the credential; no cookie is read.
 */
export function isOriginlessTesterPost(method: string, path: string): boolean {
  return method === "POST" && ORIGINLESS_POST.test(path);
}

/** The origin the request was addressed to, as the browser would write it. */
function ownOrigin(url: string, host: string | undefined): string {
  const parsed = new URL(url);
  return host ? `${parsed.protocol}//${host.toLowerCase()}` : parsed.origin;
}

/**
 * CORS from the External Access network settings (docs/api.md §4). Only requests carrying a foreign `Origin`
 * (browsers) are concerned. In remote mode an origin in `allowed_origins` is echoed back; any other foreign
 * origin is refused with 403 before the route runs, so a page elsewhere cannot even cause side effects with a
 * "simple" request. In local mode no foreign origin is allowed at all: that also stops a web page from
 * driving the loopback-only endpoints through the user's browser.
 */
export function corsFromSettings(deps: AppDeps) {
  // A request without a foreign Origin (nearly all) passes on synchronously: no async frame per request.
  return createMiddleware<AppEnv>((c, next) => {
    const origin = c.req.header("origin");
    if (origin === undefined || origin === ownOrigin(c.req.url, c.req.header("host"))) return next();
    // The tester page's Install form posts with `Origin: null` (its no-referrer policy); see isTesterLinkPost.
    if (origin === "null" && isTesterLinkPost(c.req.method, c.req.path)) return next();
    return crossOrigin(c, next, origin);
  });

  async function crossOrigin(c: Context<AppEnv>, next: Next, origin: string): Promise<Response | void> {
    const inst = await loadInstance(deps);
    const allowed = inst.runtimeMode === "remote" && (await readNetworkSettings(deps)).allowed_origins.includes(origin);
    const isPreflight = c.req.method === "OPTIONS" && c.req.header("access-control-request-method") !== undefined;
    if (!allowed) {
      throw new ApiError(
        "forbidden",
        inst.runtimeMode === "remote" ? "this origin is not in allowed_origins" : "cross-origin requests are refused in local mode",
      );
    }
    if (isPreflight) {
      return c.body(null, 204, {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Allow-Methods": ALLOW_METHODS,
        "Access-Control-Allow-Headers": ALLOW_HEADERS,
        "Access-Control-Max-Age": PREFLIGHT_MAX_AGE_S,
        Vary: "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
      });
    }
    await next();
    c.header("Access-Control-Allow-Origin", origin);
    c.header("Access-Control-Expose-Headers", EXPOSE_HEADERS);
    c.header("Vary", "Origin", { append: true });
  }
}
