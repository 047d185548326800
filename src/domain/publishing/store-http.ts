// Requests to the stores (docs/publishing.md): every one through the daemon's guarded fetch, redirects refused,
// and a store's refusal kept in its own words (its error code and message) for the publish's detail.
import type { AppDeps } from "../../deps.ts";
import { describeError } from "../../errors.ts";
import { findDestinationNotAllowed } from "../common/outbound.ts";

/** Refusals without an HTTP status that another attempt would meet again: the publish fails at once. */
const FINAL_CODES = new Set([
  "destination_not_allowed",
  "missing_app_metadata",
  "missing_package_name",
  "no_artifact",
  "no_store_credentials",
  "project_deleted",
]);

/** A store call that did not succeed. `retryable`: 5xx, 408, 429 and network errors; any other 4xx is final. */
export class StoreError extends Error {
  constructor(
    readonly status: number | null,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
  get retryable(): boolean {
    if (FINAL_CODES.has(this.code)) return false;
    return this.status === null || this.status >= 500 || this.status === 408 || this.status === 429;
  }
  /** What the build page and the API show: the status, the store's code and its message. */
  get detail(): string {
    return `${this.status === null ? "" : `HTTP ${this.status} `}${this.code}: ${this.message}`.slice(0, 2000);
  }
}

/** The store's own code and message from an error body: App Store Connect `{errors: [...]}`, Google `{error: {...}}`. */
function storeErrorOf(status: number, text: string): StoreError {
  try {
    const body = JSON.parse(text) as {
      errors?: Array<{ code?: string; title?: string; detail?: string }>;
      error?: unknown;
      error_description?: string;
    };
    const asc = body.errors?.[0];
    if (asc) return new StoreError(status, asc.code ?? "ERROR", [asc.title, asc.detail].filter(Boolean).join(": ") || "no message");
    if (body.error && typeof body.error === "object") {
      const g = body.error as { status?: string; code?: number; message?: string };
      return new StoreError(status, g.status ?? String(g.code ?? status), g.message ?? "no message");
    }
    if (typeof body.error === "string") return new StoreError(status, body.error, body.error_description ?? "no message");
  } catch {
    // not JSON: the text itself is the store's word
  }
  return new StoreError(status, `http_${status}`, text.slice(0, 500) || "no message");
}

export const STORE_CALL_TIMEOUT_MS = 60_000;

export interface StoreRequest {
  method: string;
  url: string;
  headers?: Record<string, string>;
  body?: ReadableStream<Uint8Array> | string | null;
  /** An upload's body time-out, longer than an API call's. */
  timeoutMs?: number;
}

/** A store's answer as it came: the status, the headers and the body's text. */
export interface StoreAnswer {
  status: number;
  headers: Headers;
  text: string;
}

/**
 * Sends one request and answers whatever status came back; only a request that got no answer (refused by the
 * guard, timed out, cut off) throws StoreError. The resumable upload needs this: its 308 is not a redirect.
 */
export async function storeSend(deps: Pick<AppDeps, "fetch" | "uploadFetch">, request: StoreRequest): Promise<StoreAnswer> {
  let res: Response;
  try {
    const init: RequestInit & { duplex?: "half" } = {
      method: request.method,
      headers: { "user-agent": "hangar", ...request.headers },
      body: request.body ?? null,
      redirect: "manual",
      signal: AbortSignal.timeout(request.timeoutMs ?? STORE_CALL_TIMEOUT_MS),
    };
    // A streamed body (an upload from storage) needs half duplex on Node's fetch.
    if (request.body instanceof ReadableStream) init.duplex = "half";
    // An upload outlives the guard's 10 s deadline: it has its own time-out above, on the guard without one.
    const send = request.timeoutMs !== undefined && deps.uploadFetch ? deps.uploadFetch : deps.fetch;
    res = await send(request.url, init);
    return { status: res.status, headers: res.headers, text: await res.text() };
  } catch (err) {
    if (findDestinationNotAllowed(err))
      return Promise.reject(
        new StoreError(
          null,
          "destination_not_allowed",
          `${new URL(request.url).host} is refused by the outbound guard: add it to HANGAR_OUTBOUND_ALLOW`,
        ),
      );
    const timeout = err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError");
    throw new StoreError(
      null,
      timeout ? "timeout" : "network_error",
      timeout ? `no answer from ${new URL(request.url).host}` : describeError(err).slice(0, 300),
    );
  }
}

/** The parsed JSON of an answer's text (null when empty, the text itself when not JSON). */
export function answerBody(text: string): unknown {
  if (text === "") return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** A refusal in the store's own words; redirects are refused, never followed. */
export function storeErrorOfAnswer(answer: StoreAnswer): StoreError {
  if (answer.status >= 300 && answer.status < 400)
    return new StoreError(answer.status, "redirect_refused", `the store answered a redirect to ${answer.headers.get("location") ?? "nowhere"}`);
  return storeErrorOf(answer.status, answer.text);
}

/** One store call; answers the parsed JSON body (or null when empty), throws StoreError otherwise. */
export async function storeCall(deps: Pick<AppDeps, "fetch" | "uploadFetch">, request: StoreRequest): Promise<unknown> {
  const answer = await storeSend(deps, request);
  if (answer.status >= 300) throw storeErrorOfAnswer(answer);
  return answerBody(answer.text);
}
