// docs/api.md §3's OIDC rules against the real oidc-provider: (iss, sub) binding, email_verified, the per-client cap
// on pending starts, loopback-only OIDC in local mode, and error messages that never echo the provider's content.
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { users } from "../../src/db/schema/index.ts";
import { writeSetting } from "../../src/domain/settings/instance-settings.ts";
import { TRUSTED_PROXY_SETTING } from "../../src/domain/auth/trusted-proxy.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { sessionFor, setInstance } from "../helpers/factories.ts";
import {
  completeOidcSetup,
  startOidcProvider,
  startTokenForge,
  TEST_CLIENT_ID,
  TEST_CLIENT_SECRET,
  TEST_REDIRECT_URI,
  wallClockSeconds,
  type TestOidcProvider,
  type TokenForge,
} from "../helpers/oidc-provider.ts";

let idp: TestOidcProvider;
let forge: TokenForge;
beforeAll(async () => {
  [idp, forge] = await Promise.all([startOidcProvider(), startTokenForge()]);
});
afterAll(async () => {
  await Promise.all([idp.close(), forge.close()]);
});

const START = `/v1/auth/oidc/start?redirect_uri=${encodeURIComponent(TEST_REDIRECT_URI)}`;

async function readyApp(): Promise<{ t: TestApp; ownerToken: string }> {
  const t = await makeTestApp();
  t.clock.set(wallClockSeconds());
  await completeOidcSetup(t, idp);
  const owner = await t.deps.db.select().from(users).where(eq(users.role, "owner")).get();
  return { t, ownerToken: await sessionFor(t, owner!) };
}

async function invite(t: TestApp, ownerToken: string, email: string) {
  const res = await t.call("POST", "/v1/users/invite", { token: ownerToken, body: { email, role: "developer" } });
  expect(res.status).toBe(200);
  return res.body as { id: string };
}

/** Start, the provider's pages as `accountId`, callback; from `peer` with `headers` (default: this machine). */
async function signIn(t: TestApp, accountId: string, options: { peer?: string; headers?: Record<string, string> } = {}) {
  const start = await t.call("GET", START, options);
  expect(start.status, start.text).toBe(200);
  const { code, state } = await idp.authorize(start.body.authorization_url, accountId);
  return t.call("POST", "/v1/auth/oidc/callback", { body: { code, state }, ...options });
}

describe("binding to (iss, sub)", () => {
  it("binds a user at its first OIDC sign-in; another account with the same email gets 403 user_not_found", async () => {
    const { t, ownerToken } = await readyApp();
    const dev = await invite(t, ownerToken, "dev@example.com");
    const first = await signIn(t, "dev-sub");
    expect(first.status).toBe(200);
    const row = await t.deps.db.select().from(users).where(eq(users.id, dev.id)).get();
    expect([row?.oidcIssuer, row?.oidcSubject]).toEqual([idp.issuer, "dev-sub"]);

    const twin = await signIn(t, "dev-twin-sub");
    expect([twin.status, twin.body.code]).toEqual([403, "user_not_found"]);
    // The binding was not overwritten: the first account still signs in.
    expect((await signIn(t, "dev-sub")).status).toBe(200);
    expect((await t.deps.db.select().from(users).where(eq(users.id, dev.id)).get())?.oidcSubject).toBe("dev-sub");
  });

  it("the owner made through OIDC setup is bound too", async () => {
    const { t } = await readyApp();
    const owner = await t.deps.db.select().from(users).where(eq(users.role, "owner")).get();
    expect([owner?.oidcIssuer, owner?.oidcSubject]).toEqual([idp.issuer, "owner-sub"]);
  });

  it("disabling and enabling the user resets the binding: the next account to sign in binds", async () => {
    const { t, ownerToken } = await readyApp();
    const dev = await invite(t, ownerToken, "dev@example.com");
    expect((await signIn(t, "dev-sub")).status).toBe(200);
    expect((await t.call("DELETE", `/v1/users/${dev.id}`, { token: ownerToken })).status).toBe(200);
    const enabled = await t.call("POST", `/v1/users/${dev.id}/enable`, { token: ownerToken });
    expect(enabled.status, enabled.text).toBe(200);
    const twin = await signIn(t, "dev-twin-sub");
    expect(twin.status).toBe(200);
    expect(twin.body.user).toMatchObject({ user_id: dev.id, oidc_subject: "dev-twin-sub" });
    const old = await signIn(t, "dev-sub");
    expect([old.status, old.body.code]).toEqual([403, "user_not_found"]);
  });
});

describe("email_verified", () => {
  it("answers 502 missing_email when email_verified is false or absent", async () => {
    const { t, ownerToken } = await readyApp();
    await invite(t, ownerToken, "unverified@example.com");
    await invite(t, ownerToken, "unstated@example.com");
    for (const account of ["unverified-sub", "unstated-sub"]) {
      const res = await signIn(t, account);
      expect([res.status, res.body.code], account).toEqual([502, "missing_email"]);
    }
    const row = await t.deps.db.select().from(users).where(eq(users.email, "unstated@example.com")).get();
    expect([row?.status, row?.oidcSubject]).toEqual(["invited", null]);
  });

  it("accepts them once the owner sets trust_unverified_email, kept across a re-save that omits it", async () => {
    const { t, ownerToken } = await readyApp();
    await invite(t, ownerToken, "unverified@example.com");
    await invite(t, ownerToken, "unstated@example.com");
    const body = { issuer_url: idp.issuer, client_id: TEST_CLIENT_ID, client_secret: TEST_CLIENT_SECRET };
    const trusted = await t.call("PUT", "/v1/settings/external-access/oidc", { token: ownerToken, body: { ...body, trust_unverified_email: true } });
    expect(trusted.status, trusted.text).toBe(200);
    expect(trusted.body.trust_unverified_email).toBe(true);
    expect((await signIn(t, "unverified-sub")).status).toBe(200);
    const resaved = await t.call("PUT", "/v1/settings/external-access/oidc", { token: ownerToken, body });
    expect(resaved.body.trust_unverified_email).toBe(true);
    expect((await signIn(t, "unstated-sub")).status).toBe(200);
    const off = await t.call("PUT", "/v1/settings/external-access/oidc", { token: ownerToken, body: { ...body, trust_unverified_email: false } });
    expect(off.body.trust_unverified_email).toBe(false);
    expect((await signIn(t, "unstated-sub")).body.code).toBe("missing_email");
    const bad = await t.call("PUT", "/v1/settings/external-access/oidc", { token: ownerToken, body: { ...body, trust_unverified_email: "yes" } });
    expect([bad.status, bad.body.code]).toEqual([400, "invalid_input"]);
  });
});

describe("pending starts per client", () => {
  it("allows 20 pending starts per peer (429 too_many_pending for the 21st); other peers are not affected", async () => {
    const { t } = await readyApp();
    await setInstance(t, { runtimeMode: "remote" });
    const first = await Promise.all(Array.from({ length: 20 }, () => t.call("GET", START, { peer: "203.0.113.5" })));
    for (const r of first) expect(r.status).toBe(200);
    const over = await t.call("GET", START, { peer: "203.0.113.5" });
    expect([over.status, over.body.code]).toEqual([429, "too_many_pending"]);
    // The same peer as IPv4-mapped IPv6 is the same client.
    expect((await t.call("GET", START, { peer: "::ffff:203.0.113.5" })).status).toBe(429);
    // A forged X-Forwarded-For from a peer that is not a trusted proxy changes nothing.
    const forged = await t.call("GET", START, { peer: "203.0.113.5", headers: { "x-forwarded-for": "198.51.100.1" } });
    expect([forged.status, forged.body.code]).toEqual([429, "too_many_pending"]);
    expect((await t.call("GET", START, { peer: "203.0.113.6" })).status).toBe(200);
    // Ten minutes later the first ones have expired.
    t.clock.advance(600);
    expect((await t.call("GET", START, { peer: "203.0.113.5" })).status).toBe(200);
  });

  it("behind a loopback or listed proxy, counts the last address X-Forwarded-For adds", async () => {
    const { t } = await readyApp();
    await setInstance(t, { runtimeMode: "remote" });
    const fromProxy = (peer: string, xff: string) => t.call("GET", START, { peer, headers: { "x-forwarded-for": xff } });
    // A loopback proxy: the client's own forged entries come first and do not count.
    for (let i = 0; i < 20; i++) expect((await fromProxy("127.0.0.1", `10.9.9.${i}, 198.51.100.7`)).status).toBe(200);
    expect((await fromProxy("127.0.0.1", "1.2.3.4, 198.51.100.7")).status).toBe(429);
    expect((await fromProxy("127.0.0.1", "198.51.100.8")).status).toBe(200);
    // A proxy listed in trusted_proxy_cidrs (the document as trusted-proxy configure stores it).
    await writeSetting(t.deps, TRUSTED_PROXY_SETTING, {
      setup_owner_email: null,
      user_email_header: "x-hangar-user-email",
      trusted_proxy_cidrs: ["192.0.2.0/24"],
      shared_secret_sealed: null,
      gateway_access_ticket_sealed: null,
      configured_at: t.clock.now(),
    });
    for (let i = 0; i < 20; i++) expect((await fromProxy("192.0.2.10", "198.51.100.20")).status).toBe(200);
    expect((await fromProxy("192.0.2.10", "198.51.100.20")).status).toBe(429);
    expect((await fromProxy("192.0.2.10", "198.51.100.21")).status).toBe(200);
  });
});

describe("pending starts per client: IPv6 and Workers", () => {
  it("counts IPv6 clients by their /64", async () => {
    const { t } = await readyApp();
    await setInstance(t, { runtimeMode: "remote" });
    for (let i = 0; i < 20; i++) expect((await t.call("GET", START, { peer: `2001:db8:1:2::${(i + 1).toString(16)}` })).status).toBe(200);
    // Another address of the same /64, however it is spelled.
    const over = await t.call("GET", START, { peer: "2001:0db8:0001:0002:ffff:ffff:ffff:ffff" });
    expect([over.status, over.body.code]).toEqual([429, "too_many_pending"]);
    // The next /64 is another client.
    expect((await t.call("GET", START, { peer: "2001:db8:1:3::1" })).status).toBe(200);
  });

  it("with no peer address (a Worker), counts CF-Connecting-IP, IPv6 by its /64", async () => {
    const { t } = await readyApp();
    await setInstance(t, { runtimeMode: "remote" });
    // No peerAddress in the env: what the Workers entry passes (getPeerAddress answers undefined).
    const fromEdge = (ip: string) => t.app.request(START, { headers: { "cf-connecting-ip": ip } }, {});
    for (let i = 0; i < 20; i++) expect((await fromEdge("198.51.100.40")).status).toBe(200);
    const over = await fromEdge("198.51.100.40");
    expect(over.status).toBe(429);
    expect(((await over.json()) as { code: string }).code).toBe("too_many_pending");
    expect((await fromEdge("198.51.100.41")).status).toBe(200);
    for (let i = 0; i < 20; i++) expect((await fromEdge(`2001:db8:9:9::${i + 1}`)).status).toBe(200);
    expect((await fromEdge("2001:db8:9:9:abcd::1")).status).toBe(429);
    // A Node daemon's client cannot pick its key with the header: the socket decides.
    for (let i = 0; i < 20; i++)
      expect((await t.call("GET", START, { peer: "203.0.113.77", headers: { "cf-connecting-ip": `198.51.100.${i}` } })).status).toBe(200);
    expect((await t.call("GET", START, { peer: "203.0.113.77", headers: { "cf-connecting-ip": "198.51.100.250" } })).status).toBe(429);
  });
});

describe("local mode", () => {
  it("answers start and callback only for loopback clients (403 local_login_loopback_required)", async () => {
    const { t } = await readyApp();
    const clients: Array<{ peer: string; headers?: Record<string, string> }> = [
      { peer: "192.168.1.20" },
      { peer: "127.0.0.1", headers: { "x-forwarded-for": "203.0.113.1" } },
      { peer: "127.0.0.1", headers: { host: "ci.example.com" } },
    ];
    for (const options of clients) {
      const start = await t.call("GET", START, options);
      expect([start.status, start.body.code], JSON.stringify(options)).toEqual([403, "local_login_loopback_required"]);
    }
    // A callback for a start made on this machine, finished from the LAN.
    const start = await t.call("GET", START);
    const { code, state } = await idp.authorize(start.body.authorization_url, "owner-sub");
    const lan = await t.call("POST", "/v1/auth/oidc/callback", { body: { code, state }, peer: "192.168.1.20" });
    expect([lan.status, lan.body.code]).toEqual([403, "local_login_loopback_required"]);
    // The pending request was not used up: the machine itself can still finish it.
    expect((await t.call("POST", "/v1/auth/oidc/callback", { body: { code, state } })).status).toBe(200);
  });
});

describe("no echo of provider content", () => {
  it("keeps the discovery document's values and bodies out of error messages", async () => {
    const { t, ownerToken } = await readyApp();
    const put = () =>
      t.call("PUT", "/v1/settings/external-access/oidc", { token: ownerToken, body: { issuer_url: forge.issuer, client_id: TEST_CLIENT_ID } });
    forge.discovery = { issuer: "<script>alert('ECHO-MARK')</script>" };
    const wrongIssuer = await put();
    expect([wrongIssuer.status, wrongIssuer.body.code]).toEqual([400, "oidc_discovery_failed"]);
    expect(wrongIssuer.text).not.toContain("ECHO-MARK");
    forge.discovery = {};
    for (const answer of [
      (res: import("node:http").ServerResponse) => res.writeHead(200, { "content-type": "application/json" }).end("ECHO-MARK not json"),
      (res: import("node:http").ServerResponse) => res.writeHead(500, { "content-type": "text/plain" }).end("ECHO-MARK internal details"),
      (res: import("node:http").ServerResponse) => res.writeHead(200, { "content-type": "application/json" }).end('"ECHO-MARK"'),
    ]) {
      forge.discoveryOverride = answer;
      const res = await put();
      expect([res.status, res.body.code]).toEqual([400, "oidc_discovery_failed"]);
      expect(res.text).not.toContain("ECHO-MARK");
    }
    forge.discoveryOverride = null;
  });
});
