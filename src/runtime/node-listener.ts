// The daemon's `node:http` request listener: Node's request in, the app's answer out (issue 16).
//
// It replaces @hono/node-server's getRequestListener in `hangar serve` (the embedder export keeps that one). The
// request handed to the app is a light object with the `Request` members Hono and the app read (method, url,
// headers, signal, body and its readers); anything else builds a real undici Request on demand. Together with
// fetch-lite.ts no request needs Node's bundled undici, and node:http2 (which @hono/node-server imports to tell
// HTTP/2 requests apart) is never loaded: the daemon only speaks HTTP/1.1.
//
// The rules kept from @hono/node-server: the request target and Host header are checked the same way (a
// RequestError goes to `errorHandler`, which answers JSON); a body left unread is drained after the answer (at
// most 64 MiB for 500 ms) so the connection can be reused; the request's signal aborts when the client goes away
// before the answer is finished; an answer without a Content-Type is sent as text/plain; text and bytes get a
// Content-Length, streams are written as they come with the socket's backpressure.
import type { IncomingMessage, ServerResponse } from "node:http";
import { readStreamWhole } from "../domain/common/streams.ts";
import { isBlob, isStream, LiteHeaders, LiteResponse, type LiteBody } from "./fetch-lite.ts";

export interface NodeBindings {
  incoming: IncomingMessage;
  outgoing: ServerResponse;
}

type FetchCallback = (request: Request, env: NodeBindings) => Response | Promise<Response>;

export interface ListenerOptions {
  /** The host name for requests without a Host header (the listening address). */
  hostname?: string;
  /** The answer when no request could be made of what arrived (a malformed target or Host header). */
  errorHandler: (err: unknown) => Response | Promise<Response>;
  /** Told of an answer that failed after it started (a stream that threw): the daemon logs it as JSON. */
  onResponseError?: (err: Error) => void;
}

/** What arrived could not become a request (the name the error handler looks for). */
export class RequestError extends Error {
  override name = "RequestError";
}

const DRAIN_TIMEOUT_MS = 500;
const MAX_DRAIN_BYTES = 64 * 1024 * 1024;

const draining = new WeakSet<IncomingMessage>();

/** Reads the rest of a body nobody read, so the connection can carry the next request; gives up on a flood. */
function drainIncoming(incoming: IncomingMessage): void {
  if (incoming.destroyed || incoming.readableEnded || draining.has(incoming)) return;
  draining.add(incoming);
  let bytesRead = 0;
  const cleanup = () => {
    clearTimeout(timer);
    incoming.off("data", onData);
    incoming.off("end", cleanup);
    incoming.off("error", cleanup);
  };
  const forceClose = () => {
    cleanup();
    if (!incoming.socket.destroyed) incoming.socket.destroySoon();
  };
  const timer = setTimeout(forceClose, DRAIN_TIMEOUT_MS);
  timer.unref();
  const onData = (chunk: Buffer) => {
    bytesRead += chunk.length;
    if (bytesRead > MAX_DRAIN_BYTES) forceClose();
  };
  incoming.on("data", onData);
  incoming.on("end", cleanup);
  incoming.on("error", cleanup);
  incoming.resume();
}

/** A backslash in the path (before any query) is refused: some servers read it as a slash. */
function validateRequestTarget(target: string): void {
  const backslash = target.indexOf("\\");
  if (backslash === -1) return;
  const query = target.indexOf("?");
  if (query === -1 || backslash < query) throw new RequestError("Backslash in request path");
}

/** The request's absolute URL, from its target and Host header (as @hono/node-server builds it). */
function requestUrl(incoming: IncomingMessage, defaultHostname: string | undefined): string {
  const target = incoming.url ?? "";
  if (target[0] !== "/" && (target.startsWith("http://") || target.startsWith("https://"))) {
    validateRequestTarget(target);
    try {
      return new URL(target).href;
    } catch (e) {
      throw new RequestError("Invalid absolute URL", { cause: e });
    }
  }
  const host = incoming.headers.host || defaultHostname;
  if (!host) throw new RequestError("Missing host header");
  const scheme = (incoming.socket as { encrypted?: boolean }).encrypted ? "https" : "http";
  validateRequestTarget(target);
  let url: URL;
  try {
    url = new URL(`${scheme}://${host}${target}`);
  } catch (e) {
    throw new RequestError("Invalid request target", { cause: e });
  }
  if (url.hostname.length !== host.length && url.hostname !== host.replace(/:\d+$/, "")) {
    throw new RequestError("Invalid host header");
  }
  return url.href;
}

const decoder = new TextDecoder();

/**
 * The request as the app sees it. The members Hono and the app use are its own; the rest of `Request` (cache,
 * mode, clone()…) comes from a real Request made on first use, which then also owns the body.
 */
class NodeRequest {
  readonly method: string;
  readonly url: string;
  #incoming: IncomingMessage;
  #headers: LiteHeaders | undefined;
  #abort: AbortController | undefined;
  #body: ReadableStream<Uint8Array> | null | undefined;
  #bodyUsed = false;
  #real: Request | undefined;

  constructor(incoming: IncomingMessage, url: string) {
    this.#incoming = incoming;
    this.method = incoming.method || "GET";
    this.url = url;
  }

  get headers(): LiteHeaders {
    return (this.#headers ??= LiteHeaders.fromRaw(this.#incoming.rawHeaders));
  }

  get signal(): AbortSignal {
    return (this.#abort ??= new AbortController()).signal;
  }

  /** Called when the connection closes: the signal aborts unless the answer was finished. */
  connectionClosed(outgoing: ServerResponse): void {
    if (!this.#abort) return;
    if (this.#incoming.errored) this.#abort.abort(String(this.#incoming.errored));
    else if (!outgoing.writableFinished) this.#abort.abort("Client connection prematurely closed.");
  }

  get body(): ReadableStream<Uint8Array> | null {
    if (this.#body !== undefined) return this.#body;
    if (this.method === "GET" || this.method === "HEAD") return (this.#body = null);
    // Pulled a chunk at a time from the socket (no buffering ahead of the reader).
    const chunks = this.#incoming.iterator({ destroyOnReturn: false });
    this.#body = new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          const { done, value } = await chunks.next();
          if (done) controller.close();
          else controller.enqueue(value as Uint8Array);
        },
        async cancel() {
          await chunks.return?.();
        },
      },
      { highWaterMark: 0 },
    );
    return this.#body;
  }

  get bodyUsed(): boolean {
    return this.#bodyUsed || (this.#body?.locked ?? false) || (this.#real?.bodyUsed ?? false);
  }

  async bytes(): Promise<Uint8Array> {
    if (this.#real) return new Uint8Array(await this.#real.arrayBuffer());
    // No body (GET, HEAD) reads as empty as often as asked, as with the platform's Request.
    if (this.method === "GET" || this.method === "HEAD") return new Uint8Array(0);
    if (this.bodyUsed) throw new TypeError("Body is unusable: Body has already been read");
    this.#bodyUsed = true;
    if (this.#body) return readStreamWhole(this.#body);
    // Straight from the socket when nobody asked for `body`: no Web stream (the JSON routes' usual case).
    const chunks: Buffer[] = [];
    for await (const chunk of this.#incoming.iterator({ destroyOnReturn: false })) chunks.push(chunk as Buffer);
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  }
  async arrayBuffer(): Promise<ArrayBuffer> {
    const b = await this.bytes();
    return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
  }
  async text(): Promise<string> {
    return decoder.decode(await this.bytes());
  }
  async json(): Promise<unknown> {
    return JSON.parse(await this.text());
  }
  async blob(): Promise<Blob> {
    return new Blob([await this.bytes()], { type: this.headers.get("content-type") ?? "" });
  }
  async formData(): Promise<FormData> {
    return this.platformRequest().formData();
  }
  clone(): Request {
    return this.platformRequest().clone();
  }

  /** A platform Request for what this one does not do itself; it takes over the body. */
  platformRequest(): Request {
    if (this.#real) return this.#real;
    if (this.bodyUsed) throw new TypeError("Body is unusable: Body has already been read");
    const body = this.body;
    this.#bodyUsed = true;
    const init: RequestInit & { duplex?: "half" } = { method: this.method, headers: [...this.headers], signal: this.signal };
    if (body) {
      init.body = body;
      init.duplex = "half";
    }
    return (this.#real = new Request(this.url, init));
  }

  get [Symbol.toStringTag](): string {
    return "Request";
  }
}

for (const key of ["cache", "credentials", "destination", "integrity", "keepalive", "mode", "redirect", "referrer", "referrerPolicy"] as const) {
  Object.defineProperty(NodeRequest.prototype, key, {
    get(this: NodeRequest) {
      return this.platformRequest()[key];
    },
  });
}

/** The answer's headers as `writeHead` takes them, with the default Content-Type. */
function nodeHeaders(headers: Record<string, string | string[]> | LiteHeaders | Headers | null): Record<string, string | string[]> {
  let out: Record<string, string | string[]>;
  if (headers === null) out = {};
  else if (LiteHeaders.isLite(headers)) out = headers.toNodeHeaders();
  else if (typeof (headers as Headers).forEach === "function" && typeof (headers as Headers).get === "function") {
    // A platform Headers (an answer the app passed through from fetch).
    const h = headers as Headers;
    out = {};
    for (const [k, v] of h) if (k !== "set-cookie") out[k] = v;
    const cookies = h.getSetCookie();
    if (cookies.length > 0) out["set-cookie"] = cookies;
  } else out = { ...(headers as Record<string, string | string[]>) };
  let hasType = false;
  for (const k in out) {
    if (k.length === 12 && k.toLowerCase() === "content-type") {
      hasType = true;
      break;
    }
  }
  if (!hasType) out["content-type"] = "text/plain; charset=UTF-8";
  return out;
}

function hasContentLength(headers: Record<string, string | string[]>): boolean {
  for (const k in headers) if (k.length === 14 && k.toLowerCase() === "content-length") return true;
  return false;
}

/** Writes a stream to the socket, waiting for it to drain; stops reading when the client goes away. */
async function writeStream(stream: ReadableStream<Uint8Array>, outgoing: ServerResponse): Promise<void> {
  if (stream.locked) throw new TypeError("ReadableStream is locked.");
  if (outgoing.destroyed) {
    await stream.cancel().catch(() => {});
    return;
  }
  const reader = stream.getReader();
  let gone = false;
  const cancel = (error?: unknown) => {
    gone = true;
    reader.cancel(error).catch(() => {});
  };
  outgoing.on("close", cancel);
  outgoing.on("error", cancel);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (gone) return;
      if (!outgoing.write(value)) {
        await new Promise<void>((resolve) => {
          const resume = () => {
            outgoing.off("drain", resume);
            outgoing.off("close", resume);
            resolve();
          };
          outgoing.on("drain", resume);
          outgoing.on("close", resume);
        });
        if (gone || outgoing.destroyed) return;
      }
    }
    outgoing.end();
  } catch (err) {
    // The client leaving cancels the read; anything else is the answer failing (responseFailed).
    if (!gone) throw err;
  } finally {
    outgoing.off("close", cancel);
    outgoing.off("error", cancel);
  }
}

async function writeBody(status: number, headers: Record<string, string | string[]>, body: LiteBody, outgoing: ServerResponse): Promise<void> {
  if (typeof body === "string") {
    if (!hasContentLength(headers)) headers["content-length"] = String(Buffer.byteLength(body));
    outgoing.writeHead(status, headers);
    outgoing.end(body);
  } else if (body instanceof Uint8Array) {
    if (!hasContentLength(headers)) headers["content-length"] = String(body.byteLength);
    outgoing.writeHead(status, headers);
    outgoing.end(body);
  } else if (isStream(body)) {
    outgoing.writeHead(status, headers);
    // The headers go out now: a long stream (an SSE feed, a download) shows its status at once.
    outgoing.flushHeaders();
    await writeStream(body, outgoing);
  } else if (body === null) {
    outgoing.writeHead(status, headers);
    outgoing.end();
  } else {
    // A Blob.
    if (!hasContentLength(headers)) headers["content-length"] = String(body.size);
    outgoing.writeHead(status, headers);
    outgoing.end(new Uint8Array(await body.arrayBuffer()));
  }
}

async function writeResponse(res: Response | LiteResponse, outgoing: ServerResponse): Promise<void> {
  if (res instanceof LiteResponse && "takeForWriting" in res) {
    const [status, headers, body] = res.takeForWriting();
    return writeBody(status, nodeHeaders(headers), body, outgoing);
  }
  const real = res as Response;
  return writeBody(real.status, nodeHeaders(real.headers), real.body as ReadableStream<Uint8Array> | null, outgoing);
}

/**
 * An answer that failed: reported (as JSON on the daemon's stderr). Before its headers went out the client gets a
 * JSON 500. After, it cannot be corrected, only cut off: the connection is closed once what was written has been
 * flushed, without the final chunk, so the client sees an incomplete answer (a download can resume with a Range)
 * rather than one that looks complete with an error text at its end.
 */
function responseFailed(err: unknown, outgoing: ServerResponse, report: (err: Error) => void): void {
  const e = err instanceof Error ? err : new Error("unknown error", { cause: err });
  if ((e as NodeJS.ErrnoException).code === "ERR_STREAM_PREMATURE_CLOSE") return;
  report(e);
  if (!outgoing.headersSent) {
    outgoing.writeHead(500, { "content-type": "application/json", "cache-control": "no-store" });
    outgoing.end(JSON.stringify({ code: "internal_error", message: "internal error" }));
    return;
  }
  const socket = outgoing.socket;
  if (socket && !socket.destroyed) socket.end(() => socket.destroy());
  else outgoing.destroy();
}

export function createNodeListener(fetchCallback: FetchCallback, options: ListenerOptions) {
  const report = options.onResponseError ?? ((err: Error) => console.error(err));
  return async (incoming: IncomingMessage, outgoing: ServerResponse): Promise<void> => {
    let req: NodeRequest | undefined;
    let res: Response | LiteResponse;
    try {
      req = new NodeRequest(incoming, requestUrl(incoming, options.hostname));
      const request = req;
      const hasBody = !(incoming.method === "GET" || incoming.method === "HEAD");
      if (hasBody) outgoing.on("finish", () => drainIncoming(incoming));
      outgoing.on("close", () => {
        request.connectionClosed(outgoing);
        if (hasBody) setTimeout(() => drainIncoming(incoming));
      });
      res = await fetchCallback(req as unknown as Request, { incoming, outgoing });
    } catch (err) {
      try {
        res = await options.errorHandler(req ? err : err instanceof RequestError ? err : new RequestError((err as Error)?.message ?? "bad request", { cause: err }));
      } catch (e) {
        return responseFailed(e, outgoing, report);
      }
    }
    try {
      await writeResponse(res, outgoing);
    } catch (err) {
      responseFailed(err, outgoing, report);
    }
  };
}
