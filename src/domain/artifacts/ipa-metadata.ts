// Install metadata of an IPA, read from `Payload/<App>.app/Info.plist` inside the archive (docs/api.md §7).
// The archive is never loaded whole: the zip's end record, its central directory and the one entry are
// fetched with ranged reads through the store, then the entry is inflated with the web-standard
// DecompressionStream. XML and binary (bplist00) property lists are both understood. Web-standard only.
import type { InstallMetadata } from "./artifacts.ts";
import { readStreamCapped } from "../common/streams.ts";

export type RangeReader = (range: { start: number; end: number }) => Promise<Uint8Array>;

/** Bounds that keep a hostile archive from costing memory: Info.plist files are a few KiB. */
const MAX_CENTRAL_DIRECTORY = 64 * 1024 * 1024;
const MAX_PLIST_COMPRESSED = 8 * 1024 * 1024;
const MAX_PLIST_BYTES = 16 * 1024 * 1024;
/** References a binary plist may follow in all (shared ones included); a real Info.plist has a few hundred. */
const MAX_PLIST_REFERENCES = 1_000_000;
const INFO_PLIST = /^Payload\/[^/]+\.app\/Info\.plist$/;

export class ZipFormatError extends Error {}

/** The metadata of an IPA of `size` bytes, or null when it has no readable Info.plist with a bundle id. */
export async function readIpaMetadata(read: RangeReader, size: number): Promise<InstallMetadata | null> {
  const entry = await findZipEntry(read, size, (name) => INFO_PLIST.test(name));
  if (!entry) return null;
  const plist = await parsePlist(await readZipEntry(read, entry));
  return installMetadataFromInfoPlist(plist);
}

/** CFBundleIdentifier, the marketing version (CFBundleShortVersionString, else CFBundleVersion), the name. */
export function installMetadataFromInfoPlist(plist: unknown): InstallMetadata | null {
  if (!isDict(plist)) return null;
  const text = (key: string): string | null => {
    const value = plist[key];
    return typeof value === "string" && value.trim() !== "" ? value.trim() : null;
  };
  const bundleIdentifier = text("CFBundleIdentifier");
  const version = text("CFBundleShortVersionString") ?? text("CFBundleVersion");
  const title = text("CFBundleDisplayName") ?? text("CFBundleName");
  if (!bundleIdentifier || !version) return null;
  return { bundle_identifier: bundleIdentifier, bundle_version: version, title: title ?? bundleIdentifier };
}

// ---------------------------------------------------------------------------------------------------------
// Zip (PKWARE APPNOTE 6.3.x): end of central directory, ZIP64, central directory, local header.

export interface ZipEntry {
  name: string;
  method: number;
  compressedSize: number;
  uncompressedSize: number;
  localHeaderOffset: number;
}

const u16 = (b: DataView, o: number) => b.getUint16(o, true);
const u32 = (b: DataView, o: number) => b.getUint32(o, true);
const u64 = (b: DataView, o: number) => Number(b.getBigUint64(o, true));
const view = (bytes: Uint8Array) => new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);

export async function findZipEntry(read: RangeReader, size: number, wanted: (name: string) => boolean): Promise<ZipEntry | null> {
  let found: ZipEntry | null = null;
  await scanZipDirectory(read, size, (entry) => {
    if (!wanted(entry.name)) return true;
    found = entry;
    return false;
  });
  return found;
}

/** Every entry of the archive's central directory whose name `keep` accepts, by name. */
export async function readZipDirectory(read: RangeReader, size: number, keep: (name: string) => boolean): Promise<Map<string, ZipEntry>> {
  const out = new Map<string, ZipEntry>();
  await scanZipDirectory(read, size, (entry) => {
    if (keep(entry.name) && !out.has(entry.name)) out.set(entry.name, entry);
    return true;
  });
  return out;
}

/** Walks the central directory (one ranged read, bounded) until `visit` answers false. */
async function scanZipDirectory(read: RangeReader, size: number, visit: (entry: ZipEntry) => boolean): Promise<void> {
  if (size < 22) throw new ZipFormatError("too small to be a zip archive");
  // The end record is 22 bytes plus a comment of at most 65535 bytes, at the very end.
  const tailStart = Math.max(0, size - 22 - 65535);
  const tail = await read({ start: tailStart, end: size - 1 });
  const tv = view(tail);
  let eocd = -1;
  for (let i = tail.length - 22; i >= 0; i--) {
    if (u32(tv, i) === 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new ZipFormatError("no end of central directory record");
  let entries = u16(tv, eocd + 10);
  let cdSize = u32(tv, eocd + 12);
  let cdOffset = u32(tv, eocd + 16);
  if (entries === 0xffff || cdSize === 0xffffffff || cdOffset === 0xffffffff) {
    const locator = eocd - 20;
    if (locator < 0 || u32(tv, locator) !== 0x07064b50) throw new ZipFormatError("ZIP64 locator missing");
    const recordOffset = u64(tv, locator + 8);
    const record = view(await read({ start: recordOffset, end: recordOffset + 55 }));
    if (u32(record, 0) !== 0x06064b50) throw new ZipFormatError("ZIP64 end record missing");
    entries = u64(record, 32);
    cdSize = u64(record, 40);
    cdOffset = u64(record, 48);
  }
  if (cdSize > MAX_CENTRAL_DIRECTORY || cdOffset + cdSize > size) throw new ZipFormatError("central directory out of bounds");
  const cd = await read({ start: cdOffset, end: cdOffset + cdSize - 1 });
  const cv = view(cd);
  const decoder = new TextDecoder();
  let pos = 0;
  for (let n = 0; n < entries && pos + 46 <= cd.length; n++) {
    if (u32(cv, pos) !== 0x02014b50) throw new ZipFormatError("bad central directory entry");
    const nameLength = u16(cv, pos + 28);
    const extraLength = u16(cv, pos + 30);
    const commentLength = u16(cv, pos + 32);
    if (pos + 46 + nameLength + extraLength > cd.length) throw new ZipFormatError("central directory entry out of bounds");
    const name = decoder.decode(cd.subarray(pos + 46, pos + 46 + nameLength));
    let compressedSize = u32(cv, pos + 20);
    let uncompressedSize = u32(cv, pos + 24);
    let localHeaderOffset = u32(cv, pos + 42);
    // ZIP64 extra field: the 8-byte values, in this order, for each field that says 0xFFFFFFFF.
    let extra = pos + 46 + nameLength;
    const extraEnd = extra + extraLength;
    while (extra + 4 <= extraEnd) {
      const id = u16(cv, extra);
      const length = u16(cv, extra + 2);
      if (id === 0x0001) {
        let p = extra + 4;
        if (uncompressedSize === 0xffffffff && p + 8 <= extraEnd) {
          uncompressedSize = u64(cv, p);
          p += 8;
        }
        if (compressedSize === 0xffffffff && p + 8 <= extraEnd) {
          compressedSize = u64(cv, p);
          p += 8;
        }
        if (localHeaderOffset === 0xffffffff && p + 8 <= extraEnd) localHeaderOffset = u64(cv, p);
      }
      extra += 4 + length;
    }
    if (!visit({ name, method: u16(cv, pos + 10), compressedSize, uncompressedSize, localHeaderOffset })) return;
    pos += 46 + nameLength + extraLength + commentLength;
  }
}

/**
 * One entry's bytes, refused when it is larger than `limit` (compressed or inflated): the inflation stops at
 * the limit, so an entry that lies about its size costs no more than that.
 */
export async function readZipEntry(read: RangeReader, entry: ZipEntry, limit = MAX_PLIST_BYTES): Promise<Uint8Array> {
  if (entry.compressedSize > Math.max(limit, MAX_PLIST_COMPRESSED) || entry.uncompressedSize > limit) {
    throw new ZipFormatError("entry too large");
  }
  const header = view(await read({ start: entry.localHeaderOffset, end: entry.localHeaderOffset + 29 }));
  if (u32(header, 0) !== 0x04034b50) throw new ZipFormatError("bad local file header");
  const dataStart = entry.localHeaderOffset + 30 + u16(header, 26) + u16(header, 28);
  const compressed = entry.compressedSize === 0 ? new Uint8Array(0) : await read({ start: dataStart, end: dataStart + entry.compressedSize - 1 });
  if (entry.method === 0) return compressed;
  if (entry.method !== 8) throw new ZipFormatError(`unsupported compression method ${entry.method}`);
  return inflateRaw(compressed, limit);
}

export async function inflateRaw(data: Uint8Array, limit: number, format: "deflate-raw" | "deflate" = "deflate-raw"): Promise<Uint8Array> {
  const stream = new Blob([data]).stream().pipeThrough(new DecompressionStream(format));
  // A zip bomb stops at the limit instead of filling memory.
  return readStreamCapped(stream, null, limit, () => new ZipFormatError("entry inflates past the limit"));
}

// ---------------------------------------------------------------------------------------------------------
// Property lists

export type PlistValue = string | number | bigint | boolean | Date | Uint8Array | null | PlistValue[] | { [key: string]: PlistValue };

function isDict(value: unknown): value is Record<string, PlistValue> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array) && !(value instanceof Date);
}

export async function parsePlist(bytes: Uint8Array): Promise<PlistValue> {
  const magic = new TextDecoder().decode(bytes.subarray(0, 8));
  if (magic === "bplist00") return parseBinaryPlist(bytes);
  return parseXmlPlist(new TextDecoder().decode(bytes));
}

/** Apple's binary property list, version 00 (CoreFoundation's CFBinaryPList.c format). */
export function parseBinaryPlist(bytes: Uint8Array): PlistValue {
  if (bytes.length < 40) throw new ZipFormatError("binary plist too short");
  const dv = view(bytes);
  const trailer = bytes.length - 32;
  const offsetSize = dv.getUint8(trailer + 6);
  const refSize = dv.getUint8(trailer + 7);
  const objectCount = Number(dv.getBigUint64(trailer + 8));
  const top = Number(dv.getBigUint64(trailer + 16));
  const tableOffset = Number(dv.getBigUint64(trailer + 24));
  if (offsetSize < 1 || offsetSize > 8 || refSize < 1 || refSize > 8 || tableOffset + objectCount * offsetSize > trailer) {
    throw new ZipFormatError("binary plist trailer invalid");
  }
  const uint = (at: number, size: number): number => {
    let v = 0;
    for (let i = 0; i < size; i++) v = v * 256 + dv.getUint8(at + i);
    return v;
  };
  const offsetOf = (ref: number): number => {
    if (ref >= objectCount) throw new ZipFormatError("binary plist reference out of range");
    return uint(tableOffset + ref * offsetSize, offsetSize);
  };
  // The length of a collection or string: the low nibble, or an int object that follows when it is 0xF.
  const lengthAt = (at: number): { length: number; start: number } => {
    const low = dv.getUint8(at) & 0x0f;
    if (low !== 0x0f) return { length: low, start: at + 1 };
    const intMarker = dv.getUint8(at + 1);
    const size = 1 << (intMarker & 0x0f);
    return { length: uint(at + 2, size), start: at + 2 + size };
  };
  // A collection's references must lie inside the file before the trailer, whatever its length claims.
  const refsAt = (at: number, perEntry: number): { length: number; start: number } => {
    const found = lengthAt(at);
    if (found.start + found.length * perEntry * refSize > trailer) throw new ZipFormatError("binary plist collection out of bounds");
    return found;
  };
  const decodeObject = (ref: number, depth: number): PlistValue => {
    if (depth > 64) throw new ZipFormatError("binary plist nested too deeply");
    const at = offsetOf(ref);
    const marker = dv.getUint8(at);
    const kind = marker >> 4;
    switch (kind) {
      case 0x0:
        return marker === 0x09 ? true : marker === 0x08 ? false : null;
      case 0x1: {
        const size = 1 << (marker & 0x0f);
        if (size === 8) return Number(dv.getBigInt64(at + 1));
        return uint(at + 1, size);
      }
      case 0x2:
        return (marker & 0x0f) === 2 ? dv.getFloat32(at + 1) : dv.getFloat64(at + 1);
      case 0x3:
        return new Date(Date.UTC(2001, 0, 1) + dv.getFloat64(at + 1) * 1000);
      case 0x4: {
        const { length, start } = lengthAt(at);
        return bytes.slice(start, start + length);
      }
      case 0x5: {
        const { length, start } = lengthAt(at);
        return new TextDecoder("latin1").decode(bytes.subarray(start, start + length));
      }
      case 0x6: {
        const { length, start } = lengthAt(at);
        let s = "";
        for (let i = 0; i < length; i++) s += String.fromCharCode(dv.getUint16(start + i * 2));
        return s;
      }
      case 0x8:
        return uint(at + 1, (marker & 0x0f) + 1);
      case 0xa: {
        const { length, start } = refsAt(at, 1);
        const out: PlistValue[] = [];
        for (let i = 0; i < length; i++) out.push(readObject(uint(start + i * refSize, refSize), depth + 1));
        return out;
      }
      case 0xd: {
        const { length, start } = refsAt(at, 2);
        const out: Record<string, PlistValue> = {};
        for (let i = 0; i < length; i++) {
          const key = readObject(uint(start + i * refSize, refSize), depth + 1);
          const value = readObject(uint(start + (length + i) * refSize, refSize), depth + 1);
          if (typeof key === "string") out[key] = value;
        }
        return out;
      }
      default:
        throw new ZipFormatError(`binary plist object type 0x${kind.toString(16)} not supported`);
    }
  };
  // Each object is decoded once and then shared: collections that point at the same object again and again
  // would otherwise cost 2^depth (a few hundred bytes could block the event loop for days).
  const decoded = new Map<number, PlistValue>();
  const decoding = new Set<number>();
  let references = 0;
  const readObject = (ref: number, depth: number): PlistValue => {
    if (++references > MAX_PLIST_REFERENCES) throw new ZipFormatError("binary plist has too many references");
    if (decoded.has(ref)) return decoded.get(ref)!;
    if (decoding.has(ref)) throw new ZipFormatError("binary plist reference cycle");
    decoding.add(ref);
    const value = decodeObject(ref, depth);
    decoding.delete(ref);
    decoded.set(ref, value);
    return value;
  };
  return readObject(top, 0);
}

type XmlNode = Record<string, unknown> & { ":@"?: Record<string, string> };

/** An XML property list. Values stay strings as written ("1.10" must not become the number 1.1). */
export async function parseXmlPlist(text: string): Promise<PlistValue> {
  // Loaded on first use: XML property lists come only with iOS artifacts, and the parser is a tenth of the
  // daemon's code (docs/benchmarks.md: start time and idle memory).
  const { XMLParser } = await import("fast-xml-parser");
  const parser = new XMLParser({ preserveOrder: true, parseTagValue: false, trimValues: false, ignoreAttributes: true, processEntities: true });
  const doc = parser.parse(text) as XmlNode[];
  const root = elements(doc).find((n) => tagOf(n) === "plist");
  if (!root) throw new ZipFormatError("not a property list");
  const first = elements(childrenOf(root))[0];
  if (!first) throw new ZipFormatError("empty property list");
  return xmlValue(first, 0);
}

const tagOf = (node: XmlNode): string => Object.keys(node).find((k) => k !== ":@") ?? "";
const childrenOf = (node: XmlNode): XmlNode[] => (node[tagOf(node)] as XmlNode[] | undefined) ?? [];
const elements = (nodes: XmlNode[]): XmlNode[] => nodes.filter((n) => !tagOf(n).startsWith("#") && !tagOf(n).startsWith("?"));
const textOf = (node: XmlNode): string =>
  childrenOf(node)
    .map((c) => (typeof c["#text"] === "string" || typeof c["#text"] === "number" ? String(c["#text"]) : ""))
    .join("");

function xmlValue(node: XmlNode, depth: number): PlistValue {
  if (depth > 64) throw new ZipFormatError("property list nested too deeply");
  switch (tagOf(node)) {
    case "dict": {
      const out: Record<string, PlistValue> = {};
      const kids = elements(childrenOf(node));
      for (let i = 0; i + 1 < kids.length; i += 2) {
        const key = kids[i]!;
        if (tagOf(key) === "key") out[textOf(key)] = xmlValue(kids[i + 1]!, depth + 1);
      }
      return out;
    }
    case "array":
      return elements(childrenOf(node)).map((n) => xmlValue(n, depth + 1));
    case "string":
      return textOf(node);
    case "integer":
      return Number(textOf(node).trim());
    case "real":
      return Number(textOf(node).trim());
    case "true":
      return true;
    case "false":
      return false;
    case "date":
      return new Date(textOf(node).trim());
    case "data":
      return Uint8Array.from(atob(textOf(node).replace(/\s+/g, "")), (c) => c.charCodeAt(0));
    default:
      return null;
  }
}
