// `Headers` and `Response` for the daemon process, without Node's bundled undici (issue 16).
//
// Node defines `Headers`, `Request`, `Response` and `fetch` as lazy globals: the first touch of any of them loads
// and runs the whole internal undici (about 30 ms of the daemon's start and 10 MiB of its resident memory).
// Hono creates a `Headers` and a `Response` for every answer, so before this module every daemon paid that at
// start. These two classes cover what Hono, the app and the Node listener (node-listener.ts) use: the answer to a
// request (a string, bytes, a Blob or a ReadableStream with a status and headers) never needs undici. Everything
// else (`formData()` on a response, `clone()`) is handed to a real undici `Response` built on demand, and
// outbound `fetch` is undici as before, loaded the first time the daemon sends something.
//
// They follow the Fetch standard where it shows: header names and values are validated the same way (a value
// with CR, LF or NUL, or a character above U+00FF, is a TypeError; a name must be a token), names are
// lower-cased, iteration is sorted with each Set-Cookie on its own, `get` joins repeated values with ", ", a body
// can be read once. `installFetchLite()` puts them in place of the globals; only `hangar serve` calls it (the
// embedder export, the Worker and `app.request()` keep the platform's own classes).

import { readStreamWhole } from "../domain/common/streams.ts";

/** Characters allowed in a header name (RFC 9110 token). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** A header value is invalid with NUL, CR or LF in it, or anything a ByteString cannot hold. */
const INVALID_VALUE = /[\0\r\n\u0100-\uffff]/;
/** HTTP whitespace around a value, which the standard strips. */
const OUTER_WHITESPACE = /^[\t\n\r ]+|[\t\n\r ]+$/g;

function checkedName(name: string): string {
  const s = String(name);
  if (!TOKEN.test(s)) throw new TypeError(`Headers: "${s}" is an invalid header name.`);
  return s.toLowerCase();
}

function normalizedValue(name: string, value: string): string {
  let v = String(value);
  if (v.length > 0 && (v.charCodeAt(0) <= 32 || v.charCodeAt(v.length - 1) <= 32)) v = v.replace(OUTER_WHITESPACE, "");
  if (INVALID_VALUE.test(v)) throw new TypeError(`Headers: "${v.slice(0, 80)}" is an invalid header value for ${name}.`);
  return v;
}

/** Whatever the platform's Response accepts as a body. */
type PlatformBody = ConstructorParameters<typeof Response>[0];

type HeadersInitLike = Iterable<readonly [string, string] | readonly string[]> | Record<string, string> | LiteHeaders;

export class LiteHeaders {
  /** Lower-cased name → value; repeated values already joined with ", " (Set-Cookie kept apart). */
  #map = new Map<string, string>();
  #cookies: string[] | undefined;
  /** The sorted pairs, kept until the next change (every request's headers are walked at least once). */
  #sorted: [string, string][] | undefined;

  constructor(init?: HeadersInitLike | null) {
    if (init === undefined || init === null) return;
    if (LiteHeaders.isLite(init)) {
      for (const [k, v] of init.#map) this.#map.set(k, v);
      if (init.#cookies) this.#cookies = [...init.#cookies];
      return;
    }
    if (typeof init !== "object") throw new TypeError("Headers: the init is not an object");
    if (typeof (init as Iterable<unknown>)[Symbol.iterator] === "function") {
      for (const pair of init as Iterable<readonly string[]>) {
        if (pair.length !== 2) throw new TypeError("Headers: a header pair must have exactly two items");
        this.append(pair[0]!, pair[1]!);
      }
      return;
    }
    for (const key of Object.keys(init)) this.append(key, (init as Record<string, string>)[key]!);
  }

  /**
   * The request headers Node parsed (already valid: its parser refuses bad names and values), as `[name, value,
   * …]` (`IncomingMessage.rawHeaders`). HTTP/2 pseudo-headers are left out.
   */
  static fromRaw(raw: readonly string[]): LiteHeaders {
    const h = new LiteHeaders();
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i]!;
      if (name.charCodeAt(0) === 58 /* : */) continue;
      h.#add(name.toLowerCase(), raw[i + 1]!);
    }
    return h;
  }

  /** Whether `value` is one of these (not merely Headers-like). */
  static isLite(value: unknown): value is LiteHeaders {
    return typeof value === "object" && value !== null && #map in value;
  }

  static [Symbol.hasInstance](value: unknown): boolean {
    // Real undici Headers (a fetch answer's) count too: code written for the platform class keeps working.
    if (typeof value !== "object" || value === null) return false;
    if (#map in value) return true;
    const v = value as Record<string, unknown>;
    return typeof v.get === "function" && typeof v.append === "function" && typeof v.getSetCookie === "function";
  }

  #add(name: string, value: string): void {
    this.#sorted = undefined;
    if (name === "set-cookie") {
      (this.#cookies ??= []).push(value);
      return;
    }
    const prev = this.#map.get(name);
    this.#map.set(name, prev === undefined ? value : `${prev}, ${value}`);
  }

  append(name: string, value: string): void {
    const n = checkedName(name);
    this.#add(n, normalizedValue(n, value));
  }

  set(name: string, value: string): void {
    const n = checkedName(name);
    const v = normalizedValue(n, value);
    this.#sorted = undefined;
    if (n === "set-cookie") this.#cookies = [v];
    else this.#map.set(n, v);
  }

  get(name: string): string | null {
    const n = checkedName(name);
    if (n === "set-cookie") return this.#cookies?.length ? this.#cookies.join(", ") : null;
    return this.#map.get(n) ?? null;
  }

  has(name: string): boolean {
    const n = checkedName(name);
    return n === "set-cookie" ? (this.#cookies?.length ?? 0) > 0 : this.#map.has(n);
  }

  delete(name: string): void {
    const n = checkedName(name);
    this.#sorted = undefined;
    if (n === "set-cookie") this.#cookies = undefined;
    else this.#map.delete(n);
  }

  getSetCookie(): string[] {
    return this.#cookies ? [...this.#cookies] : [];
  }

  /** The standard's "sort and combine": names in order, each Set-Cookie a pair of its own. */
  #pairs(): [string, string][] {
    if (this.#sorted) return this.#sorted;
    const names = [...this.#map.keys()];
    if (this.#cookies?.length) names.push("set-cookie");
    names.sort();
    const out: [string, string][] = [];
    for (const n of names) {
      if (n === "set-cookie") for (const c of this.#cookies!) out.push([n, c]);
      else out.push([n, this.#map.get(n)!]);
    }
    return (this.#sorted = out);
  }

  forEach(callback: (value: string, name: string, headers: LiteHeaders) => void, thisArg?: unknown): void {
    for (const [n, v] of this.#pairs()) callback.call(thisArg, v, n, this);
  }
  entries(): IterableIterator<[string, string]> {
    // Copies: a caller may change a pair it was given, and the cached ones are shared.
    return this.#pairs().map((pair): [string, string] => [pair[0], pair[1]])[Symbol.iterator]();
  }
  keys(): IterableIterator<string> {
    return this.#pairs().map((pair) => pair[0])[Symbol.iterator]();
  }
  values(): IterableIterator<string> {
    return this.#pairs().map(([, v]) => v)[Symbol.iterator]();
  }
  [Symbol.iterator](): IterableIterator<[string, string]> {
    return this.entries();
  }
  get [Symbol.toStringTag](): string {
    return "Headers";
  }

  /** For `ServerResponse.writeHead`: one property per name, Set-Cookie as an array. */
  toNodeHeaders(): Record<string, string | string[]> {
    const out: Record<string, string | string[]> = {};
    for (const [n, v] of this.#map) out[n] = v;
    if (this.#cookies?.length) out["set-cookie"] = [...this.#cookies];
    return out;
  }
}

/** A body as the listener writes it: text, bytes, a Blob, a stream, or nothing. */
export type LiteBody = string | Uint8Array | Blob | ReadableStream<Uint8Array> | null;

interface ResponseInitLike {
  status?: number;
  statusText?: string;
  headers?: HeadersInitLike | Headers | null;
}

/** Statuses whose response has no body (the standard's "null body status"). */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

/**
 * Streams handed out by `Response.body` for a text or byte body, with that body: a new Response made from such a
 * stream, still unread, takes the text or bytes themselves (Hono does `new Response(res.body, res)` when a
 * handler's answer meets headers set earlier), so the answer is still written with a Content-Length.
 */
const streamSources = new WeakMap<ReadableStream<Uint8Array>, string | Uint8Array>();

const encoder = new TextEncoder();

/**
 * Whether a body is a ReadableStream, by its reader (not `instanceof`: the first touch of the global loads Node's
 * web streams, 1.7 MiB, which a text or JSON answer never needs).
 */
export function isStream(body: unknown): body is ReadableStream<Uint8Array> {
  return typeof body === "object" && body !== null && typeof (body as ReadableStream).getReader === "function";
}

/** Whether a body is a Blob (or a File), likewise without touching the lazily loaded global. */
export function isBlob(body: unknown): body is Blob {
  return typeof body === "object" && body !== null && typeof (body as Blob).stream === "function" && typeof (body as Blob).size === "number";
}

function bytesOf(body: string | Uint8Array): Uint8Array {
  return typeof body === "string" ? encoder.encode(body) : body;
}

function streamOf(body: string | Uint8Array): ReadableStream<Uint8Array> {
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      const bytes = bytesOf(body);
      if (bytes.byteLength > 0) controller.enqueue(bytes);
      controller.close();
    },
  });
  streamSources.set(stream, body);
  return stream;
}

let realResponseClass: (() => typeof Response) | undefined;

export class LiteResponse {
  readonly status: number;
  readonly statusText: string;
  #headers: LiteHeaders | undefined;
  /** The init's headers while nobody asked for `headers` (the listener writes a plain record as it is). */
  #headersInit: HeadersInitLike | Headers | null | undefined;
  #body: LiteBody;
  #bodyUsed = false;

  constructor(body?: PlatformBody | LiteBody | ArrayBuffer | null, init?: ResponseInitLike | LiteResponse | Response) {
    const status = init?.status ?? 200;
    if (!Number.isInteger(status) || status < 200 || status > 599) {
      throw new RangeError(`Response: init["status"] must be in the range of 200 to 599, inclusive.`);
    }
    this.status = status;
    this.statusText = init?.statusText ?? "";
    if (init instanceof LiteResponse || (init && typeof (init as Response).arrayBuffer === "function")) {
      // A Response as the init (Hono's HEAD answer, its `c.res` setter): its headers, copied.
      this.#headers = new LiteHeaders(init.headers as unknown as LiteHeaders);
    } else if (LiteHeaders.isLite(init?.headers)) {
      // Kept, not copied, as @hono/node-server's Response did: Hono sets later headers on `res.headers` anyway.
      this.#headers = init.headers;
    } else this.#headersInit = init?.headers;

    let b: LiteBody;
    if (body === undefined || body === null) b = null;
    else if (typeof body === "string" || body instanceof Uint8Array || isStream(body) || isBlob(body)) b = body as LiteBody;
    else if (body instanceof ArrayBuffer) b = new Uint8Array(body);
    else if (ArrayBuffer.isView(body)) b = new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
    else if (body instanceof URLSearchParams) {
      b = body.toString();
      if (!this.headers.has("content-type")) this.headers.set("content-type", "application/x-www-form-urlencoded;charset=UTF-8");
    } else {
      // FormData and anything else the standard allows: the platform's Response knows how to encode it.
      const real = new (realResponse())(body as PlatformBody, { status, statusText: this.statusText, headers: [...this.headers] });
      b = real.body;
      this.#headers = new LiteHeaders(real.headers as unknown as LiteHeaders);
    }
    if (isStream(b)) {
      const source = streamSources.get(b);
      if (source !== undefined && !b.locked) b = source;
    }
    if (b !== null && NULL_BODY_STATUSES.has(status)) throw new TypeError(`Response: a ${status} response cannot have a body`);
    this.#body = b;
  }

  static [Symbol.hasInstance](value: unknown): boolean {
    // A real undici Response (a fetch answer) counts as one too, as it would with the platform class.
    if (typeof value !== "object" || value === null) return false;
    if (#body in value) return true;
    const v = value as Record<string, unknown>;
    return typeof v.status === "number" && typeof v.arrayBuffer === "function" && typeof v.headers === "object";
  }

  static json(data: unknown, init?: ResponseInitLike): LiteResponse {
    const res = new LiteResponse(JSON.stringify(data), init);
    if (!res.headers.has("content-type")) res.headers.set("content-type", "application/json");
    return res;
  }

  static redirect(url: string | URL, status = 302): LiteResponse {
    if (![301, 302, 303, 307, 308].includes(status)) throw new RangeError(`Response.redirect: invalid status ${status}`);
    return new LiteResponse(null, { status, headers: { location: new URL(url).href } });
  }

  static error(): Response {
    return realResponse().error();
  }

  get headers(): LiteHeaders {
    if (!this.#headers) {
      this.#headers = new LiteHeaders(this.#headersInit as HeadersInitLike | null | undefined);
      this.#headersInit = undefined;
    }
    return this.#headers;
  }
  get ok(): boolean {
    return this.status >= 200 && this.status < 300;
  }
  get type(): "default" {
    return "default";
  }
  get url(): string {
    return "";
  }
  get redirected(): boolean {
    return false;
  }
  get bodyUsed(): boolean {
    return this.#bodyUsed || (isStream(this.#body) && this.#body.locked);
  }
  get body(): ReadableStream<Uint8Array> | null {
    const b = this.#body;
    if (b === null || isStream(b)) return b;
    const stream = isBlob(b) ? (b.stream() as ReadableStream<Uint8Array>) : streamOf(b);
    this.#body = stream;
    return stream;
  }
  get [Symbol.toStringTag](): string {
    return "Response";
  }

  /**
   * What the listener writes: status, headers (a plain record when that is what the answer was made with) and the
   * body as it was given. Marks the body used.
   */
  takeForWriting(): [number, Record<string, string | string[]> | LiteHeaders | null, LiteBody] {
    this.#bodyUsed = true;
    const init = this.#headersInit;
    if (this.#headers) return [this.status, this.#headers, this.#body];
    if (init === undefined || init === null) return [this.status, null, this.#body];
    if (typeof init === "object" && !(Symbol.iterator in init) && Object.getPrototypeOf(init) === Object.prototype) {
      return [this.status, init as Record<string, string>, this.#body];
    }
    return [this.status, this.headers, this.#body];
  }

  async bytes(): Promise<Uint8Array> {
    const b = this.#body;
    // A null body reads as empty as often as asked (the standard never marks it used).
    if (b === null) return new Uint8Array(0);
    if (this.bodyUsed) throw new TypeError("Body is unusable: Body has already been read");
    this.#bodyUsed = true;
    if (typeof b === "string") return encoder.encode(b);
    if (b instanceof Uint8Array) return b;
    if (isBlob(b)) return new Uint8Array(await b.arrayBuffer());
    return readStreamWhole(b);
  }
  async arrayBuffer(): Promise<ArrayBuffer> {
    const bytes = await this.bytes();
    return bytes.buffer.byteLength === bytes.byteLength && bytes.byteOffset === 0
      ? (bytes.buffer as ArrayBuffer)
      : (bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer);
  }
  async text(): Promise<string> {
    if (typeof this.#body === "string" && !this.bodyUsed) {
      this.#bodyUsed = true;
      return this.#body;
    }
    return new TextDecoder().decode(await this.bytes());
  }
  async json(): Promise<unknown> {
    return JSON.parse(await this.text());
  }
  async blob(): Promise<Blob> {
    return new Blob([await this.bytes()], { type: this.headers.get("content-type") ?? "" });
  }
  async formData(): Promise<FormData> {
    return this.#real().formData();
  }
  clone(): Response {
    return this.#real().clone();
  }

  /** A platform Response with this one's status, headers and body (which this one gives up). */
  #real(): Response {
    if (this.bodyUsed) throw new TypeError("Body is unusable: Body has already been read");
    const body = this.body;
    this.#bodyUsed = true;
    return new (realResponse())(body, { status: this.status, statusText: this.statusText, headers: [...this.headers] });
  }
}

function realResponse(): typeof Response {
  // Before installFetchLite() the global is still the platform's own.
  return realResponseClass?.() ?? (globalThis.Response as unknown as typeof Response);
}

let installed = false;

/**
 * Puts LiteHeaders and LiteResponse in place of the global `Headers` and `Response` for this process. The
 * platform's classes stay reachable (for what the light ones hand over) without being loaded until then.
 * `Request` and `fetch` are left alone: outbound requests are undici's.
 */
export function installFetchLite(): void {
  if (installed) return;
  installed = true;
  const responseDescriptor = Object.getOwnPropertyDescriptor(globalThis, "Response");
  let real: typeof Response | undefined;
  realResponseClass = () =>
    (real ??= (responseDescriptor?.get ? responseDescriptor.get.call(globalThis) : responseDescriptor?.value) as typeof Response);
  Object.defineProperty(globalThis, "Response", { value: LiteResponse, writable: true, configurable: true, enumerable: false });
  Object.defineProperty(globalThis, "Headers", { value: LiteHeaders, writable: true, configurable: true, enumerable: false });
}
