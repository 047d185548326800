// The Node listener's own edges. Requests that never reach the app are answered like every other error, with
// a JSON `{code, message}` body (CONTRACT §2) instead of Node's and @hono/node-server's empty 400s; and the
// timeouts fit multi-GiB uploads.
import type { Server } from "node:http";
import type { Duplex } from "node:stream";

const errorJson = (code: string, message: string): string => JSON.stringify({ code, message });

/**
 * `errorHandler` for @hono/node-server's getRequestListener. It runs only when no Request could be built
 * (a Host header that is not a host, a malformed absolute-form target): the app itself answers everything else.
 */
export function requestErrorResponse(err: unknown): Response {
  const malformed = err instanceof Error && err.name === "RequestError";
  return new Response(
    malformed ? errorJson("invalid_input", "the request target or Host header is malformed") : errorJson("internal_error", "internal error"),
    { status: malformed ? 400 : 500, headers: { "content-type": "application/json", "cache-control": "no-store" } },
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
 * Malformed HTTP (request smuggling attempts, bad chunks, control bytes, oversized headers): Node's default
 * `clientError` behaviour with a JSON body. Like Node, it answers only while no response has started on the
 * socket, and always closes the connection.
 */
export function answerClientErrorsWithJson(server: Server): void {
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex) => {
    // `_httpMessage` is the response in flight on this socket, the field Node's own handler checks.
    const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
    if (err.code === "ECONNRESET" || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const [status, reason, code, message] = clientErrorStatus(err.code);
    const body = errorJson(code, message);
    // Closed once written, whatever the peer does (Node's default destroys the socket too).
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Cache-Control: no-store\r\nConnection: close\r\n\r\n${body}`,
      () => socket.destroy(),
    );
  });
}

/** A connection with no byte moving either way for this long is closed (longer than a 30 s long-poll claim). */
export const IDLE_TIMEOUT_MS = 120_000;

/**
 * Node's default `requestTimeout` (300 s for the WHOLE request, body included) cuts off any upload slower than
 * that: a 2 GiB IPA over 50 Mbit/s takes about six minutes. Uploads may take as long as they keep moving;
 * a connection that stops moving is closed after `idleMs`, and `headersTimeout` (60 s) still bounds the headers.
 */
export function setServerTimeouts(server: Server, idleMs = IDLE_TIMEOUT_MS): void {
  server.requestTimeout = 0;
  server.setTimeout(idleMs);
}
