import { execFileSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeSetting } from "../../src/domain/settings/instance-settings.ts";
import { NETWORK_SETTING } from "../../src/domain/settings/network-settings.ts";
import { TRUSTED_PROXY_SETTING } from "../../src/domain/auth/trusted-proxy.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { artifactWorld, makeIpa, pathOf, sha256Of, uploadArtifact, useS3Storage, type ArtifactWorld } from "../helpers/artifact-world.ts";
import { setInstance, userWithRole } from "../helpers/factories.ts";
import { startTestS3, type TestS3 } from "../helpers/s3rver.ts";

const INFO = {
  CFBundleIdentifier: "com.example.demo",
  CFBundleVersion: "42",
  CFBundleShortVersionString: "1.4.2",
  CFBundleDisplayName: "Demo <&> App",
};
const TICKET = "gw-Ticket_123.abc~";

/** The manifest as python3's plistlib reads it: a parser that is not the one that wrote it. */
function plistlibParse(xml: string): { items: Array<{ assets: Array<{ kind: string; url: string }>; metadata: Record<string, string> }> } {
  const out = execFileSync("python3", ["-c", "import json, plistlib, sys; print(json.dumps(plistlib.loads(sys.stdin.buffer.read())))"], {
    input: xml,
  });
  return JSON.parse(out.toString());
}

async function setNetwork(t: TestApp, publicUrl: string | null, deliveryUrl: string | null = null) {
  await writeSetting(t.deps, NETWORK_SETTING, {
    public_url: publicUrl,
    artifact_delivery_url: deliveryUrl,
    allowed_origins: publicUrl ? [new URL(publicUrl).origin] : [],
  });
}

async function setTrustedProxy(t: TestApp, header: string, ticket: string | null) {
  await writeSetting(t.deps, TRUSTED_PROXY_SETTING, {
    setup_owner_email: null,
    user_email_header: header,
    trusted_proxy_cidrs: [],
    shared_secret_sealed: null,
    gateway_access_ticket_sealed: ticket ? await t.deps.secrets.seal(ticket) : null,
    configured_at: t.clock.now(),
  });
}

async function get(t: TestApp, url: string, headers: Record<string, string> = {}) {
  const res = await t.app.request(pathOf(url), { headers }, { peerAddress: "198.51.100.7" });
  return { res, body: new Uint8Array(await res.arrayBuffer()) };
}

describe("install links", () => {
  let t: TestApp;
  let w: ArtifactWorld;
  let ipa: Uint8Array;
  let ios: { id: string };
  let apk: { id: string };
  beforeAll(async () => {
    t = await makeTestApp();
    w = await artifactWorld(t);
    ipa = makeIpa({ plist: INFO });
    ios = await uploadArtifact(t, w, "Demo.ipa", ipa);
    apk = await uploadArtifact(t, w, "demo.apk", Uint8Array.from([1, 2, 3, 4]), { content_type: "application/vnd.android.package-archive" });
  });

  const link = (id: string, token = w.ownerToken) => t.call("POST", `/v1/artifacts/${id}/install-link`, { token });

  it("412 install_base_url_missing without a public or delivery URL", async () => {
    for (const id of [ios.id, apk.id]) {
      const r = await link(id);
      expect(r.status).toBe(412);
      expect(r.body.code).toBe("install_base_url_missing");
    }
  });

  it("412 install_https_required for iOS on an http base; Android accepts it", async () => {
    await setNetwork(t, "http://ci.example.com");
    const r = await link(ios.id);
    expect(r.status).toBe(412);
    expect(r.body.code).toBe("install_https_required");
    const android = await link(apk.id);
    expect(android.status).toBe(200);
    expect(android.body.install_url).toMatch(/^http:\/\/ci\.example\.com\/install\/artifact\/[A-Za-z0-9_-]{43}$/);
  });

  it("422 unsupported_artifact for other files, 422 install_metadata_missing for an IPA without metadata", async () => {
    await setNetwork(t, "https://ci.example.com");
    const zip = await uploadArtifact(t, w, "symbols.zip", Uint8Array.from([1]));
    const r = await link(zip.id);
    expect(r.status).toBe(422);
    expect(r.body.code).toBe("unsupported_artifact");
    const bare = await uploadArtifact(t, w, "Bare.ipa", makeIpa({ plist: null }));
    const m = await link(bare.id);
    expect(m.status).toBe(422);
    expect(m.body.code).toBe("install_metadata_missing");
  });

  it("builds the iOS session on the delivery URL (rule 1): itms-services URL, manifest, download, one hour", async () => {
    await setNetwork(t, "https://ci.example.com", "https://dl.example.com/hangar");
    const { token: qa } = await userWithRole(t, "qa_viewer");
    const r = await link(ios.id, qa);
    expect(r.status).toBe(200);
    expect(r.body.platform).toBe("ios");
    expect(r.body.expires_at).toBe(t.clock.now() + 3600);
    expect(r.body.manifest_url).toMatch(/^https:\/\/dl\.example\.com\/hangar\/install\/ios\/[A-Za-z0-9_-]{43}\/manifest\.plist$/);
    expect(r.body.download_url).toMatch(/^https:\/\/dl\.example\.com\/hangar\/install\/artifact\/[A-Za-z0-9_-]{43}$/);
    const itms = new URL(r.body.install_url);
    expect(r.body.install_url.startsWith("itms-services://?action=download-manifest&url=https%3A%2F%2Fdl.example.com%2F")).toBe(true);
    expect(itms.searchParams.get("action")).toBe("download-manifest");
    expect(itms.searchParams.get("url")).toBe(r.body.manifest_url);
  });

  it("serves the manifest as application/xml, reusable, read back by plistlib", async () => {
    await setNetwork(t, "https://ci.example.com");
    const r = await link(ios.id);
    for (let i = 0; i < 2; i++) {
      const { res, body } = await get(t, r.body.manifest_url);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("application/xml");
      expect(res.headers.get("referrer-policy")).toBe("no-referrer");
      const plist = plistlibParse(new TextDecoder().decode(body));
      expect(plist.items).toHaveLength(1);
      expect(plist.items[0]!.assets).toEqual([{ kind: "software-package", url: r.body.download_url }]);
      expect(plist.items[0]!.metadata).toEqual({
        "bundle-identifier": "com.example.demo",
        "bundle-version": "1.4.2",
        kind: "software",
        title: "Demo <&> App",
      });
    }
  });

  it("redirects /install/artifact once to /install/download, which streams the IPA (ranges too)", async () => {
    const r = await link(ios.id);
    const first = await get(t, r.body.download_url);
    expect(first.res.status).toBe(302);
    const location = first.res.headers.get("location")!;
    expect(location).toBe(r.body.download_url.replace("/install/artifact/", "/install/download/"));
    const { res, body } = await get(t, location);
    expect(res.status).toBe(200);
    expect(sha256Of(body)).toBe(sha256Of(ipa));
    expect(res.headers.get("content-disposition")).toBe('attachment; filename="Demo.ipa"');
    expect(res.headers.get("content-length")).toBe(String(ipa.length));
    const part = await get(t, location, { range: "bytes=0-3" });
    expect(part.res.status).toBe(206);
    expect(part.body).toEqual(ipa.subarray(0, 4));
  });

  it("expires the session after one hour (410 link_expired) and answers 404 not_found for unknown tokens", async () => {
    const r = await link(ios.id);
    t.clock.advance(3599);
    expect((await get(t, r.body.manifest_url)).res.status).toBe(200);
    t.clock.advance(1);
    for (const url of [r.body.manifest_url, r.body.download_url, r.body.download_url.replace("/artifact/", "/download/")]) {
      const res = await t.call("GET", pathOf(url));
      expect(res.status).toBe(410);
      expect(res.body.code).toBe("link_expired");
    }
    const unknown = await t.call("GET", `/install/ios/${"C".repeat(43)}/manifest.plist`);
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe("not_found");
  });

  it("gives Android the scoped APK URL under /install/ and no manifest", async () => {
    const r = await link(apk.id);
    expect(r.status).toBe(200);
    expect(r.body.platform).toBe("android");
    expect(r.body).not.toHaveProperty("manifest_url");
    expect(r.body.install_url).toBe(r.body.download_url);
    expect(r.body.install_url).toMatch(/^https:\/\/ci\.example\.com\/install\/artifact\/[A-Za-z0-9_-]{43}$/);
    const token = pathOf(r.body.install_url).split("/")[3];
    const manifest = await t.call("GET", `/install/ios/${token}/manifest.plist`);
    expect(manifest.status).toBe(404);
    const redirect = await get(t, r.body.install_url);
    const { body } = await get(t, redirect.res.headers.get("location")!);
    expect(body).toEqual(Uint8Array.from([1, 2, 3, 4]));
  });

  it("needs a session (401 missing_auth) and an available artifact (404 not_found)", async () => {
    const anon = await t.call("POST", `/v1/artifacts/${ios.id}/install-link`);
    expect(anon.status).toBe(401);
    expect(anon.body.code).toBe("missing_auth");
    const unknown = await link(crypto.randomUUID());
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe("not_found");
  });
});

describe("gateway-ticket (install-link rule 4)", () => {
  let t: TestApp;
  let w: ArtifactWorld;
  let ios: { id: string };
  let apk: { id: string };
  beforeAll(async () => {
    t = await makeTestApp();
    w = await artifactWorld(t);
    ios = await uploadArtifact(t, w, "Demo.ipa", makeIpa({ plist: INFO }));
    apk = await uploadArtifact(t, w, "demo.apk", Uint8Array.from([9]));
    await setNetwork(t, "https://ci.example.com");
  });

  const link = (id: string) => t.call("POST", `/v1/artifacts/${id}/install-link`, { token: w.ownerToken });

  it("adds the ticket to the manifest and IPA URLs and carries it through manifest and redirect", async () => {
    await setInstance(t, { runtimeMode: "remote", remoteAuthMode: "trusted_proxy" });
    await setTrustedProxy(t, "X-Gateway-Username", TICKET);
    const r = await link(ios.id);
    expect(r.status).toBe(200);
    expect(new URL(r.body.manifest_url).searchParams.get("gateway-ticket")).toBe(TICKET);
    expect(new URL(r.body.download_url).searchParams.get("gateway-ticket")).toBe(TICKET);
    expect(new URL(r.body.install_url).searchParams.get("url")).toBe(r.body.manifest_url);
    const manifest = plistlibParse(new TextDecoder().decode((await get(t, r.body.manifest_url)).body));
    expect(manifest.items[0]!.assets[0]!.url).toBe(r.body.download_url);
    const redirect = await get(t, r.body.download_url);
    expect(new URL(redirect.res.headers.get("location")!).searchParams.get("gateway-ticket")).toBe(TICKET);
    expect(new URL(redirect.res.headers.get("location")!).pathname).toMatch(/^\/install\/download\//);
    // The ticket alone grants nothing: the artifact token is still required.
    const bogus = await t.call("GET", `/install/artifact/${"D".repeat(43)}?gateway-ticket=${TICKET}`);
    expect(bogus.status).toBe(404);
  });

  it("never adds it for Android", async () => {
    await setInstance(t, { runtimeMode: "remote", remoteAuthMode: "trusted_proxy" });
    await setTrustedProxy(t, "x-gateway-username", TICKET);
    const r = await link(apk.id);
    expect(r.body.install_url).not.toContain("gateway-ticket");
  });

  it.each([
    ["a generic trusted proxy", "remote", "trusted_proxy", "x-hangar-user-email", TICKET],
    ["a gateway without a stored ticket", "remote", "trusted_proxy", "x-gateway-username", null],
    ["OIDC", "remote", "oidc", "x-gateway-username", TICKET],
    ["local mode", "local", "trusted_proxy", "x-gateway-username", TICKET],
  ] as const)("is inactive for %s", async (_, mode, auth, header, ticket) => {
    await setInstance(t, { runtimeMode: mode, remoteAuthMode: auth });
    await setTrustedProxy(t, header, ticket);
    const r = await link(ios.id);
    expect(r.status).toBe(200);
    for (const url of [r.body.install_url, r.body.manifest_url, r.body.download_url]) expect(url).not.toContain("gateway-ticket");
    const manifest = plistlibParse(new TextDecoder().decode((await get(t, r.body.manifest_url)).body));
    expect(manifest.items[0]!.assets[0]!.url).not.toContain("gateway-ticket");
  });
});

describe("install from S3 storage", () => {
  let s3: TestS3;
  afterAll(async () => s3?.close());

  it("redirects /install/artifact to a presigned GET that serves the IPA", async () => {
    s3 = await startTestS3();
    const t = await makeTestApp();
    t.clock.set(Math.floor(Date.now() / 1000));
    const w = await artifactWorld(t);
    await useS3Storage(t, s3.endpoint, s3.bucket);
    await setNetwork(t, "https://ci.example.com");
    const ipa = makeIpa({ plist: INFO, binary: true });
    const created = await t.call("POST", w.jobPath, {
      token: w.runner.token,
      body: { filename: "Demo.ipa", size_bytes: ipa.length, content_type: "application/octet-stream" },
    });
    expect((await fetch(created.body.upload.url, { method: "PUT", headers: created.body.upload.headers, body: ipa })).status).toBe(200);
    const done = await t.call("POST", `${w.jobPath}/${created.body.artifact.id}/complete`, { token: w.runner.token });
    // Metadata read from the binary plist through ranged GETs on the object store.
    expect(done.body.artifact.install_metadata).toEqual({ bundle_identifier: "com.example.demo", bundle_version: "1.4.2", title: "Demo <&> App" });
    const r = await t.call("POST", `/v1/artifacts/${created.body.artifact.id}/install-link`, { token: w.ownerToken });
    const redirect = await get(t, r.body.download_url);
    expect(redirect.res.status).toBe(302);
    const location = redirect.res.headers.get("location")!;
    expect(location.startsWith(s3.endpoint)).toBe(true);
    const got = await fetch(location);
    expect(got.status).toBe(200);
    expect(sha256Of(new Uint8Array(await got.arrayBuffer()))).toBe(sha256Of(ipa));
    expect(s3.requests.every((q) => q.verified)).toBe(true);
  });
});
