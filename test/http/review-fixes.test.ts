// Regression tests for review findings: each one failed (or hung) before its fix.
import { execFile, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { eq } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { gitEnv as runnerGitEnv } from "../../src/cli/runner/checkout.ts";
import { artifacts, urlTokens } from "../../src/db/schema/index.ts";
import { deleteOrphanArtifacts } from "../../src/domain/artifacts/artifacts.ts";
import { parseBinaryPlist } from "../../src/domain/artifacts/ipa-metadata.ts";
import { createLocalDiskStore } from "../../src/storage/local-disk.ts";
import { createNodeGitClient } from "../../src/runtime/git.ts";
import { parseOutboundAllow } from "../../src/domain/common/outbound.ts";
import { openNodeArtifactStore } from "../../src/storage/node-stores.ts";
import { createS3Store } from "../../src/storage/s3.ts";
import { makeTestApp } from "../helpers/app.ts";
import { artifactWorld, pathOf, uploadArtifact, useS3Storage } from "../helpers/artifact-world.ts";
import { makeGitRepo } from "../helpers/builds.ts";
import { relayToGitHttpBackend } from "../helpers/git-http.ts";
import { configureOidcInSetup, TEST_CLIENT_ID, TEST_CLIENT_SECRET, TEST_REDIRECT_URI } from "../helpers/oidc-provider.ts";

// ---------------------------------------------------------------------------------------------------------
// 1. Binary plist: shared references must not cost 2^depth.

/**
 * A bplist00 written byte by byte: a top dict with a bundle id and a version, plus "junk" → a chain of `depth`
 * arrays where each array holds the next one twice. Decoding it as a tree visits 2^depth leaves.
 */
function exponentialPlist(depth: number, cycle = false): Uint8Array {
  const ascii = (s: string): number[] => {
    const head = s.length < 15 ? [0x50 | s.length] : [0x5f, 0x10, s.length];
    return [...head, ...Array.from(s, (c) => c.charCodeAt(0))];
  };
  const firstArray = 6;
  const leaf = firstArray + depth;
  const objects: number[][] = [
    [0xd3, 1, 2, 3, 4, 5, firstArray],
    ascii("CFBundleIdentifier"),
    ascii("CFBundleShortVersionString"),
    ascii("junk"),
    ascii("com.example.bomb"),
    ascii("1.0"),
  ];
  for (let i = 0; i < depth; i++) {
    const next = cycle && i === depth - 1 ? firstArray : firstArray + i + 1;
    objects.push([0xa2, next, next]);
  }
  objects.push(ascii("x"));
  if (objects.length !== leaf + 1 || objects.length > 255) throw new Error("test plist layout");
  const out: number[] = [...Array.from("bplist00", (c) => c.charCodeAt(0))];
  const offsets: number[] = [];
  for (const o of objects) {
    offsets.push(out.length);
    out.push(...o);
  }
  const tableOffset = out.length;
  for (const off of offsets) out.push(off >> 8, off & 0xff);
  const u64 = (n: number) => [0, 0, 0, 0, 0, 0, (n >> 8) & 0xff, n & 0xff];
  out.push(0, 0, 0, 0, 0, 0, 2, 1, ...u64(objects.length), ...u64(0), ...u64(tableOffset));
  return Uint8Array.from(out);
}

/** An IPA (python3 zipfile) whose Info.plist holds exactly `plist`. */
function ipaWithRawPlist(plist: Uint8Array): Uint8Array {
  const dir = mkdtempSync(join(tmpdir(), "hangar-ipa-raw-"));
  try {
    writeFileSync(join(dir, "Info.plist"), plist);
    const script = `
import sys, zipfile
with zipfile.ZipFile(sys.argv[2], "w") as z:
    z.write(sys.argv[1], "Payload/Bomb.app/Info.plist", compress_type=zipfile.ZIP_DEFLATED)
`;
    execFileSync("python3", ["-c", script, join(dir, "Info.plist"), join(dir, "bomb.ipa")]);
    return new Uint8Array(readFileSync(join(dir, "bomb.ipa")));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("binary plist with shared references", () => {
  it("decodes a 2^22-leaf reference chain in well under a second", () => {
    const started = performance.now();
    const parsed = parseBinaryPlist(exponentialPlist(22)) as Record<string, unknown>;
    expect(performance.now() - started).toBeLessThan(1000);
    expect(parsed.CFBundleIdentifier).toBe("com.example.bomb");
  });

  it("refuses a reference cycle", () => {
    expect(() => parseBinaryPlist(exponentialPlist(3, true))).toThrow(/cycle/);
  });

  it("complete answers at once for an IPA whose Info.plist is a 2^60 reference chain", async () => {
    const t = await makeTestApp();
    const w = await artifactWorld(t);
    const ipa = ipaWithRawPlist(exponentialPlist(60));
    const started = performance.now();
    const artifact = await uploadArtifact(t, w, "Bomb.ipa", ipa);
    expect(performance.now() - started).toBeLessThan(1000);
    expect(artifact.status).toBe("available");
    expect(artifact.install_metadata).toEqual({ bundle_identifier: "com.example.bomb", bundle_version: "1.0", title: "com.example.bomb" });
  });
});

// ---------------------------------------------------------------------------------------------------------
// 2–3. S3 store: a deadline on every call, no redirects followed, Range answered with at most the range.

interface Loopback {
  url: string;
  hits: Array<{ method: string; path: string; headers: IncomingHttpHeaders }>;
  close(): Promise<void>;
}

async function loopbackServer(handle: (req: IncomingMessage, res: ServerResponse) => void): Promise<Loopback> {
  const hits: Loopback["hits"] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((req, res) => {
    hits.push({ method: req.method ?? "", path: req.url ?? "", headers: req.headers });
    handle(req, res);
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    hits,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

const s3Target = (endpoint: string) =>
  ({ provider: "s3", endpoint, region: "us-east-1", bucket: "b", accessKeyId: "AK", secretAccessKey: "SK", forcePathStyle: true }) as const;

describe("S3 store against misbehaving endpoints", () => {
  const servers: Loopback[] = [];
  afterAll(async () => {
    for (const s of servers) await s.close();
  });
  const serve = async (handle: (req: IncomingMessage, res: ServerResponse) => void) => {
    const s = await loopbackServer(handle);
    servers.push(s);
    return s;
  };

  it("head, read, readRange and remove fail within the deadline when the endpoint never answers", async () => {
    const hung = await serve(() => undefined);
    const store = createS3Store(s3Target(hung.url), { fetch, now: () => Math.floor(Date.now() / 1000), timeoutMs: 200 });
    const started = performance.now();
    const outcomes = await Promise.allSettled([store.head("k"), store.read("k"), store.readRange("k", { start: 0, end: 9 }), store.remove("k")]);
    expect(outcomes.map((o) => o.status)).toEqual(["rejected", "rejected", "rejected", "rejected"]);
    expect(performance.now() - started).toBeLessThan(3000);
    expect(hung.hits).toHaveLength(4);
  });

  it("complete answers (500 internal_error, like any store failure) instead of hanging on a hung endpoint", async () => {
    const hung = await serve(() => undefined);
    const t = await makeTestApp({
      deps: {
        openArtifactStore: (target) =>
          target.provider === "local"
            ? createLocalDiskStore(target.baseDir)
            : createS3Store(target, { fetch, now: () => t.clock.now(), timeoutMs: 200 }),
      },
    });
    t.clock.set(Math.floor(Date.now() / 1000));
    const w = await artifactWorld(t);
    await useS3Storage(t, hung.url, "bucket");
    const created = await t.call("POST", w.jobPath, {
      token: w.runner.token,
      body: { filename: "a.apk", size_bytes: 3, content_type: "application/octet-stream" },
    });
    expect(created.status).toBe(200);
    const started = performance.now();
    const done = await t.call("POST", `${w.jobPath}/${created.body.artifact.id}/complete`, { token: w.runner.token });
    expect(performance.now() - started).toBeLessThan(3000);
    expect(done.status).toBe(500);
    expect(done.body.code).toBe("internal_error");
    expect(hung.hits.map((h) => h.method)).toEqual(["HEAD"]);
  });

  it("does not follow a redirect (signed requests stay with the configured endpoint)", async () => {
    const elsewhere = await serve((_req, res) => res.writeHead(200, { "content-length": "3" }).end("abc"));
    const redirecting = await serve((req, res) => res.writeHead(307, { location: `${elsewhere.url}${req.url}` }).end());
    const store = createS3Store(s3Target(redirecting.url), { fetch, now: () => Math.floor(Date.now() / 1000), timeoutMs: 2000 });
    const outcomes = await Promise.allSettled([store.head("k"), store.read("k"), store.readRange("k", { start: 0, end: 2 }), store.remove("k")]);
    expect(outcomes.map((o) => o.status)).toEqual(["rejected", "rejected", "rejected", "rejected"]);
    expect(redirecting.hits).toHaveLength(4);
    expect(elsewhere.hits).toHaveLength(0);
  });

  it("readRange takes at most the range from a server that ignores Range and streams without end", async () => {
    const chunk = new Uint8Array(64 * 1024).fill(7);
    const endless = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/octet-stream" });
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once("drain", pump);
      };
      pump();
    });
    const store = createS3Store(s3Target(endless.url), { fetch, now: () => Math.floor(Date.now() / 1000), timeoutMs: 2000 });
    // From the start, the first bytes of a 200 are the range.
    expect(await store.readRange("k", { start: 0, end: 9 })).toEqual(new Uint8Array(10).fill(7));
    // Anywhere else a 200 is refused rather than read through.
    await expect(store.readRange("k", { start: 100, end: 109 })).rejects.toThrow(/range/i);
  });

  it("readRange keeps only the range when a 206 carries more", async () => {
    const generous = await serve((_req, res) => res.writeHead(206, { "content-range": "bytes 0-9/100" }).end(new Uint8Array(100).fill(1)));
    const store = createS3Store(s3Target(generous.url), { fetch, now: () => Math.floor(Date.now() / 1000), timeoutMs: 2000 });
    expect(await store.readRange("k", { start: 0, end: 9 })).toHaveLength(10);
  });
});

// ---------------------------------------------------------------------------------------------------------
// 4. content_type is echoed as a header: quoted parameter values must be visible ASCII.

describe("artifact content_type", () => {
  it("refuses quoted parameters with non-ASCII or control characters, keeps ordinary media types", async () => {
    const t = await makeTestApp();
    const w = await artifactWorld(t);
    const create = (content_type: string) =>
      t.call("POST", w.jobPath, { token: w.runner.token, body: { filename: "a.bin", size_bytes: 1, content_type } });
    for (const bad of [
      'application/octet-stream; x="€"',
      'application/octet-stream; x="a\u0001b"',
      'text/plain; charset="\u00e9"',
      'text/plain; x="a\\"',
    ]) {
      const r = await create(bad);
      expect(r.status, bad).toBe(400);
      expect(r.body.code, bad).toBe("invalid_input");
    }
    for (const good of ["application/vnd.android.package-archive", 'text/plain; charset="utf-8"', "application/octet-stream"]) {
      expect((await create(good)).status, good).toBe(200);
    }
    // And the stored type still serves as a download header.
    const apk = await uploadArtifact(t, w, "demo.apk", Uint8Array.from([1, 2]), { content_type: "application/vnd.android.package-archive" });
    const link = await t.call("POST", `/v1/artifacts/${apk.id}/download-link`, { token: w.ownerToken });
    const got = await t.app.request(pathOf(link.body.url), {}, { peerAddress: "127.0.0.1" });
    expect(got.status).toBe(200);
    expect(got.headers.get("content-type")).toBe("application/vnd.android.package-archive");
  });
});

// ---------------------------------------------------------------------------------------------------------
// 5. OIDC token exchange: through deps.fetch, never following a redirect with the code and PKCE verifier.

describe("OIDC token exchange", () => {
  const servers: Loopback[] = [];
  afterAll(async () => {
    for (const s of servers) await s.close();
  });

  it("does not re-post the code and verifier to where a 307 from the token endpoint points", async () => {
    const elsewhere = await loopbackServer((_req, res) => res.writeHead(200, { "content-type": "application/json" }).end("{}"));
    servers.push(elsewhere);
    const provider: Loopback = await loopbackServer((req, res) => {
      const path = new URL(req.url ?? "/", "http://x").pathname;
      if (path === "/.well-known/openid-configuration") {
        res.writeHead(200, { "content-type": "application/json" }).end(
          JSON.stringify({
            issuer: provider.url,
            authorization_endpoint: `${provider.url}/authorize`,
            token_endpoint: `${provider.url}/token`,
            jwks_uri: `${provider.url}/jwks`,
            response_types_supported: ["code"],
            subject_types_supported: ["public"],
            id_token_signing_alg_values_supported: ["RS256"],
          }),
        );
        return;
      }
      if (path === "/token") {
        req.resume();
        res.writeHead(307, { location: `${elsewhere.url}/steal` }).end();
        return;
      }
      res.writeHead(404).end();
    });
    servers.push(provider);
    const fetched: string[] = [];
    const recordingFetch: typeof fetch = (input, init) => {
      fetched.push(String(input instanceof Request ? input.url : input));
      return globalThis.fetch(input, init);
    };
    const t = await makeTestApp({ deps: { fetch: recordingFetch } });
    const setupToken = await configureOidcInSetup(t, provider.url);
    const start = await t.call("POST", "/v1/setup/owner/start-oidc", { token: setupToken, body: { redirect_uri: TEST_REDIRECT_URI } });
    expect(start.status).toBe(200);
    const verified = await t.call("POST", "/v1/setup/owner/verify-oidc", { token: setupToken, body: { code: "the-code", state: start.body.state } });
    expect([verified.status, verified.body.code]).toEqual([502, "token_exchange_error"]);
    expect(elsewhere.hits).toHaveLength(0);
    // The exchange went through deps.fetch, with the client's credentials in the Basic header.
    expect(fetched).toContain(`${provider.url}/token`);
    const exchange = provider.hits.find((h) => h.path === "/token")!;
    expect(exchange.headers.authorization).toBe(`Basic ${Buffer.from(`${TEST_CLIENT_ID}:${TEST_CLIENT_SECRET}`).toString("base64")}`);
  });
});

// ---------------------------------------------------------------------------------------------------------
// 6. Orphan sweep: a removal that fails leaves the row for the next pass, never an aborted row forever.

describe("orphan sweep", () => {
  it("retries an orphan whose bytes could not be removed, then deletes bytes, tokens and row", async () => {
    let failures = 1;
    const t = await makeTestApp({
      deps: {
        openArtifactStore: (target) => {
          const store = openNodeArtifactStore(target, fetch, { now: () => 0 });
          return {
            ...store,
            kind: store.kind,
            remove: async (key: string) => {
              if (failures-- > 0) throw new Error("object store DELETE failed with HTTP 503");
              return store.remove(key);
            },
          };
        },
      },
    });
    const w = await artifactWorld(t);
    const created = await t.call("POST", w.jobPath, {
      token: w.runner.token,
      body: { filename: "orphan.apk", size_bytes: 4, content_type: "application/octet-stream" },
    });
    expect((await t.call("PUT", pathOf(created.body.upload.url), { rawBody: new Uint8Array(4) })).status).toBe(200);
    const id = created.body.artifact.id as string;
    const row = (await t.deps.db.select().from(artifacts).where(eq(artifacts.id, id)).get())!;
    const location = row.storageLocation as { base_dir: string; key: string };
    const file = join(location.base_dir, location.key);
    await t.deps.db
      .insert(urlTokens)
      .values({ tokenHash: "f".repeat(64), kind: "download", artifactId: id, expiresAt: t.clock.now() + 99_999, createdAt: t.clock.now() });
    t.clock.advance(3 * 3600);
    // An orphan can no longer be completed: the sweep removes its bytes before its row.
    const late = await t.call("POST", `${w.jobPath}/${id}/complete`, { token: w.runner.token });
    expect([late.status, late.body.code]).toEqual([409, "invalid_transition"]);

    await expect(deleteOrphanArtifacts(t.deps)).rejects.toThrow(/503/);
    expect((await t.deps.db.select().from(artifacts).where(eq(artifacts.id, id)).get())?.status).toBe("pending");
    expect(existsSync(file)).toBe(true);

    expect(await deleteOrphanArtifacts(t.deps)).toBe(1);
    expect(existsSync(file)).toBe(false);
    expect(await t.deps.db.select().from(artifacts).where(eq(artifacts.id, id)).get()).toBeUndefined();
    expect(await t.deps.db.select().from(urlTokens).where(eq(urlTokens.artifactId, id)).all()).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------------------
// 7. git ls-remote: the source credentials never follow a redirect to another server.

/** An open smart-HTTP git server (`git http-backend`) that records each request's Authorization header. */
async function openGitHttpServer(repoPath: string): Promise<Loopback> {
  return loopbackServer((req, res) => relayToGitHttpBackend(req, res, repoPath));
}

describe("git ls-remote with source credentials", () => {
  it("does not follow a redirect, so the Authorization header never reaches the other server", async () => {
    const repo = makeGitRepo();
    const elsewhere = await openGitHttpServer(repo.path);
    const redirecting = await loopbackServer((req, res) => res.writeHead(302, { location: `${elsewhere.url}${req.url}` }).end());
    try {
      // The redirect target is an open, working repository: a followed redirect would succeed (and leak).
      const result = await createNodeGitClient({ allow: parseOutboundAllow("127.0.0.1/32") }).lsRemote(`${redirecting.url}/repo`, "refs/heads/main", {
        username: "bot",
        password: "s3cr3t-token",
      });
      expect(result.ok).toBe(false);
      expect(redirecting.hits[0]?.headers.authorization).toBe(`Basic ${Buffer.from("bot:s3cr3t-token").toString("base64")}`);
      expect(elsewhere.hits.map((h) => h.headers.authorization ?? "")).not.toContain(`Basic ${Buffer.from("bot:s3cr3t-token").toString("base64")}`);
      expect(elsewhere.hits).toHaveLength(0);
    } finally {
      await redirecting.close();
      await elsewhere.close();
      repo.remove();
    }
  });
});

describe("runner checkout git environment", () => {
  it("does not follow a redirect with the credentials either", async () => {
    const repo = makeGitRepo();
    const elsewhere = await openGitHttpServer(repo.path);
    const redirecting = await loopbackServer((req, res) => res.writeHead(302, { location: `${elsewhere.url}${req.url}` }).end());
    try {
      const url = `${redirecting.url}/repo`;
      const env = runnerGitEnv({ PATH: process.env.PATH, HOME: process.env.HOME }, url, { username: "bot", password: "s3cr3t-token" });
      const outcome = await new Promise<boolean>((resolve) => execFile("git", ["ls-remote", "--", url], { env }, (err) => resolve(err === null)));
      expect(outcome).toBe(false);
      expect(redirecting.hits).toHaveLength(1);
      expect(elsewhere.hits).toHaveLength(0);
    } finally {
      await redirecting.close();
      await elsewhere.close();
      repo.remove();
    }
  });
});

// ---------------------------------------------------------------------------------------------------------
// 8. Local disk: removing a build's last artifact removes its (now empty) directory, never the store root.

describe("local disk store cleanup", () => {
  it("abort of a build's only artifact leaves no empty build directory; the base directory stays", async () => {
    const t = await makeTestApp();
    const w = await artifactWorld(t);
    const created = await t.call("POST", w.jobPath, {
      token: w.runner.token,
      body: { filename: "a.apk", size_bytes: 3, content_type: "application/octet-stream" },
    });
    expect((await t.call("PUT", pathOf(created.body.upload.url), { rawBody: Uint8Array.from([1, 2, 3]) })).status).toBe(200);
    const row = (await t.deps.db.select().from(artifacts).where(eq(artifacts.id, created.body.artifact.id)).get())!;
    const location = row.storageLocation as { base_dir: string; key: string };
    const buildDir = dirname(join(location.base_dir, location.key));
    expect(existsSync(buildDir)).toBe(true);
    const aborted = await t.call("POST", `${w.jobPath}/${created.body.artifact.id}/abort`, { token: w.runner.token });
    expect(aborted.status).toBe(200);
    expect(existsSync(buildDir)).toBe(false);
    expect(existsSync(location.base_dir)).toBe(true);
  });

  it("a key without a directory never takes the (empty) store root with it", async () => {
    const base = mkdtempSync(join(tmpdir(), "hangar-store-root-"));
    try {
      const store = createLocalDiskStore(base);
      await store.remove("lonely");
      expect(existsSync(base)).toBe(true);
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });
});
