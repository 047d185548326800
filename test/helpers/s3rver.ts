// A real S3 API on loopback for the artifact tests: s3rver behind a middleware that checks every SigV4
// signature. s3rver 3.7.1 checks the key id and the expiry but not the signature itself (a known limitation of s3rver),
// so each request's signature is recomputed here with AWS's own signer (@smithy/signature-v4), an
// implementation independent of aws4fetch, and a mismatch is refused with 403 SignatureDoesNotMatch.
import { createHash, createHmac, timingSafeEqual, type Hash, type Hmac } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SignatureV4 } from "@smithy/signature-v4";
import S3rver from "s3rver";

export const S3_ACCESS_KEY_ID = "S3RVER";
export const S3_SECRET_ACCESS_KEY = "S3RVER";

/** node:crypto as the signer's SHA-256 / HMAC-SHA-256 constructor. */
class NodeSha256 {
  private hash: Hash | Hmac;
  constructor(private readonly secret?: string | ArrayBuffer | ArrayBufferView) {
    this.hash = this.fresh();
  }
  private fresh(): Hash | Hmac {
    if (this.secret === undefined) return createHash("sha256");
    const key =
      typeof this.secret === "string"
        ? this.secret
        : ArrayBuffer.isView(this.secret)
          ? Buffer.from(this.secret.buffer, this.secret.byteOffset, this.secret.byteLength)
          : Buffer.from(this.secret);
    return createHmac("sha256", key);
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.hash.update(
      typeof data === "string" ? data : ArrayBuffer.isView(data) ? Buffer.from(data.buffer, data.byteOffset, data.byteLength) : Buffer.from(data),
    );
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }
  reset(): void {
    this.hash = this.fresh();
  }
}

export interface TestS3 {
  /** The endpoint to configure (path-style): http://127.0.0.1:PORT */
  endpoint: string;
  bucket: string;
  /** Every request's method, path and whether its signature verified. */
  requests: Array<{ method: string; path: string; verified: boolean }>;
  close(): Promise<void>;
}

const parseDate = (amz: string): Date =>
  new Date(`${amz.slice(0, 4)}-${amz.slice(4, 6)}-${amz.slice(6, 8)}T${amz.slice(9, 11)}:${amz.slice(11, 13)}:${amz.slice(13, 15)}Z`);

function sameHex(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/** Recomputes the request's SigV4 signature (query-presigned or Authorization header); true when it matches. */
export async function verifySigV4(req: IncomingMessage, secretAccessKey: string): Promise<boolean> {
  const url = new URL(req.url ?? "/", "http://placeholder");
  const query: Record<string, string> = {};
  for (const [k, v] of url.searchParams) query[k] = v;
  const pick = (names: string[]) => {
    const headers: Record<string, string> = {};
    for (const name of names) {
      const value = req.headers[name];
      if (value === undefined) return null;
      headers[name] = Array.isArray(value) ? value.join(",") : value;
    }
    return headers;
  };
  const [hostname, port] = (req.headers.host ?? "").split(":");
  const base = {
    method: req.method ?? "GET",
    protocol: "http:",
    hostname: hostname ?? "",
    port: port ? Number(port) : undefined,
    path: url.pathname,
  };

  if (query["X-Amz-Signature"]) {
    const given = query["X-Amz-Signature"];
    const [accessKeyId, , region, service] = (query["X-Amz-Credential"] ?? "").split("/");
    const signedHeaders = (query["X-Amz-SignedHeaders"] ?? "").split(";");
    const headers = pick(signedHeaders);
    if (!headers || !accessKeyId || !region || !service) return false;
    const signer = new SignatureV4({ service, region, credentials: { accessKeyId, secretAccessKey }, sha256: NodeSha256, uriEscapePath: false });
    const signingDate = parseDate(query["X-Amz-Date"] ?? "");
    const rest = { ...query };
    delete rest["X-Amz-Signature"];
    // Presigned S3 URLs sign an unsigned payload; the marker header is neither signed nor hoisted.
    const marker = new Set(["x-amz-content-sha256"]);
    const presigned = await signer.presign(
      { ...base, query: rest, headers: { ...headers, "x-amz-content-sha256": "UNSIGNED-PAYLOAD" } },
      { signingDate, expiresIn: Number(query["X-Amz-Expires"]), unsignableHeaders: marker, unhoistableHeaders: marker },
    );
    const expected = presigned.query?.["X-Amz-Signature"];
    if (typeof expected !== "string" || !sameHex(expected, given)) return false;
    return signingDate.getTime() + Number(query["X-Amz-Expires"]) * 1000 > Date.now();
  }

  const auth = req.headers.authorization ?? "";
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/\d{8}\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]+)$/.exec(auth);
  if (!m) return false;
  const [, accessKeyId, region, service, signedList, given] = m as unknown as [string, string, string, string, string, string];
  const headers = pick(signedList.split(";"));
  if (!headers) return false;
  const signer = new SignatureV4({ service, region, credentials: { accessKeyId, secretAccessKey }, sha256: NodeSha256, uriEscapePath: false });
  const signed = await signer.sign({ ...base, query, headers }, { signingDate: parseDate(String(req.headers["x-amz-date"] ?? "")) });
  const expected = /Signature=([0-9a-f]+)$/.exec(String(signed.headers.authorization ?? signed.headers.Authorization ?? ""))?.[1];
  return expected !== undefined && sameHex(expected, given);
}

/** Starts s3rver with one bucket, behind the verifying middleware, on 127.0.0.1 and a free port. */
export async function startTestS3(bucket = "hangar-artifacts"): Promise<TestS3> {
  const directory = mkdtempSync(join(tmpdir(), "hangar-s3-"));
  const s3 = new S3rver({ silent: true, directory, configureBuckets: [{ name: bucket, configs: [] }] });
  await s3.configureBuckets();
  const handle = s3.callback();
  const requests: TestS3["requests"] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    verifySigV4(req, S3_SECRET_ACCESS_KEY)
      .catch(() => false)
      .then((verified) => {
        requests.push({ method: req.method ?? "", path: new URL(req.url ?? "/", "http://x").pathname, verified });
        if (verified) return handle(req, res);
        res.writeHead(403, { "content-type": "application/xml" });
        res.end('<?xml version="1.0" encoding="UTF-8"?><Error><Code>SignatureDoesNotMatch</Code></Error>');
        req.resume();
      });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    bucket,
    requests,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

/** The `PUT /v1/settings/artifact-storage` body that points an instance at this S3 server (for tests of a real daemon). */
export function s3StorageSettingsBody(s3: TestS3, prefix = "ci/") {
  return {
    provider: "s3",
    s3: {
      endpoint: s3.endpoint,
      region: "us-east-1",
      bucket: s3.bucket,
      prefix,
      access_key_id: S3_ACCESS_KEY_ID,
      secret_access_key: S3_SECRET_ACCESS_KEY,
      force_path_style: true,
    },
  };
}
