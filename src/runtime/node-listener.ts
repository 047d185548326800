// The `node:http` request listener that serves Hangar: `hangar serve` and embedders (src/index.ts) use this one.
//
// It is @hono/node-server's getRequestListener, as it comes: its Request and Response classes, its body draining,
// its abort signal, its writing of answers (an answer whose stream fails half-way is cut off without the final
// chunk). Two edges are ours, so that every error a client sees is a JSON `{code, message}`
// (docs/decisions.md, "HTTP adapter"):
// - a request that cannot become one (a malformed target or Host header, two Host headers) → 400 invalid_input;
// - an answer whose headers cannot be written (a value with CR or LF) → a JSON 500, logged, never written.
// What the adapter itself prints (a failed stream) reaches stderr as JSON through consoleToLog below.
import type { IncomingMessage, ServerResponse } from "node:http";
import { format } from "node:util";
import { getRequestListener } from "@hono/node-server";
import { createApp } from "../app.ts";
import type { AppDeps, Logger } from "../deps.ts";
import { describeError } from "../errors.ts";

type Bindings = { incoming: IncomingMessage; outgoing: ServerResponse };

const JSON_ERROR_HEADERS = { "content-type": "application/json", "cache-control": "no-store" };
const errorJson = (code: string, message: string): string => JSON.stringify({ code, message });

/** The answer when no request could be made of what arrived; the app answers everything else. */
function requestErrorResponse(err: unknown): Response {
  const malformed = err instanceof Error && err.name === "RequestError";
  return new Response(
    malformed ? errorJson("invalid_input", "the request target or Host header is malformed") : errorJson("internal_error", "internal error"),
    { status: malformed ? 400 : 500, headers: JSON_ERROR_HEADERS },
  );
}

/** Two Host headers make the request's authority ambiguous (a proxy and the daemon could each read another). */
function hasTwoHosts(rawHeaders: readonly string[]): boolean {
  let hosts = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 4 && name.toLowerCase() === "host" && ++hosts > 1) return true;
  }
  return false;
}

/** The listener around any fetch callback: the daemon's app, or a plain one in tests. */
export function nodeRequestListener(
  fetch: (request: Request, env: Bindings) => Response | Promise<Response>,
  options: { hostname?: string; log: Logger },
) {
  const listener = getRequestListener(
    async (request, env) => {
      const res = await fetch(request, env as Bindings);
      try {
        // Reading the headers checks every name and value (Headers refuses CR, LF and NUL) before any reaches
        // the socket; the adapter would otherwise answer a text/plain 500 of its own.
        void res.headers;
      } catch (err) {
        options.log({ time: new Date().toISOString(), level: "error", msg: "an answer had headers that cannot be sent", error: describeError(err) });
        return new Response(errorJson("internal_error", "internal error"), { status: 500, headers: JSON_ERROR_HEADERS });
      }
      return res;
    },
    { hostname: options.hostname, errorHandler: requestErrorResponse },
  );
  return (incoming: IncomingMessage, outgoing: ServerResponse): Promise<void> => {
    if (hasTwoHosts(incoming.rawHeaders)) {
      const body = errorJson("invalid_input", "the request has more than one Host header");
      outgoing.writeHead(400, { ...JSON_ERROR_HEADERS, "content-length": Buffer.byteLength(body), connection: "close" });
      outgoing.end(body);
      return Promise.resolve();
    }
    return listener(incoming, outgoing);
  };
}

/**
 * A `node:http` request listener serving the whole app. The socket stays reachable by the app's peer functions
 * (`c.env.incoming.socket`, runtime/node-deps.ts).
 */
export function createNodeListener(deps: AppDeps, options: { hostname?: string } = {}) {
  const app = createApp(deps);
  return nodeRequestListener((request, env) => app.fetch(request, env), { hostname: options.hostname, log: deps.log });
}

/**
 * Sends what libraries print with `console` to `log` as JSON records, so stderr carries JSON only and stdout
 * only the listening line (@hono/node-server prints a failed answer with console.error, a client that went away
 * with console.info). Answers a function that puts the console back.
 */
export function consoleToLog(log: Logger): () => void {
  const saved = { error: console.error, warn: console.warn, info: console.info, log: console.log, debug: console.debug };
  const record =
    (level: string) =>
    (...args: unknown[]) => {
      const err = args.find((a): a is Error => a instanceof Error);
      log({
        time: new Date().toISOString(),
        level,
        msg: err && args.length === 1 ? "a library reported an error" : format(...args),
        ...(err ? { error: describeError(err) } : {}),
      });
    };
  console.error = record("error");
  console.warn = record("warn");
  console.info = record("info");
  console.log = record("info");
  console.debug = record("debug");
  return () => Object.assign(console, saved);
}
