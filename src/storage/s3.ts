// S3-compatible artifact store (AWS S3, Cloudflare R2 with region "auto", MinIO, ...) through aws4fetch.
// Web-standard only (fetch, Web Crypto), so the Workers entry can use it as it is. Runners upload with a
// presigned PUT, the daemon confirms with a HEAD, and downloads are presigned GETs that carry the
// Content-Disposition to answer with (`response-content-disposition`).
import { AwsClient } from "aws4fetch";
import type { ArtifactStore, ByteRange, StoreTarget } from "./types.ts";

type S3Target = Extract<StoreTarget, { provider: "s3" | "r2" }>;

export interface S3StoreOptions {
  fetch: typeof fetch;
  /** Epoch seconds, from the app's clock: signatures are dated with it. */
  now: () => number;
}

/** SigV4's timestamp format, e.g. 20260102T030405Z. */
export function amzDate(epochSeconds: number): string {
  return new Date(epochSeconds * 1000).toISOString().replace(/[:-]|\.\d{3}/g, "");
}

export function createS3Store(target: S3Target, options: S3StoreOptions): ArtifactStore {
  const client = new AwsClient({
    accessKeyId: target.accessKeyId,
    secretAccessKey: target.secretAccessKey,
    service: "s3",
    region: target.region,
    // Retries are the caller's business; a presign never fetches.
    retries: 0,
  });
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
    const signed = await client.sign(url.toString(), { method, aws: { signQuery: true, datetime: amzDate(now) } });
    return signed.url;
  };

  const send = async (method: string, key: string, headers: Record<string, string> = {}): Promise<Response> => {
    const signed = await client.sign(objectUrl(key).toString(), { method, headers, aws: { datetime: amzDate(options.now()) } });
    return options.fetch(signed);
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
      const res = await send("GET", key, range ? rangeHeader(range) : {});
      if (!res.ok || !res.body) throw await failure(res, "GET");
      return res.body;
    },

    async readRange(key, range) {
      const res = await send("GET", key, rangeHeader(range));
      if (!res.ok) throw await failure(res, "GET");
      const bytes = new Uint8Array(await res.arrayBuffer());
      // A server that ignores Range answers 200 with everything: keep only what was asked for.
      return res.status === 206 ? bytes : bytes.subarray(range.start, range.end + 1);
    },

    async remove(key) {
      const res = await send("DELETE", key);
      if (!res.ok && res.status !== 404) throw await failure(res, "DELETE");
      await res.body?.cancel();
    },
  };
}
