import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { LookupFunction } from "node:net";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { Agent } from "undici";
import {
  checkResolved,
  checkUrlWithoutDns,
  createGuardedFetch,
  DEFAULT_OUTBOUND_LIMITS,
  DestinationNotAllowedError,
  type OutboundAllowList,
  type OutboundLimits,
} from "../domain/common/outbound.ts";
import { isLocalhostName } from "../domain/common/addresses.ts";

/**
 * The Node half of the outbound guard (docs/api.md §12): every name is resolved by the connection itself and each
 * address checked before the socket opens, so there is no window between "checked" and "connected" for a DNS
 * rebinding answer to slip into. IP literals never reach a lookup; the core wrapper checks them first.
 */
export interface NodeOutbound {
  /** Guarded fetch with the default deadline (10 s) and answer cap (8 MiB): OIDC, statuses, notifications. */
  fetch: typeof fetch;
  /** Guarded fetch without the deadline and cap, for the S3 store (it sets its own, and streams artifacts). */
  streamingFetch: typeof fetch;
  /**
   * Resolves a URL's host and checks it now: the addresses to connect to (pinned by git) and whether they are
   * all in HANGAR_OUTBOUND_ALLOW. Throws DestinationNotAllowedError. A name that does not resolve answers no
   * addresses (the request itself will fail later; that is not a refusal).
   */
  resolve(url: string): Promise<{ addresses: string[]; listed: boolean }>;
  close(): Promise<void>;
}

/** A `lookup` for net/tls.connect that answers only addresses the guard lets through. */
export function guardedLookup(allow: OutboundAllowList): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { family: options.family, hints: options.hints, all: true, verbatim: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, "", 0);
      let usable: string[];
      try {
        ({ usable } = checkResolved(
          hostname,
          addresses.map((a) => a.address),
          allow,
        ));
      } catch (refusal) {
        return callback(refusal as NodeJS.ErrnoException, "", 0);
      }
      const list = addresses.filter((a) => usable.includes(a.address));
      // Node asks for all addresses when it races IPv4 and IPv6 (autoSelectFamily), else for one.
      if (options.all) (callback as unknown as (e: null, list: LookupAddress[]) => void)(null, list);
      else callback(null, list[0]!.address, list[0]!.family);
    });
  };
}

const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);
/** Request bodies larger than this (by their declared Content-Length) are streamed, not buffered. */
const STREAM_BODY_ABOVE = 1024 * 1024;
/** A streamed upload that moves no byte for this long is given up (its total time is the caller's signal). */
const UPLOAD_IDLE_MS = 120_000;

/** The global Response for a node:http answer, its body read as the caller pulls it. */
function responseOf(res: IncomingMessage, method: string): Response {
  const headers = new Headers();
  for (const [name, value] of Object.entries(res.headers)) {
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else if (value !== undefined) headers.set(name, value);
  }
  const status = res.statusCode ?? 502;
  const empty = NULL_BODY_STATUSES.has(status) || method === "HEAD";
  if (empty) res.resume();
  return new Response(empty ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), { status, statusText: res.statusMessage, headers });
}

/**
 * A large streamed body (an artifact sent to a store, docs/publishing.md) goes out through node:http, piped
 * from the storage stream with backpressure. undici's fetch with a web-stream body measured a third of the
 * socket's rate and an RSS that grew with the file (docs/benchmarks.md); this path holds a chunk or two.
 * The sockets come from agents whose connections resolve through the guard's lookup, as undici's do.
 */
function sendStreamed(request: Request, agents: { http: HttpAgent; https: HttpsAgent }, lookup: LookupFunction): Promise<Response> {
  const url = new URL(request.url);
  const https = url.protocol === "https:";
  return new Promise<Response>((resolve, reject) => {
    let answered = false;
    const req = (https ? httpsRequest : httpRequest)(
      url,
      {
        method: request.method,
        headers: Object.fromEntries(request.headers),
        agent: https ? agents.https : agents.http,
        lookup,
        signal: request.signal,
      },
      (res) => {
        answered = true;
        resolve(responseOf(res, request.method));
      },
    );
    req.setTimeout(UPLOAD_IDLE_MS, () => req.destroy(new Error(`no progress for ${UPLOAD_IDLE_MS / 1000} s`)));
    req.on("error", (err) => {
      if (!answered) reject(err);
    });
    // highWaterMark 0: the storage stream is pulled only when the socket wants more.
    pipeline(Readable.fromWeb(request.body as import("node:stream/web").ReadableStream<Uint8Array>, { highWaterMark: 0 }), req).catch((err) => {
      // A store may answer (and close) before it has read the whole body: that answer stands.
      if (!answered) reject(err);
    });
  });
}

export function createNodeOutbound(allow: OutboundAllowList, limits: OutboundLimits = DEFAULT_OUTBOUND_LIMITS): NodeOutbound {
  // No proxy from the environment, no connection to an unchecked address: the Agent's sockets all go through
  // guardedLookup. undici 7's own fetch, so the dispatcher's version matches the fetch that drives it.
  // undici is a megabyte of code that most runs of the daemon never need (it serves OIDC, commit statuses,
  // notifications and S3 only): it loads on the first outbound request, which keeps it out of start time and
  // idle memory (docs/benchmarks.md).
  let client: Promise<{ agent: Agent; undiciFetch: typeof import("undici").fetch }> | undefined;
  const loadClient = () =>
    (client ??= import("undici").then((loaded) => {
      // undici is CommonJS: split out of the bundle, it arrives as a default export only.
      const { Agent, fetch: undiciFetch } = "Agent" in loaded ? loaded : (loaded as unknown as { default: typeof loaded }).default;
      return { agent: new Agent({ connect: { lookup: guardedLookup(allow), timeout: 10_000 } }), undiciFetch };
    }));
  const lookup = guardedLookup(allow);
  let uploadAgents: { http: HttpAgent; https: HttpsAgent } | undefined;

  const base = async (input: Request | string | URL, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    // Most bodies the daemon sends are small forms and JSON; buffering keeps Content-Length (no chunked upload).
    // An upload to a store (docs/publishing.md) declares its Content-Length and is streamed as storage reads it.
    const streamed =
      request.body !== null && request.headers.has("content-length") && Number(request.headers.get("content-length")) > STREAM_BODY_ABOVE;
    if (streamed)
      return sendStreamed(
        request,
        (uploadAgents ??= { http: new HttpAgent({ keepAlive: true }), https: new HttpsAgent({ keepAlive: true }) }),
        lookup,
      );
    const body = request.body ? new Uint8Array(await request.arrayBuffer()) : undefined;
    const { agent, undiciFetch } = await loadClient();
    const res = await undiciFetch(request.url, {
      method: request.method,
      headers: [...request.headers],
      body,
      redirect: "manual",
      signal: request.signal,
      dispatcher: agent,
    });
    // A global Response, so callers (and jose) see the runtime's own classes.
    return new Response(NULL_BODY_STATUSES.has(res.status) ? null : (res.body as ReadableStream<Uint8Array> | null), {
      status: res.status,
      statusText: res.statusText,
      headers: res.headers as unknown as Headers,
    });
  };
  const baseFetch = base as typeof fetch;

  return {
    fetch: createGuardedFetch(baseFetch, allow, limits),
    streamingFetch: createGuardedFetch(baseFetch, allow, { timeoutMs: null, maxResponseBytes: null }),
    async resolve(url) {
      const checked = checkUrlWithoutDns(url, allow);
      const hostname = new URL(url).hostname;
      if (checked.literal) {
        const bare = hostname.replace(/^\[|\]$/g, "");
        return { addresses: isLocalhostName(hostname) ? ["127.0.0.1"] : [bare], listed: checked.listed };
      }
      let addresses: LookupAddress[];
      try {
        addresses = await new Promise((resolve, reject) =>
          dnsLookup(hostname, { all: true, verbatim: true }, (err, list) => (err ? reject(err) : resolve(list))),
        );
      } catch {
        return { addresses: [], listed: false };
      }
      const { usable, listed } = checkResolved(
        hostname,
        addresses.map((a) => a.address),
        allow,
      );
      return { addresses: usable, listed };
    },
    close: async () => {
      uploadAgents?.http.destroy();
      uploadAgents?.https.destroy();
      if (client) await (await client).agent.close();
    },
  };
}

export { DestinationNotAllowedError };
