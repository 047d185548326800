/**
 * Reads a body stream whole, up to `maxBytes`: a declared length over the cap is refused before reading, and the
 * stream is counted as it arrives, so a body that lies about its length is cut off rather than buffered.
 * `tooLarge` makes the error each caller answers with (a 413 for requests, a plain failure for answers we fetched).
 */
export async function readStreamCapped(
  body: ReadableStream<Uint8Array> | null,
  declaredLength: string | null,
  maxBytes: number,
  tooLarge: () => Error,
): Promise<Uint8Array> {
  const declared = Number(declaredLength ?? "NaN");
  if (Number.isFinite(declared) && declared > maxBytes) throw tooLarge();
  if (!body) return new Uint8Array(0);
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge();
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}

/** Reads a body stream whole, with no cap (for bodies already bounded by whoever made them). */
export function readStreamWhole(body: ReadableStream<Uint8Array> | null): Promise<Uint8Array> {
  return readStreamCapped(body, null, Number.POSITIVE_INFINITY, () => new RangeError("no cap to exceed"));
}
