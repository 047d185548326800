import type { CallResult, TestApp, TestEnv } from "./app.ts";
import { toCallResult } from "./app.ts";

/** The origin app.request() addresses (http://localhost): what a browser on the page would send as Origin. */
export const TEST_ORIGIN = "http://localhost";

/** A browser's cookie store, reduced to what page tests need: Set-Cookie in, Cookie out (Max-Age=0 deletes). */
export class CookieJar {
  readonly cookies = new Map<string, string>();
  store(setCookies: string[]): void {
    for (const line of setCookies) {
      const [pair, ...attrs] = line.split(";");
      const eq = pair!.indexOf("=");
      const name = pair!.slice(0, eq).trim();
      const expired = attrs.some((a) => /^\s*max-age=0\s*$/i.test(a));
      if (expired) this.cookies.delete(name);
      else this.cookies.set(name, pair!.slice(eq + 1));
    }
  }
  header(): string[] {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`);
  }
}

export interface PageOptions {
  /** Cookies to send and to keep what the answer sets. */
  jar?: CookieJar;
  /** A user session token, sent as the browser session cookie. */
  session?: string;
  /** Extra cookies, `name=value` each. */
  cookies?: string[];
  /** A form body (POST, urlencoded). */
  form?: Record<string, string | string[]>;
  /** The Origin header of a POST; defaults to the same origin. `null` sends none. */
  origin?: string | null;
  peer?: string;
  /** The client's socket belongs to another OS user than the daemon's (local sign-in refuses it). */
  peerIsOtherUser?: boolean;
  headers?: Record<string, string>;
}

/** A browser-like request to a page through app.request(): cookies, a form body, an Origin. */
export async function page(
  t: TestApp,
  method: string,
  path: string,
  o: PageOptions = {},
): Promise<CallResult & { location: string | null; setCookies: string[] }> {
  const headers: Record<string, string> = { accept: "text/html", ...o.headers };
  const cookies = [...(o.cookies ?? []), ...(o.jar?.header() ?? [])];
  if (o.session !== undefined) cookies.push(`__Host-hangar_session=${o.session}`);
  if (cookies.length > 0) headers.cookie = cookies.join("; ");
  let body: string | undefined;
  if (method !== "GET") {
    if (o.origin !== null) headers.origin = o.origin ?? TEST_ORIGIN;
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(o.form ?? {})) for (const one of Array.isArray(v) ? v : [v]) params.append(k, one);
    body = params.toString();
    headers["content-type"] = "application/x-www-form-urlencoded";
  }
  const res = await t.app.request(path, { method, headers, body, redirect: "manual" }, {
    peerAddress: o.peer ?? "127.0.0.1",
    peerIsLocalUser: o.peerIsOtherUser !== true,
  } satisfies TestEnv);
  const result = await toCallResult(res);
  o.jar?.store(res.headers.getSetCookie());
  return { ...result, location: res.headers.get("location"), setCookies: res.headers.getSetCookie() };
}

/** The value a Set-Cookie list gives a cookie, or undefined. */
export function cookieValue(setCookies: string[], name: string): string | undefined {
  for (const line of setCookies) {
    const [pair] = line.split(";");
    const eq = pair!.indexOf("=");
    if (pair!.slice(0, eq).trim() === name) return decodeURIComponent(pair!.slice(eq + 1));
  }
  return undefined;
}
