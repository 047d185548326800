import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { connect, type AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DestinationNotAllowedError, EMPTY_ALLOW_LIST, parseOutboundAllow } from "../../src/domain/common/outbound.ts";
import { createNodeOutbound, guardedLookup } from "../../src/runtime/outbound.ts";
import { makeTestApp } from "../helpers/app.ts";
import { buildWorld, createPipeline, createProject, makeGitRepo, type GitRepo } from "../helpers/builds.ts";
import { setInstance } from "../helpers/factories.ts";
import { startGitHttpServer } from "../helpers/git-http.ts";
import { startOidcProvider, TEST_CLIENT_ID, type TestOidcProvider } from "../helpers/oidc-provider.ts";

/** A real HTTP service on 127.0.0.1 that records every request it gets. */
interface Service {
  url: string;
  port: number;
  hits: string[];
  close(): Promise<void>;
}

async function service(handle: (req: IncomingMessage, res: ServerResponse) => void = (_q, r) => r.end("internal secret")): Promise<Service> {
  const hits: string[] = [];
  const server: Server = createServer((req, res) => {
    hits.push(req.url ?? "");
    handle(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    hits,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const services: Service[] = [];
const open = async (handle?: (req: IncomingMessage, res: ServerResponse) => void) => {
  const s = await service(handle);
  services.push(s);
  return s;
};
afterAll(async () => {
  for (const s of services) await s.close();
});

describe("the Node outbound guard against a real loopback service", () => {
  it("refuses every spelling of the loopback service's address; the service sees no request", async () => {
    const internal = await open();
    const guard = createNodeOutbound(EMPTY_ALLOW_LIST);
    try {
      for (const host of ["127.0.0.1", "2130706433", "0x7f.1", "0177.0.0.1", "127.1", "localhost", "[::ffff:127.0.0.1]", "[::1]"]) {
        const err = await guard.fetch(`http://${host}:${internal.port}/admin`).then(
          () => null,
          (e: unknown) => e,
        );
        expect(err, host).toBeInstanceOf(DestinationNotAllowedError);
        expect((err as Error).message).toMatch(/HANGAR_OUTBOUND_ALLOW/);
      }
      expect(internal.hits).toEqual([]);
    } finally {
      await guard.close();
    }
  });

  it("checks the resolved address at connect time: a name resolving to loopback never gets a socket", async () => {
    const internal = await open();
    let accepted = 0;
    const counting = createServer().on("connection", () => accepted++);
    await new Promise<void>((resolve) => counting.listen(0, "127.0.0.1", resolve));
    const port = (counting.address() as AddressInfo).port;
    try {
      // net.connect with the guard's lookup: "localhost" is resolved by the system resolver, then refused.
      const outcome = await new Promise<unknown>((resolve) => {
        const socket = connect({ host: "localhost", port, lookup: guardedLookup(EMPTY_ALLOW_LIST) });
        socket.once("connect", () => {
          socket.destroy();
          resolve("connected");
        });
        socket.once("error", resolve);
      });
      expect(outcome).toBeInstanceOf(DestinationNotAllowedError);
      expect(accepted).toBe(0);
      // Allowed by HANGAR_OUTBOUND_ALLOW, the same lookup connects.
      const allowed = await new Promise<unknown>((resolve) => {
        const socket = connect({ host: "localhost", port, family: 4, lookup: guardedLookup(parseOutboundAllow("127.0.0.1/32")) });
        socket.once("connect", () => {
          socket.destroy();
          resolve("connected");
        });
        socket.once("error", resolve);
      });
      expect(allowed).toBe("connected");
      expect(internal.hits).toEqual([]);
    } finally {
      await new Promise<void>((resolve) => counting.close(() => resolve()));
    }
  });

  it("lets an address in HANGAR_OUTBOUND_ALLOW through, without following a redirect", async () => {
    const target = await open();
    const redirecting = await open((_q, r) => r.writeHead(302, { location: `${target.url}/elsewhere` }).end());
    const guard = createNodeOutbound(parseOutboundAllow("127.0.0.1/32"));
    try {
      const ok = await guard.fetch(`${target.url}/ok`);
      expect([ok.status, await ok.text()]).toEqual([200, "internal secret"]);
      const moved = await guard.fetch(`${redirecting.url}/start`, { redirect: "follow" });
      expect(moved.status).toBe(302);
      await moved.body?.cancel();
      expect(target.hits).toEqual(["/ok"]);
    } finally {
      await guard.close();
    }
  });

  it("streams a large request body through the guard (node:http): every byte arrives, a 308 is answered as it is, a refused address gets nothing", async () => {
    const received: number[] = [];
    const target = await open((req, res) => {
      let bytes = 0;
      req.on("data", (chunk: Buffer) => (bytes += chunk.length));
      req.on("end", () => {
        received.push(bytes);
        res.writeHead(308, { range: `bytes=0-${bytes - 1}`, location: "http://127.0.0.1:9/elsewhere" }).end();
      });
    });
    const size = 3 * 1024 * 1024 + 17;
    const body = () =>
      new ReadableStream<Uint8Array>({
        start(controller) {
          for (let sent = 0; sent < size; sent += 64 * 1024) controller.enqueue(new Uint8Array(Math.min(64 * 1024, size - sent)).fill(7));
          controller.close();
        },
      });
    const init = (): RequestInit & { duplex: "half" } => ({
      method: "PUT",
      headers: { "content-length": String(size) },
      body: body(),
      duplex: "half",
    });
    const allowed = createNodeOutbound(parseOutboundAllow("127.0.0.1/32"));
    const refusing = createNodeOutbound(EMPTY_ALLOW_LIST);
    try {
      const res = await allowed.streamingFetch(`${target.url}/upload`, init());
      expect(res.status).toBe(308);
      expect(res.headers.get("range")).toBe(`bytes=0-${size - 1}`);
      expect(received).toEqual([size]);
      const err = await refusing.streamingFetch(`${target.url}/upload`, init()).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(DestinationNotAllowedError);
      expect(target.hits).toEqual(["/upload"]);
    } finally {
      await allowed.close();
      await refusing.close();
    }
  });

  it("caps the answer's size and the request's time", async () => {
    const big = await open((_q, r) => {
      r.writeHead(200, { "content-type": "application/octet-stream" }); // chunked: no declared length
      const chunk = Buffer.alloc(64 * 1024, 97);
      let sent = 0;
      const pump = () => {
        while (sent < 2 * 1024 * 1024) {
          sent += chunk.length;
          if (!r.write(chunk)) return void r.once("drain", pump);
        }
        r.end();
      };
      pump();
    });
    const declared = await open((_q, r) => r.writeHead(200, { "content-length": String(4 * 1024 * 1024) }).end(Buffer.alloc(4 * 1024 * 1024)));
    const hung = await open(() => undefined);
    const guard = createNodeOutbound(parseOutboundAllow("127.0.0.1/32"), { timeoutMs: 1_500, maxResponseBytes: 1024 * 1024 });
    try {
      const res = await guard.fetch(big.url);
      await expect(res.arrayBuffer()).rejects.toThrow();
      await expect(guard.fetch(declared.url)).rejects.toThrow(/larger than 1048576 bytes/);
      const started = performance.now();
      await expect(guard.fetch(hung.url)).rejects.toThrow();
      expect(performance.now() - started).toBeLessThan(10_000);
    } finally {
      await guard.close();
    }
  });
});

describe("settings that point at a refused place (400 destination_not_allowed)", () => {
  let idp: TestOidcProvider;
  beforeAll(async () => {
    idp = await startOidcProvider();
  });
  afterAll(async () => idp.close());

  it("refuses an OIDC issuer and an S3 endpoint on loopback or a private network without fetching them", async () => {
    const t = await makeTestApp({ config: { HANGAR_OUTBOUND_ALLOW: "" } });
    const { ownerToken } = await buildWorld(t);
    const internal = await open();
    const httpsLoopback = `https://127.0.0.1:${internal.port}`;
    const oidc = await t.call("PUT", "/v1/settings/external-access/oidc", {
      token: ownerToken,
      body: { issuer_url: httpsLoopback, client_id: TEST_CLIENT_ID },
    });
    expect([oidc.status, oidc.body.code]).toEqual([400, "destination_not_allowed"]);
    expect(oidc.body.message).toContain("127.0.0.1");
    expect(oidc.body.message).toContain("HANGAR_OUTBOUND_ALLOW");
    // The real provider on loopback: refused too while nothing allows it (plain http → the https rule).
    const plain = await t.call("PUT", "/v1/settings/external-access/oidc", {
      token: ownerToken,
      body: { issuer_url: idp.issuer, client_id: TEST_CLIENT_ID },
    });
    expect([plain.status, plain.body.code]).toEqual([400, "invalid_input"]);
    for (const endpoint of ["https://169.254.169.254", "https://10.0.0.5:9000", "https://2130706433", "https://[::1]:9000"]) {
      const s3 = await t.call("PUT", "/v1/settings/artifact-storage", {
        token: ownerToken,
        body: { provider: "s3", s3: { endpoint, region: "us-east-1", bucket: "hangar-artifacts", access_key_id: "AK", secret_access_key: "SK" } },
      });
      expect([endpoint, s3.status, s3.body.code]).toEqual([endpoint, 400, "destination_not_allowed"]);
    }
    const httpS3 = await t.call("PUT", "/v1/settings/artifact-storage", {
      token: ownerToken,
      body: {
        provider: "s3",
        s3: { endpoint: internal.url, region: "us-east-1", bucket: "hangar-artifacts", access_key_id: "AK", secret_access_key: "SK" },
      },
    });
    expect([httpS3.status, httpS3.body.code]).toEqual([400, "invalid_s3_endpoint"]);
    expect(internal.hits).toEqual([]);
    expect(idp.issuer.startsWith("http://127.0.0.1:")).toBe(true);
  });

  it("accepts the same provider over plain http once HANGAR_OUTBOUND_ALLOW lists it", async () => {
    const t = await makeTestApp({ config: { HANGAR_OUTBOUND_ALLOW: "127.0.0.1/32" } });
    const { ownerToken } = await buildWorld(t);
    const res = await t.call("PUT", "/v1/settings/external-access/oidc", {
      token: ownerToken,
      body: { issuer_url: idp.issuer, client_id: TEST_CLIENT_ID },
    });
    expect(res.status).toBe(200);
  });
});

describe("a project's repository at trigger time (422 source_not_allowed)", () => {
  let repo: GitRepo;
  beforeAll(() => {
    repo = makeGitRepo();
  });
  afterAll(() => repo.remove());

  it("refuses a repository on a loopback HTTP git server; git never connects", async () => {
    const t = await makeTestApp({ config: { HANGAR_OUTBOUND_ALLOW: "" } });
    const git = await startGitHttpServer(repo.path, { username: "bot", password: "pw" });
    try {
      const w = await buildWorld(t, { repo_url: git.url });
      for (const repo_url of [git.url, git.url.replace("127.0.0.1", "2130706433"), git.url.replace("127.0.0.1", "localhost")]) {
        const p = await createProject(t, w.ownerToken, { repo_url, name: `p-${Math.random()}` });
        const pl = await createPipeline(t, w.ownerToken, p.id);
        const res = await t.call("POST", `/v1/projects/${p.id}/builds`, { token: w.ownerToken, body: { pipeline_id: pl.id } });
        expect([repo_url, res.status, res.body.code]).toEqual([repo_url, 422, "source_not_allowed"]);
        expect(res.body.message).toContain("HANGAR_OUTBOUND_ALLOW");
      }
      expect(git.seen).toEqual([]);
    } finally {
      await git.close();
    }
  });

  it("refuses ssh and scp-like repositories for branch resolution (the daemon user's keys are never used)", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t, { repo_url: "ssh://git@127.0.0.1:1/x.git" });
    for (const repo_url of ["ssh://git@example.com/x.git", "git@example.com:acme/app.git", "git://example.com/x.git"]) {
      const p = await createProject(t, w.ownerToken, { repo_url, name: `p-${Math.random()}` });
      const pl = await createPipeline(t, w.ownerToken, p.id);
      const res = await t.call("POST", `/v1/projects/${p.id}/builds`, { token: w.ownerToken, body: { pipeline_id: pl.id } });
      expect([repo_url, res.status, res.body.code]).toEqual([repo_url, 422, "source_not_allowed"]);
      // A given commit skips resolution: the runner clones with its own identity.
      const given = await t.call("POST", `/v1/projects/${p.id}/builds`, { token: w.ownerToken, body: { pipeline_id: pl.id, commit_sha: "abcdef1" } });
      expect(given.status).toBe(200);
    }
  });

  it("allows local paths and file:// in local mode, refuses them in remote mode unless HANGAR_ALLOW_LOCAL_REPOS=1", async () => {
    for (const allowLocal of ["0", "1"]) {
      const t = await makeTestApp({ config: { HANGAR_ALLOW_LOCAL_REPOS: allowLocal } });
      const w = await buildWorld(t, { repo_url: repo.url });
      const trigger = (body: Record<string, unknown> = {}) =>
        t.call("POST", `/v1/projects/${w.project.id}/builds`, { token: w.ownerToken, body: { pipeline_id: w.pipeline.id, ...body } });
      expect((await trigger()).status).toBe(200);
      await setInstance(t, { runtimeMode: "remote" });
      const path = await createProject(t, w.ownerToken, { repo_url: repo.path, name: "by-path" });
      const pathPipeline = await createPipeline(t, w.ownerToken, path.id);
      const byPath = await t.call("POST", `/v1/projects/${path.id}/builds`, { token: w.ownerToken, body: { pipeline_id: pathPipeline.id } });
      for (const res of [await trigger(), byPath, await trigger({ commit_sha: "abcdef1" })]) {
        if (allowLocal === "1") expect(res.status).toBe(200);
        else {
          expect([res.status, res.body.code]).toEqual([422, "source_not_allowed"]);
          expect(res.body.message).toContain("HANGAR_ALLOW_LOCAL_REPOS=1");
        }
      }
    }
  });
});

describe("git runs without the daemon user's configuration", () => {
  it("never reads a hostile ~/.gitconfig: no credential helper runs, no extra header is sent", async () => {
    const repo = makeGitRepo();
    const home = mkdtempSync(join(tmpdir(), "hangar-hostile-home-"));
    const marker = join(home, "credential-helper-ran");
    const git = await startGitHttpServer(repo.path, { username: "bot", password: "pw" });
    const saved = { HOME: process.env.HOME, XDG_CONFIG_HOME: process.env.XDG_CONFIG_HOME };
    writeFileSync(
      join(home, ".gitconfig"),
      [
        "[credential]",
        `\thelper = "!f() { touch '${marker}'; echo username=bot; echo password=pw; }; f"`,
        "[http]",
        "\textraHeader = Authorization: Basic " + Buffer.from("bot:pw").toString("base64"),
        "",
      ].join("\n"),
    );
    // The hostile config works for a git that reads it: the proof that the daemon's git does not.
    const plain = await new Promise<string>((resolve) =>
      execFile(
        "git",
        ["ls-remote", "--", git.url, "refs/heads/main"],
        { env: { PATH: process.env.PATH, HOME: home, GIT_TERMINAL_PROMPT: "0" } },
        (_e, out) => resolve(out),
      ),
    );
    expect(plain).toContain(repo.shas.main);
    git.seen.length = 0;
    try {
      process.env.HOME = home;
      process.env.XDG_CONFIG_HOME = home;
      rmSync(marker, { force: true });
      const t = await makeTestApp();
      const w = await buildWorld(t, { repo_url: git.url });
      const res = await t.call("POST", `/v1/projects/${w.project.id}/builds`, { token: w.ownerToken, body: { pipeline_id: w.pipeline.id } });
      expect([res.status, res.body.code]).toEqual([422, "source_unreachable"]);
      expect(existsSync(marker)).toBe(false);
      expect(git.seen.length).toBeGreaterThan(0);
      expect(git.seen.every((h) => h === "")).toBe(true);
    } finally {
      process.env.HOME = saved.HOME;
      if (saved.XDG_CONFIG_HOME === undefined) delete process.env.XDG_CONFIG_HOME;
      else process.env.XDG_CONFIG_HOME = saved.XDG_CONFIG_HOME;
      await git.close();
      repo.remove();
      rmSync(home, { recursive: true, force: true });
    }
  });
});
