// Device registration for ad-hoc iOS builds (docs/api.md §18): the Profile Service enrolment a device goes through,
// its CMS-signed answer (made here by `openssl cms -sign` around a real plist, as the device signs its own), the
// project's device list, Apple's upload file, and the tester page's "is my device in this build".
import { eq } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { builds, devices, pipelines } from "../../src/db/schema/index.ts";
import { parsePlist } from "../../src/domain/artifacts/ipa-metadata.ts";
import { NETWORK_SETTING } from "../../src/domain/settings/network-settings.ts";
import { writeSetting } from "../../src/domain/settings/instance-settings.ts";
import { cmsSign, DEMO_INFO, makeIpaArchive, makePlist, makeProfile } from "../helpers/app-fixtures.ts";
import { makeTestApp, toCallResult, type TestApp } from "../helpers/app.ts";
import { artifactWorld, insertBuild, uploadArtifact, type ArtifactWorld } from "../helpers/artifact-world.ts";
import { userWithRole } from "../helpers/factories.ts";
import { page } from "../helpers/web.ts";

/** The profile's devices are 00008110-000000000000000{0,1,2} (test/helpers/app-fixtures.ts profilePlist). */
const IN_PROFILE = "00008110-0000000000000001";
const NOT_IN_PROFILE = "00008110-00000000000000FF";

/** A device's answer: the attributes plist, CMS-signed by a self-signed certificate with openssl. */
const answer = (attributes: Record<string, string>) => cmsSign(makePlist(attributes));

describe("device registration", () => {
  let t: TestApp;
  let w: ArtifactWorld;
  let token: string;
  let otherToken: string;
  let dev: string;
  let qa: string;

  /** POSTs a device's answer as the device does: no Origin, no cookie, the signed body. */
  async function callback(tok: string, body: Uint8Array | string, headers: Record<string, string> = {}) {
    const res = await t.app.request(
      `/apps/${tok}/enroll/callback`,
      { method: "POST", headers: { "content-type": "application/pkcs7-signature", ...headers }, body, redirect: "manual" },
      { peerAddress: "203.0.113.9" },
    );
    return toCallResult(res);
  }

  beforeAll(async () => {
    t = await makeTestApp();
    w = await artifactWorld(t);
    dev = (await userWithRole(t, "developer")).token;
    qa = (await userWithRole(t, "qa_viewer")).token;
    await writeSetting(t.deps, NETWORK_SETTING, { public_url: "https://ci.example.com", artifact_delivery_url: null, allowed_origins: [] });
    const pipelineId = (await t.deps.db.select().from(pipelines).where(eq(pipelines.projectId, w.projectId)).get())!.id;
    const base = `/v1/projects/${w.projectId}/channels`;
    const ch = (await t.call("POST", base, { token: dev, body: { name: "ios", pipeline_id: pipelineId, platforms: ["ios"] } })).body;
    const ada = await t.call("POST", `${base}/${ch.id}/testers`, { token: dev, body: { email: "ada@example.com", name: "Ada\tLovelace" } });
    token = ada.body.page_url.split("/apps/")[1];
    otherToken = (await t.call("POST", `${base}/${ch.id}/testers`, { token: dev, body: { email: "bob@example.com" } })).body.page_url.split(
      "/apps/",
    )[1];
    // An ad-hoc release whose profile lists three devices.
    const buildId = await insertBuild(t, w.projectId, pipelineId, w.runner.id);
    await t.deps.db.update(builds).set({ branch: "main" }).where(eq(builds.id, buildId));
    const ipa = makeIpaArchive({ info: DEMO_INFO, profile: makeProfile({ kind: "ad_hoc", devices: 3 }) });
    await uploadArtifact(t, { ...w, buildId, jobPath: `/v1/runners/${w.runner.id}/jobs/${buildId}/artifacts` }, "Demo.ipa", ipa);
    expect(
      (await t.call("POST", `/v1/runners/${w.runner.id}/jobs/${buildId}/status`, { token: w.runner.token, body: { status: "succeeded" } })).status,
    ).toBe(200);
  });

  it("serves a Profile Service .mobileconfig whose callback is the tester's enrolment URL", async () => {
    const res = await t.app.request(`/apps/${token}/enroll`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/x-apple-aspen-config");
    expect(res.headers.get("referrer-policy")).toBe("no-referrer");
    const plist = (await parsePlist(new Uint8Array(await res.arrayBuffer()))) as Record<string, unknown>;
    expect(plist.PayloadType).toBe("Profile Service");
    expect(plist.PayloadVersion).toBe(1);
    const content = plist.PayloadContent as Record<string, unknown>;
    expect(content.URL).toBe(`https://ci.example.com/apps/${token}/enroll/callback`);
    expect(content.DeviceAttributes).toEqual(["UDID", "PRODUCT", "VERSION", "SERIAL"]);
    const unknown = await toCallResult(await t.app.request("/apps/nope/enroll"));
    expect([unknown.status, unknown.body.code]).toEqual([404, "not_found"]);
  });

  it("stores the device from its signed answer (idempotent per UDID and project), answers 301 to a page saying what comes next", async () => {
    const before = await page(t, "GET", `/apps/${token}`, { headers: { "user-agent": "iPhone" } });
    expect(before.text).toContain("You have registered no device yet");
    expect(before.text).toContain(`href="/apps/${token}/enroll"`);

    const body = answer({ UDID: IN_PROFILE.toLowerCase(), PRODUCT: "iPhone15,2", VERSION: "21F90", SERIAL: "F2LXXXXXXX" });
    const r = await callback(token, body);
    expect(r.status, r.text).toBe(301);
    expect(r.headers.get("location")).toBe(`/apps/${token}/enroll/done`);
    const again = await callback(token, body);
    expect(again.status).toBe(301);
    const rows = await t.deps.db.select().from(devices).where(eq(devices.projectId, w.projectId));
    expect(rows.map((d) => [d.udid, d.product, d.version])).toEqual([[IN_PROFILE, "iPhone15,2", "21F90"]]);

    const done = await page(t, "GET", `/apps/${token}/enroll/done`);
    expect(done.status).toBe(200);
    expect(done.text).toContain("Device registered");
    expect(done.text).toContain("once the team adds the device to the app");

    const hint = await page(t, "GET", `/apps/${token}`);
    expect(hint.text).toContain("Your registered device is in this build.");
    // A second device, not in the profile.
    expect((await callback(token, answer({ UDID: NOT_IN_PROFILE, PRODUCT: "iPad<script>", VERSION: "22A3354" }))).status).toBe(301);
    const partly = await page(t, "GET", `/apps/${token}`);
    expect(partly.text).toContain("1 of your 2 registered devices is in this build");
    // Bob has registered nothing: his page says so.
    expect((await page(t, "GET", `/apps/${otherToken}`)).text).toContain("You have registered no device yet");
  });

  it("refuses hostile, unparsable and oversized answers, each with its code", async () => {
    const big = new Uint8Array(70 * 1024).fill(0x30);
    const cases: Array<[string, Uint8Array | string, number, string]> = [
      ["not CMS", "UDID=123", 400, "invalid_input"],
      ["CMS around text", cmsSign(new TextEncoder().encode("hello")), 400, "invalid_input"],
      ["plist without UDID", answer({ PRODUCT: "iPhone15,2" }), 400, "invalid_input"],
      ["hostile UDID", answer({ UDID: "<script>alert(1)</script>", PRODUCT: "x" }), 400, "invalid_input"],
      ["UDID with a line break", answer({ UDID: `${IN_PROFILE}\nX`, PRODUCT: "x" }), 400, "invalid_input"],
      ["truncated CMS", answer({ UDID: IN_PROFILE }).subarray(0, 40), 400, "invalid_input"],
      ["nested too deep", new Uint8Array(Array.from({ length: 400 }, (_, i) => (i % 2 === 0 ? 0x30 : 0x80))), 400, "invalid_input"],
      ["over 64 KiB", big, 413, "payload_too_large"],
    ];
    for (const [what, body, status, code] of cases) {
      const r = await callback(token, body);
      expect([what, r.status, r.body.code]).toEqual([what, status, code]);
    }
    // A body that does not declare its length is counted as it arrives.
    const streamed = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < 5; i++) controller.enqueue(new Uint8Array(20 * 1024));
        controller.close();
      },
    });
    const res = await t.app.request(`/apps/${token}/enroll/callback`, { method: "POST", body: streamed, duplex: "half" } as RequestInit);
    expect([res.status, ((await res.json()) as { code: string }).code]).toEqual([413, "payload_too_large"]);
    const unknown = await callback("nope", answer({ UDID: IN_PROFILE }));
    expect([unknown.status, unknown.body.code]).toEqual([404, "not_found"]);
    expect(await t.deps.db.select().from(devices).where(eq(devices.projectId, w.projectId))).toHaveLength(2);
  });

  it("lists the project's devices for builders and exports Apple's device upload file", async () => {
    const list = await t.call("GET", `/v1/projects/${w.projectId}/devices`, { token: dev });
    expect(list.status, list.text).toBe(200);
    expect(list.body.map((d: { udid: string; tester: { email: string } }) => [d.udid, d.tester.email])).toEqual([
      [IN_PROFILE, "ada@example.com"],
      [NOT_IN_PROFILE, "ada@example.com"],
    ]);
    expect(list.body[0]).toMatchObject({ product: "iPhone15,2", version: "21F90" });
    expect(list.body[0]).not.toHaveProperty("serial");

    const exported = await t.app.request(`/v1/projects/${w.projectId}/devices/export`, { headers: { authorization: `Bearer ${dev}` } });
    expect(exported.status).toBe(200);
    expect(exported.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(await exported.text()).toBe(
      `Device ID\tDevice Name\tDevice Platform\n${IN_PROFILE}\tAda Lovelace iPhone15,2\tios\n${NOT_IN_PROFILE}\tAda Lovelace iPad<script>\tios\n`,
    );

    const cases: Array<[string, string | undefined, number, string]> = [
      [`/v1/projects/${w.projectId}/devices`, qa, 403, "forbidden"],
      [`/v1/projects/${w.projectId}/devices/export`, qa, 403, "forbidden"],
      [`/v1/projects/${w.projectId}/devices`, undefined, 401, "missing_auth"],
      ["/v1/projects/nope/devices", dev, 404, "not_found"],
      ["/v1/projects/nope/devices/export", dev, 404, "not_found"],
    ];
    for (const [path, tok, status, code] of cases) {
      const r = await t.call("GET", path, { token: tok });
      expect([path, r.status, r.body.code]).toEqual([path, status, code]);
    }
  });
});
