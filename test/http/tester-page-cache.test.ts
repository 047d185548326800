// The tester page /apps/{token} is kept rendered per link (docs/decisions.md "Tester page cache"): a repeat GET sends
// the kept page after one small read, so every write that changes the page must show on the very next GET, on the
// daemon that wrote it and on another daemon on the same database whose copy was rendered before the write.
import { eq } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { builds, pipelines } from "../../src/db/schema/index.ts";
import { writeSetting } from "../../src/domain/settings/instance-settings.ts";
import { NETWORK_SETTING } from "../../src/domain/settings/network-settings.ts";
import { cmsSign, DEMO_INFO, makeIpaArchive, makePlist, makeProfile } from "../helpers/app-fixtures.ts";
import { makeTestApp, secondDaemon, type TestApp } from "../helpers/app.ts";
import { artifactWorld, insertBuild, uploadArtifact, type ArtifactWorld } from "../helpers/artifact-world.ts";
import { userWithRole } from "../helpers/factories.ts";
import { page } from "../helpers/web.ts";

const IPHONE =
  "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1";
const DESKTOP = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36";
/** In the profiles' device list (test/helpers/app-fixtures.ts profilePlist). */
const IN_PROFILE = "00008110-0000000000000001";
const DAY = 86400;

describe("tester page: the next GET after a write shows it, on either daemon", () => {
  let a: TestApp;
  let b: TestApp;
  let w: ArtifactWorld;
  let pipelineId: string;
  let dev: string;
  let channelPath: string;
  let testerId: string;
  let token: string;
  let profileExpiry: number;

  /** The page as `daemon` answers it now, for an iPhone (device hints) or a desktop (the QR code). */
  async function show(daemon: TestApp, userAgent = IPHONE) {
    return page(daemon, "GET", `/apps/${token}`, { headers: { "user-agent": userAgent } });
  }

  /** Both daemons' pages, twice each, so each has its copy kept before the write that follows. */
  async function keptOnBoth(expected: RegExp) {
    for (const daemon of [a, b, a, b]) {
      const shown = await show(daemon);
      expect(shown.status).toBe(200);
      expect(shown.text).toMatch(expected);
    }
  }

  /** An ad-hoc iOS build of `version` that uploads through `daemon` and succeeds with the runner's report there. */
  async function release(daemon: TestApp, version: string, build: string, notes: string) {
    a.clock.advance(60);
    const buildId = await insertBuild(a, w.projectId, pipelineId, w.runner.id);
    const ipa = makeIpaArchive({
      info: { ...DEMO_INFO, CFBundleShortVersionString: version, CFBundleVersion: build },
      profile: makeProfile({ kind: "ad_hoc", devices: 3, expires: new Date(profileExpiry * 1000).toISOString().slice(0, 19) + "Z" }),
    });
    await uploadArtifact(daemon, { ...w, buildId, jobPath: `/v1/runners/${w.runner.id}/jobs/${buildId}/artifacts` }, "Demo.ipa", ipa);
    const done = await daemon.call("POST", `/v1/runners/${w.runner.id}/jobs/${buildId}/status`, {
      token: w.runner.token,
      body: { status: "succeeded", release_notes: notes },
    });
    expect(done.status, done.text).toBe(200);
    return buildId;
  }

  const versionShown = (html: string) => html.match(/id="version">Version <bdi[^>]*>([^<]*)<\/bdi>/)?.[1];

  beforeAll(async () => {
    a = await makeTestApp();
    b = await secondDaemon(a);
    w = await artifactWorld(a);
    dev = (await userWithRole(a, "developer")).token;
    profileExpiry = a.clock.now() + 60 * DAY;
    await writeSetting(a.deps, NETWORK_SETTING, { public_url: "https://ci.example.com", artifact_delivery_url: null, allowed_origins: [] });
    pipelineId = (await a.deps.db.select().from(pipelines).where(eq(pipelines.projectId, w.projectId)).get())!.id;
    const channel = (
      await a.call("POST", `/v1/projects/${w.projectId}/channels`, { token: dev, body: { name: "ios beta", pipeline_id: pipelineId } })
    ).body;
    channelPath = `/v1/projects/${w.projectId}/channels/${channel.id}`;
    const tester = await a.call("POST", `${channelPath}/testers`, { token: dev, body: { email: "ada@example.com", name: "Ada" } });
    expect(tester.status, tester.text).toBe(200);
    testerId = tester.body.id;
    token = tester.body.page_url.split("/apps/")[1];
    await release(a, "2.3", "45", "First notes");
  });

  it("answers a kept page with a fresh nonce each time, the one its Content-Security-Policy names", async () => {
    const nonces = new Set<string>();
    for (const daemon of [a, a, b, b]) {
      const shown = await show(daemon);
      expect(shown.status).toBe(200);
      const nonce = shown.headers.get("content-security-policy")!.match(/style-src 'self' 'nonce-([^']+)'/)![1]!;
      expect(shown.text).toContain(`<style nonce="${nonce}">`);
      expect(shown.text.match(/nonce="/g)).toHaveLength(1);
      nonces.add(nonce);
    }
    expect(nonces.size).toBe(4);
  });

  it("a new release reported through the other daemon", async () => {
    await keptOnBoth(/id="version">Version <bdi[^>]*>2\.3</);
    await release(b, "2.4", "46", "Second notes <b>bold</b>");
    for (const daemon of [a, b]) {
      const shown = await show(daemon);
      expect(versionShown(shown.text)).toBe("2.4");
      expect(shown.text).toContain("Second notes &lt;b&gt;bold&lt;/b&gt;");
      expect(shown.text).toMatch(/id="earlier"[\s\S]*2\.3/);
    }
  });

  it("release notes changed by any writer (here a statement on the other daemon's connection)", async () => {
    await keptOnBoth(/Second notes/);
    const latest = await b.deps.db.select({ id: builds.id }).from(builds).where(eq(builds.releaseNotes, "Second notes <b>bold</b>")).get();
    await b.deps.db.update(builds).set({ releaseNotes: "Corrected notes" }).where(eq(builds.id, latest!.id));
    for (const daemon of [a, b]) {
      const shown = await show(daemon);
      expect(shown.text).toContain("Corrected notes");
      expect(shown.text).not.toContain("Second notes");
    }
  });

  it("a device enrolled through the other daemon: the page says it is in this build", async () => {
    await keptOnBoth(/You have registered no device yet/);
    const enrolled = await b.app.request(
      `/apps/${token}/enroll/callback`,
      {
        method: "POST",
        headers: { "content-type": "application/pkcs7-signature" },
        body: cmsSign(makePlist({ UDID: IN_PROFILE, PRODUCT: "iPhone15,2", VERSION: "17.4", SERIAL: "F2LX" })),
        redirect: "manual",
      },
      { peerAddress: "203.0.113.9" },
    );
    expect(enrolled.status).toBe(301);
    for (const daemon of [a, b]) {
      const shown = await show(daemon);
      expect(shown.text).toContain("Your registered device is in this build.");
      expect(shown.text).not.toContain("You have registered no device yet");
    }
  });

  it("the QR code follows a changed public URL, and the channel's settings show at once", async () => {
    for (const daemon of [a, b, a, b]) expect((await show(daemon, DESKTOP)).text).toContain('id="qr"');
    const before = (await show(a, DESKTOP)).text.match(/<svg[\s\S]*?<\/svg>/)![0];
    await writeSetting(b.deps, NETWORK_SETTING, { public_url: "https://testers.example.org", artifact_delivery_url: null, allowed_origins: [] });
    for (const daemon of [a, b]) expect((await show(daemon, DESKTOP)).text.match(/<svg[\s\S]*?<\/svg>/)![0]).not.toBe(before);

    await keptOnBoth(/id="app-name"/);
    const renamed = await b.call("PATCH", channelPath, { token: dev, body: { platforms: ["android"] } });
    expect(renamed.status, renamed.text).toBe(200);
    for (const daemon of [a, b]) expect((await show(daemon)).text).toContain('id="no-release"');
    expect((await a.call("PATCH", channelPath, { token: dev, body: { platforms: null } })).status).toBe(200);
    for (const daemon of [a, b]) expect(versionShown((await show(daemon)).text)).toBe("2.4");
  });

  it("a tester link revoked through the other daemon answers 404 on the next GET of both", async () => {
    await keptOnBoth(/id="version"/);
    const removed = await b.call("DELETE", `${channelPath}/testers/${testerId}`, { token: dev });
    expect(removed.status).toBe(204);
    for (const daemon of [a, b]) {
      const shown = await show(daemon);
      expect(shown.status).toBe(404);
      expect(shown.text).toContain('id="expired"');
    }
  });

  it("with nothing written, the profile's expiry warning appears once it is 14 days away", async () => {
    const bob = await a.call("POST", `${channelPath}/testers`, { token: dev, body: { email: "bob@example.com" } });
    expect(bob.status, bob.text).toBe(200);
    token = bob.body.page_url.split("/apps/")[1];
    await keptOnBoth(/id="version"/);
    for (const daemon of [a, b]) expect((await show(daemon)).text).not.toContain('id="hint-profile-expiry"');
    // signingHints warns once less than 14 days are left: not yet at exactly 14 days, one second later it does.
    a.clock.set(profileExpiry - 14 * DAY);
    await keptOnBoth(/id="version"/);
    for (const daemon of [a, b]) expect((await show(daemon)).text).not.toContain('id="hint-profile-expiry"');
    a.clock.advance(1);
    for (const daemon of [a, b]) expect((await show(daemon)).text).toContain('id="hint-profile-expiry"');
  });
});
