// JUnit XML as the tools write it (docs/test-reports.md): Gradle, Maven Surefire, xcpretty/xcbeautify, fastlane
// scan (trainer) and xcresult converters. A `testsuites` root or a bare `testsuite`, suites nested to any depth,
// `testcase` with `failure`, `error` or `skipped` (Surefire's `flakyFailure`/`flakyError` mean it passed on a rerun).
//
// Safety: a document with a DOCTYPE is refused before parsing (an internal subset is where entities, and the
// billion-laughs expansion, come from), and fast-xml-parser runs with entity processing off: only the five
// predefined entities and character references are decoded, here, by one linear replace.
import { XMLParser } from "fast-xml-parser";
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

export type JunitParse =
  | { ok: true; cases: ParsedTestCase[]; truncated: boolean }
  | { ok: false; message: string };

/** `output` is cut to this many UTF-8 bytes. */
export const MAX_OUTPUT_BYTES = 64 * 1024;
const MAX_MESSAGE_CHARS = 4096;

const ELEMENTS_AS_LISTS = new Set(["testsuites", "testsuite", "testcase", "failure", "error", "skipped", "system-out", "system-err", "flakyFailure", "flakyError", "rerunFailure", "rerunError"]);

let parser: XMLParser | null = null;
function xmlParser(): XMLParser {
  parser ??= new XMLParser({
    ignoreAttributes: false,
    attributeNamePrefix: "@",
    textNodeName: "#text",
    parseTagValue: false,
    parseAttributeValue: false,
    trimValues: false,
    processEntities: false,
    htmlEntities: false,
    ignoreDeclaration: true,
    ignorePiTags: true,
    isArray: (name) => ELEMENTS_AS_LISTS.has(name),
    maxNestedTags: 200,
  });
  return parser;
}

/**
 * Whether the document declares a DOCTYPE outside CDATA sections and comments. A DOCTYPE may only stand before
 * the root element, but a malformed file could put one anywhere, so every `<!D` is checked, and only one that
 * sits inside a CDATA section or a comment (test output quoting HTML) is let through.
 */
export function declaresDoctype(xml: string): boolean {
  const upper = /<!doctype|<!entity/gi;
  for (let match = upper.exec(xml); match; match = upper.exec(xml)) {
    const at = match.index;
    const cdataOpen = xml.lastIndexOf("<![CDATA[", at);
    if (cdataOpen >= 0 && xml.indexOf("]]>", cdataOpen) > at) continue;
    const commentOpen = xml.lastIndexOf("<!--", at);
    if (commentOpen >= 0 && xml.indexOf("-->", commentOpen) > at) continue;
    return true;
  }
  return false;
}

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

type XmlNode = Record<string, unknown>;

function attr(node: unknown, name: string): string | null {
  if (node === null || typeof node !== "object") return null;
  const value = (node as XmlNode)[`@${name}`];
  return typeof value === "string" ? decodeXmlText(value) : null;
}

function textOf(node: unknown): string {
  if (typeof node === "string") return decodeXmlText(node);
  if (node === null || typeof node !== "object") return "";
  const text = (node as XmlNode)["#text"];
  return typeof text === "string" ? decodeXmlText(text) : "";
}

function children(node: unknown, name: string): unknown[] {
  if (node === null || typeof node !== "object") return [];
  const value = (node as XmlNode)[name];
  return Array.isArray(value) ? value : [];
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

function caseOf(node: unknown, suite: string): ParsedTestCase {
  const failure = children(node, "failure")[0];
  const error = children(node, "error")[0];
  const skipped = children(node, "skipped")[0];
  const outcome = failure ?? error;
  const status: TestCaseStatus = failure !== undefined ? "failed" : error !== undefined ? "errored" : skipped !== undefined ? "skipped" : "passed";
  const detail = outcome ?? skipped;
  const detailText = detail === undefined ? "" : textOf(detail).trim();
  let message = detail === undefined ? null : attr(detail, "message") ?? (detailText.split("\n", 1)[0] || null);
  if (message !== null) message = message.slice(0, MAX_MESSAGE_CHARS);
  const parts: string[] = [];
  if (outcome !== undefined && detailText) parts.push(detailText);
  for (const stream of ["system-out", "system-err"]) {
    for (const part of children(node, stream)) {
      const text = textOf(part).trim();
      if (text) parts.push(text);
    }
  }
  const output = parts.length > 0 ? cutUtf8(parts.join("\n\n"), MAX_OUTPUT_BYTES) : null;
  return {
    suite,
    classname: attr(node, "classname") ?? "",
    name: attr(node, "name") ?? "",
    status,
    durationMs: durationMs(attr(node, "time")),
    message,
    output,
  };
}

/**
 * Parses one report; at most `maxCases` cases are kept (`truncated` when there were more). Malformed XML, a
 * DOCTYPE or a document that is not JUnit answers `ok: false` with a message for the report's record.
 */
export function parseJunit(xml: string, maxCases: number): JunitParse {
  if (declaresDoctype(xml)) return { ok: false, message: "the report declares a DOCTYPE or entities, which are refused (never expanded)" };
  let document: XmlNode;
  try {
    document = xmlParser().parse(xml) as XmlNode;
  } catch (err) {
    return { ok: false, message: `not well-formed XML: ${err instanceof Error ? err.message : String(err)}`.slice(0, 500) };
  }
  const roots = [...children(document, "testsuites"), ...children(document, "testsuite")];
  if (roots.length === 0) return { ok: false, message: "no testsuites or testsuite element: not a JUnit report" };
  const cases: ParsedTestCase[] = [];
  let truncated = false;
  // Iterative walk (suites nest to any depth in converted xcresult output), innermost suite name carried along.
  const stack: Array<{ node: unknown; suite: string }> = roots.reverse().map((node) => ({ node, suite: "" }));
  while (stack.length > 0 && !truncated) {
    const { node, suite: outer } = stack.pop()!;
    const suite = attr(node, "name") ?? outer;
    for (const testcase of children(node, "testcase")) {
      if (cases.length >= maxCases) {
        truncated = true;
        break;
      }
      cases.push(caseOf(testcase, suite));
    }
    const nested = [...children(node, "testsuite"), ...children(node, "testsuites")];
    for (let i = nested.length - 1; i >= 0; i--) stack.push({ node: nested[i], suite });
  }
  return { ok: true, cases, truncated };
}
