// App icons (docs/api.md §7). An IPA's icons are usually Apple's "CgBI" PNGs: a CgBI chunk before IHDR, IDAT
// holding raw deflate (no zlib header), pixels in BGRA order with premultiplied alpha. No browser shows those,
// so they are restored to a standard PNG: RGBA, straight alpha, zlib-compressed. A standard PNG is checked and
// kept as it is. Web-standard only (DecompressionStream / CompressionStream), bounded in memory.
import { concatBytes } from "../common/bytes.ts";
import { inflateRaw } from "./ipa-metadata.ts";

/** The largest icon kept: App Store icons are 1024×1024. */
const MAX_PIXELS = 2048 * 2048;
/** A stored icon is at most this large (a 1024×1024 PNG is well under it). */
export const MAX_ICON_BYTES = 4 * 1024 * 1024;

const SIGNATURE = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

export class PngFormatError extends Error {}

interface Chunk {
  type: string;
  data: Uint8Array;
}

function chunksOf(bytes: Uint8Array): Chunk[] {
  if (bytes.length < 8 || !SIGNATURE.every((b, i) => bytes[i] === b)) throw new PngFormatError("not a PNG");
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: Chunk[] = [];
  let at = 8;
  while (at + 12 <= bytes.length) {
    const length = dv.getUint32(at);
    if (at + 12 + length > bytes.length) throw new PngFormatError("PNG chunk runs past the end");
    const type = String.fromCharCode(...bytes.subarray(at + 4, at + 8));
    out.push({ type, data: bytes.subarray(at + 8, at + 8 + length) });
    at += 12 + length;
    if (type === "IEND") break;
  }
  return out;
}

interface Header {
  width: number;
  height: number;
  bitDepth: number;
  colorType: number;
  interlace: number;
}

function headerOf(chunks: Chunk[]): Header {
  const ihdr = chunks.find((c) => c.type === "IHDR");
  if (!ihdr || ihdr.data.length !== 13) throw new PngFormatError("PNG without IHDR");
  const dv = new DataView(ihdr.data.buffer, ihdr.data.byteOffset, 13);
  const header = { width: dv.getUint32(0), height: dv.getUint32(4), bitDepth: dv.getUint8(8), colorType: dv.getUint8(9), interlace: dv.getUint8(12) };
  if (header.width === 0 || header.height === 0 || header.width * header.height > MAX_PIXELS) throw new PngFormatError("PNG dimensions out of range");
  return header;
}

/**
 * A browser-ready PNG from an icon file: a CgBI PNG restored, a standard one checked and returned as is.
 * Throws PngFormatError for anything else (not a PNG, truncated, too large, a CgBI variant not understood).
 */
export async function normalizeIconPng(bytes: Uint8Array): Promise<Uint8Array> {
  if (bytes.length > MAX_ICON_BYTES) throw new PngFormatError("icon too large");
  const chunks = chunksOf(bytes);
  const isCgbi = chunks[0]?.type === "CgBI";
  const header = headerOf(chunks);
  if (!chunks.some((c) => c.type === "IEND") || !chunks.some((c) => c.type === "IDAT")) throw new PngFormatError("PNG is truncated");
  if (!isCgbi) return bytes;
  return restoreCgbi(chunks, header);
}

async function restoreCgbi(chunks: Chunk[], header: Header): Promise<Uint8Array> {
  const { width, height, bitDepth, colorType, interlace } = header;
  // Apple's tool writes 8-bit RGBA (6) or RGB (2), never interlaced; anything else is not worth guessing at.
  if (bitDepth !== 8 || (colorType !== 6 && colorType !== 2) || interlace !== 0) throw new PngFormatError("CgBI variant not supported");
  const channels = colorType === 6 ? 4 : 3;
  const stride = width * channels;
  const expected = height * (stride + 1);
  const idat = concatBytes(chunks.filter((c) => c.type === "IDAT").map((c) => c.data));
  const raw = await inflateRaw(idat, expected);
  if (raw.length !== expected) throw new PngFormatError("CgBI image data has the wrong size");
  const pixels = unfilter(raw, height, stride, channels);
  // BGRA → RGBA, premultiplied → straight alpha.
  const out = new Uint8Array(height * (width * 4 + 1));
  for (let y = 0; y < height; y++) {
    const row = y * (width * 4 + 1);
    out[row] = 0; // filter: None
    for (let x = 0; x < width; x++) {
      const i = y * stride + x * channels;
      const o = row + 1 + x * 4;
      const a = channels === 4 ? pixels[i + 3]! : 255;
      const b = pixels[i]!;
      const g = pixels[i + 1]!;
      const r = pixels[i + 2]!;
      if (a === 0) {
        out[o] = out[o + 1] = out[o + 2] = out[o + 3] = 0;
      } else if (a === 255) {
        out[o] = r;
        out[o + 1] = g;
        out[o + 2] = b;
        out[o + 3] = 255;
      } else {
        out[o] = Math.min(255, Math.round((r * 255) / a));
        out[o + 1] = Math.min(255, Math.round((g * 255) / a));
        out[o + 2] = Math.min(255, Math.round((b * 255) / a));
        out[o + 3] = a;
      }
    }
  }
  const ihdr = new Uint8Array(13);
  const dv = new DataView(ihdr.buffer);
  dv.setUint32(0, width);
  dv.setUint32(4, height);
  ihdr.set([8, 6, 0, 0, 0], 8);
  return concatBytes([SIGNATURE, chunk("IHDR", ihdr), chunk("IDAT", await deflate(out)), chunk("IEND", new Uint8Array(0))]);
}

/** PNG scanline filters (None, Sub, Up, Average, Paeth) undone in place into a pixel buffer. */
function unfilter(raw: Uint8Array, height: number, stride: number, bpp: number): Uint8Array {
  const out = new Uint8Array(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!;
    const src = y * (stride + 1) + 1;
    const dst = y * stride;
    const prev = dst - stride;
    for (let x = 0; x < stride; x++) {
      const left = x >= bpp ? out[dst + x - bpp]! : 0;
      const up = y > 0 ? out[prev + x]! : 0;
      const upLeft = y > 0 && x >= bpp ? out[prev + x - bpp]! : 0;
      let predictor: number;
      switch (filter) {
        case 0:
          predictor = 0;
          break;
        case 1:
          predictor = left;
          break;
        case 2:
          predictor = up;
          break;
        case 3:
          predictor = (left + up) >> 1;
          break;
        case 4: {
          const p = left + up - upLeft;
          const pa = Math.abs(p - left);
          const pb = Math.abs(p - up);
          const pc = Math.abs(p - upLeft);
          predictor = pa <= pb && pa <= pc ? left : pb <= pc ? up : upLeft;
          break;
        }
        default:
          throw new PngFormatError(`unknown PNG filter ${filter}`);
      }
      out[dst + x] = (raw[src + x]! + predictor) & 0xff;
    }
  }
  return out;
}

async function deflate(data: Uint8Array): Promise<Uint8Array> {
  const stream = new Blob([data]).stream().pipeThrough(new CompressionStream("deflate"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

function chunk(type: string, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(12 + data.length);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, data.length);
  for (let i = 0; i < 4; i++) out[4 + i] = type.charCodeAt(i);
  out.set(data, 8);
  dv.setUint32(8 + data.length, crc32(out.subarray(4, 8 + data.length)));
  return out;
}

let crcTable: Uint32Array | null = null;
function crc32(bytes: Uint8Array): number {
  if (!crcTable) {
    crcTable = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      crcTable[n] = c >>> 0;
    }
  }
  let crc = 0xffffffff;
  for (const b of bytes) crc = crcTable[(crc ^ b) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}
