// Artifact upload (docs/api.md §7): create → PUT the bytes to the returned URL → complete, abort when it fails.
// Files are streamed from disk (hashing too), so a 2 GB IPA costs no more memory than a 2 KB text file.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { basename, extname, join } from "node:path";
import { pipeline } from "node:stream/promises";
import type { ArtifactCreated, ArtifactKind, CreateArtifactBody, UploadTarget } from "../../protocol/runner.ts";
import { DaemonError, type RetryPolicy, type RunnerClient, backoffDelay, sleep } from "./client.ts";

const CONTENT_TYPES: Record<string, string> = {
  ".apk": "application/vnd.android.package-archive",
  ".aab": "application/octet-stream",
  ".ipa": "application/octet-stream",
  ".zip": "application/zip",
  ".gz": "application/gzip",
  ".tgz": "application/gzip",
  ".json": "application/json",
  ".xml": "application/xml",
  ".txt": "text/plain; charset=utf-8",
  ".log": "text/plain; charset=utf-8",
  ".html": "text/html; charset=utf-8",
  ".pdf": "application/pdf",
  ".png": "image/png",
  ".jpg": "image/jpeg",
};

export function contentTypeFor(filename: string): string {
  return CONTENT_TYPES[extname(filename).toLowerCase()] ?? "application/octet-stream";
}

/** The artifact's name: the file's base name, with control characters (refused by the daemon) replaced. */
export function artifactName(relPath: string): string {
  // eslint-disable-next-line no-control-regex -- control characters are exactly what must go
  return basename(relPath).replace(/[\u0000-\u001f\u007f\\]/g, "_");
}

async function sha256File(path: string): Promise<string> {
  const hash = createHash("sha256");
  await pipeline(createReadStream(path), hash);
  return hash.digest("hex");
}

/** Streams a file as the body of one PUT; answers the status and (short) body. Shared caches upload with it too. */
export function putFile(
  url: URL,
  method: string,
  headers: Record<string, string>,
  path: string,
  size: number,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const send = url.protocol === "https:" ? httpsRequest : httpRequest;
    const req = send(url, { method, headers: { ...headers, "content-length": String(size) } }, (res: IncomingMessage) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => {
        if (body.length < 4096) body += d;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      res.on("error", reject);
    });
    req.setTimeout(120_000, () => req.destroy(new Error("upload stalled for 120 s")));
    req.on("error", reject);
    const file = createReadStream(path);
    file.on("error", (err) => req.destroy(err));
    file.pipe(req);
  });
}

export interface UploadReport {
  uploaded: string[];
  failed: Array<{ file: string; reason: string }>;
}

/** Uploads each file (paths relative to `root`); `say` writes to the build log. */
export async function uploadArtifacts(
  client: RunnerClient,
  jobId: string,
  root: string,
  files: string[],
  say: (line: string) => void,
  retry: RetryPolicy,
  /** `junit` for test reports (the daemon parses them); plain files otherwise. */
  kind: ArtifactKind = "file",
): Promise<UploadReport> {
  const report: UploadReport = { uploaded: [], failed: [] };
  for (const rel of files) {
    try {
      await uploadOne(client, jobId, join(root, rel), artifactName(rel), say, retry, kind);
      report.uploaded.push(rel);
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      say(`hangar: artifact ${rel} was not uploaded: ${reason}`);
      report.failed.push({ file: rel, reason });
    }
  }
  return report;
}

const ATTEMPTS = 3;

async function uploadOne(
  client: RunnerClient,
  jobId: string,
  path: string,
  filename: string,
  say: (line: string) => void,
  retry: RetryPolicy,
  kind: ArtifactKind,
): Promise<void> {
  const { size } = await stat(path);
  const sha256 = await sha256File(path);
  const contentType = contentTypeFor(filename);
  say(`hangar: uploading ${filename} (${size} bytes, sha256 ${sha256})`);
  let lastError = "";
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    // `kind` only when it is not the default, so a runner still talks to a daemon that predates test reports.
    const declared: CreateArtifactBody = { filename, size_bytes: size, content_type: contentType, sha256, ...(kind === "junit" ? { kind } : {}) };
    const created = await client.ok("POST", client.jobPath(jobId, "/artifacts"), { json: declared, retry });
    const body = created.body as Partial<ArtifactCreated>;
    const artifactId = body.artifact?.id;
    const upload = body.upload;
    if (!artifactId || !upload?.url) throw new Error("the daemon's create-artifact answer has no artifact id or upload URL");
    const artifactPath = client.jobPath(jobId, `/artifacts/${encodeURIComponent(artifactId)}`);
    try {
      await putWithRetries(new URL(upload.url, `${client.baseUrl}/`), upload, path, size);
      const done = await client.call("POST", `${artifactPath}/complete`, { retry });
      if (done.status >= 200 && done.status < 300) {
        say(`hangar: uploaded ${filename}`);
        return;
      }
      const code = (done.body as { code?: string } | null)?.code ?? `http_${done.status}`;
      throw new DaemonError(done.status, code, `complete answered ${done.status} ${code}`);
    } catch (err) {
      lastError = err instanceof Error ? err.message : String(err);
      await abortArtifact(client, artifactPath, retry);
      // Another go helps only after a network failure, a lapsed upload token or an incomplete upload.
      if (err instanceof DaemonError && !retryable(err)) throw err;
    }
    await sleep(backoffDelay(attempt + 2), retry.signal);
    if (retry.signal?.aborted) break;
  }
  throw new Error(lastError || "upload failed");
}

function retryable(err: DaemonError): boolean {
  return err.status >= 500 || err.status === 408 || err.status === 429 || err.status === 410 || err.code === "upload_incomplete";
}

/** PUT with a few retries of the same URL: a connection dropped mid-body leaves the (unused) token valid. */
async function putWithRetries(url: URL, upload: UploadTarget, path: string, size: number): Promise<void> {
  let last: Error = new Error("upload failed");
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    try {
      const res = await putFile(url, upload.method || "PUT", upload.headers ?? {}, path, size);
      if (res.status >= 200 && res.status < 300) return;
      let code = `http_${res.status}`;
      try {
        code = (JSON.parse(res.body) as { code?: string }).code ?? code;
      } catch {
        // S3 answers XML; the status is enough
      }
      last = new DaemonError(res.status, code, `upload answered ${res.status} ${code}`);
      if (res.status < 500 && res.status !== 408 && res.status !== 429) throw last;
    } catch (err) {
      if (err instanceof DaemonError && err.status < 500 && err.status !== 408 && err.status !== 429) throw err;
      last = err instanceof Error ? err : new Error(String(err));
    }
    await sleep(backoffDelay(attempt + 1));
  }
  throw last;
}

async function abortArtifact(client: RunnerClient, artifactPath: string, retry: RetryPolicy): Promise<void> {
  try {
    await client.call("POST", `${artifactPath}/abort`, { retry: { ...retry, attempts: 5 } });
  } catch {
    // Best effort: the daemon sweeps pending artifacts of finished builds anyway.
  }
}
