// Rendered pages kept with the version they were rendered at (docs/decisions.md "Tester page cache"). A page is sent
// again only while the version its route reads from the database on this GET is the one it was rendered at, and
// through the last moment it reads the same by itself (`freshThrough`): a cache never decides alone that a page is
// current, so a write through another daemon on the same database shows on the next GET as well.
import { concatBytes } from "../domain/common/bytes.ts";

interface Entry {
  version: string;
  /**
   * The page as UTF-8, split around its CSP nonce placeholder: each answer joins them with its own nonce. Bytes, not a
   * string: encoding ≈ 21 KB of text with a few non-Latin-1 characters (·, “) on every answer cost more than the rest
   * of the kept page's path (docs/benchmarks.md "Tester page").
   */
  parts: Uint8Array[];
  /** The last `now` at which the page reads as rendered with nothing written. */
  freshThrough: number;
  size: number;
}

const encoder = new TextEncoder();

/** A fresh, unguessable stand-in for the nonce while a page is rendered for the cache. */
export function noncePlaceholder(): string {
  return `nonce-${crypto.randomUUID()}`;
}

/** Least recently used pages dropped first once the kept ones exceed `maxChars` characters. */
export class RenderedPageCache {
  private readonly entries = new Map<string, Entry>();
  private chars = 0;

  constructor(private readonly maxChars: number) {}

  /** The page for `key` with `nonce` in place, when it was rendered at `version` and still reads the same at `now`. */
  get(key: string, version: string, now: number, nonce: string): Uint8Array<ArrayBuffer> | null {
    const entry = this.entries.get(key);
    if (!entry) return null;
    if (entry.version !== version || now > entry.freshThrough) {
      this.drop(key, entry);
      return null;
    }
    // Most recently used last: the first key is the one to drop.
    this.entries.delete(key);
    this.entries.set(key, entry);
    const separator = encoder.encode(nonce);
    return concatBytes(entry.parts.flatMap((part, i) => (i === 0 ? [part] : [separator, part])));
  }

  /** Keeps `html`, rendered at `version` with `placeholder` for the nonce; it reads the same through `freshThrough`. */
  set(key: string, version: string, html: string, placeholder: string, freshThrough: number): void {
    const old = this.entries.get(key);
    if (old) this.drop(key, old);
    if (html.length > this.maxChars) return;
    const parts = html.split(placeholder).map((part) => encoder.encode(part));
    this.entries.set(key, { version, parts, freshThrough, size: html.length });
    this.chars += html.length;
    for (const [oldest, entry] of this.entries) {
      if (this.chars <= this.maxChars) break;
      this.drop(oldest, entry);
    }
  }

  get size(): number {
    return this.entries.size;
  }

  private drop(key: string, entry: Entry): void {
    this.entries.delete(key);
    this.chars -= entry.size;
  }
}
