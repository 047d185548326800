// App metadata read on complete (docs/api.md §7): Info.plist, icon (CgBI restored), provisioning profile, APK
// manifest and resources; GET /v1/artifacts/{id}, its icon, and install_not_possible. Fixtures are made by
// test/helpers/app-fixtures.ts: real zips, plists, CMS containers (openssl cms -sign), CgBI PNGs, binary XML.
import { execFileSync } from "node:child_process";
import { inflateRawSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeSetting } from "../../src/domain/settings/instance-settings.ts";
import { NETWORK_SETTING } from "../../src/domain/settings/network-settings.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import {
  DEMO_INFO,
  cmsSign,
  decodePng,
  encodeCgbi,
  encodePng,
  makeApk,
  makeIpaArchive,
  makePlist,
  makeProfile,
  makeZip,
  samplePixels,
} from "../helpers/app-fixtures.ts";
import { artifactWorld, uploadArtifact, type ArtifactWorld } from "../helpers/artifact-world.ts";
import { userWithRole } from "../helpers/factories.ts";

const W = 48;
const H = 40;

/** Every pixel within what premultiplied storage can keep: exact when opaque, within 255/(2·alpha)+1 else. */
function expectSamePicture(actual: Uint8Array, expected: Uint8Array): void {
  expect(actual.length).toBe(expected.length);
  let worst = 0;
  for (let i = 0; i < expected.length; i += 4) {
    const a = expected[i + 3]!;
    expect(actual[i + 3]).toBe(a);
    if (a === 0) continue;
    const tolerance = a === 255 ? 0 : Math.ceil(255 / (2 * a)) + 1;
    for (let c = 0; c < 3; c++) {
      const diff = Math.abs(actual[i + c]! - expected[i + c]!);
      worst = Math.max(worst, diff - tolerance);
    }
  }
  expect(worst).toBeLessThanOrEqual(0);
}

describe("app metadata", () => {
  let t: TestApp;
  let w: ArtifactWorld;
  const pixels = samplePixels(W, H);
  const normalPng = encodePng(W, H, pixels);
  const cgbiPng = encodeCgbi(W, H, pixels);

  beforeAll(async () => {
    t = await makeTestApp();
    w = await artifactWorld(t);
    await writeSetting(t.deps, NETWORK_SETTING, {
      public_url: "https://ci.example.com",
      artifact_delivery_url: null,
      allowed_origins: ["https://ci.example.com"],
    });
  });
  afterAll(() => t.close());

  const getArtifact = (id: string, token = w.ownerToken) => t.call("GET", `/v1/artifacts/${id}`, { token });
  const getIcon = (id: string, token = w.ownerToken) => t.app.request(`/v1/artifacts/${id}/icon`, { headers: { authorization: `Bearer ${token}` } });
  const link = (id: string) => t.call("POST", `/v1/artifacts/${id}/install-link`, { token: w.ownerToken });

  it("the fixtures are what other tools read: python3's zipfile and plistlib, openssl cms -verify", () => {
    const ipa = makeIpaArchive({ info: DEMO_INFO, binaryPlist: true, profile: makeProfile({ kind: "ad_hoc", devices: 2 }) });
    const script = `
import io, json, plistlib, sys, zipfile
z = zipfile.ZipFile(io.BytesIO(sys.stdin.buffer.read()))
assert z.testzip() is None
info = plistlib.loads(z.read("Payload/Demo.app/Info.plist"))
print(json.dumps({"names": z.namelist(), "info": info}))
`;
    const out = JSON.parse(execFileSync("python3", ["-c", script], { input: ipa }).toString());
    expect(out.names).toContain("Payload/Demo.app/embedded.mobileprovision");
    expect(out.info).toEqual(DEMO_INFO);
    // The profile is a CMS SignedData openssl itself parses (signature not checked: a throwaway signer).
    const content = execFileSync("openssl", ["cms", "-verify", "-noverify", "-inform", "DER"], {
      input: makeProfile({ kind: "ad_hoc", devices: 2 }),
    }).toString();
    expect(content).toContain("<key>ProvisionedDevices</key>");
  });

  it("reads an IPA with an XML Info.plist, a CgBI icon and an ad-hoc profile", async () => {
    const expires = "2027-06-30T12:00:00Z";
    const ipa = makeIpaArchive({
      info: DEMO_INFO,
      profile: makeProfile({ kind: "ad_hoc", devices: 7, expires, name: "Demo AdHoc", team: "Example Team <Ltd>" }),
      // The largest declared icon is taken; the smaller one is a decoy of another size.
      icons: { "AppIcon60x60@3x.png": cgbiPng, "AppIcon60x60@2x.png": encodeCgbi(8, 8, samplePixels(8, 8)) },
      fillerBytes: 256 * 1024,
    });
    const created = await uploadArtifact(t, w, "Demo.ipa", ipa);
    expect(created.app).toMatchObject({ platform: "ios", bundle_identifier: "com.example.demo" });
    const r = await getArtifact(created.id);
    expect(r.status).toBe(200);
    expect(r.headers.get("cache-control")).toBe("no-store");
    expect(r.body.id).toBe(created.id);
    expect(r.body.filename).toBe("Demo.ipa");
    expect(r.body.app).toEqual({
      platform: "ios",
      name: "Demo <b>App</b>",
      bundle_identifier: "com.example.demo",
      version: "2.3",
      build: "45",
      min_os: "15.0",
      has_icon: true,
      signing: { kind: "ad_hoc", profile_name: "Demo AdHoc", team: "Example Team <Ltd>", expires_at: Date.parse(expires) / 1000, device_count: 7 },
    });
    // Without install_metadata from the runner, the manifest's fields come from the same Info.plist.
    expect(r.body.install_metadata).toEqual({ bundle_identifier: "com.example.demo", bundle_version: "2.3", title: "Demo <b>App</b>" });

    const icon = await getIcon(created.id);
    expect(icon.status).toBe(200);
    expect(icon.headers.get("content-type")).toBe("image/png");
    expect(icon.headers.get("x-content-type-options")).toBe("nosniff");
    const restored = decodePng(new Uint8Array(await icon.arrayBuffer()));
    expect([restored.width, restored.height]).toEqual([W, H]);
    // The same picture as the standard PNG, with straight (not premultiplied) alpha.
    expectSamePicture(restored.data, decodePng(normalPng).data);
  });

  it("reads a binary Info.plist, a standard PNG icon kept as is, and an enterprise profile in BER (indefinite lengths)", async () => {
    const ipa = makeIpaArchive({
      info: { ...DEMO_INFO, CFBundleDisplayName: undefined, CFBundleName: "Binary Demo", CFBundleVersion: "46" },
      binaryPlist: true,
      profile: cmsSign(
        makePlist({ Name: "In House", TeamName: "Big Corp", ProvisionsAllDevices: true, ExpirationDate: { $date: "2027-12-01T00:00:00Z" } }),
        { stream: true },
      ),
      icons: { "AppIcon60x60@2x.png": normalPng },
    });
    const created = await uploadArtifact(t, w, "Binary.ipa", ipa);
    const r = await getArtifact(created.id);
    expect(r.body.app).toMatchObject({ name: "Binary Demo", build: "46", version: "2.3", has_icon: true });
    expect(r.body.app.signing).toEqual({
      kind: "enterprise",
      profile_name: "In House",
      team: "Big Corp",
      expires_at: Date.parse("2027-12-01T00:00:00Z") / 1000,
      device_count: null,
    });
    const icon = await getIcon(created.id);
    expect(new Uint8Array(await icon.arrayBuffer())).toEqual(normalPng);
  });

  it("tells development from ad-hoc by get-task-allow, and App Store by the absent device list", async () => {
    const dev = await uploadArtifact(t, w, "Dev.ipa", makeIpaArchive({ info: DEMO_INFO, profile: makeProfile({ kind: "development", devices: 2 }) }));
    expect((await getArtifact(dev.id)).body.app.signing).toMatchObject({ kind: "development", device_count: 2 });
    const store = await uploadArtifact(t, w, "Store.ipa", makeIpaArchive({ info: DEMO_INFO, profile: makeProfile({ kind: "app_store" }) }));
    expect((await getArtifact(store.id)).body.app.signing).toMatchObject({ kind: "app_store", device_count: null });
    expect((await getArtifact(store.id)).body.app.has_icon).toBe(false);
  });

  it("422 install_not_possible for an App Store-signed IPA and an expired profile, in words", async () => {
    const store = await uploadArtifact(t, w, "Store.ipa", makeIpaArchive({ info: DEMO_INFO, profile: makeProfile({ kind: "app_store" }) }));
    const r = await link(store.id);
    expect(r.status).toBe(422);
    expect(r.body.code).toBe("install_not_possible");
    expect(r.body.message).toMatch(/App Store/);

    // The test clock stands in 2027; this profile ended in 2026.
    const old = await uploadArtifact(
      t,
      w,
      "Old.ipa",
      makeIpaArchive({ info: DEMO_INFO, profile: makeProfile({ kind: "ad_hoc", expires: "2026-03-01T00:00:00Z", name: "Old AdHoc" }) }),
    );
    const e = await link(old.id);
    expect(e.status).toBe(422);
    expect(e.body.code).toBe("install_not_possible");
    expect(e.body.message).toMatch(/expired on 2026-03-01/);
    expect(e.body.message).toContain("Old AdHoc");

    // A current ad-hoc profile installs, and the answer carries the page URL.
    const ok = await uploadArtifact(
      t,
      w,
      "Ok.ipa",
      makeIpaArchive({ info: DEMO_INFO, profile: makeProfile({ kind: "ad_hoc", expires: "2028-01-01T00:00:00Z" }) }),
    );
    const good = await link(ok.id);
    expect(good.status).toBe(200);
    expect(good.body.page_url).toMatch(/^https:\/\/ci\.example\.com\/install\/[A-Za-z0-9_-]{43}$/);
    expect(good.body.manifest_url).toContain(good.body.page_url.split("/install/")[1]);
  });

  it("reads an APK: package, versions, minimum SDK, label and the densest launcher icon from manifest and resources", async () => {
    const big = samplePixels(W, H);
    const apk = makeApk({
      packageName: "com.example.android",
      versionCode: 112,
      versionName: "2.3.1",
      minSdk: 24,
      label: "Demo Android",
      icons: [
        { density: 480, png: encodePng(8, 8, samplePixels(8, 8)) },
        { density: 640, png: encodePng(W, H, big) },
        { density: 160, png: encodePng(4, 4, samplePixels(4, 4)) },
      ],
    });
    const created = await uploadArtifact(t, w, "demo.apk", apk, { content_type: "application/vnd.android.package-archive" });
    const r = await getArtifact(created.id);
    expect(r.body.app).toEqual({
      platform: "android",
      name: "Demo Android",
      bundle_identifier: "com.example.android",
      version: "2.3.1",
      build: "112",
      min_os: "24",
      has_icon: true,
      signing: null,
    });
    const icon = decodePng(new Uint8Array(await (await getIcon(created.id)).arrayBuffer()));
    expect([icon.width, icon.height]).toEqual([W, H]);
    expect(icon.data).toEqual(big);
    const l = await link(created.id);
    expect(l.status).toBe(200);
    expect(l.body.page_url).toMatch(/^https:\/\/ci\.example\.com\/install\/[A-Za-z0-9_-]{43}$/);
  });

  describe("hostile archives: absent metadata, never a 5xx", () => {
    it("a truncated IPA completes with app null", async () => {
      const ipa = makeIpaArchive({ info: DEMO_INFO, icons: { "AppIcon60x60@3x.png": cgbiPng } });
      const created = await uploadArtifact(t, w, "Cut.ipa", ipa.subarray(0, Math.floor(ipa.length * 0.6)));
      expect(created.app).toBeNull();
      expect((await getArtifact(created.id)).body.app).toBeNull();
      const icon = await getIcon(created.id);
      expect(icon.status).toBe(404);
      expect(((await icon.json()) as { code: string }).code).toBe("not_found");
    });

    it("a zip bomb (an Info.plist inflating to 64 MiB) completes quickly with app null", async () => {
      const bomb = makeZip([{ name: "Payload/Demo.app/Info.plist", data: new Uint8Array(64 * 1024 * 1024) }]);
      expect(bomb.length).toBeLessThan(1024 * 1024);
      const started = Date.now();
      const created = await uploadArtifact(t, w, "Bomb.ipa", bomb);
      expect(Date.now() - started).toBeLessThan(15_000);
      expect(created.app).toBeNull();
    });

    it("a bomb APK manifest and a garbage resources.arsc: no metadata, or metadata without label", async () => {
      const bomb = makeZip([{ name: "AndroidManifest.xml", data: new Uint8Array(64 * 1024 * 1024) }]);
      expect((await uploadArtifact(t, w, "bomb.apk", bomb)).app).toBeNull();
      const apk = makeApk({ label: "Hidden" });
      // Replace resources.arsc with random bytes of the same length: the manifest still reads.
      const broken = makeZip([
        { name: "AndroidManifest.xml", data: extractManifest(apk) },
        { name: "resources.arsc", data: crypto.getRandomValues(new Uint8Array(4096)), stored: true },
      ]);
      const created = await uploadArtifact(t, w, "broken.apk", broken);
      expect(created.app).toMatchObject({ platform: "android", bundle_identifier: "com.example.demo", build: "112", name: null, has_icon: false });
    });

    it("a binary plist bomb (shared references) and an XML entity bomb leave metadata absent or unexpanded", async () => {
      // 40 levels of arrays each pointing twice at the next: 2^40 visits if references were followed naively.
      const objects: Uint8Array[] = [];
      const levels = 40;
      for (let i = 0; i < levels; i++) objects.push(Uint8Array.from([0xa2, i + 1, i + 1]));
      objects.push(Uint8Array.from([0x51, 0x78]));
      const bplist = binaryPlist(objects);
      const a = await uploadArtifact(t, w, "BBomb.ipa", makeZip([{ name: "Payload/Demo.app/Info.plist", data: bplist }]));
      expect(a.app).toBeNull();

      let entities = '<!ENTITY a0 "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA">';
      for (let i = 1; i < 12; i++) entities += `<!ENTITY a${i} "${`&a${i - 1};`.repeat(10)}">`;
      const xml = `<?xml version="1.0"?><!DOCTYPE plist [${entities}]><plist version="1.0"><dict><key>CFBundleIdentifier</key><string>&a11;</string><key>CFBundleShortVersionString</key><string>1</string></dict></plist>`;
      const started = Date.now();
      const b = await uploadArtifact(t, w, "XBomb.ipa", makeZip([{ name: "Payload/Demo.app/Info.plist", data: xml }]));
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(String(b.app?.bundle_identifier ?? "").length).toBeLessThan(1000);
    });

    it("a profile that is not CMS and an icon that is not a PNG: the rest of the metadata stays", async () => {
      const ipa = makeIpaArchive({
        info: DEMO_INFO,
        profile: makePlist(profileLike()),
        icons: { "AppIcon60x60@3x.png": new TextEncoder().encode("<svg xmlns='http://www.w3.org/2000/svg'></svg>") },
      });
      const created = await uploadArtifact(t, w, "Odd.ipa", ipa);
      expect(created.app).toMatchObject({ bundle_identifier: "com.example.demo", has_icon: false, signing: null });
      expect((await getIcon(created.id)).status).toBe(404);
      // Without a profile to judge by, the link is made: the phone has the last word.
      expect((await link(created.id)).status).toBe(200);
      // A CgBI icon cut short is no icon either.
      const cut = await uploadArtifact(
        t,
        w,
        "CutIcon.ipa",
        makeIpaArchive({ info: DEMO_INFO, icons: { "AppIcon60x60@3x.png": cgbiPng.subarray(0, cgbiPng.length - 40) } }),
      );
      expect(cut.app.has_icon).toBe(false);
    });
  });

  it("answers 404 not_found for an unknown artifact and 401 without a session; a qa_viewer may read", async () => {
    const unknown = await getArtifact(crypto.randomUUID());
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe("not_found");
    const icon = await getIcon(crypto.randomUUID());
    expect(icon.status).toBe(404);
    expect(((await icon.json()) as { code: string }).code).toBe("not_found");
    const anon = await t.call("GET", `/v1/artifacts/${crypto.randomUUID()}`);
    expect(anon.status).toBe(401);
    expect(anon.body.code).toBe("missing_auth");
    const anonIcon = await t.call("GET", `/v1/artifacts/${crypto.randomUUID()}/icon`);
    expect(anonIcon.status).toBe(401);
    expect(anonIcon.body.code).toBe("missing_auth");
    const apk = await uploadArtifact(t, w, "qa.apk", makeApk({ icons: [{ density: 480, png: normalPng }] }));
    const { token: qa } = await userWithRole(t, "qa_viewer");
    expect((await getArtifact(apk.id, qa)).status).toBe(200);
    expect((await getIcon(apk.id, qa)).status).toBe(200);
  });
});

function profileLike() {
  return { Name: "Not CMS", TeamName: "Nobody", ProvisionedDevices: ["x"] };
}

/** AndroidManifest.xml out of an APK made by makeApk (it is the first entry, deflated). */
function extractManifest(zip: Uint8Array): Uint8Array {
  const dv = new DataView(zip.buffer, zip.byteOffset, zip.byteLength);
  const method = dv.getUint16(8, true);
  const size = dv.getUint32(18, true);
  const start = 30 + dv.getUint16(26, true) + dv.getUint16(28, true);
  const data = zip.subarray(start, start + size);
  if (method === 0) return data;
  return new Uint8Array(inflateRawSync(data));
}

/** A bplist00 of the given objects (object 0 the top), 1-byte offsets and refs. */
function binaryPlist(objects: Uint8Array[]): Uint8Array {
  const header = new TextEncoder().encode("bplist00");
  const parts: Uint8Array[] = [header];
  const offsets: number[] = [];
  let at = header.length;
  for (const o of objects) {
    offsets.push(at);
    parts.push(o);
    at += o.length;
  }
  const tableOffset = at;
  const offsetSize = at > 255 ? 2 : 1;
  const table = new Uint8Array(offsets.length * offsetSize);
  offsets.forEach((o, i) => {
    if (offsetSize === 2) {
      table[i * 2] = o >> 8;
      table[i * 2 + 1] = o & 0xff;
    } else table[i] = o;
  });
  parts.push(table);
  const trailer = new Uint8Array(32);
  const dv = new DataView(trailer.buffer);
  dv.setUint8(6, offsetSize);
  dv.setUint8(7, 1);
  dv.setBigUint64(8, BigInt(objects.length));
  dv.setBigUint64(16, 0n);
  dv.setBigUint64(24, BigInt(tableOffset));
  parts.push(trailer);
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let p = 0;
  for (const part of parts) {
    out.set(part, p);
    p += part.length;
  }
  return out;
}
