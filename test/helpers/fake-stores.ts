// Local stand-ins for App Store Connect (Build Uploads, beta groups, beta build localizations) and Google Play
// (OAuth token endpoint, edits, media and resumable uploads), written from the documented request shapes. They verify every JWT with the
// public key of the key the test made, record each request and the uploaded bytes, and fail on demand.
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { importSPKI, jwtVerify } from "jose";

export interface RecordedRequest {
  method: string;
  path: string;
  auth: string | null;
  body: string;
  /** The Content-Range of a resumable upload's PUT. */
  contentRange?: string;
}

export interface Failure {
  /** `METHOD /path-prefix` */
  match: string;
  status: number;
  body: unknown;
  /** How many requests it answers (default 1). */
  times?: number;
}

export interface FakeStores {
  url: string;
  requests: RecordedRequest[];
  /** Bytes of each App Store Connect upload file, in the order its ranges arrived, and of each Play upload. */
  ascUploaded: Buffer[];
  playUploaded: Buffer[];
  committedChecksum: string | null;
  groupsAdded: string[];
  whatToTest: string | null;
  track: unknown;
  commits: number;
  /** Polls that answer PROCESSING before COMPLETE. */
  processingPolls: number;
  failures: Failure[];
  /** Uploads are hashed and counted instead of kept (a benchmark's gigabyte): see `sunk`. */
  sinkUploads?: boolean;
  sunk: Array<{ bytes: number; sha256: string; ms: number }>;
  /**
   * Cuts the connection of the resumable upload PUT during which the session passes `afterBytes` received
   * (once): the bytes up to there are kept, as Google keeps what it received, and the client must resume.
   */
  interruptUpload?: { afterBytes: number };
  /** Resumable upload sessions started. */
  sessionsStarted: number;
  /** Called when an upload range arrives, before it is read (a test can crash the daemon here). */
  onUploadRange?: () => void | Promise<void>;
  close(): Promise<void>;
}

export async function startFakeStores(keys: {
  ascPublicPem: string;
  ascIssuer: string;
  ascKeyId: string;
  googlePublicPem: string;
  googleEmail: string;
}): Promise<FakeStores> {
  const ascKey = await importSPKI(keys.ascPublicPem, "ES256");
  const googleKey = await importSPKI(keys.googlePublicPem, "RS256");
  let base = "";
  const uploads = new Map<string, Buffer[]>();
  /** Resumable sessions: the bytes kept (or only hashed and counted when uploads are sunk). */
  const sessions = new Map<
    string,
    { total: number; received: number; parts: Buffer[]; hash: ReturnType<typeof createHash>; firstByteAt: number | null; done: boolean }
  >();
  let polls = 0;
  const state: FakeStores = {
    url: "",
    requests: [],
    ascUploaded: [],
    playUploaded: [],
    committedChecksum: null,
    groupsAdded: [],
    whatToTest: null,
    track: null,
    commits: 0,
    processingPolls: 1,
    failures: [],
    sunk: [],
    sessionsStarted: 0,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const send = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };
  const readBody = async (req: IncomingMessage) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  };
  const ascAuth = async (auth: string | null) => {
    const token = auth?.replace(/^Bearer /, "") ?? "";
    const { payload, protectedHeader } = await jwtVerify(token, ascKey, {
      audience: "appstoreconnect-v1",
      issuer: keys.ascIssuer,
      algorithms: ["ES256"],
    });
    if (protectedHeader.kid !== keys.ascKeyId) throw new Error("wrong kid");
    if ((payload.exp ?? 0) - (payload.iat ?? 0) > 20 * 60) throw new Error("token lives too long");
  };
  /** How far a session got, as Google answers it: 308 with `Range: bytes=0-N` (none when nothing was kept). */
  const incomplete = (res: ServerResponse, received: number) => {
    res.writeHead(308, received > 0 ? { range: `bytes=0-${received - 1}`, "content-length": "0" } : { "content-length": "0" });
    res.end();
  };
  const finished = (
    res: ServerResponse,
    session: { parts: Buffer[]; hash: ReturnType<typeof createHash>; total: number; firstByteAt: number | null },
  ) => {
    if (state.sinkUploads)
      state.sunk.push({
        bytes: session.total,
        sha256: session.hash.digest("hex"),
        ms: performance.now() - (session.firstByteAt ?? performance.now()),
      });
    else state.playUploaded.push(Buffer.concat(session.parts));
    send(res, 200, { versionCode: 45, sha256: "" });
  };
  const resumablePut = async (req: IncomingMessage, res: ServerResponse, id: string, pathAndQuery: string) => {
    const session = sessions.get(id);
    const range = String(req.headers["content-range"] ?? "");
    state.requests.push({ method: "PUT", path: pathAndQuery, auth: req.headers.authorization ?? null, body: "", contentRange: range });
    const recorded = state.requests.at(-1)!;
    const failure = state.failures.find((f) => `PUT ${pathAndQuery}`.startsWith(f.match));
    if (failure) {
      failure.times = (failure.times ?? 1) - 1;
      if (failure.times <= 0) state.failures.splice(state.failures.indexOf(failure), 1);
      req.resume();
      return send(res, failure.status, failure.body);
    }
    if (!session) {
      req.resume();
      return send(res, 404, { error: { code: 404, status: "NOT_FOUND", message: "no such upload session" } });
    }
    const status = /^bytes \*\/(\d+)$/.exec(range);
    if (status) {
      req.resume();
      if (session.done) return send(res, 200, { versionCode: 45, sha256: "" });
      return incomplete(res, session.received);
    }
    const chunk = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(range);
    if (!chunk || Number(chunk[3]) !== session.total || Number(chunk[1]) !== session.received || Number(chunk[2]) >= session.total) {
      req.resume();
      return send(res, 400, {
        error: { code: 400, status: "INVALID_ARGUMENT", message: `Content-Range ${range} does not continue at byte ${session.received}` },
      });
    }
    const end = Number(chunk[2]) + 1;
    let bytes = 0;
    try {
      for await (const piece of req) {
        let data = piece as Buffer;
        session.firstByteAt ??= performance.now();
        const cut = state.interruptUpload;
        if (cut && session.received + data.length > cut.afterBytes && session.received < cut.afterBytes) {
          data = data.subarray(0, cut.afterBytes - session.received);
          keep(session, data);
          bytes += data.length;
          state.interruptUpload = undefined;
          recorded.body = `<${bytes} bytes, cut off>`;
          req.socket.destroy();
          return;
        }
        keep(session, data);
        bytes += data.length;
      }
    } catch {
      // The client went away mid-chunk: what arrived is kept.
      recorded.body = `<${bytes} bytes, cut off>`;
      return;
    }
    recorded.body = `<${bytes} bytes>`;
    if (session.received !== end) return incomplete(res, session.received);
    if (end < session.total) return incomplete(res, session.received);
    session.done = true;
    return finished(res, session);
  };
  const keep = (session: { received: number; parts: Buffer[]; hash: ReturnType<typeof createHash> }, data: Buffer) => {
    session.received += data.length;
    if (state.sinkUploads) session.hash.update(data);
    else session.parts.push(Buffer.from(data));
  };
  const server: Server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", base);
    const path = url.pathname;
    const method = req.method ?? "GET";
    const isUpload = path.startsWith("/asc-upload/") || path.includes("/upload/androidpublisher/");
    if (isUpload && path.startsWith("/asc-upload/")) await state.onUploadRange?.();
    const sessionId = url.searchParams.get("upload_id");
    if (method === "PUT" && sessionId !== null) return resumablePut(req, res, sessionId, path + url.search);
    if (state.sinkUploads && isUpload && url.searchParams.get("uploadType") !== "resumable") {
      const started = performance.now();
      const hash = createHash("sha256");
      let bytes = 0;
      for await (const chunk of req) {
        hash.update(chunk as Buffer);
        bytes += (chunk as Buffer).length;
      }
      state.sunk.push({ bytes, sha256: hash.digest("hex"), ms: performance.now() - started });
      state.requests.push({ method, path, auth: null, body: `<${bytes} bytes>` });
      if (path.startsWith("/asc-upload/")) {
        res.writeHead(200);
        return res.end();
      }
      return send(res, 200, { versionCode: 45 });
    }
    let raw: Buffer;
    try {
      raw = await readBody(req);
    } catch {
      // The client went away mid-body (a killed daemon): nothing was received.
      return res.destroy();
    }
    const body = isUpload ? `<${raw.length} bytes>` : raw.toString("utf8");
    state.requests.push({ method, path: path + url.search, auth: req.headers.authorization ?? null, body });
    const failure = state.failures.find((f) => `${method} ${path}`.startsWith(f.match));
    if (failure) {
      failure.times = (failure.times ?? 1) - 1;
      if (failure.times <= 0) state.failures.splice(state.failures.indexOf(failure), 1);
      return send(res, failure.status, failure.body);
    }
    try {
      // Google's token endpoint: an RS256 assertion whose aud is this very URL.
      if (method === "POST" && path === "/token") {
        const form = new URLSearchParams(body);
        if (form.get("grant_type") !== "urn:ietf:params:oauth:grant-type:jwt-bearer") return send(res, 400, { error: "unsupported_grant_type" });
        const { payload } = await jwtVerify(form.get("assertion") ?? "", googleKey, {
          audience: `${base}/token`,
          issuer: keys.googleEmail,
          algorithms: ["RS256"],
        });
        if (payload.scope !== "https://www.googleapis.com/auth/androidpublisher") return send(res, 400, { error: "invalid_scope" });
        return send(res, 200, { access_token: "ya29.fake-access-token", token_type: "Bearer", expires_in: 3600 });
      }
      if (path.startsWith("/androidpublisher/") || path.startsWith("/upload/androidpublisher/")) {
        if (req.headers.authorization !== "Bearer ya29.fake-access-token")
          return send(res, 401, { error: { code: 401, status: "UNAUTHENTICATED", message: "bad token" } });
        if (method === "POST" && /\/edits$/.test(path)) return send(res, 200, { id: `edit-${state.commits}-${Date.now()}` });
        if (method === "POST" && /\/edits\/[^/]+\/(bundles|apks)$/.test(path) && url.searchParams.get("uploadType") === "resumable") {
          const total = Number(req.headers["x-upload-content-length"]);
          if (!Number.isInteger(total) || total <= 0)
            return send(res, 400, { error: { code: 400, status: "INVALID_ARGUMENT", message: "X-Upload-Content-Length is required" } });
          const id = `session-${++state.sessionsStarted}`;
          sessions.set(id, { total, received: 0, parts: [], hash: createHash("sha256"), firstByteAt: null, done: false });
          res.writeHead(200, { location: `${base}${path}?uploadType=resumable&upload_id=${id}`, "content-length": "0" });
          return res.end();
        }
        if (method === "POST" && /\/edits\/[^/]+\/(bundles|apks)$/.test(path)) {
          state.playUploaded.push(raw);
          return send(res, 200, { versionCode: 45, sha256: "" });
        }
        if (method === "PUT" && /\/edits\/[^/]+\/tracks\/[^/]+$/.test(path)) {
          state.track = JSON.parse(body);
          return send(res, 200, state.track);
        }
        if (method === "POST" && /\/edits\/[^/]+:commit$/.test(path)) {
          state.commits++;
          return send(res, 200, { id: "committed" });
        }
        return send(res, 404, { error: { code: 404, status: "NOT_FOUND", message: `no route ${path}` } });
      }
      if (path.startsWith("/asc-upload/")) {
        const id = path.split("/")[2]!;
        uploads.set(id, [...(uploads.get(id) ?? []), raw]);
        res.writeHead(200);
        return res.end();
      }
      await ascAuth(req.headers.authorization ?? null);
      if (method === "GET" && path === "/v1/apps")
        return send(res, 200, { data: url.searchParams.get("filter[bundleId]") === "com.example.demo" ? [{ type: "apps", id: "app-1" }] : [] });
      if (method === "POST" && path === "/v1/buildUploads") return send(res, 201, { data: { type: "buildUploads", id: `upload-${uploads.size}` } });
      if (method === "POST" && path === "/v1/buildUploadFiles") {
        const size = JSON.parse(body).data.attributes.fileSize as number;
        const id = `file-${uploads.size + 1}`;
        uploads.set(id, []);
        const half = Math.ceil(size / 2);
        const ops = [
          {
            method: "PUT",
            url: `${base}/asc-upload/${id}/0`,
            offset: 0,
            length: half,
            requestHeaders: [{ name: "Content-Type", value: "application/octet-stream" }],
          },
          {
            method: "PUT",
            url: `${base}/asc-upload/${id}/1`,
            offset: half,
            length: size - half,
            requestHeaders: [{ name: "Content-Type", value: "application/octet-stream" }],
          },
        ];
        return send(res, 201, { data: { type: "buildUploadFiles", id, attributes: { uploadOperations: ops } } });
      }
      if (method === "PATCH" && path.startsWith("/v1/buildUploadFiles/")) {
        const id = path.split("/")[3]!;
        const attrs = JSON.parse(body).data.attributes;
        state.committedChecksum = attrs.sourceFileChecksums.file.hash;
        state.ascUploaded.push(Buffer.concat(uploads.get(id) ?? []));
        return send(res, 200, { data: { type: "buildUploadFiles", id } });
      }
      if (method === "GET" && path.startsWith("/v1/buildUploads/")) {
        polls++;
        const done = polls > state.processingPolls;
        return send(res, 200, {
          data: {
            type: "buildUploads",
            id: path.split("/")[3],
            attributes: { state: { state: done ? "COMPLETE" : "PROCESSING", errors: [] } },
            relationships: { build: { data: done ? { type: "builds", id: "build-1" } : null } },
          },
        });
      }
      if (method === "GET" && path === "/v1/apps/app-1/betaGroups") {
        const name = url.searchParams.get("filter[name]");
        return send(res, 200, { data: name === "QA" || name === "Friends" ? [{ type: "betaGroups", id: `group-${name}` }] : [] });
      }
      if (method === "POST" && path === "/v1/builds/build-1/relationships/betaGroups") {
        state.groupsAdded.push(...JSON.parse(body).data.map((d: { id: string }) => d.id));
        res.writeHead(204);
        return res.end();
      }
      if (method === "POST" && path === "/v1/betaBuildLocalizations") {
        state.whatToTest = JSON.parse(body).data.attributes.whatsNew;
        return send(res, 201, { data: { type: "betaBuildLocalizations", id: "loc-1" } });
      }
      return send(res, 404, { errors: [{ status: "404", code: "NOT_FOUND", title: "not found", detail: path }] });
    } catch (err) {
      return send(res, 401, {
        errors: [{ status: "401", code: "NOT_AUTHORIZED", title: "Authentication credentials are missing or invalid.", detail: String(err) }],
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.url = base;
  return state;
}
