// Store keys per project (docs/publishing.md): checked on save, sealed, never answered.
import { eq } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { auditEvents, projects } from "../../src/db/schema/index.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { buildWorld } from "../helpers/builds.ts";
import { userWithRole } from "../helpers/factories.ts";
import { makeAscKey, makeServiceAccount } from "../helpers/store-keys.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON
type Json = any;

describe("store credentials", () => {
  let t: TestApp;
  let w: Awaited<ReturnType<typeof buildWorld>>;
  const asc = makeAscKey();
  const google = makeServiceAccount("https://oauth2.googleapis.com/token");
  beforeAll(async () => {
    t = await makeTestApp();
    w = await buildWorld(t);
  });
  const base = () => `/v1/projects/${w.project.id}/stores`;
  const secretParts = () => [asc.privatePem.split("\n")[1]!, google.privatePem.split("\n")[1]!];

  it("starts empty, stores both keys sealed, answers only what they are", async () => {
    const empty = await t.call("GET", base(), { token: w.ownerToken });
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual({ app_store_connect: null, google_play: null });

    const putAsc = await t.call("PUT", `${base()}/app-store-connect`, {
      token: w.ownerToken,
      body: { issuer_id: asc.issuerId, key_id: asc.keyId, private_key_p8: asc.privatePem },
    });
    expect(putAsc.status).toBe(200);
    expect(putAsc.body).toEqual({ app_store_connect: { issuer_id: asc.issuerId, key_id: asc.keyId, has_private_key: true }, google_play: null });

    const putGoogle = await t.call("PUT", `${base()}/google-play`, { token: w.ownerToken, body: { service_account_json: google.json } });
    expect(putGoogle.status).toBe(200);
    const expected = {
      app_store_connect: { issuer_id: asc.issuerId, key_id: asc.keyId, has_private_key: true },
      google_play: { client_email: google.clientEmail, project_id: "example-project", has_service_account: true },
    };
    expect(putGoogle.body).toEqual(expected);
    const get = await t.call("GET", base(), { token: w.ownerToken });
    expect(get.body).toEqual(expected);

    const row = await t.deps.db.select().from(projects).where(eq(projects.id, w.project.id)).get();
    for (const part of secretParts()) {
      expect(row!.appStoreConnectSealed).not.toContain(part);
      expect(row!.googlePlaySealed).not.toContain(part);
      for (const answer of [
        putAsc.text,
        putGoogle.text,
        get.text,
        (await t.call("GET", `/v1/projects/${w.project.id}`, { token: w.ownerToken })).text,
      ]) {
        expect(answer).not.toContain(part);
      }
    }
    expect(JSON.parse(await t.deps.secrets.open(row!.appStoreConnectSealed!)).private_key_p8).toBe(asc.privatePem.trim());
    const audit = await t.deps.db.select().from(auditEvents);
    expect(audit.filter((e) => e.action === "project.store.set")).toHaveLength(2);
    for (const part of secretParts()) expect(JSON.stringify(audit)).not.toContain(part);
  });

  const badAsc: Array<[string, Json]> = [
    ["an RSA key as a .p8", () => ({ issuer_id: asc.issuerId, key_id: asc.keyId, private_key_p8: google.privatePem })],
    ["not a PEM", () => ({ issuer_id: asc.issuerId, key_id: asc.keyId, private_key_p8: "hello" })],
  ];
  it.each(badAsc)("refuses an App Store Connect key that does not parse: %s (400 invalid_store_credentials)", async (_name, body) => {
    const res = await t.call("PUT", `${base()}/app-store-connect`, { token: w.ownerToken, body: body() });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe("invalid_store_credentials");
  });

  const badGoogle: Array<[string, () => string]> = [
    ["not JSON", () => "{not json"],
    ["not a service account", () => JSON.stringify({ type: "authorized_user", client_id: "x" })],
    ["an EC key in the file", () => JSON.stringify({ ...JSON.parse(google.json), private_key: asc.privatePem })],
    ["no token_uri", () => JSON.stringify({ ...JSON.parse(google.json), token_uri: undefined })],
  ];
  it.each(badGoogle)("refuses a service account file that does not parse: %s (400 invalid_store_credentials)", async (_name, json) => {
    const res = await t.call("PUT", `${base()}/google-play`, { token: w.ownerToken, body: { service_account_json: json() } });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe("invalid_store_credentials");
  });

  it("refuses a body with missing fields (400 invalid_input), viewers (403) and unknown projects (404)", async () => {
    const missing = await t.call("PUT", `${base()}/app-store-connect`, { token: w.ownerToken, body: { key_id: asc.keyId } });
    expect(missing.status).toBe(400);
    expect(missing.body.code).toBe("invalid_input");
    const viewer = await userWithRole(t, "qa_viewer");
    const get = await t.call("GET", base(), { token: viewer.token });
    expect(get.status).toBe(403);
    const put = await t.call("PUT", `${base()}/google-play`, { token: viewer.token, body: { service_account_json: google.json } });
    expect(put.status).toBe(403);
    const unknown = await t.call("GET", "/v1/projects/nope/stores", { token: w.ownerToken });
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe("not_found");
  });
});
