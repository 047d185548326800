import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { auditEvents, instanceSettings } from "../../src/db/schema/index.ts";
import { ARTIFACT_STORAGE_SETTING, readActiveStorageSettings } from "../../src/domain/settings/artifact-storage-settings.ts";
import { makeTestApp } from "../helpers/app.ts";
import { completeLocalSetup, userWithRole } from "../helpers/factories.ts";

const PATH = "/v1/settings/artifact-storage";
const SECRET = "s3-secret-access-key/EXAMPLEKEY+abc";
const S3 = {
  endpoint: "https://s3.eu-central-1.amazonaws.com",
  region: "eu-central-1",
  bucket: "hangar-artifacts",
  prefix: "builds/",
  access_key_id: "AKIAEXAMPLE",
  secret_access_key: SECRET,
  force_path_style: false,
};

async function ready() {
  const t = await makeTestApp();
  const { ownerToken, owner } = await completeLocalSetup(t);
  return { t, ownerToken, owner };
}

describe("GET /v1/settings/artifact-storage", () => {
  it("answers local storage under the data directory before anything is chosen", async () => {
    const { t, ownerToken } = await ready();
    const res = await t.call("GET", PATH, { token: ownerToken });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      provider: "local",
      local: { base_dir: `${t.dataDir}/artifacts` },
      s3: { endpoint: null, region: null, bucket: null, prefix: null, access_key_id: null, force_path_style: false, has_secret_access_key: false },
      updated_at: null,
    });
  });

  it("answers 403 insufficient_role to developers and QA viewers, on GET and PUT", async () => {
    const { t } = await ready();
    for (const role of ["developer", "qa_viewer"] as const) {
      const { token } = await userWithRole(t, role);
      for (const method of ["GET", "PUT"]) {
        const res = await t.call(method, PATH, { token, body: method === "PUT" ? { provider: "local" } : undefined });
        expect([res.status, res.body.code], `${role} ${method}`).toEqual([403, "insufficient_role"]);
      }
    }
  });
});

describe("PUT /v1/settings/artifact-storage", () => {
  it("stores S3 settings with the secret sealed and write-only", async () => {
    const { t, owner } = await ready();
    const admin = await userWithRole(t, "admin");
    const res = await t.call("PUT", PATH, { token: admin.token, body: { provider: "s3", s3: S3 } });
    expect(res.status).toBe(200);
    const { secret_access_key: _secret, ...visible } = S3;
    expect(res.body).toEqual({
      provider: "s3",
      local: { base_dir: `${t.dataDir}/artifacts` },
      s3: { ...visible, has_secret_access_key: true },
      updated_at: t.clock.now(),
    });
    expect(res.text).not.toContain(SECRET);
    const get = await t.call("GET", PATH, { token: admin.token });
    expect(get.body).toEqual(res.body);
    const row = await t.deps.db.select().from(instanceSettings).where(eq(instanceSettings.key, ARTIFACT_STORAGE_SETTING)).get();
    expect(JSON.stringify(row?.value)).not.toContain(SECRET);
    // The artifacts area gets the opened secret.
    expect(await readActiveStorageSettings(t.deps)).toMatchObject({
      provider: "s3",
      bucket: "hangar-artifacts",
      accessKeyId: "AKIAEXAMPLE",
      secretAccessKey: SECRET,
    });
    const audit = await t.deps.db.select().from(auditEvents).where(eq(auditEvents.action, "settings.artifact_storage_updated")).all();
    expect(audit).toHaveLength(1);
    expect(audit[0]?.actorUserId).toBe(admin.user.id);
    expect(JSON.stringify(audit[0]?.details)).not.toContain(SECRET);
    expect(owner.id).not.toBe(admin.user.id);
  });

  it("keeps the stored secret when a client sends back what it read, and drops it when the key id changes", async () => {
    const { t, ownerToken } = await ready();
    await t.call("PUT", PATH, { token: ownerToken, body: { provider: "s3", s3: S3 } });
    const read = (await t.call("GET", PATH, { token: ownerToken })).body;
    const resent = await t.call("PUT", PATH, { token: ownerToken, body: { ...read, s3: { ...read.s3, prefix: "other/" } } });
    expect(resent.status).toBe(200);
    expect(resent.body.s3).toMatchObject({ prefix: "other/", has_secret_access_key: true });
    const newKey = await t.call("PUT", PATH, { token: ownerToken, body: { provider: "s3", s3: { access_key_id: "AKIAOTHER" } } });
    expect([newKey.status, newKey.body.code]).toEqual([400, "missing_s3_credentials"]);
    const removed = await t.call("PUT", PATH, { token: ownerToken, body: { provider: "s3", s3: { secret_access_key: null } } });
    expect([removed.status, removed.body.code]).toEqual([400, "missing_s3_credentials"]);
  });

  it("treats R2 as S3 with region auto, and allows plain http only for a loopback endpoint", async () => {
    const { t, ownerToken } = await ready();
    const r2 = await t.call("PUT", PATH, {
      token: ownerToken,
      body: { provider: "r2", s3: { ...S3, endpoint: "https://0123456789abcdef.r2.cloudflarestorage.com", region: "eu-central-1" } },
    });
    expect(r2.status).toBe(200);
    expect(r2.body).toMatchObject({ provider: "r2", s3: { region: "auto" } });
    const local = await t.call("PUT", PATH, {
      token: ownerToken,
      body: { provider: "s3", s3: { ...S3, endpoint: "http://127.0.0.1:4569/", region: null, force_path_style: true } },
    });
    expect(local.status).toBe(200);
    expect(local.body.s3).toMatchObject({ endpoint: "http://127.0.0.1:4569", region: "us-east-1", force_path_style: true });
  });

  it("switches back to a writable local directory, creating it", async () => {
    const { t, ownerToken } = await ready();
    await t.call("PUT", PATH, { token: ownerToken, body: { provider: "s3", s3: S3 } });
    const dir = join(t.dataDir, "elsewhere", "artifacts");
    const res = await t.call("PUT", PATH, { token: ownerToken, body: { provider: "local", local: { base_dir: dir } } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ provider: "local", local: { base_dir: dir }, s3: { bucket: "hangar-artifacts", has_secret_access_key: true } });
    expect(await readActiveStorageSettings(t.deps)).toEqual({ provider: "local", baseDir: dir });
    // The default directory, as GET shows it, is accepted back unchanged.
    const def = await t.call("PUT", PATH, { token: ownerToken, body: { provider: "local", local: { base_dir: `${t.dataDir}/artifacts` } } });
    expect(def.status).toBe(200);
  });

  it.each([
    ["a relative directory", { provider: "local", local: { base_dir: "artifacts" } }, "invalid_local_base_dir"],
    ["a directory below a file", { provider: "local", local: { base_dir: "<file>/sub" } }, "invalid_local_base_dir"],
    ["a missing bucket", { provider: "s3", s3: { ...S3, bucket: null } }, "invalid_s3_bucket"],
    ["an upper-case bucket", { provider: "s3", s3: { ...S3, bucket: "Hangar" } }, "invalid_s3_bucket"],
    ["a two-letter bucket", { provider: "s3", s3: { ...S3, bucket: "ab" } }, "invalid_s3_bucket"],
    ["a bucket like an IP address", { provider: "s3", s3: { ...S3, bucket: "192.168.5.4" } }, "invalid_s3_bucket"],
    ["a bucket with adjacent dots", { provider: "r2", s3: { ...S3, bucket: "my..bucket" } }, "invalid_s3_bucket"],
    ["a bucket with a reserved prefix", { provider: "s3", s3: { ...S3, bucket: "xn--bucket" } }, "invalid_s3_bucket"],
    ["a missing endpoint", { provider: "s3", s3: { ...S3, endpoint: null } }, "invalid_s3_endpoint"],
    ["a relative endpoint", { provider: "s3", s3: { ...S3, endpoint: "s3.amazonaws.com" } }, "invalid_s3_endpoint"],
    ["a plain-http public endpoint", { provider: "s3", s3: { ...S3, endpoint: "http://minio.example.com" } }, "invalid_s3_endpoint"],
    ["an endpoint with credentials", { provider: "r2", s3: { ...S3, endpoint: "https://user:pw@r2.example.com" } }, "invalid_s3_endpoint"],
    ["no access key id", { provider: "s3", s3: { ...S3, access_key_id: null } }, "missing_s3_credentials"],
    ["no secret", { provider: "s3", s3: { ...S3, secret_access_key: undefined } }, "missing_s3_credentials"],
    ["an empty secret", { provider: "r2", s3: { ...S3, secret_access_key: "" } }, "missing_s3_credentials"],
    ["an unknown provider", { provider: "gcs" }, "invalid_input"],
    ["a prefix with '..'", { provider: "s3", s3: { ...S3, prefix: "a/../b" } }, "invalid_input"],
  ])("answers 400 for %s", async (_name, body, code) => {
    const { t, ownerToken } = await ready();
    const file = join(t.dataDir, "plain-file");
    writeFileSync(file, "x");
    const fixed = JSON.parse(JSON.stringify(body).replace("<file>", file));
    const res = await t.call("PUT", PATH, { token: ownerToken, body: fixed });
    expect([res.status, res.body.code]).toEqual([400, code]);
    expect((await t.call("GET", PATH, { token: ownerToken })).body.updated_at).toBeNull();
  });

  it("refuses local storage where the runtime has no disk", async () => {
    const t = await makeTestApp({ deps: { checkWritableDir: undefined } });
    const { ownerToken } = await completeLocalSetup(t);
    const res = await t.call("PUT", PATH, { token: ownerToken, body: { provider: "local", local: { base_dir: "/tmp" } } });
    expect([res.status, res.body.code]).toEqual([400, "invalid_local_base_dir"]);
  });
});
