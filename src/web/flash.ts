import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import type { FlashKind, FlashMessage } from "./components.tsx";

// A message shown once on the page a POST redirects to (post/redirect/get). It lives in a short-lived cookie
// rather than the URL so that a reload or a shared link does not repeat it. Its text is rendered escaped.
const FLASH_COOKIE = "hangar_flash";
const KINDS: readonly FlashKind[] = ["ok", "error", "info"];

export function setFlash(c: Context, kind: FlashKind, text: string): void {
  setCookie(c, FLASH_COOKIE, `${kind}:${encodeURIComponent(text.slice(0, 500))}`, {
    prefix: "host",
    path: "/",
    secure: true,
    httpOnly: true,
    sameSite: "Lax",
    maxAge: 60,
  });
}

/** The pending flash message, consumed: the cookie is cleared in the same answer. */
export function takeFlash(c: Context): FlashMessage | null {
  const raw = getCookie(c, FLASH_COOKIE, "host");
  if (raw === undefined) return null;
  deleteCookie(c, FLASH_COOKIE, { prefix: "host", path: "/", secure: true });
  const sep = raw.indexOf(":");
  const kind = raw.slice(0, sep) as FlashKind;
  if (!KINDS.includes(kind)) return null;
  try {
    return { kind, text: decodeURIComponent(raw.slice(sep + 1)) };
  } catch {
    return null;
  }
}
