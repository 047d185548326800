// The daemon's light Headers and Response (src/runtime/fetch-lite.ts) against the platform's own classes: the
// same operations give the same answers and the same refusals, so Hono and the app cannot tell them apart.
import { describe, expect, it } from "vitest";
import { LiteHeaders, LiteResponse } from "../../src/runtime/fetch-lite.ts";

type HeadersLike = {
  append(n: string, v: string): void;
  set(n: string, v: string): void;
  get(n: string): string | null;
  has(n: string): boolean;
  delete(n: string): void;
  getSetCookie(): string[];
  [Symbol.iterator](): IterableIterator<[string, string]>;
};

/** Runs one script of operations on a fresh Headers of each kind; answers what each step returned or threw. */
function run(make: (init?: unknown) => HeadersLike, init: unknown, ops: Array<(h: HeadersLike) => unknown>): unknown[] {
  const out: unknown[] = [];
  let h: HeadersLike;
  try {
    h = make(init);
  } catch (err) {
    return [`throws ${(err as Error).constructor.name}`];
  }
  for (const op of ops) {
    try {
      out.push(op(h));
    } catch (err) {
      out.push(`throws ${(err as Error).constructor.name}`);
    }
  }
  out.push([...h]);
  return out;
}

const lite = (init?: unknown) => new LiteHeaders(init as never) as unknown as HeadersLike;
const platform = (init?: unknown) => new Headers(init as never) as unknown as HeadersLike;

describe("LiteHeaders behaves like the platform's Headers", () => {
  const scripts: Array<[string, unknown, Array<(h: HeadersLike) => unknown>]> = [
    ["names are case-insensitive and lower-cased", undefined, [(h) => h.set("X-Request-ID", "a"), (h) => h.get("x-request-id"), (h) => h.has("X-REQUEST-ID")]],
    ["repeated values are joined", undefined, [(h) => h.append("Accept", "a"), (h) => h.append("accept", "b"), (h) => h.get("Accept")]],
    ["each Set-Cookie stays apart", undefined, [(h) => h.append("Set-Cookie", "a=1; Path=/"), (h) => h.append("set-cookie", "b=2"), (h) => h.getSetCookie(), (h) => h.get("set-cookie")]],
    ["set replaces every Set-Cookie", [["set-cookie", "a=1"], ["set-cookie", "b=2"]], [(h) => h.set("Set-Cookie", "c=3"), (h) => h.getSetCookie()]],
    ["delete", { a: "1", b: "2" }, [(h) => h.delete("A"), (h) => h.get("a"), (h) => h.has("b")]],
    ["iteration is sorted", { zeta: "1", Alpha: "2", "set-cookie": "c=1", beta: "3" }, []],
    ["outer whitespace is stripped", undefined, [(h) => h.set("x", " \t spaced \t "), (h) => h.get("x")]],
    ["a CR LF in a value is refused (header injection)", undefined, [(h) => h.set("x", "a\r\nSet-Cookie: evil=1"), (h) => h.append("x", "a\nb"), (h) => h.get("x")]],
    ["a NUL in a value is refused", undefined, [(h) => h.set("x", "a\u0000b")]],
    ["a character above U+00FF in a value is refused", undefined, [(h) => h.set("content-disposition", "attachment; filename=\"日本.ipa\"")]],
    ["Latin-1 in a value is kept", undefined, [(h) => h.set("x", "café"), (h) => h.get("x")]],
    ["a name that is not a token is refused", undefined, [(h) => h.set("bad name", "1"), (h) => h.set("x:y", "1"), (h) => h.get("bad name"), (h) => h.has("")]],
    ["a bad name in the init is refused", { "bad name": "1" }, []],
    ["a pair of three in the init is refused", [["a", "1", "2"]], []],
    ["init from another Headers", new Headers([["a", "1"], ["set-cookie", "x=1"], ["set-cookie", "y=2"]]), [(h) => h.getSetCookie()]],
    ["a missing name reads as null", undefined, [(h) => h.get("nope"), (h) => h.has("nope")]],
    ["iteration after each change shows the change", { a: "1" }, [(h) => [...h], (h) => h.set("b", "2"), (h) => [...h], (h) => h.append("a", "3"), (h) => [...h], (h) => h.delete("a"), (h) => [...h], (h) => h.append("set-cookie", "s=1"), (h) => [...h]]],
  ];
  it.each(scripts)("%s", (_, init, ops) => {
    expect(run(lite, init, ops)).toEqual(run(platform, init, ops));
  });

  it("forEach, keys, values and entries give the same pairs in the same order", () => {
    const init = { b: "2", "Set-Cookie": "s=1", a: "1" };
    for (const make of [lite, platform]) {
      const h = make(init) as unknown as Headers;
      const seen: string[] = [];
      h.forEach((v, k) => seen.push(`${k}=${v}`));
      expect(seen).toEqual(["a=1", "b=2", "set-cookie=s=1"]);
      expect([...h.keys()]).toEqual(["a", "b", "set-cookie"]);
      expect([...h.values()]).toEqual(["1", "2", "s=1"]);
      expect([...h.entries()]).toEqual([["a", "1"], ["b", "2"], ["set-cookie", "s=1"]]);
    }
  });

  it("the platform's Request and Response take it as their headers", async () => {
    const h = new LiteHeaders({ "x-a": "1" });
    h.append("set-cookie", "a=1");
    h.append("set-cookie", "b=2");
    const res = new Response("x", { headers: h as unknown as Headers });
    expect(res.headers.get("x-a")).toBe("1");
    expect(res.headers.getSetCookie()).toEqual(["a=1", "b=2"]);
    const req = new Request("http://example.com/", { headers: h as unknown as Headers });
    expect(req.headers.get("x-a")).toBe("1");
  });

  it("counts the platform's Headers as one of its own (instanceof), but not a plain object", () => {
    expect(new Headers() instanceof LiteHeaders).toBe(true);
    expect(new LiteHeaders() instanceof LiteHeaders).toBe(true);
    expect({ get() {} } instanceof LiteHeaders).toBe(false);
    expect(LiteHeaders.isLite(new Headers())).toBe(false);
  });

  it("fromRaw joins repeated request headers and leaves out HTTP/2 pseudo-headers", () => {
    const h = LiteHeaders.fromRaw([":path", "/", "Accept", "a", "accept", "b", "Cookie", "x=1", "Set-Cookie", "s=1"]);
    expect([...h]).toEqual([["accept", "a, b"], ["cookie", "x=1"], ["set-cookie", "s=1"]]);
  });
});

describe("LiteResponse behaves like the platform's Response", () => {
  const bodies: Array<[string, () => unknown]> = [
    ["text", () => "héllo"],
    ["bytes", () => new Uint8Array([1, 2, 3])],
    ["an ArrayBuffer", () => new Uint8Array([4, 5]).buffer],
    ["a Blob", () => new Blob(["blob"])],
    ["a stream", () => new ReadableStream({ start(c) { c.enqueue(new TextEncoder().encode("st")); c.enqueue(new TextEncoder().encode("ream")); c.close(); } })],
    ["URLSearchParams", () => new URLSearchParams({ a: "1 2" })],
    ["nothing", () => null],
  ];
  it.each(bodies)("%s: status, headers and body read the same", async (_, body) => {
    const init = { status: 201, statusText: "Made", headers: { "x-a": "1" } };
    const a = new LiteResponse(body() as never, init);
    const b = new Response(body() as never, init);
    expect([a.status, a.statusText, a.ok, a.type, a.url, a.redirected, a.bodyUsed]).toEqual([b.status, b.statusText, b.ok, b.type, b.url, b.redirected, b.bodyUsed]);
    expect(a.headers.get("x-a")).toBe(b.headers.get("x-a"));
    if (body() instanceof URLSearchParams) expect(a.headers.get("content-type")).toBe(b.headers.get("content-type"));
    expect(new Uint8Array(await a.arrayBuffer())).toEqual(new Uint8Array(await b.arrayBuffer()));
    expect(a.bodyUsed).toBe(b.bodyUsed);
    // A second read: refused once a body was read, an empty string again for no body.
    const again = (r: { text(): Promise<string> }) => r.text().then((t) => `text ${t}`, (e: Error) => `throws ${e.constructor.name}`);
    expect(await again(a)).toBe(await again(b));
  });

  it("json(), text() and blob()", async () => {
    expect(await new LiteResponse('{"a":[1]}').json()).toEqual({ a: [1] });
    expect(await new LiteResponse(new TextEncoder().encode("\ufeffbom")).text()).toBe(await new Response(new TextEncoder().encode("\ufeffbom")).text());
    const blob = await new LiteResponse("x", { headers: { "content-type": "text/x" } }).blob();
    expect([blob.type, await blob.text()]).toEqual(["text/x", "x"]);
    await expect(new LiteResponse("{bad").json()).rejects.toThrow(SyntaxError);
  });

  it("refuses what the platform refuses: a status out of range, a body on a 204", () => {
    for (const status of [0, 100, 199, 600, 1.5]) {
      expect(() => new LiteResponse(null, { status })).toThrow(RangeError);
      expect(() => new Response(null, { status })).toThrow(RangeError);
    }
    expect(() => new LiteResponse("x", { status: 204 })).toThrow(TypeError);
    expect(() => new Response("x", { status: 204 })).toThrow(TypeError);
    expect(new LiteResponse(null, { status: 204 }).status).toBe(204);
  });

  it("a Response as the init gives its status and headers (Hono's HEAD answer)", () => {
    const first = new LiteResponse("x", { status: 202, headers: { "x-a": "1" } });
    const head = new LiteResponse(null, first);
    expect([head.status, head.headers.get("x-a")]).toEqual([202, "1"]);
    const fromPlatform = new LiteResponse(null, new Response("y", { status: 203, headers: { "x-b": "2" } }));
    expect([fromPlatform.status, fromPlatform.headers.get("x-b")]).toEqual([203, "2"]);
  });

  it("a Response made from another one's unread body keeps the text, so it is still written with a length", async () => {
    const first = new LiteResponse("payload");
    const second = new LiteResponse(first.body, first);
    expect(second.takeForWriting()[2]).toBe("payload");
    const streamed = new LiteResponse(new ReadableStream({ start(c) { c.close(); } }));
    expect(streamed.takeForWriting()[2]).toBeInstanceOf(ReadableStream);
  });

  it("clone() and formData() are handed to the platform's Response", async () => {
    const a = new LiteResponse("a=1&b=2", { headers: { "content-type": "application/x-www-form-urlencoded" } });
    const form = await a.formData();
    expect(form.get("b")).toBe("2");
    const c = new LiteResponse("again").clone();
    expect(await c.text()).toBe("again");
  });

  it("statics: json() and redirect()", async () => {
    const j = LiteResponse.json({ a: 1 }, { status: 400 });
    expect([j.status, j.headers.get("content-type"), await j.text()]).toEqual([400, "application/json", '{"a":1}']);
    const r = LiteResponse.redirect("http://example.com/x", 303);
    expect([r.status, r.headers.get("location")]).toEqual([303, "http://example.com/x"]);
    expect(() => LiteResponse.redirect("http://example.com/", 200)).toThrow(RangeError);
  });

  it("counts the platform's Response as one of its own (instanceof), but not a plain object", () => {
    expect(new Response("x") instanceof LiteResponse).toBe(true);
    expect({ status: 200 } instanceof LiteResponse).toBe(false);
  });
});
