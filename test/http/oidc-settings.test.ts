import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { instanceSettings, users } from "../../src/db/schema/index.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { completeLocalSetup, sessionFor, startSetup, userWithRole } from "../helpers/factories.ts";
import {
  signInWithOidc,
  startOidcProvider,
  startTokenForge,
  TEST_CLIENT_ID,
  TEST_CLIENT_SECRET,
  wallClockSeconds,
  type TestOidcProvider,
  type TokenForge,
} from "../helpers/oidc-provider.ts";

const PATH = "/v1/settings/external-access/oidc";

let idp: TestOidcProvider;
let forge: TokenForge;
beforeAll(async () => {
  [idp, forge] = await Promise.all([startOidcProvider(), startTokenForge()]);
});
afterAll(async () => {
  await Promise.all([idp.close(), forge.close()]);
});

async function readyLocal(): Promise<{ t: TestApp; ownerToken: string }> {
  const t = await makeTestApp();
  t.clock.set(wallClockSeconds());
  return { t, ...(await completeLocalSetup(t, "owner@example.com")) };
}

async function storedSecret(t: TestApp): Promise<string | null> {
  const row = await t.deps.db.select().from(instanceSettings).where(eq(instanceSettings.key, "oidc")).get();
  const sealed = (row?.value as { client_secret_sealed: string | null } | undefined)?.client_secret_sealed ?? null;
  return sealed === null ? null : t.deps.secrets.open(sealed);
}

describe("PUT /v1/settings/external-access/oidc", () => {
  it("lets the owner configure OIDC after setup, after which sign-in goes to that provider", async () => {
    const { t, ownerToken } = await readyLocal();
    const res = await t.call("PUT", PATH, {
      token: ownerToken,
      body: { issuer_url: idp.issuer, client_id: TEST_CLIENT_ID, client_secret: TEST_CLIENT_SECRET },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ discovered_issuer: idp.issuer, has_client_secret: true, trust_unverified_email: false, configured_at: t.clock.now() });
    expect(res.text).not.toContain(TEST_CLIENT_SECRET);
    expect(await storedSecret(t)).toBe(TEST_CLIENT_SECRET);
    const signIn = await signInWithOidc(t, idp, "owner-sub");
    expect(signIn.status).toBe(200);
    expect(signIn.body.user).toMatchObject({ email: "owner@example.com", role: "owner", oidc_subject: "owner-sub" });
    const owner = await t.deps.db.select().from(users).where(eq(users.email, "owner@example.com")).get();
    expect(owner?.oidcSubject).toBe("owner-sub");
  });

  it("keeps the write-only secret when it is omitted for the same provider and client, and drops it otherwise", async () => {
    const { t, ownerToken } = await readyLocal();
    await t.call("PUT", PATH, { token: ownerToken, body: { issuer_url: idp.issuer, client_id: TEST_CLIENT_ID, client_secret: TEST_CLIENT_SECRET } });
    t.clock.advance(10);
    const same = await t.call("PUT", PATH, { token: ownerToken, body: { issuer_url: idp.issuer, client_id: TEST_CLIENT_ID } });
    expect(same.body).toEqual({
      discovered_issuer: idp.issuer,
      has_client_secret: true,
      trust_unverified_email: false,
      configured_at: t.clock.now(),
    });
    expect(await storedSecret(t)).toBe(TEST_CLIENT_SECRET);
    const cleared = await t.call("PUT", PATH, {
      token: ownerToken,
      body: { issuer_url: idp.issuer, client_id: TEST_CLIENT_ID, client_secret: null },
    });
    expect(cleared.body.has_client_secret).toBe(false);
    await t.call("PUT", PATH, { token: ownerToken, body: { issuer_url: idp.issuer, client_id: TEST_CLIENT_ID, client_secret: TEST_CLIENT_SECRET } });
    const otherClient = await t.call("PUT", PATH, { token: ownerToken, body: { issuer_url: idp.issuer, client_id: "another-client" } });
    expect(otherClient.body.has_client_secret).toBe(false);
    expect(await storedSecret(t)).toBeNull();
  });

  it("answers 403 external_access_owner_required for an admin and other roles", async () => {
    const { t } = await readyLocal();
    for (const role of ["admin", "developer", "qa_viewer"] as const) {
      const { token } = await userWithRole(t, role);
      const res = await t.call("PUT", PATH, { token, body: { issuer_url: idp.issuer, client_id: TEST_CLIENT_ID } });
      expect([res.status, res.body.code], role).toEqual([403, "external_access_owner_required"]);
    }
    const anonymous = await t.call("PUT", PATH, { body: { issuer_url: idp.issuer, client_id: TEST_CLIENT_ID } });
    expect([anonymous.status, anonymous.body.code]).toEqual([401, "missing_auth"]);
  });

  it("answers 409 invalid_state before setup is ready", async () => {
    const t = await makeTestApp();
    const setupToken = await startSetup(t);
    await t.call("POST", "/v1/setup/local-owner/create", { token: setupToken, body: { email: "owner@example.com" } });
    const owner = await t.deps.db.select().from(users).where(eq(users.email, "owner@example.com")).get();
    const res = await t.call("PUT", PATH, { token: await sessionFor(t, owner!), body: { issuer_url: idp.issuer, client_id: TEST_CLIENT_ID } });
    expect([res.status, res.body.code]).toEqual([409, "invalid_state"]);
  });

  it("answers 400 invalid_input for bad issuer or client values", async () => {
    const { t, ownerToken } = await readyLocal();
    for (const body of [
      {},
      { issuer_url: idp.issuer },
      { issuer_url: idp.issuer, client_id: "   " },
      { issuer_url: "https://", client_id: TEST_CLIENT_ID },
      { issuer_url: "http://sso.example.com", client_id: TEST_CLIENT_ID },
      { issuer_url: idp.issuer, client_id: TEST_CLIENT_ID, client_secret: 42 },
    ]) {
      const res = await t.call("PUT", PATH, { token: ownerToken, body });
      expect([res.status, res.body.code], JSON.stringify(body)).toEqual([400, "invalid_input"]);
    }
  });

  it("answers 400 oidc_discovery_failed when discovery fails, leaving the previous configuration", async () => {
    const { t, ownerToken } = await readyLocal();
    await t.call("PUT", PATH, { token: ownerToken, body: { issuer_url: idp.issuer, client_id: TEST_CLIENT_ID } });
    forge.discoveryOverride = (res) => res.writeHead(404).end();
    try {
      const res = await t.call("PUT", PATH, { token: ownerToken, body: { issuer_url: forge.issuer, client_id: TEST_CLIENT_ID } });
      expect([res.status, res.body.code]).toEqual([400, "oidc_discovery_failed"]);
    } finally {
      forge.discoveryOverride = null;
    }
    const row = await t.deps.db.select().from(instanceSettings).where(eq(instanceSettings.key, "oidc")).get();
    expect((row?.value as { issuer_url: string }).issuer_url).toBe(idp.issuer);
  });
});
