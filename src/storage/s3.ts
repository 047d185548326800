// S3-compatible artifact store (AWS S3, Cloudflare R2 with region "auto", MinIO, ...) through aws4fetch.
// Web-standard only (fetch, Web Crypto), so the Workers entry can use it as it is. Runners upload with a
// presigned PUT, the daemon confirms with a HEAD, and downloads are presigned GETs that carry the
// Content-Disposition to answer with (`response-content-disposition`).
import type { AwsClient } from "aws4fetch";
import type { ArtifactStore, ByteRange, StoreTarget } from "./types.ts";

type S3Target = Extract<StoreTarget, { provider: "s3" | "r2" }>;

export interface S3StoreOptions {
  fetch: typeof fetch;
  /** Epoch seconds, from the app's clock: signatures are dated with it. */
  now: () => number;
  /** How long one call may take (a streamed download: until its headers); 30 s unless a test shortens it. */
  timeoutMs?: number;
}

/** SigV4's timestamp format, e.g. 20260102T030405Z. */
export function amzDate(epochSeconds: number): string {
  return new Date(epochSeconds * 1000).toISOString().replace(/[:-]|\.\d{3}/g, "");
}

export function createS3Store(target: S3Target, options: S3StoreOptions): ArtifactStore {
  // The signer loads with the first S3 request, not at every start of a daemon that may store locally (docs/benchmarks.md).
  let signer: Promise<AwsClient> | undefined;
  const loadSigner = () =>
    (signer ??= import("aws4fetch").then(
      ({ AwsClient }) =>
        new AwsClient({
          accessKeyId: target.accessKeyId,
          secretAccessKey: target.secretAccessKey,
          service: "s3",
          region: target.region,
          // Retries are the caller's business; a presign never fetches.
          retries: 0,
        }),
    ));
  const endpoint = new URL(target.endpoint.replace(/\/+$/, ""));

  const objectUrl = (key: string): URL => {
    const path = key.split("/").map(encodeURIComponent).join("/");
    const base = endpoint.pathname.replace(/\/+$/, "");
    if (target.forcePathStyle) return new URL(`${endpoint.origin}${base}/${encodeURIComponent(target.bucket)}/${path}`);
    return new URL(`${endpoint.protocol}//${target.bucket}.${endpoint.host}${base}/${path}`);
  };

  const presign = async (method: string, key: string, expiresInS: number, query: Record<string, string>, now: number) => {
    const url = objectUrl(key);
    for (const [name, value] of Object.entries(query)) url.searchParams.set(name, value);
    url.searchParams.set("X-Amz-Expires", String(expiresInS));
    const signed = await (await loadSigner()).sign(url.toString(), { method, aws: { signQuery: true, datetime: amzDate(now) } });
    return signed.url;
  };

  const timeoutMs = options.timeoutMs ?? 30_000;
  // Redirects are not followed: a signed request (and the bytes) stay with the configured endpoint; a 3xx is
  // then simply not ok. "manual" rather than "error", which the Workers runtime refuses outright.
  // A hung endpoint fails the call at the deadline instead of holding a request (or the sweeper) forever.
  const send = async (method: string, key: string, headers: Record<string, string> = {}, streamed = false): Promise<Response> => {
    const signed = await (await loadSigner()).sign(objectUrl(key).toString(), { method, headers, aws: { datetime: amzDate(options.now()) } });
    if (!streamed) return options.fetch(new Request(signed, { redirect: "manual", signal: AbortSignal.timeout(timeoutMs) }));
    // A streamed download may rightly outlast any fixed deadline: there it covers the answer's headers only.
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new DOMException(`object store ${method} timed out`, "TimeoutError")), timeoutMs);
    try {
      return await options.fetch(new Request(signed, { redirect: "manual", signal: controller.signal }));
    } finally {
      clearTimeout(timer);
    }
  };

  /** At most `limit` bytes of a body; the rest is cancelled rather than read. */
  const readAtMost = async (body: ReadableStream<Uint8Array> | null, limit: number): Promise<Uint8Array> => {
    const out = new Uint8Array(limit);
    let filled = 0;
    if (!body) return out.subarray(0, 0);
    const reader = body.getReader();
    while (filled < limit) {
      const { done, value } = await reader.read();
      if (done) break;
      const take = Math.min(value.byteLength, limit - filled);
      out.set(value.subarray(0, take), filled);
      filled += take;
    }
    await reader.cancel().catch(() => undefined);
    return out.subarray(0, filled);
  };

  const failure = async (res: Response, what: string): Promise<Error> => {
    await res.body?.cancel();
    // The status only: the body of an S3 error may echo request details.
    return new Error(`object store ${what} failed with HTTP ${res.status}`);
  };

  const rangeHeader = (range: ByteRange) => ({ range: `bytes=${range.start}-${range.end}` });

  return {
    kind: "s3",

    async presignUpload(key, o) {
      return { url: await presign("PUT", key, o.expiresInS, {}, o.now), headers: { "content-type": o.contentType } };
    },

    async presignDownload(key, o) {
      return presign(
        "GET",
        key,
        o.expiresInS,
        { "response-content-disposition": o.contentDisposition, "response-content-type": o.contentType },
        o.now,
      );
    },

    async head(key) {
      const res = await send("HEAD", key);
      if (res.status === 404) return null;
      if (!res.ok) throw await failure(res, "HEAD");
      const length = Number(res.headers.get("content-length"));
      return Number.isFinite(length) ? { sizeBytes: length } : null;
    },

    async read(key, range) {
      const res = await send("GET", key, range ? rangeHeader(range) : {}, true);
      if (!res.ok || !res.body) throw await failure(res, "GET");
      return res.body;
    },

    async readRange(key, range) {
      const res = await send("GET", key, rangeHeader(range));
      if (!res.ok) throw await failure(res, "GET");
      // A server that ignores Range answers 200 with the whole object, which is never buffered: from offset 0
      // its first bytes are the range, from anywhere else it is refused. A 206 is read no further either.
      if (res.status !== 206 && range.start !== 0) {
        await res.body?.cancel();
        throw new Error(`object store GET ignored the byte range (HTTP ${res.status})`);
      }
      return readAtMost(res.body, range.end - range.start + 1);
    },

    async remove(key) {
      const res = await send("DELETE", key);
      if (!res.ok && res.status !== 404) throw await failure(res, "DELETE");
      await res.body?.cancel();
    },
  };
}
