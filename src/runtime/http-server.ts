// The daemon's `node:http` server: what happens before a request reaches the listener (node-listener.ts) and
// how long a client may take. Requests that never reach the app are answered like every other error, with a
// JSON `{code, message}` body instead of Node's empty 400s. Time limits (docs/decisions.md, "HTTP adapter"):
// headers must arrive within `headersTimeoutMs` (20 s) and a body within `bodyTimeoutMs` (60 s), else 408 (or the
// connection closed when an answer has started); an artifact upload may take as long as it keeps moving.
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";

const errorJson = (code: string, message: string): string => JSON.stringify({ code, message });

/** A complete HTTP/1.1 answer written straight to the socket, which is closed once it is flushed. */
function endSocketWithJson(socket: Duplex, status: number, reason: string, code: string, message: string): void {
  const body = errorJson(code, message);
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `Cache-Control: no-store\r\nConnection: close\r\n\r\n${body}`,
    () => socket.destroy(),
  );
}

/** Node's HTTP parser errors and their status, as Node's own default answer maps them. */
function clientErrorStatus(code: string | undefined): [number, string, string, string] {
  if (code === "HPE_HEADER_OVERFLOW") return [431, "Request Header Fields Too Large", "payload_too_large", "the request headers are too large"];
  if (code === "HPE_CHUNK_EXTENSIONS_OVERFLOW") return [413, "Payload Too Large", "payload_too_large", "the chunk extensions are too large"];
  if (code === "ERR_HTTP_REQUEST_TIMEOUT") return [408, "Request Timeout", "invalid_input", "the request took too long to arrive"];
  return [400, "Bad Request", "invalid_input", "the request is not valid HTTP"];
}

/**
 * Malformed HTTP (request smuggling attempts, bad chunks, control bytes, oversized headers, headers too slow):
 * Node's default `clientError` behaviour with a JSON body. Like Node, it answers only while no response has
 * started on the socket, and always closes the connection.
 */
function answerClientErrorsWithJson(server: Server): void {
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex) => {
    // `_httpMessage` is the response in flight on this socket, the field Node's own handler checks.
    const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
    if (err.code === "ECONNRESET" || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    endSocketWithJson(socket, ...clientErrorStatus(err.code));
  });
}

/** The one route whose body may take longer than the body time-out: artifact bytes, up to 4 GiB. */
const UPLOAD_PATH = "/v1/artifacts/local-upload/";

/**
 * The body must have arrived `ms` after the headers. An upload gets `ms` more each time bytes moved in the last
 * `ms` (a 2 GiB IPA over 50 Mbit/s takes about six minutes; its URL's token is the credential, so only a runner
 * can hold one open). On expiry: a JSON 408 if no answer has started, else the connection is closed.
 */
function enforceBodyDeadline(incoming: IncomingMessage, outgoing: ServerResponse, ms: number): void {
  if (incoming.complete) return;
  const socket = incoming.socket;
  const isUpload = incoming.url?.startsWith(UPLOAD_PATH) ?? false;
  let bytesSeen = socket.bytesRead;
  const check = () => {
    if (incoming.complete || socket.destroyed) return;
    if (isUpload && socket.bytesRead > bytesSeen) {
      bytesSeen = socket.bytesRead;
      timer = setTimeout(check, ms);
      timer.unref();
      return;
    }
    if (outgoing.headersSent) socket.destroy();
    else endSocketWithJson(socket, 408, "Request Timeout", "invalid_input", "the request body took too long to arrive");
  };
  let timer = setTimeout(check, ms);
  timer.unref();
  outgoing.once("close", () => clearTimeout(timer));
}

export interface HttpServerLimits {
  /** The request line and headers must arrive within this (Node's `headersTimeout`). */
  headersTimeoutMs: number;
  /** The body must arrive within this after the headers (artifact uploads: while it keeps moving). */
  bodyTimeoutMs: number;
  /** A connection with no byte moving either way for this long is closed (longer than a 30 s long-poll claim). */
  idleTimeoutMs?: number;
}

export const IDLE_TIMEOUT_MS = 120_000;

/** A `node:http` server for `listener` with the daemon's error answers and time limits. */
export function createHttpServer(listener: RequestListener, limits: HttpServerLimits): Server {
  const server = createServer({
    headersTimeout: limits.headersTimeoutMs,
    // Node's whole-request limit would cut off long uploads: the body deadline above replaces it.
    requestTimeout: 0,
    // How often Node looks for connections over `headersTimeout` (30 s by default, longer than the limit).
    connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(limits.headersTimeoutMs / 4))),
  });
  server.on("request", (incoming: IncomingMessage, outgoing: ServerResponse) => enforceBodyDeadline(incoming, outgoing, limits.bodyTimeoutMs));
  server.on("request", listener);
  answerClientErrorsWithJson(server);
  server.setTimeout(limits.idleTimeoutMs ?? IDLE_TIMEOUT_MS);
  return server;
}
