// Text that came from outside (runners, repositories, identity providers, users) on its way into HTML.
// hono/jsx escapes every string child and attribute value, so markup can never be injected; what escaping
// alone does not stop is a string that *looks* different from what it is. Bidirectional controls (Trojan
// Source, CVE-2021-42574) reorder the characters around them, so "evil‮gpj.exe" reads as "evilexe.jpg".

/** Unicode bidirectional formatting characters: embeddings, overrides, isolates and the invisible marks. */
const BIDI_CONTROLS = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g;
/** C0/C1 control characters other than tab and newline: invisible in HTML, confusing in names. */
const OTHER_CONTROLS = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F]/g;

function codePoint(ch: string): string {
  return `<U+${(ch.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, "0")}>`;
}

/**
 * The string with every bidi and control character replaced by a visible `<U+202E>` marker, so the reader
 * sees exactly which characters are there. Render the result inside `<bdi>` (the `Name` component) so that
 * right-to-left text in it cannot reorder the text around it either.
 */
export function neutralise(text: string | null | undefined): string {
  if (text === null || text === undefined) return "";
  return text.replace(BIDI_CONTROLS, codePoint).replace(OTHER_CONTROLS, codePoint);
}

/**
 * A value as pretty JSON for a page (a pipeline's config): bidi and C1 control characters inside its strings become
 * `\uXXXX` escapes, which show them and still parse back to the same value (the edit form round-trips it exactly).
 * JSON.stringify already escapes the C0 controls.
 */
export function jsonForDisplay(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(
    /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069\u007F-\u009F\u2028\u2029]/g,
    (ch) => `\\u${(ch.codePointAt(0) ?? 0).toString(16).padStart(4, "0")}`,
  );
}

/** True when `neutralise` would change the string: pages can flag such a name. */
export function hasHiddenCharacters(text: string): boolean {
  BIDI_CONTROLS.lastIndex = 0;
  OTHER_CONTROLS.lastIndex = 0;
  return BIDI_CONTROLS.test(text) || OTHER_CONTROLS.test(text);
}

/** Epoch seconds as an ISO-8601 UTC string (machine-readable, for `<time datetime>`). */
export function isoTime(epochSeconds: number): string {
  return new Date(epochSeconds * 1000).toISOString();
}

/** Epoch seconds as "2026-11-24 01:40 UTC": deterministic whatever the server's locale and zone. */
export function shortTime(epochSeconds: number): string {
  return `${isoTime(epochSeconds).slice(0, 16).replace("T", " ")} UTC`;
}

/** "3 min ago", "in 2 h": relative to `now` (the app's clock, never the wall clock). */
export function relativeTime(epochSeconds: number, now: number): string {
  const delta = epochSeconds - now;
  const abs = Math.abs(delta);
  const unit =
    abs < 60
      ? `${abs} s`
      : abs < 3600
        ? `${Math.round(abs / 60)} min`
        : abs < 86400 * 2
          ? `${Math.round(abs / 3600)} h`
          : `${Math.round(abs / 86400)} d`;
  if (abs < 5) return "just now";
  return delta < 0 ? `${unit} ago` : `in ${unit}`;
}

/** Bytes as "1.5 MB". */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ["KB", "MB", "GB", "TB"];
  let value = n / 1024;
  let i = 0;
  while (value >= 1024 && i < units.length - 1) {
    value /= 1024;
    i++;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[i]}`;
}

/** A duration in seconds as people read it: `42 s`, `3 min 5 s`, `1 h 20 min`. */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}
