// App archives the metadata tests stand on, made here rather than checked in: zips and property lists (XML and
// bplist00) by small writers below, provisioning profiles as real CMS SignedData made by `openssl cms -sign`,
// CgBI icons by the same recipe Apple's tool follows, and APKs with a binary AndroidManifest.xml and
// resources.arsc from a small encoder of AOSP's ResourceTypes.h formats.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { deflateRawSync, deflateSync, crc32 } from "node:zlib";
import { PNG } from "pngjs";

function withTempDir<T>(fn: (dir: string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), "hangar-fixture-"));
  try {
    return fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface ZipInput {
  name: string;
  data: Uint8Array | string;
  /** Stored rather than deflated. */
  stored?: boolean;
}

/**
 * A zip archive (PKWARE APPNOTE: local headers, central directory, end record), entries in the given order,
 * deflated with zlib unless stored. Written here rather than by a zip tool: spawning one costs seconds on a
 * loaded machine, and python3's zipfile reads these back (checked in the metadata tests).
 */
export function makeZip(entries: ZipInput[]): Uint8Array {
  const locals: Buffer[] = [];
  const central: Buffer[] = [];
  let offset = 0;
  for (const e of entries) {
    const data = typeof e.data === "string" ? Buffer.from(e.data) : Buffer.from(e.data.buffer, e.data.byteOffset, e.data.byteLength);
    const body = e.stored ? data : deflateRawSync(data);
    const name = Buffer.from(e.name, "utf8");
    const crc = crc32(data) >>> 0;
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0x0800, 6); // UTF-8 names
    local.writeUInt16LE(e.stored ? 0 : 8, 8);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(body.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(name.length, 26);
    const dir = Buffer.alloc(46);
    dir.writeUInt32LE(0x02014b50, 0);
    dir.writeUInt16LE(20, 4);
    dir.writeUInt16LE(20, 6);
    dir.writeUInt16LE(0x0800, 8);
    dir.writeUInt16LE(e.stored ? 0 : 8, 10);
    dir.writeUInt32LE(crc, 16);
    dir.writeUInt32LE(body.length, 20);
    dir.writeUInt32LE(data.length, 24);
    dir.writeUInt16LE(name.length, 28);
    dir.writeUInt32LE(offset, 42);
    locals.push(local, name, body);
    central.push(dir, name);
    offset += 30 + name.length + body.length;
  }
  const cd = Buffer.concat(central);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(cd.length, 12);
  end.writeUInt32LE(offset, 16);
  return new Uint8Array(Buffer.concat([...locals, cd, end]));
}

/** A value for makePlist: `{ $date: iso }` is a <date>, `{ $data: base64 }` is <data>. */
type PlistInput = unknown;

const isDate = (v: unknown): v is { $date: string } => typeof v === "object" && v !== null && "$date" in v;
const isData = (v: unknown): v is { $data: string } => typeof v === "object" && v !== null && "$data" in v;
const escapeXml = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** A property list as Xcode writes it: XML, or bplist00 (CFBinaryPList.c layout). */
export function makePlist(value: PlistInput, binary = false): Uint8Array {
  return binary ? binaryPlistOf(value) : new TextEncoder().encode(xmlPlistOf(value));
}

function xmlPlistOf(value: PlistInput): string {
  const out = (v: PlistInput, indent: string): string => {
    if (typeof v === "string") return `${indent}<string>${escapeXml(v)}</string>\n`;
    if (typeof v === "number") return Number.isInteger(v) ? `${indent}<integer>${v}</integer>\n` : `${indent}<real>${v}</real>\n`;
    if (typeof v === "boolean") return `${indent}<${v}/>\n`;
    if (isDate(v)) return `${indent}<date>${new Date(v.$date).toISOString().slice(0, 19)}Z</date>\n`;
    if (isData(v)) return `${indent}<data>${v.$data}</data>\n`;
    if (Array.isArray(v)) return `${indent}<array>\n${v.map((x) => out(x, indent + "\t")).join("")}${indent}</array>\n`;
    if (typeof v === "object" && v !== null) {
      const entries = Object.entries(v).filter(([, x]) => x !== undefined);
      return `${indent}<dict>\n${entries.map(([k, x]) => `${indent}\t<key>${escapeXml(k)}</key>\n${out(x, indent + "\t")}`).join("")}${indent}</dict>\n`;
    }
    throw new Error(`no plist form for ${String(v)}`);
  };
  return (
    '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n<plist version="1.0">\n' +
    out(value, "") +
    "</plist>\n"
  );
}

/** bplist00 with 4-byte offsets and 2-byte references; objects written depth-first, the top one first. */
function binaryPlistOf(value: PlistInput): Uint8Array {
  const objects: Buffer[] = [];
  const lengthMarker = (kind: number, n: number): Buffer => {
    if (n < 15) return Buffer.from([(kind << 4) | n]);
    const b = Buffer.alloc(6);
    b[0] = (kind << 4) | 0xf;
    b[1] = 0x12;
    b.writeUInt32BE(n, 2);
    return b;
  };
  const ref = (n: number) => {
    const b = Buffer.alloc(2);
    b.writeUInt16BE(n);
    return b;
  };
  const add = (v: PlistInput): number => {
    const index = objects.length;
    objects.push(Buffer.alloc(0));
    let bytes: Buffer;
    if (typeof v === "string") {
      // ASCII as 0x5, anything else as UTF-16BE (0x6), as CoreFoundation does.
      if (/^[\x00-\x7f]*$/.test(v)) bytes = Buffer.concat([lengthMarker(5, v.length), Buffer.from(v, "latin1")]);
      else {
        const le = Buffer.from(v, "utf16le");
        for (let i = 0; i < le.length; i += 2) [le[i], le[i + 1]] = [le[i + 1]!, le[i]!];
        bytes = Buffer.concat([lengthMarker(6, le.length / 2), le]);
      }
    } else if (typeof v === "boolean") bytes = Buffer.from([v ? 0x09 : 0x08]);
    else if (typeof v === "number") {
      bytes = Buffer.alloc(9);
      bytes[0] = 0x13;
      bytes.writeBigInt64BE(BigInt(Math.trunc(v)), 1);
    } else if (isDate(v)) {
      bytes = Buffer.alloc(9);
      bytes[0] = 0x33;
      bytes.writeDoubleBE((Date.parse(v.$date) - Date.UTC(2001, 0, 1)) / 1000, 1);
    } else if (isData(v)) {
      const data = Buffer.from(v.$data, "base64");
      bytes = Buffer.concat([lengthMarker(4, data.length), data]);
    } else if (Array.isArray(v)) {
      const refs = v.map(add);
      bytes = Buffer.concat([lengthMarker(0xa, refs.length), ...refs.map(ref)]);
    } else if (typeof v === "object" && v !== null) {
      const entries = Object.entries(v).filter(([, x]) => x !== undefined);
      const keys = entries.map(([k]) => add(k));
      const values = entries.map(([, x]) => add(x));
      bytes = Buffer.concat([lengthMarker(0xd, entries.length), ...keys.map(ref), ...values.map(ref)]);
    } else throw new Error(`no plist form for ${String(v)}`);
    objects[index] = bytes;
    return index;
  };
  add(value);
  const header = Buffer.from("bplist00", "latin1");
  const offsets: number[] = [];
  let at = header.length;
  for (const o of objects) {
    offsets.push(at);
    at += o.length;
  }
  const table = Buffer.alloc(offsets.length * 4);
  offsets.forEach((o, i) => table.writeUInt32BE(o, i * 4));
  const trailer = Buffer.alloc(32);
  trailer[6] = 4;
  trailer[7] = 2;
  trailer.writeBigUInt64BE(BigInt(objects.length), 8);
  trailer.writeBigUInt64BE(0n, 16);
  trailer.writeBigUInt64BE(BigInt(at), 24);
  return new Uint8Array(Buffer.concat([header, ...objects, table, trailer]));
}

// ---------------------------------------------------------------------------------------------------------
// Provisioning profiles

export type ProfileKind = "ad_hoc" | "app_store" | "enterprise" | "development";

export interface ProfileSpec {
  kind: ProfileKind;
  name?: string;
  team?: string;
  /** ISO date; default a year from now. */
  expires?: string;
  devices?: number;
}

/** The profile's plist as Xcode writes it, for the given kind. */
export function profilePlist(spec: ProfileSpec): Record<string, unknown> {
  const devices = Array.from(
    { length: spec.devices ?? (spec.kind === "ad_hoc" || spec.kind === "development" ? 3 : 0) },
    (_, i) => `00008110-${String(i).padStart(16, "0")}`,
  );
  const plist: Record<string, unknown> = {
    AppIDName: "Demo",
    CreationDate: { $date: "2026-01-01T00:00:00Z" },
    ExpirationDate: { $date: spec.expires ?? new Date(Date.now() + 365 * 86400_000).toISOString().slice(0, 19) + "Z" },
    Name: spec.name ?? `Demo ${spec.kind}`,
    TeamName: spec.team ?? "Example Team <Ltd>",
    TeamIdentifier: ["ABCDE12345"],
    UUID: "5b1d1a3c-0000-4000-8000-000000000000",
    Version: 1,
    Entitlements: { "application-identifier": "ABCDE12345.com.example.demo", "get-task-allow": spec.kind === "development" },
  };
  if (spec.kind === "enterprise") plist.ProvisionsAllDevices = true;
  if (spec.kind === "ad_hoc" || spec.kind === "development") plist.ProvisionedDevices = devices;
  return plist;
}

let signer: { dir: string; cert: string; key: string } | null = null;

/** One throwaway signing identity for the whole test process. */
function signingIdentity(): { cert: string; key: string } {
  if (signer) return signer;
  const dir = mkdtempSync(join(tmpdir(), "hangar-signer-"));
  const cert = join(dir, "cert.pem");
  const key = join(dir, "key.pem");
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-keyout",
      key,
      "-out",
      cert,
      "-days",
      "2",
      "-subj",
      "/CN=Hangar Test Profile Signer",
    ],
    { stdio: "ignore" },
  );
  signer = { dir, cert, key };
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  return signer;
}

/** CMS SignedData with `content` embedded, as `openssl cms -sign -nodetach` writes it (DER). */
export function cmsSign(content: Uint8Array, options: { stream?: boolean } = {}): Uint8Array {
  const { cert, key } = signingIdentity();
  return withTempDir((dir) => {
    const input = join(dir, "in");
    const out = join(dir, "out.der");
    writeFileSync(input, content);
    const args = ["cms", "-sign", "-binary", "-nodetach", "-in", input, "-signer", cert, "-inkey", key, "-outform", "DER", "-out", out];
    // -stream writes BER with indefinite lengths and a constructed OCTET STRING, as some signers do.
    if (options.stream) args.push("-stream");
    execFileSync("openssl", args, { stdio: "ignore" });
    return new Uint8Array(readFileSync(out));
  });
}

const profileCache = new Map<string, Uint8Array>();

/** A signed profile; the same spec is signed once per process (openssl is slow to start on a busy machine). */
export function makeProfile(spec: ProfileSpec): Uint8Array {
  const key = JSON.stringify(spec);
  let profile = profileCache.get(key);
  if (!profile) {
    profile = cmsSign(makePlist(profilePlist(spec)));
    profileCache.set(key, profile);
  }
  return profile;
}

// ---------------------------------------------------------------------------------------------------------
// Icons

/** A width×height RGBA picture with gradients and translucent corners: every channel and alpha level varies. */
export function samplePixels(width: number, height: number): Uint8Array {
  const out = new Uint8Array(width * height * 4);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 4;
      out[i] = (x * 255) / (width - 1);
      out[i + 1] = (y * 255) / (height - 1);
      out[i + 2] = ((x + y) * 37) & 0xff;
      // Opaque in the middle, fading to transparent towards the left edge, fully transparent in one corner.
      out[i + 3] = x < width / 4 ? Math.round((x * 255) / (width / 4)) : 255;
      if (x < 2 && y < 2) out[i + 3] = 0;
    }
  }
  return out;
}

/** A standard PNG of RGBA pixels (pngjs). */
export function encodePng(width: number, height: number, rgba: Uint8Array): Uint8Array {
  const png = new PNG({ width, height });
  png.data = Buffer.from(rgba);
  return new Uint8Array(PNG.sync.write(png));
}

export function decodePng(bytes: Uint8Array): { width: number; height: number; data: Uint8Array } {
  const png = PNG.sync.read(Buffer.from(bytes));
  return { width: png.width, height: png.height, data: new Uint8Array(png.data) };
}

function pngChunk(type: string, data: Uint8Array): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, "latin1");
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])) >>> 0, 0);
  return Buffer.concat([head, data, crc]);
}

/**
 * The CgBI form of RGBA pixels, as Xcode's pngcrush writes it: a CgBI chunk first, BGRA with premultiplied
 * alpha, rows filtered (each of the five filters in turn, so restoring must undo all of them), IDAT as raw
 * deflate without the zlib wrapper.
 */
export function encodeCgbi(width: number, height: number, rgba: Uint8Array): Uint8Array {
  const stride = width * 4;
  const pixels = new Uint8Array(height * stride);
  for (let i = 0; i < width * height; i++) {
    const a = rgba[i * 4 + 3]!;
    const pre = (c: number) => Math.round((c * a) / 255);
    pixels[i * 4] = pre(rgba[i * 4 + 2]!);
    pixels[i * 4 + 1] = pre(rgba[i * 4 + 1]!);
    pixels[i * 4 + 2] = pre(rgba[i * 4]!);
    pixels[i * 4 + 3] = a;
  }
  const raw = new Uint8Array(height * (stride + 1));
  for (let y = 0; y < height; y++) {
    const filter = y % 5;
    raw[y * (stride + 1)] = filter;
    for (let x = 0; x < stride; x++) {
      const cur = pixels[y * stride + x]!;
      const left = x >= 4 ? pixels[y * stride + x - 4]! : 0;
      const up = y > 0 ? pixels[(y - 1) * stride + x]! : 0;
      const upLeft = y > 0 && x >= 4 ? pixels[(y - 1) * stride + x - 4]! : 0;
      const paeth = () => {
        const p = left + up - upLeft;
        const pa = Math.abs(p - left);
        const pb = Math.abs(p - up);
        const pc = Math.abs(p - upLeft);
        return pa <= pb && pa <= pc ? left : pb <= pc ? up : upLeft;
      };
      const predictor = [0, left, up, (left + up) >> 1, paeth()][filter]!;
      raw[y * (stride + 1) + 1 + x] = (cur - predictor) & 0xff;
    }
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 6, 0, 0, 0], 8);
  const idat = deflateRawSync(raw);
  // Split IDAT in two: the restorer must join them.
  const half = Math.floor(idat.length / 2);
  return new Uint8Array(
    Buffer.concat([
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
      pngChunk("CgBI", Uint8Array.from([0x50, 0x00, 0x20, 0x06])),
      pngChunk("IHDR", ihdr),
      pngChunk("IDAT", idat.subarray(0, half)),
      pngChunk("IDAT", idat.subarray(half)),
      pngChunk("IEND", new Uint8Array(0)),
    ]),
  );
}

export { deflateSync };

// ---------------------------------------------------------------------------------------------------------
// IPAs

export interface IpaSpec {
  info: Record<string, unknown> | null;
  binaryPlist?: boolean;
  appName?: string;
  profile?: Uint8Array | null;
  /** Icon files by name inside the .app (e.g. AppIcon60x60@2x.png). */
  icons?: Record<string, Uint8Array>;
  /** Incompressible filler stored uncompressed (bytes), so reading the whole archive would show. */
  fillerBytes?: number;
  extra?: ZipInput[];
}

export const DEMO_INFO = {
  CFBundleIdentifier: "com.example.demo",
  CFBundleShortVersionString: "2.3",
  CFBundleVersion: "45",
  CFBundleDisplayName: "Demo <b>App</b>",
  CFBundleName: "Demo",
  MinimumOSVersion: "15.0",
  CFBundleIcons: { CFBundlePrimaryIcon: { CFBundleIconFiles: ["AppIcon60x60"], CFBundleIconName: "AppIcon" } },
};

export function makeIpaArchive(spec: IpaSpec): Uint8Array {
  const app = `Payload/${spec.appName ?? "Demo"}.app/`;
  const entries: ZipInput[] = [];
  if (spec.fillerBytes) entries.push({ name: `${app}Frameworks/filler.bin`, data: randomBytes(spec.fillerBytes), stored: true });
  if (spec.info) entries.push({ name: `${app}Info.plist`, data: makePlist(spec.info, spec.binaryPlist) });
  if (spec.profile) entries.push({ name: `${app}embedded.mobileprovision`, data: spec.profile });
  for (const [name, data] of Object.entries(spec.icons ?? {})) entries.push({ name: `${app}${name}`, data, stored: true });
  entries.push({ name: `${app}Watch/W.app/Info.plist`, data: makePlist({ CFBundleIdentifier: "wrong.nested" }) });
  entries.push(...(spec.extra ?? []));
  return makeZip(entries);
}

export function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i += 65536) crypto.getRandomValues(out.subarray(i, Math.min(n, i + 65536)));
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// APKs: binary XML and resource table encoders (AOSP ResourceTypes.h)

class Bytes {
  private parts: Buffer[] = [];
  u8(v: number) {
    this.parts.push(Buffer.from([v & 0xff]));
    return this;
  }
  u16(v: number) {
    const b = Buffer.alloc(2);
    b.writeUInt16LE(v);
    this.parts.push(b);
    return this;
  }
  u32(v: number) {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v >>> 0);
    this.parts.push(b);
    return this;
  }
  raw(b: Uint8Array) {
    this.parts.push(Buffer.from(b));
    return this;
  }
  get length() {
    return this.parts.reduce((n, p) => n + p.length, 0);
  }
  done() {
    return Buffer.concat(this.parts);
  }
}

function chunk(type: number, header: Buffer, body: Buffer): Buffer {
  const head = new Bytes()
    .u16(type)
    .u16(8 + header.length)
    .u32(8 + header.length + body.length)
    .done();
  return Buffer.concat([head, header, body]);
}

/** A string pool chunk, UTF-16 (the manifest's usual form) or UTF-8 (aapt2's for resources.arsc). */
function stringPool(strings: string[], utf8: boolean): Buffer {
  const data: Buffer[] = [];
  const offsets: number[] = [];
  let at = 0;
  for (const s of strings) {
    offsets.push(at);
    let b: Buffer;
    if (utf8) {
      const enc = Buffer.from(s, "utf8");
      const len = (n: number) => (n > 0x7f ? Buffer.from([0x80 | (n >> 8), n & 0xff]) : Buffer.from([n]));
      b = Buffer.concat([len(s.length), len(enc.length), enc, Buffer.from([0])]);
    } else {
      const enc = Buffer.from(s, "utf16le");
      b = Buffer.concat([new Bytes().u16(s.length).done(), enc, Buffer.from([0, 0])]);
    }
    data.push(b);
    at += b.length;
  }
  let body = Buffer.concat([Buffer.concat(offsets.map((o) => new Bytes().u32(o).done())), ...data]);
  while (body.length % 4) body = Buffer.concat([body, Buffer.from([0])]);
  const header = new Bytes()
    .u32(strings.length)
    .u32(0)
    .u32(utf8 ? 0x100 : 0)
    .u32(28 + strings.length * 4)
    .u32(0)
    .done();
  return chunk(0x0001, header, body);
}

export interface AttrSpec {
  name: string;
  /** android.R.attr id, for android: attributes. */
  id?: number;
  value: { string: string } | { int: number } | { ref: number };
}

export interface ElementSpec {
  name: string;
  attrs: AttrSpec[];
  children?: ElementSpec[];
}

const ANDROID_NS = "http://schemas.android.com/apk/res/android";

/** A binary AndroidManifest.xml for an element tree. */
export function encodeBinaryXml(root: ElementSpec): Uint8Array {
  // Attribute names with resource ids come first, in the order of the resource map.
  const withIds: AttrSpec[] = [];
  const walk = (e: ElementSpec) => {
    for (const a of e.attrs) if (a.id !== undefined && !withIds.some((w) => w.id === a.id)) withIds.push(a);
    e.children?.forEach(walk);
  };
  walk(root);
  const strings: string[] = withIds.map((a) => a.name);
  const index = (s: string) => {
    let i = strings.indexOf(s);
    if (i < 0) {
      strings.push(s);
      i = strings.length - 1;
    }
    return i;
  };
  index("android");
  index(ANDROID_NS);
  const nodes: Buffer[] = [];
  const nodeHeader = () => new Bytes().u32(1).u32(0xffffffff).done();
  nodes.push(chunk(0x0100, nodeHeader(), new Bytes().u32(index("android")).u32(index(ANDROID_NS)).done()));
  const emit = (e: ElementSpec) => {
    const attrs = new Bytes();
    for (const a of e.attrs) {
      const ns = a.id !== undefined ? index(ANDROID_NS) : 0xffffffff;
      const name = a.id !== undefined ? withIds.findIndex((w) => w.id === a.id) : index(a.name);
      let raw = 0xffffffff;
      let type: number;
      let data: number;
      if ("string" in a.value) {
        raw = index(a.value.string);
        type = 0x03;
        data = raw;
      } else if ("int" in a.value) {
        type = 0x10;
        data = a.value.int;
      } else {
        type = 0x01;
        data = a.value.ref;
      }
      attrs.u32(ns).u32(name).u32(raw).u16(8).u8(0).u8(type).u32(data);
    }
    const ext = new Bytes().u32(0xffffffff).u32(index(e.name)).u16(20).u16(20).u16(e.attrs.length).u16(0).u16(0).u16(0).raw(attrs.done()).done();
    nodes.push(chunk(0x0102, nodeHeader(), ext));
    e.children?.forEach(emit);
    nodes.push(chunk(0x0103, nodeHeader(), new Bytes().u32(0xffffffff).u32(index(e.name)).done()));
  };
  emit(root);
  nodes.push(chunk(0x0101, nodeHeader(), new Bytes().u32(index("android")).u32(index(ANDROID_NS)).done()));
  const pool = stringPool(strings, false);
  const resourceMap = chunk(0x0180, Buffer.alloc(0), Buffer.concat(withIds.map((a) => new Bytes().u32(a.id!).done())));
  return new Uint8Array(chunk(0x0003, Buffer.alloc(0), Buffer.concat([pool, resourceMap, ...nodes])));
}

export interface ResourceValue {
  /** Density (0 = default, 480 = xxhdpi, 640 = xxxhdpi, 0xFFFF = anydpi). */
  density?: number;
  /** Two-letter language, "" for the default. */
  language?: string;
  string: string;
}

export interface ResourceTypeSpec {
  name: string;
  /** Entries in id order: each a list of per-configuration values. */
  entries: Array<{ key: string; values: ResourceValue[] }>;
}

/**
 * A resources.arsc for package id 0x7f: each type's entries get ids 0x7fTTEEEE (types numbered from 1 in
 * order), one type chunk per distinct (density, language) configuration.
 */
export function encodeResourceTable(packageName: string, types: ResourceTypeSpec[]): Uint8Array {
  const globalStrings: string[] = [];
  const gIndex = (s: string) => {
    let i = globalStrings.indexOf(s);
    if (i < 0) {
      globalStrings.push(s);
      i = globalStrings.length - 1;
    }
    return i;
  };
  const keyStrings = [...new Set(types.flatMap((t) => t.entries.map((e) => e.key)))];
  const typeChunks: Buffer[] = [];
  types.forEach((type, ti) => {
    const typeId = ti + 1;
    const count = type.entries.length;
    typeChunks.push(chunk(0x0202, new Bytes().u8(typeId).u8(0).u16(0).u32(count).done(), Buffer.alloc(count * 4)));
    const configs = new Map<string, { density: number; language: string }>();
    for (const e of type.entries)
      for (const v of e.values) configs.set(`${v.density ?? 0}/${v.language ?? ""}`, { density: v.density ?? 0, language: v.language ?? "" });
    for (const config of configs.values()) {
      const offsets = new Bytes();
      const entries = new Bytes();
      for (const e of type.entries) {
        const v = e.values.find((x) => (x.density ?? 0) === config.density && (x.language ?? "") === config.language);
        if (!v) {
          offsets.u32(0xffffffff);
          continue;
        }
        offsets.u32(entries.length);
        entries.u16(8).u16(0).u32(keyStrings.indexOf(e.key)).u16(8).u8(0).u8(0x03).u32(gIndex(v.string));
      }
      // ResTable_config, 64 bytes: size, mcc/mnc, language/country, orientation/touchscreen/density, …
      const cfg = Buffer.alloc(64);
      cfg.writeUInt32LE(64, 0);
      if (config.language) cfg.write(config.language, 8, "latin1");
      cfg.writeUInt16LE(config.density, 14);
      const offsetBytes = offsets.done();
      const headerLen = 8 + 12 + 64;
      const header = new Bytes()
        .u8(typeId)
        .u8(0)
        .u16(0)
        .u32(count)
        .u32(headerLen + offsetBytes.length)
        .raw(cfg)
        .done();
      typeChunks.push(chunk(0x0201, header, Buffer.concat([offsetBytes, entries.done()])));
    }
  });
  const typePool = stringPool(
    types.map((t) => t.name),
    true,
  );
  const keyPool = stringPool(keyStrings, true);
  const name = Buffer.alloc(256);
  name.write(packageName.slice(0, 127), 0, "utf16le");
  const pkgHeaderLen = 8 + 4 + 256 + 16 + 4;
  const pkgHeader = new Bytes()
    .u32(0x7f)
    .raw(name)
    .u32(pkgHeaderLen)
    .u32(types.length)
    .u32(pkgHeaderLen + typePool.length)
    .u32(keyStrings.length)
    .u32(0)
    .done();
  const pkg = chunk(0x0200, pkgHeader, Buffer.concat([typePool, keyPool, ...typeChunks]));
  const pool = stringPool(globalStrings, true);
  return new Uint8Array(chunk(0x0002, new Bytes().u32(1).done(), Buffer.concat([pool, pkg])));
}

export const ATTR = { label: 0x01010001, icon: 0x01010002, minSdkVersion: 0x0101020c, versionCode: 0x0101021b, versionName: 0x0101021c };

export interface ApkSpec {
  packageName?: string;
  versionCode?: number;
  versionName?: string;
  minSdk?: number;
  label?: string;
  /** PNG per density; the launcher icon resource points at all of them. */
  icons?: Array<{ density: number; png: Uint8Array }>;
  fillerBytes?: number;
}

/**
 * An APK: AndroidManifest.xml (binary) whose label and icon are references into resources.arsc (a default
 * and a German label; icon PNGs at several densities plus an adaptive-icon XML at anydpi).
 */
export function makeApk(spec: ApkSpec = {}): Uint8Array {
  const icons = spec.icons ?? [];
  const types: ResourceTypeSpec[] = [
    {
      name: "string",
      entries: [{ key: "app_name", values: [{ string: spec.label ?? "Demo Android" }, { language: "de", string: "Demo auf Deutsch" }] }],
    },
    {
      name: "mipmap",
      entries: [
        {
          key: "ic_launcher",
          values: [
            ...icons.map((i) => ({ density: i.density, string: `res/mipmap-${i.density}/ic_launcher.png` })),
            { density: 0xffff, string: "res/mipmap-anydpi-v26/ic_launcher.xml" },
          ],
        },
      ],
    },
  ];
  const manifest = encodeBinaryXml({
    name: "manifest",
    attrs: [
      { name: "versionCode", id: ATTR.versionCode, value: { int: spec.versionCode ?? 112 } },
      { name: "versionName", id: ATTR.versionName, value: { string: spec.versionName ?? "2.3.1" } },
      { name: "package", value: { string: spec.packageName ?? "com.example.demo" } },
    ],
    children: [
      { name: "uses-sdk", attrs: [{ name: "minSdkVersion", id: ATTR.minSdkVersion, value: { int: spec.minSdk ?? 24 } }] },
      {
        name: "application",
        attrs: [
          { name: "label", id: ATTR.label, value: { ref: 0x7f010000 } },
          { name: "icon", id: ATTR.icon, value: { ref: 0x7f020000 } },
        ],
        children: [{ name: "activity", attrs: [{ name: "name", value: { string: ".Main" } }] }],
      },
    ],
  });
  const entries: ZipInput[] = [{ name: "AndroidManifest.xml", data: manifest }];
  if (spec.fillerBytes) entries.push({ name: "assets/filler.bin", data: randomBytes(spec.fillerBytes), stored: true });
  entries.push({ name: "resources.arsc", data: encodeResourceTable(spec.packageName ?? "com.example.demo", types), stored: true });
  for (const i of icons) entries.push({ name: `res/mipmap-${i.density}/ic_launcher.png`, data: i.png, stored: true });
  entries.push({ name: "res/mipmap-anydpi-v26/ic_launcher.xml", data: encodeBinaryXml({ name: "adaptive-icon", attrs: [] }) });
  entries.push({ name: "classes.dex", data: randomBytes(1024) });
  return makeZip(entries);
}
