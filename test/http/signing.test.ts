// Signing material checked on upload, described without secrets, handed to runners with every profile, and its
// health (docs/signing.md): real material from openssl and keytool, real HTTP through app.request().
import { beforeAll, describe, expect, it } from "vitest";
import { eq } from "drizzle-orm";
import { outbox, projects } from "../../src/db/schema/index.ts";
import { countPendingDeliveries, runOutboxOnce } from "../../src/domain/events/outbox.ts";
import { runMaintenance } from "../../src/domain/setup/maintenance.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { claim, createPipeline, createProject, queueBuild, registerRunner } from "../helpers/builds.ts";
import { completeLocalSetup, sessionFor } from "../helpers/factories.ts";
import { startReceiver, type Receiver } from "../helpers/receiver.ts";
import {
  b64,
  makeKeystore,
  makeSigningIdentity,
  makeSigningProfile,
  P12_PASSWORD,
  type AndroidKeystore,
  type SigningIdentity,
} from "../helpers/signing-material.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON
type Json = any;

const APP_UUID = "11111111-2222-4333-8444-555555555555";
const WIDGET_UUID = "66666666-7777-4888-9999-AAAAAAAAAAAA";
const DAY = 86_400;

let t: TestApp;
let owner: string;
let identity: SigningIdentity;
let other: SigningIdentity;
let appProfile: Uint8Array;
let widgetProfile: Uint8Array;
let foreignProfile: Uint8Array;
let expiredProfile: Uint8Array;
let jks: AndroidKeystore;
let pkcs12Keystore: AndroidKeystore;
const nowS = Math.floor(Date.now() / 1000);

beforeAll(async () => {
  t = await makeTestApp({ config: { HANGAR_OUTBOX_RETRY_BASE_MS: "5" } });
  ({ ownerToken: owner } = await completeLocalSetup(t));
  identity = makeSigningIdentity({ days: 200 });
  other = makeSigningIdentity({ days: 200, name: "Someone Else", team: "ZZZZZ99999" });
  appProfile = makeSigningProfile({
    certificates: [other.certDer, identity.certDer],
    uuid: APP_UUID,
    bundleId: "com.example.app",
    expiresAt: nowS + 100 * DAY,
    name: "App Store app",
  });
  widgetProfile = makeSigningProfile({
    certificates: [identity.certDer],
    uuid: WIDGET_UUID,
    bundleId: "com.example.app.widget",
    expiresAt: nowS + 150 * DAY,
    name: "App Store widget",
    kind: "ad_hoc",
  });
  foreignProfile = makeSigningProfile({
    certificates: [other.certDer],
    uuid: "99999999-2222-4333-8444-555555555555",
    bundleId: "com.example.other",
    expiresAt: nowS + 100 * DAY,
  });
  expiredProfile = makeSigningProfile({
    certificates: [identity.certDer],
    uuid: "EEEEEEEE-2222-4333-8444-555555555555",
    bundleId: "com.example.*",
    expiresAt: nowS - DAY,
    name: "Expired wildcard",
  });
  jks = makeKeystore("JKS");
  pkcs12Keystore = makeKeystore("PKCS12", { alias: "release" });
}, 120_000);

async function newProject(): Promise<Json> {
  return createProject(t, owner);
}

function iosBody(overrides: Record<string, unknown> = {}) {
  return {
    certificate_p12_base64: b64(identity.p12),
    certificate_password: P12_PASSWORD,
    provisioning_profiles_base64: [b64(appProfile), b64(widgetProfile)],
    ...overrides,
  };
}

describe("PUT /v1/projects/{id}/signing/ios", () => {
  it("opens a modern PKCS#12, reads two profiles and describes them; GET …/signing answers the same, never a secret", async () => {
    const project = await newProject();
    const put = await t.call("PUT", `/v1/projects/${project.id}/signing/ios`, { token: owner, body: iosBody() });
    expect(put.status).toBe(200);
    expect(put.body.has_ios_signing).toBe(true);
    expect(put.body.ios.certificate).toEqual({
      subject: "C=US, O=Example Team, OU=ABCDE12345, CN=Apple Distribution: Example Team (ABCDE12345), UID=ABCDE12345",
      team_id: "ABCDE12345",
      serial: identity.serial,
      expires_at: expect.any(Number),
    });
    expect(Math.abs(put.body.ios.certificate.expires_at - (nowS + 200 * DAY))).toBeLessThan(DAY);
    expect(put.body.ios.profiles).toEqual([
      {
        name: "App Store app",
        uuid: APP_UUID,
        app_id: "ABCDE12345.com.example.app",
        team_id: "ABCDE12345",
        kind: "app_store",
        expires_at: expect.any(Number),
        device_count: null,
      },
      {
        name: "App Store widget",
        uuid: WIDGET_UUID,
        app_id: "ABCDE12345.com.example.app.widget",
        team_id: "ABCDE12345",
        kind: "ad_hoc",
        expires_at: expect.any(Number),
        device_count: 2,
      },
    ]);
    expect(put.body.android).toBeNull();
    const get = await t.call("GET", `/v1/projects/${project.id}/signing`, { token: owner });
    expect(get.status).toBe(200);
    expect(get.body).toEqual({ ios: put.body.ios, android: null });
    for (const text of [put.text, get.text]) {
      expect(text).not.toContain(P12_PASSWORD);
      expect(text).not.toContain(b64(identity.p12).slice(0, 40));
    }
  });

  it("opens a legacy (RC2/3DES) PKCS#12 and still takes the old single profile field", async () => {
    const project = await newProject();
    const put = await t.call("PUT", `/v1/projects/${project.id}/signing/ios`, {
      token: owner,
      body: { certificate_p12_base64: b64(identity.p12Legacy), certificate_password: P12_PASSWORD, provisioning_profile_base64: b64(appProfile) },
    });
    expect(put.status).toBe(200);
    expect(put.body.ios.profiles.map((p: Json) => p.uuid)).toEqual([APP_UUID]);
  });

  it("accepts an expired profile (health shows it as expired)", async () => {
    const project = await newProject();
    const put = await t.call("PUT", `/v1/projects/${project.id}/signing/ios`, {
      token: owner,
      body: iosBody({ provisioning_profiles_base64: [b64(expiredProfile)] }),
    });
    expect(put.status).toBe(200);
    expect(put.body.ios.profiles[0].expires_at).toBeLessThan(nowS);
  });

  it.each([
    ["a wrong password", () => iosBody({ certificate_password: "wrong" })],
    ["a PKCS#12 without a private key", () => iosBody({ certificate_p12_base64: b64(identity.p12NoKey) })],
    ["bytes that are no PKCS#12", () => iosBody({ certificate_p12_base64: b64(new TextEncoder().encode("not a certificate at all")) })],
  ])("answers 400 invalid_certificate for %s", async (_what, body) => {
    const project = await newProject();
    const res = await t.call("PUT", `/v1/projects/${project.id}/signing/ios`, { token: owner, body: body() });
    expect([res.status, res.body.code]).toEqual([400, "invalid_certificate"]);
    expect(res.body.issues[0].path).toBe("certificate_p12_base64");
    expect(res.text).not.toContain(P12_PASSWORD);
    const stored = await t.deps.db.select().from(projects).where(eq(projects.id, project.id)).get();
    expect(stored?.iosSigningSealed).toBeNull();
  });

  it("answers 400 invalid_profile for a profile that is not CMS-signed, naming which one", async () => {
    const project = await newProject();
    const plain = new TextEncoder().encode('<?xml version="1.0"?><plist version="1.0"><dict/></plist>');
    const res = await t.call("PUT", `/v1/projects/${project.id}/signing/ios`, {
      token: owner,
      body: iosBody({ provisioning_profiles_base64: [b64(appProfile), b64(plain)] }),
    });
    expect([res.status, res.body.code]).toEqual([400, "invalid_profile"]);
    expect(res.body.issues[0].path).toBe("provisioning_profiles_base64.1");
  });

  it("answers 400 certificate_not_in_profile for a profile that lists another certificate", async () => {
    const project = await newProject();
    const res = await t.call("PUT", `/v1/projects/${project.id}/signing/ios`, {
      token: owner,
      body: iosBody({ provisioning_profiles_base64: [b64(foreignProfile)] }),
    });
    expect([res.status, res.body.code]).toEqual([400, "certificate_not_in_profile"]);
    expect(res.body.issues[0].path).toBe("provisioning_profiles_base64.0");
  });

  it("answers 400 invalid_input without any profile", async () => {
    const project = await newProject();
    const res = await t.call("PUT", `/v1/projects/${project.id}/signing/ios`, {
      token: owner,
      body: { certificate_p12_base64: b64(identity.p12), certificate_password: P12_PASSWORD },
    });
    expect([res.status, res.body.code]).toEqual([400, "invalid_input"]);
  });
});

describe("PUT /v1/projects/{id}/signing/android", () => {
  it.each([
    ["JKS", () => jks],
    ["PKCS#12", () => pkcs12Keystore],
  ])("opens a %s keystore made by keytool and describes its certificate", async (_kind, store) => {
    const project = await newProject();
    const ks = store();
    const put = await t.call("PUT", `/v1/projects/${project.id}/signing/android`, {
      token: owner,
      body: { keystore_base64: b64(ks.bytes), keystore_password: ks.storePassword, key_alias: ks.alias, key_password: ks.keyPassword },
    });
    expect(put.status).toBe(200);
    expect(put.body.android).toEqual({
      key_alias: ks.alias,
      certificate: { subject: "CN=Example Upload, O=Example", expires_at: expect.any(Number) },
    });
    expect(put.text).not.toContain(ks.storePassword);
    expect(put.text).not.toContain(ks.keyPassword);
    const get = await t.call("GET", `/v1/projects/${project.id}/signing`, { token: owner });
    expect(get.body.android).toEqual(put.body.android);
  });

  it.each([
    ["a wrong store password (JKS)", () => ({ ks: jks, store: "nope-nope", alias: jks.alias, key: jks.keyPassword })],
    ["a wrong key password (JKS)", () => ({ ks: jks, store: jks.storePassword, alias: jks.alias, key: "nope-nope" })],
    ["an unknown alias (JKS)", () => ({ ks: jks, store: jks.storePassword, alias: "missing", key: jks.keyPassword })],
    ["a wrong password (PKCS#12)", () => ({ ks: pkcs12Keystore, store: "nope-nope", alias: "release", key: "nope-nope" })],
    [
      "an unknown alias (PKCS#12)",
      () => ({ ks: pkcs12Keystore, store: pkcs12Keystore.storePassword, alias: "upload", key: pkcs12Keystore.keyPassword }),
    ],
  ])("answers 400 invalid_keystore for %s", async (_what, make) => {
    const project = await newProject();
    const { ks, store, alias, key } = make();
    const res = await t.call("PUT", `/v1/projects/${project.id}/signing/android`, {
      token: owner,
      body: { keystore_base64: b64(ks.bytes), keystore_password: store, key_alias: alias, key_password: key },
    });
    expect([res.status, res.body.code]).toEqual([400, "invalid_keystore"]);
    expect(res.text).not.toContain(ks.storePassword);
  });
});

describe("the runner's ios-signing answer", () => {
  it("carries every profile with its UUID and bundle id pattern, and the first in the old field", async () => {
    const project = await newProject();
    const pipeline = await createPipeline(t, owner, project.id, { platform: "ios" });
    expect((await t.call("PUT", `/v1/projects/${project.id}/signing/ios`, { token: owner, body: iosBody() })).status).toBe(200);
    const runner = await registerRunner(t, owner, { platforms: ["ios"] });
    await queueBuild(t, owner, project.id, pipeline.id);
    const job = await claim(t, runner);
    const res = await t.call("GET", `/v1/runners/${runner.id}/jobs/${job.build_id}/ios-signing`, { token: job.job_token ?? runner.token });
    expect(res.status).toBe(200);
    expect(res.body.certificate_password).toBe(P12_PASSWORD);
    expect(res.body.provisioning_profile_base64).toBe(b64(appProfile));
    expect(res.body.provisioning_profiles).toEqual([
      { uuid: APP_UUID, name: "App Store app", bundle_id_pattern: "com.example.app", profile_base64: b64(appProfile) },
      { uuid: WIDGET_UUID, name: "App Store widget", bundle_id_pattern: "com.example.app.widget", profile_base64: b64(widgetProfile) },
    ]);
  });
});

describe("signing health", () => {
  let receiver: Receiver;
  beforeAll(async () => {
    receiver = await startReceiver();
  });

  async function drain(): Promise<void> {
    for (let i = 0; i < 200; i++) {
      await runOutboxOnce(t.deps, "test-owner");
      if ((await countPendingDeliveries(t.deps)) === 0) return;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error("the outbox did not drain");
  }

  it("shows ok, expiring (10 days) and expired states as the clock moves, and notifies once a day, once when expired", async () => {
    const fresh = await makeTestApp({ config: { HANGAR_OUTBOX_RETRY_BASE_MS: "5", HANGAR_SIGNING_CHECK_INTERVAL_S: "3600" } });
    const previous = t;
    t = fresh;
    try {
      const { ownerToken, owner: ownerRow } = await completeLocalSetup(t);
      const project = await createProject(t, ownerToken);
      const created = await t.call("POST", `/v1/projects/${project.id}/notifications`, {
        token: ownerToken,
        body: { kind: "webhook", url: `${receiver.url}/signing`, on: ["signing_expiring"] },
      });
      expect(created.status).toBe(200);
      const put = await t.call("PUT", `/v1/projects/${project.id}/signing/ios`, {
        token: ownerToken,
        body: iosBody({ provisioning_profiles_base64: [b64(appProfile)] }),
      });
      expect(put.status).toBe(200);
      const profileExpiry: number = put.body.ios.profiles[0].expires_at;
      const certExpiry: number = put.body.ios.certificate.expires_at;
      // The clock jumps by months: a fresh session for each look (sessions last a day).
      const health = async () => (await t.call("GET", "/v1/signing/health", { token: await sessionFor(t, ownerRow) })).body.items as Json[];
      const stateOf = (items: Json[], kind: string) => items.find((i) => i.kind === kind)?.state;

      // 200 days before the profile's expiry: everything is fine; nothing is sent.
      t.clock.set(profileExpiry - 200 * DAY);
      await runMaintenance(t.deps);
      let items = await health();
      expect(items).toEqual([
        { project_id: project.id, kind: "ios_profile", uuid: APP_UUID, name: "App Store app", expires_at: profileExpiry, state: "ok" },
        {
          project_id: project.id,
          kind: "ios_certificate",
          serial: identity.serial,
          name: "Apple Distribution: Example Team (ABCDE12345)",
          expires_at: certExpiry,
          state: "ok",
        },
      ]);
      await drain();
      const signingRequests = () => receiver.requests.filter((r) => r.path === "/signing").map((r) => JSON.parse(r.body) as Json);
      expect(signingRequests()).toEqual([]);

      // 10 days before: expiring, announced once.
      t.clock.set(profileExpiry - 10 * DAY);
      await runMaintenance(t.deps);
      items = await health();
      expect(stateOf(items, "ios_profile")).toBe("expiring");
      expect(stateOf(items, "ios_certificate")).toBe("ok");
      await drain();
      expect(signingRequests()).toHaveLength(1);
      expect(signingRequests()[0]).toMatchObject({
        type: "signing.expiring",
        data: { project: { id: project.id }, item: { kind: "ios_profile", uuid: APP_UUID, state: "expiring" } },
      });

      // The next passes the same day send nothing more; a day later, once more.
      t.clock.advance(2 * 3600);
      await runMaintenance(t.deps);
      await drain();
      expect(signingRequests()).toHaveLength(1);
      t.clock.advance(DAY);
      await runMaintenance(t.deps);
      await drain();
      expect(signingRequests()).toHaveLength(2);

      // At expiry: expired, announced once, however many passes follow.
      t.clock.set(profileExpiry);
      await runMaintenance(t.deps);
      expect(stateOf(await health(), "ios_profile")).toBe("expired");
      t.clock.advance(2 * DAY);
      await runMaintenance(t.deps);
      t.clock.advance(2 * DAY);
      await runMaintenance(t.deps);
      await drain();
      const expired = signingRequests().filter((r) => r.type === "signing.expired" && r.data.item.kind === "ios_profile");
      expect(expired).toHaveLength(1);
      const rows = await t.deps.db.select().from(outbox).where(eq(outbox.event, "signing.expired"));
      expect(rows.filter((r) => (r.payload as Json).item.kind === "ios_profile")).toHaveLength(1);
    } finally {
      t = previous;
    }
  });
});
