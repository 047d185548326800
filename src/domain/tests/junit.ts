// JUnit XML as the tools write it (docs/test-reports.md): Gradle, Maven Surefire, xcpretty/xcbeautify, fastlane
// scan (trainer) and xcresult converters. A `testsuites` root or a bare `testsuite`, suites nested to any depth,
// `testcase` with `failure`, `error` or `skipped` (Surefire's `flakyFailure`/`flakyError` mean it passed on a rerun).
//
// Safety: a document with a DOCTYPE is refused where the scanner meets it, which is before its root element in
// any well-formed file (an internal subset is where entities, and the billion-laughs expansion, come from), and
// nothing is ever expanded: only the five predefined entities and
// character references are decoded, by one linear replace. Why a scanner of our own and not fast-xml-parser:
// docs/decisions.md "Test reports".
import type { TestCaseStatus } from "../../db/schema/constants.ts";

export interface ParsedTestCase {
  suite: string;
  classname: string;
  name: string;
  status: TestCaseStatus;
  durationMs: number | null;
  message: string | null;
  output: string | null;
}

export type JunitParse = { ok: true; cases: ParsedTestCase[]; truncated: boolean } | { ok: false; message: string };

/** `output` is cut to this many UTF-8 bytes. */
export const MAX_OUTPUT_BYTES = 64 * 1024;
const MAX_MESSAGE_CHARS = 4096;

const PREDEFINED: Record<string, string> = { lt: "<", gt: ">", amp: "&", quot: '"', apos: "'" };

/** The five predefined entities and numeric character references; anything else stays as written. */
export function decodeXmlText(text: string): string {
  if (!text.includes("&")) return text;
  return text.replace(/&(lt|gt|amp|quot|apos|#[0-9]{1,7}|#x[0-9a-fA-F]{1,6});/g, (whole, ref: string) => {
    if (ref[0] !== "#") return PREDEFINED[ref]!;
    const code = ref[1] === "x" || ref[1] === "X" ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
    return code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff) ? String.fromCodePoint(code) : whole;
  });
}

/** Seconds as JUnit writes them (`0.042`, Surefire's localized `1,234.5`) to whole milliseconds; null when absent. */
function durationMs(time: string | null): number | null {
  if (time === null) return null;
  const seconds = Number(time.replace(/,/g, "").trim());
  return Number.isFinite(seconds) && seconds >= 0 ? Math.round(seconds * 1000) : null;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** `text` cut to at most `maxBytes` of UTF-8, never inside a character. */
export function cutUtf8(text: string, maxBytes: number): string {
  if (text.length * 3 <= maxBytes) return text;
  const bytes = encoder.encode(text);
  if (bytes.length <= maxBytes) return text;
  let end = maxBytes;
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--;
  return decoder.decode(bytes.subarray(0, end));
}

/** Elements whose text is kept: the failure, error or skip detail and the case's own output streams. */
const OUTCOMES = new Set(["failure", "error", "skipped"]);
const STREAMS = new Set(["system-out", "system-err"]);
const MAX_DEPTH = 200;
const NAME = /^[A-Za-z_:][\w.:-]*/;
const ATTRIBUTE = /([^\s=/>]+)\s*=\s*(?:"([^"]*)"|'([^']*)')/g;

class NotWellFormed extends Error {}

interface OpenCase {
  suite: string;
  attrs: Record<string, string>;
  kind: "failure" | "error" | "skipped" | null;
  message: string | null;
  detail: string;
  streams: string[];
}

/** A start or end tag longer than this is refused (a tag cut by the end of the text fed so far is rescanned). */
const MAX_TAG_CHARS = 1024 * 1024;

/**
 * A linear scanner for JUnit's subset of XML, fed the document a piece at a time and run in slices: the caller
 * yields to the event loop between slices and takes the finished cases as they come, so neither the whole
 * document nor all its cases need to be in memory at once, and no step holds the daemon for long. A token cut by
 * the end of the text fed so far waits for the next piece (CDATA, comments and text are taken as they come).
 * Elements must nest and close properly; a DOCTYPE is refused where it is met; processing instructions and
 * comments are skipped; CDATA is text. Text is kept only inside a test case's failure, error, skipped,
 * system-out and system-err elements, each capped, so memory follows the cases kept, not the file.
 */
export class JunitScanner {
  private xml = "";
  private pos = 0;
  private final = false;
  /** Set when the text fed so far is scanned up to a token that needs more. */
  private waiting = false;
  /** Inside a CDATA section (kept) or a comment or processing instruction (skipped), up to its end marker. */
  private inside: { marker: string; keep: boolean } | null = null;
  private readonly stack: string[] = [];
  private readonly suites: string[] = [];
  private current: OpenCase | null = null;
  /** Where captured text goes: the outcome's detail or a stream of the open case. */
  private capture: "detail" | "stream" | null = null;
  private sawRoot = false;
  private ended = false;
  /** Finished cases not yet taken (takeCases). */
  private ready: ParsedTestCase[] = [];
  /** Cases kept so far, taken or not. */
  kept = 0;
  truncated = false;

  constructor(private readonly maxCases: number) {}

  /** The next piece of the document; `final` with the last one. */
  feed(text: string, final: boolean): void {
    this.xml = this.pos < this.xml.length ? this.xml.slice(this.pos) + text : text;
    this.pos = 0;
    this.final = final;
    this.waiting = false;
  }

  /** Everything fed is scanned: feed more (or the scan is done). */
  get hungry(): boolean {
    return !this.done && (this.waiting || this.pos >= this.xml.length) && !this.final;
  }

  /** The last piece is scanned and the document checked whole (or the case limit was reached). */
  get done(): boolean {
    return this.truncated || this.ended;
  }

  /** The cases finished since the last call. */
  takeCases(): ParsedTestCase[] {
    const taken = this.ready;
    this.ready = [];
    return taken;
  }

  /** Scans about `budget` characters (whole tokens); throws NotWellFormed, NotJunit or DoctypeRefused. */
  step(budget: number): void {
    const xml = this.xml;
    const stop = Math.min(xml.length, this.pos + budget);
    while (this.pos < stop && !this.truncated) {
      if (this.inside) {
        if (!this.continueInside()) break;
        continue;
      }
      const lt = xml.indexOf("<", this.pos);
      if (lt < 0) {
        if (this.final) {
          this.text(xml.slice(this.pos));
          this.pos = xml.length;
          break;
        }
        // Text goes now, except a character reference the end of the piece may have cut (`&am`).
        let cut = xml.length;
        const amp = xml.lastIndexOf("&");
        if (amp >= this.pos && xml.indexOf(";", amp) < 0) cut = amp;
        if (cut > this.pos) this.text(xml.slice(this.pos, cut));
        this.pos = cut;
        this.waiting = true;
        break;
      }
      if (lt > this.pos) {
        this.text(xml.slice(this.pos, lt));
        this.pos = lt;
      }
      if (!this.final && xml.length - lt < 9) {
        this.waiting = true;
        break;
      }
      const next = xml.charCodeAt(lt + 1);
      let after: number;
      if (next === 0x3f /* ? */) {
        this.inside = { marker: "?>", keep: false };
        after = lt + 2;
      } else if (next === 0x21 /* ! */) {
        if (xml.startsWith("<!--", lt)) {
          this.inside = { marker: "-->", keep: false };
          after = lt + 4;
        } else if (xml.startsWith("<![CDATA[", lt)) {
          this.inside = { marker: "]]>", keep: true };
          after = lt + 9;
        } else if (/^<!(doctype|entity)/i.test(xml.slice(lt, lt + 9))) throw new DoctypeRefused();
        else throw new NotWellFormed(`unexpected markup at character ${lt}`);
      } else if (next === 0x2f /* / */) {
        const end = xml.indexOf(">", lt + 2);
        if (end < 0) {
          if (this.final) throw new NotWellFormed("a closing tag is not closed");
          after = -1;
        } else {
          this.close(xml.slice(lt + 2, end).trim());
          after = end + 1;
        }
      } else {
        after = this.open(lt);
      }
      if (after < 0) {
        if (xml.length - lt > MAX_TAG_CHARS) throw new NotWellFormed(`a tag longer than ${MAX_TAG_CHARS} characters`);
        this.waiting = true;
        break;
      }
      this.pos = after;
    }
    if (this.final && this.pos >= xml.length && !this.truncated) {
      if (this.inside) throw new NotWellFormed(`${this.inside.marker} missing`);
      if (this.stack.length > 0) throw new NotWellFormed(`<${this.stack[this.stack.length - 1]}> is not closed`);
      if (!this.sawRoot) throw new NotWellFormed("no element");
      this.ended = true;
    }
  }

  /** Inside CDATA, a comment or a PI: to its end marker, or as far as the piece goes (false: more is needed). */
  private continueInside(): boolean {
    const { marker, keep } = this.inside!;
    const xml = this.xml;
    const end = xml.indexOf(marker, this.pos);
    if (end >= 0) {
      if (keep) this.rawText(xml.slice(this.pos, end));
      this.pos = end + marker.length;
      this.inside = null;
      return true;
    }
    if (this.final) {
      this.pos = xml.length;
      return false;
    }
    // All but the last characters, which may begin the marker, are taken now.
    const cut = Math.max(this.pos, xml.length - (marker.length - 1));
    if (keep && cut > this.pos) this.rawText(xml.slice(this.pos, cut));
    this.pos = cut;
    this.waiting = true;
    return false;
  }

  /** Reads a start tag from `<` at `lt` (quoted values may hold `>`); answers the position after it, -1 when cut. */
  private open(lt: number): number {
    const xml = this.xml;
    const name = NAME.exec(xml.slice(lt + 1, lt + 200))?.[0];
    if (!name) throw new NotWellFormed(`a tag without a name at character ${lt}`);
    // Character by character to the `>` that ends the tag, jumping over quoted values (tags are short; searching
    // the rest of the document for the next quote at each tag would be quadratic).
    let i = lt + 1 + name.length;
    for (;;) {
      if (i >= xml.length) {
        if (this.final) throw new NotWellFormed(`<${name}> is not closed`);
        return -1;
      }
      const c = xml.charCodeAt(i);
      if (c === 0x3e /* > */) break;
      if (c === 0x22 || c === 0x27) {
        const close = xml.indexOf(xml[i]!, i + 1);
        if (close < 0) {
          if (this.final) throw new NotWellFormed(`an attribute of <${name}> is not closed`);
          return -1;
        }
        i = close + 1;
      } else i++;
    }
    const selfClosing = xml.charCodeAt(i - 1) === 0x2f;
    const attrText = xml.slice(lt + 1 + name.length, selfClosing ? i - 1 : i);
    this.start(name, attrText);
    if (selfClosing) this.close(name);
    return i + 1;
  }

  private attributes(text: string): Record<string, string> {
    const attrs: Record<string, string> = {};
    ATTRIBUTE.lastIndex = 0;
    for (let m = ATTRIBUTE.exec(text); m; m = ATTRIBUTE.exec(text)) attrs[m[1]!] = decodeXmlText(m[2] ?? m[3] ?? "");
    return attrs;
  }

  private start(name: string, attrText: string): void {
    if (this.stack.length === 0) {
      if (this.sawRoot) throw new NotWellFormed("more than one root element");
      if (name !== "testsuites" && name !== "testsuite") throw new NotJunit();
      this.sawRoot = true;
    }
    if (this.stack.length >= MAX_DEPTH) throw new NotWellFormed(`elements nest deeper than ${MAX_DEPTH}`);
    this.stack.push(name);
    const outer = this.suites[this.suites.length - 1] ?? "";
    if (name === "testsuite" || name === "testsuites") {
      this.suites.push(this.attributes(attrText).name ?? outer);
    } else if (name === "testcase" && this.current === null) {
      this.current = { suite: outer, attrs: this.attributes(attrText), kind: null, message: null, detail: "", streams: [] };
    } else if (this.current && this.stack.length >= 2 && this.stack[this.stack.length - 2] === "testcase") {
      if (OUTCOMES.has(name)) {
        // The gravest outcome wins: a failure beside a skipped marker is a failure, and a failure beats an error.
        const kind = name as "failure" | "error" | "skipped";
        const rank = { failure: 3, error: 2, skipped: 1 } as const;
        if (this.current.kind === null || rank[kind] > rank[this.current.kind]) {
          this.current.kind = kind;
          this.current.message = this.attributes(attrText).message ?? null;
          this.current.detail = "";
        }
        this.capture = this.current.kind === kind ? "detail" : null;
      } else if (STREAMS.has(name)) {
        this.current.streams.push("");
        this.capture = "stream";
      }
    }
  }

  private close(name: string): void {
    const open = this.stack.pop();
    if (open !== name) throw new NotWellFormed(open ? `</${name}> closes <${open}>` : `</${name}> closes nothing`);
    if (name === "testsuite" || name === "testsuites") this.suites.pop();
    else if (name === "testcase" && this.current && !this.stack.includes("testcase")) {
      if (this.kept >= this.maxCases) this.truncated = true;
      else {
        this.ready.push(finish(this.current));
        this.kept++;
      }
      this.current = null;
    }
    this.capture = null;
  }

  private text(raw: string): void {
    if (this.capture) this.rawText(decodeXmlText(raw));
  }

  private rawText(text: string): void {
    const c = this.current;
    if (!c || !this.capture) return;
    if (this.capture === "detail") {
      if (c.detail.length < MAX_OUTPUT_BYTES) c.detail += text.slice(0, MAX_OUTPUT_BYTES);
    } else {
      const last = c.streams.length - 1;
      if (c.streams[last]!.length < MAX_OUTPUT_BYTES) c.streams[last] += text.slice(0, MAX_OUTPUT_BYTES);
    }
  }
}

class NotJunit extends Error {}
/** A DOCTYPE (or an entity declaration) anywhere: the report is refused there, before anything is expanded. */
class DoctypeRefused extends Error {}

function finish(c: OpenCase): ParsedTestCase {
  const status: TestCaseStatus = c.kind === "failure" ? "failed" : c.kind === "error" ? "errored" : c.kind === "skipped" ? "skipped" : "passed";
  const detail = c.detail.trim();
  let message = c.kind === null ? null : (c.message ?? (detail.split("\n", 1)[0] || null));
  if (message !== null) message = message.slice(0, MAX_MESSAGE_CHARS);
  const parts: string[] = [];
  if ((c.kind === "failure" || c.kind === "error") && detail) parts.push(detail);
  for (const stream of c.streams) {
    const text = stream.trim();
    if (text) parts.push(text);
  }
  return {
    suite: c.suite,
    classname: c.attrs.classname ?? "",
    name: c.attrs.name ?? "",
    status,
    durationMs: durationMs(c.attrs.time ?? null),
    message,
    output: parts.length > 0 ? cutUtf8(parts.join("\n\n"), MAX_OUTPUT_BYTES) : null,
  };
}

/** Characters scanned between two yields to the event loop (about 2–5 ms of work on a quiet machine). */
export const SLICE_CHARS = 32 * 1024;

/** The report's message for a scan that stopped on an error, or null when the error is not the document's fault. */
export function junitRefusal(err: unknown): string | null {
  if (err instanceof DoctypeRefused) return "the report declares a DOCTYPE or entities, which are refused (never expanded)";
  if (err instanceof NotJunit) return "the root element is not testsuites or testsuite: not a JUnit report";
  if (err instanceof NotWellFormed) return `not well-formed XML: ${err.message}`.slice(0, 500);
  return null;
}

/**
 * Parses one whole report; at most `maxCases` cases are kept (`truncated` when there were more). Malformed XML, a
 * DOCTYPE or a document that is not JUnit answers `ok: false` with a message for the report's record. `yieldNow`
 * is awaited between slices (the bench passes nothing to measure raw speed). The daemon feeds the scanner piece
 * by piece instead (test-reports.ts).
 */
export async function parseJunit(xml: string, maxCases: number, yieldNow?: () => Promise<void>): Promise<JunitParse> {
  const scanner = new JunitScanner(maxCases);
  const cases: ParsedTestCase[] = [];
  scanner.feed(xml, true);
  try {
    while (!scanner.done) {
      scanner.step(SLICE_CHARS);
      for (const c of scanner.takeCases()) cases.push(c);
      if (yieldNow && !scanner.done) await yieldNow();
    }
  } catch (err) {
    const message = junitRefusal(err);
    if (message === null) throw err;
    return { ok: false, message };
  }
  return { ok: true, cases, truncated: scanner.truncated };
}
