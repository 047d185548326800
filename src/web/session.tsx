import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { createMiddleware } from "hono/factory";
import type { JSX } from "hono/jsx/jsx-runtime";
import type { UserRole } from "../db/schema/constants.ts";
import type { AppDeps, AppEnv } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { loadInstance } from "../domain/setup/instance.ts";
import { dataDirSpace, isLowOnSpace } from "../domain/retention/disk.ts";
import { validateUserSession } from "../domain/auth/sessions.ts";
import type { UserRow } from "../domain/auth/users.ts";
import { takeFlash } from "./flash.ts";
import { ErrorPage, type PageCtx } from "./layout.tsx";

// Browser sessions (docs/api.md §10): the user session token of the same sessions table, in a cookie that
// scripts cannot read (HttpOnly), that travels over secure origins only (Secure; browsers count
// http://127.0.0.1 and http://localhost as secure), that no subdomain can set or shadow (__Host-, Path=/),
// and that cross-site subrequests and form posts do not carry (SameSite=Lax). /v1/ never reads it.
export const SESSION_COOKIE = "__Host-hangar_session";
const SESSION_COOKIE_NAME = "hangar_session";

const COOKIE_BASE = { prefix: "host", path: "/", secure: true, httpOnly: true, sameSite: "Lax" } as const;

/** Signs the browser in: the cookie lives as long as the session (24 h). */
export function setSessionCookie(c: Context, session: { token: string; expiresAt: number }, now: number): void {
  setCookie(c, SESSION_COOKIE_NAME, session.token, { ...COOKIE_BASE, maxAge: Math.max(0, session.expiresAt - now) });
}

export function clearSessionCookie(c: Context): void {
  deleteCookie(c, SESSION_COOKIE_NAME, { prefix: "host", path: "/", secure: true });
}

export function sessionCookieToken(c: Context): string | undefined {
  return getCookie(c, SESSION_COOKIE_NAME, "host");
}

/** The setup session of the wizard (30 minutes, sliding like the session itself). */
export const SETUP_COOKIE_NAME = "hangar_setup";
/** Binds an OIDC authorization request to the browser that started it: holds its `state` for 10 minutes. */
export const OIDC_STATE_COOKIE_NAME = "hangar_oidc";
export const OIDC_STATE_TTL_S = 600;

/** Another short-lived, HttpOnly cookie of the UI (setup session, OIDC state binding). */
export function setUiCookie(c: Context, name: string, value: string, maxAgeS: number): void {
  setCookie(c, name, value, { ...COOKIE_BASE, maxAge: maxAgeS });
}

export function getUiCookie(c: Context, name: string): string | undefined {
  return getCookie(c, name, "host");
}

export function clearUiCookie(c: Context, name: string): void {
  deleteCookie(c, name, { prefix: "host", path: "/", secure: true });
}

/** The signed-in browser's user and session, or null (no cookie, or a revoked, expired or disabled one). */
export async function browserSession(deps: AppDeps, c: Context): Promise<{ user: UserRow; sessionId: string } | null> {
  const token = sessionCookieToken(c);
  if (token === undefined || token === "") return null;
  try {
    const { sessionId, user } = await validateUserSession(deps, token);
    return { user, sessionId };
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return null;
    throw err;
  }
}

/** After the leading `/`: a path character (RFC 3986 pchar), so never `//host`, `/\host` or `/ host`. */
const NEXT_START = /^\/[A-Za-z0-9\-._~!$&'()*+,;=:@%]/;
// eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
const NEXT_REFUSED = /[\\\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\ufeff]/;

/**
 * A same-origin path to come back to after signing in: one `/` then a path character, and no backslash, control or
 * whitespace character anywhere (browsers strip or reinterpret those: `/\t/evil.example` is `//evil.example`).
 * Anything else is dropped.
 */
export function safeNext(next: string | undefined | null): string | null {
  if (!next || !NEXT_START.test(next) || NEXT_REFUSED.test(next)) return null;
  if (next.startsWith("/login") || next.startsWith("/logout") || next.startsWith("/setup")) return null;
  return next.length <= 2048 ? next : null;
}

/** The page context of this request; consumes the flash message. */
export function pageContext(c: Context<AppEnv>, deps: Pick<AppDeps, "clock">): PageCtx {
  let user: UserRow | undefined;
  try {
    user = c.get("user");
  } catch {
    user = undefined;
  }
  return {
    user,
    nonce: c.get("cspNonce") ?? "",
    path: c.req.path,
    flash: takeFlash(c),
    now: deps.clock.now(),
    lowDiskSpace: c.get("lowDiskSpace") ?? null,
  };
}

/** Renders a page as a full HTML document. */
export async function renderPage(
  c: Context,
  page: JSX.Element | Promise<JSX.Element>,
  status: 200 | 400 | 403 | 404 | 409 | 410 | 429 | 500 | 502 | 503 = 200,
) {
  const body = `<!DOCTYPE html>${String(await page)}`;
  return c.html(body, status);
}

/**
 * Pages for signed-in users, optionally limited to some roles. Before setup is complete every page leads to
 * the wizard; without a valid session cookie, GET goes to /login (and back afterwards) and any other method
 * gets there too (303). A role the page is not for gets a 403 page: the nav never links there for it.
 */
export function requireBrowserUser(deps: AppDeps, options: { roles?: readonly UserRole[] } = {}) {
  return createMiddleware<AppEnv>(async (c, next) => {
    const session = await browserSession(deps, c);
    if (!session) {
      const inst = await loadInstance(deps);
      if (inst.state !== "ready") return c.redirect("/setup", 303);
      if (sessionCookieToken(c) !== undefined) clearSessionCookie(c);
      const back = c.req.method === "GET" ? safeNext(c.req.path + new URL(c.req.url).search) : null;
      return c.redirect(back ? `/login?next=${encodeURIComponent(back)}` : "/login", 303);
    }
    c.set("user", session.user);
    c.set("userSessionId", session.sessionId);
    // Every signed-in page warns when the disk is nearly full (docs/decisions.md, Retention); a failing statfs never
    // stops a page.
    const space = await dataDirSpace(deps).catch(() => null);
    c.set("lowDiskSpace", isLowOnSpace(space) ? space : null);
    if (options.roles && !options.roles.includes(session.user.role)) {
      return renderPage(
        c,
        <ErrorPage
          ctx={pageContext(c, deps)}
          title="Not available for your role"
          message="Your role does not give access to this page. Ask the owner or an admin if you need it."
        />,
        403,
      );
    }
    await next();
  });
}
