// What an APK says about itself (docs/api.md §7): package, version name and code, minimum SDK, label and launcher
// icon, from the binary AndroidManifest.xml (AXML) and the resource table resources.arsc. Small bounded readers
// of AOSP's ResourceTypes.h formats: every offset is checked against its chunk, strings are decoded only when
// asked for, and references are followed a few levels at most.

export class ResourceFormatError extends Error {}

const RES_STRING_POOL = 0x0001;
const RES_TABLE = 0x0002;
const RES_XML = 0x0003;
const RES_XML_START_ELEMENT = 0x0102;
const RES_XML_RESOURCE_MAP = 0x0180;
const RES_TABLE_PACKAGE = 0x0200;
const RES_TABLE_TYPE = 0x0201;

const TYPE_REFERENCE = 0x01;
const TYPE_STRING = 0x03;
const TYPE_INT_DEC = 0x10;
const TYPE_INT_HEX = 0x11;

/** android:… attribute resource ids (android.R.attr). */
const ATTR = {
  label: 0x01010001,
  icon: 0x01010002,
  minSdkVersion: 0x0101020c,
  versionCode: 0x0101021b,
  versionName: 0x0101021c,
  roundIcon: 0x0101052c,
};

interface Reader {
  bytes: Uint8Array;
  dv: DataView;
}

const readerOf = (bytes: Uint8Array): Reader => ({ bytes, dv: new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength) });

function need(r: Reader, at: number, length: number): void {
  if (at < 0 || at + length > r.bytes.length) throw new ResourceFormatError("resource data runs past the end");
}
const u8 = (r: Reader, at: number) => (need(r, at, 1), r.dv.getUint8(at));
const u16 = (r: Reader, at: number) => (need(r, at, 2), r.dv.getUint16(at, true));
const u32 = (r: Reader, at: number) => (need(r, at, 4), r.dv.getUint32(at, true));

interface ChunkHeader {
  type: number;
  headerSize: number;
  size: number;
  at: number;
}

function chunkAt(r: Reader, at: number, end: number): ChunkHeader {
  const type = u16(r, at);
  const headerSize = u16(r, at + 2);
  const size = u32(r, at + 4);
  if (headerSize < 8 || size < headerSize || at + size > end) throw new ResourceFormatError("resource chunk out of bounds");
  return { type, headerSize, size, at };
}

/** The chunks directly inside [start, end). */
function* chunksIn(r: Reader, start: number, end: number): Generator<ChunkHeader> {
  let at = start;
  while (at + 8 <= end) {
    const chunk = chunkAt(r, at, end);
    yield chunk;
    at += chunk.size;
  }
}

/** A string pool whose strings are decoded on demand. */
class StringPool {
  private readonly count: number;
  private readonly utf8: boolean;
  private readonly stringsStart: number;
  private readonly cache = new Map<number, string>();
  constructor(
    private readonly r: Reader,
    private readonly chunk: ChunkHeader,
  ) {
    this.count = u32(r, chunk.at + 8);
    this.utf8 = (u32(r, chunk.at + 16) & 0x100) !== 0;
    this.stringsStart = chunk.at + u32(r, chunk.at + 20);
    if (chunk.headerSize + this.count * 4 > chunk.size) throw new ResourceFormatError("string pool index out of bounds");
  }

  get(index: number): string | null {
    if (index < 0 || index >= this.count) return null;
    const hit = this.cache.get(index);
    if (hit !== undefined) return hit;
    const end = this.chunk.at + this.chunk.size;
    let at = this.stringsStart + u32(this.r, this.chunk.at + this.chunk.headerSize + index * 4);
    let value: string;
    if (this.utf8) {
      // UTF-16 length (skipped), then UTF-8 byte length, each one or two bytes.
      at += u8(this.r, at) & 0x80 ? 2 : 1;
      let length = u8(this.r, at);
      if (length & 0x80) {
        length = ((length & 0x7f) << 8) | u8(this.r, at + 1);
        at += 2;
      } else at += 1;
      if (at + length > end) throw new ResourceFormatError("string out of bounds");
      value = new TextDecoder().decode(this.r.bytes.subarray(at, at + length));
    } else {
      let length = u16(this.r, at);
      if (length & 0x8000) {
        length = ((length & 0x7fff) << 16) | u16(this.r, at + 2);
        at += 4;
      } else at += 2;
      if (at + length * 2 > end) throw new ResourceFormatError("string out of bounds");
      value = new TextDecoder("utf-16le").decode(this.r.bytes.subarray(at, at + length * 2));
    }
    this.cache.set(index, value);
    return value;
  }
}

/** A typed attribute value (Res_value). */
interface ResValue {
  type: number;
  data: number;
  /** The raw string, when the attribute carries one. */
  raw: string | null;
}

export interface ManifestInfo {
  packageName: string | null;
  versionCode: string | null;
  versionName: ResValue | null;
  minSdk: string | null;
  label: ResValue | null;
  icon: ResValue | null;
}

/** The manifest, uses-sdk and application elements' attributes that matter here. */
export function readBinaryManifest(bytes: Uint8Array): ManifestInfo {
  const r = readerOf(bytes);
  const root = chunkAt(r, 0, bytes.length);
  if (root.type !== RES_XML) throw new ResourceFormatError("not a binary XML document");
  let pool: StringPool | null = null;
  let resourceIds: number[] = [];
  const info: ManifestInfo = { packageName: null, versionCode: null, versionName: null, minSdk: null, label: null, icon: null };
  let roundIcon: ResValue | null = null;
  for (const chunk of chunksIn(r, root.headerSize, root.size)) {
    if (chunk.type === RES_STRING_POOL && !pool) pool = new StringPool(r, chunk);
    else if (chunk.type === RES_XML_RESOURCE_MAP) {
      const n = Math.min((chunk.size - chunk.headerSize) / 4, 65536);
      resourceIds = Array.from({ length: n }, (_, i) => u32(r, chunk.at + chunk.headerSize + i * 4));
    } else if (chunk.type === RES_XML_START_ELEMENT && pool) {
      const ext = chunk.at + chunk.headerSize;
      const element = pool.get(u32(r, ext + 4));
      if (element !== "manifest" && element !== "uses-sdk" && element !== "application") continue;
      const attrStart = u16(r, ext + 8);
      const attrSize = u16(r, ext + 10);
      const attrCount = u16(r, ext + 12);
      if (attrSize < 20) throw new ResourceFormatError("attribute records too small");
      for (let i = 0; i < attrCount; i++) {
        const a = ext + attrStart + i * attrSize;
        if (a + attrSize > chunk.at + chunk.size) throw new ResourceFormatError("attribute out of bounds");
        const nameIndex = u32(r, a + 4);
        const rawIndex = u32(r, a + 8);
        const value: ResValue = { type: u8(r, a + 15), data: u32(r, a + 16), raw: rawIndex === 0xffffffff ? null : pool.get(rawIndex) };
        const id = resourceIds[nameIndex];
        const name = pool.get(nameIndex);
        if (element === "manifest") {
          if (name === "package" && id === undefined) info.packageName = stringOf(value, pool);
          else if (id === ATTR.versionCode || (id === undefined && name === "versionCode")) info.versionCode = intOf(value, pool);
          else if (id === ATTR.versionName || (id === undefined && name === "versionName")) info.versionName = withString(value, pool);
        } else if (element === "uses-sdk") {
          if (id === ATTR.minSdkVersion || (id === undefined && name === "minSdkVersion")) info.minSdk = intOf(value, pool);
        } else if (id === ATTR.label || (id === undefined && name === "label")) info.label = withString(value, pool);
        else if (id === ATTR.icon || (id === undefined && name === "icon")) info.icon = withString(value, pool);
        else if (id === ATTR.roundIcon) roundIcon = withString(value, pool);
      }
    }
  }
  info.icon ??= roundIcon;
  return info;
}

function withString(value: ResValue, pool: StringPool): ResValue {
  return value.type === TYPE_STRING && value.raw === null ? { ...value, raw: pool.get(value.data) } : value;
}
function stringOf(value: ResValue, pool: StringPool): string | null {
  return withString(value, pool).raw ?? (value.type === TYPE_STRING ? pool.get(value.data) : null);
}
function intOf(value: ResValue, pool: StringPool): string | null {
  if (value.type === TYPE_INT_DEC || value.type === TYPE_INT_HEX) return String(value.data);
  const s = stringOf(value, pool);
  return s && /^\d+$/.test(s.trim()) ? s.trim() : s;
}

/** One value of a resource in one configuration. */
interface ConfigValue {
  density: number;
  language: string;
  type: number;
  data: number;
}

/**
 * resources.arsc, read once into an index of (package, type, entry) → the type chunks that hold it, so that a
 * lookup touches only the few chunks of one type.
 */
export class ResourceTable {
  private readonly r: Reader;
  private readonly globalPool: StringPool | null = null;
  /** packageId → typeId → type chunk offsets. */
  private readonly types = new Map<number, Map<number, number[]>>();

  constructor(bytes: Uint8Array) {
    this.r = readerOf(bytes);
    const root = chunkAt(this.r, 0, bytes.length);
    if (root.type !== RES_TABLE) throw new ResourceFormatError("not a resource table");
    for (const chunk of chunksIn(this.r, root.headerSize, root.size)) {
      if (chunk.type === RES_STRING_POOL && !this.globalPool) this.globalPool = new StringPool(this.r, chunk);
      else if (chunk.type === RES_TABLE_PACKAGE) {
        const packageId = u32(this.r, chunk.at + 8);
        const byType = this.types.get(packageId) ?? new Map<number, number[]>();
        this.types.set(packageId, byType);
        for (const inner of chunksIn(this.r, chunk.at + chunk.headerSize, chunk.at + chunk.size)) {
          if (inner.type !== RES_TABLE_TYPE) continue;
          const typeId = u8(this.r, inner.at + 8);
          const list = byType.get(typeId) ?? [];
          list.push(inner.at);
          byType.set(typeId, list);
        }
      }
    }
  }

  /** Every configuration's simple value of resource `id`. */
  values(id: number): ConfigValue[] {
    const chunks = this.types.get(id >>> 24)?.get((id >>> 16) & 0xff) ?? [];
    const entry = id & 0xffff;
    const out: ConfigValue[] = [];
    for (const at of chunks) {
      const chunk = chunkAt(this.r, at, this.r.bytes.length);
      const end = at + chunk.size;
      const flags = u8(this.r, at + 9);
      const entryCount = u32(this.r, at + 12);
      const entriesStart = at + u32(this.r, at + 16);
      const config = at + 20;
      const offsets = at + chunk.headerSize;
      let offset: number | null = null;
      if (flags & 0x01) {
        // Sparse: (entry index, offset / 4) pairs sorted by index.
        for (let i = 0; i < entryCount && offsets + i * 4 + 4 <= end; i++) {
          if (u16(this.r, offsets + i * 4) === entry) {
            offset = u16(this.r, offsets + i * 4 + 2) * 4;
            break;
          }
        }
      } else if (entry < entryCount) {
        if (flags & 0x02) {
          const v = u16(this.r, offsets + entry * 2);
          offset = v === 0xffff ? null : v * 4;
        } else {
          const v = u32(this.r, offsets + entry * 4);
          offset = v === 0xffffffff ? null : v;
        }
      }
      if (offset === null) continue;
      const e = entriesStart + offset;
      if (e + 8 > end) continue;
      const size = u16(this.r, e);
      const entryFlags = u16(this.r, e + 2);
      let type: number;
      let data: number;
      if (entryFlags & 0x08) {
        // Compact entry: the type in the flags' high byte, the data where the key would be.
        type = entryFlags >>> 8;
        data = u32(this.r, e + 4);
      } else {
        if (entryFlags & 0x01) continue; // a bag (style, array), not a simple value
        if (e + size + 8 > end) continue;
        type = u8(this.r, e + size + 3);
        data = u32(this.r, e + size + 4);
      }
      const configSize = u32(this.r, config);
      const language = configSize >= 12 ? String.fromCharCode(u8(this.r, config + 8), u8(this.r, config + 9)).replace(/\0/g, "") : "";
      const density = configSize >= 16 ? u16(this.r, config + 14) : 0;
      out.push({ density, language, type, data });
    }
    return out;
  }

  string(index: number): string | null {
    return this.globalPool?.get(index) ?? null;
  }

  /** A string resource in the default language (else any), references followed a few levels. */
  resolveString(value: ResValue, depth = 0): string | null {
    if (value.type === TYPE_STRING) return value.raw;
    if (value.type !== TYPE_REFERENCE || depth > 4) return null;
    const values = this.values(value.data);
    const pick = values.find((v) => v.language === "") ?? values[0];
    if (!pick) return null;
    if (pick.type === TYPE_STRING) return this.string(pick.data);
    return this.resolveString({ type: pick.type, data: pick.data, raw: null }, depth + 1);
  }

  /** The file paths a drawable resource points at, the densest first (anydpi and nodpi last). */
  resolveFiles(value: ResValue, depth = 0): string[] {
    if (value.type === TYPE_STRING) return value.raw ? [value.raw] : [];
    if (value.type !== TYPE_REFERENCE || depth > 4) return [];
    const rank = (d: number) => (d === 0 ? 160 : d >= 0xfffe ? -1 : d);
    const out: string[] = [];
    for (const v of this.values(value.data).sort((a, b) => rank(b.density) - rank(a.density))) {
      if (v.type === TYPE_STRING) {
        const path = this.string(v.data);
        if (path) out.push(path);
      } else out.push(...this.resolveFiles({ type: v.type, data: v.data, raw: null }, depth + 1));
    }
    return out;
  }
}
