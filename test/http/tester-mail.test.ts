// Tester mail through a real SMTP server on loopback (docs/api.md §18): the tester's link when added, a mail per
// new release with a working opt-out link, invites with the sign-in page, and the outbox retrying a refusal.
import { and, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { builds, outbox, outboxAttempts, pipelines } from "../../src/db/schema/index.ts";
import { runOutboxOnce } from "../../src/domain/events/outbox.ts";
import { NETWORK_SETTING } from "../../src/domain/settings/network-settings.ts";
import { writeSetting } from "../../src/domain/settings/instance-settings.ts";
import { makeApk } from "../helpers/app-fixtures.ts";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { artifactWorld, insertBuild, uploadArtifact, type ArtifactWorld } from "../helpers/artifact-world.ts";
import { userWithRole } from "../helpers/factories.ts";
import { waitFor } from "../helpers/receiver.ts";
import { startSmtpSink, type SmtpSink } from "../helpers/smtp.ts";
import { page } from "../helpers/web.ts";

describe("tester mail", () => {
  let t: TestApp;
  let w: ArtifactWorld;
  let smtp: SmtpSink;
  let pipelineId: string;
  let dev: string;
  let owner: string;
  let channelsPath: string;

  async function release(branch: string, versionCode: number) {
    t.clock.advance(10);
    const buildId = await insertBuild(t, w.projectId, pipelineId, w.runner.id);
    await t.deps.db.update(builds).set({ branch }).where(eq(builds.id, buildId));
    const world = { ...w, buildId, jobPath: `/v1/runners/${w.runner.id}/jobs/${buildId}/artifacts` };
    await uploadArtifact(t, world, "app.apk", makeApk({ label: "Demo", versionName: `1.${versionCode}`, versionCode }));
    const r = await t.call("POST", `/v1/runners/${w.runner.id}/jobs/${buildId}/status`, { token: w.runner.token, body: { status: "succeeded" } });
    expect(r.status, r.text).toBe(200);
    return buildId;
  }

  /** Outbox passes until nothing is pending (retries are a few ms apart here). */
  async function drainOutbox() {
    await waitFor(
      async () => {
        await runOutboxOnce(t.deps, "test-sender");
        const pending = await t.deps.db.select().from(outbox).where(eq(outbox.status, "pending"));
        return pending.length === 0;
      },
      10_000,
      "the outbox to empty",
    );
  }

  const mailsTo = (address: string) => smtp.received.filter((m) => m.to.includes(address));

  beforeAll(async () => {
    smtp = await startSmtpSink();
    t = await makeTestApp({ config: { HANGAR_OUTBOX_RETRY_BASE_MS: "5" } });
    w = await artifactWorld(t);
    pipelineId = (await t.deps.db.select().from(pipelines).where(eq(pipelines.projectId, w.projectId)).get())!.id;
    dev = (await userWithRole(t, "developer")).token;
    owner = w.ownerToken;
    channelsPath = `/v1/projects/${w.projectId}/channels`;
    await writeSetting(t.deps, NETWORK_SETTING, {
      public_url: "http://localhost",
      artifact_delivery_url: null,
      allowed_origins: ["http://localhost"],
    });
  });
  afterAll(() => smtp.close());

  it("without SMTP settings nothing is mailed and the channel page says to copy the link", async () => {
    const ch = (await t.call("POST", channelsPath, { token: dev, body: { name: "no-mail", pipeline_id: pipelineId } })).body;
    const session = (await userWithRole(t, "developer")).token;
    const added = await page(t, "POST", `/projects/${w.projectId}/channels/${ch.id}/testers`, { session, form: { email: "copy@example.com" } });
    expect(added.status, added.text).toBe(200);
    expect(added.text).toContain("Hangar sends no mail without SMTP settings");
    expect(added.text).toMatch(/http:\/\/localhost\/apps\/[A-Za-z0-9_-]+/);
    expect(await t.deps.db.select().from(outbox).where(eq(outbox.targetKind, "mail"))).toEqual([]);
    await t.call("DELETE", `${channelsPath}/${ch.id}`, { token: dev });
  });

  it("mails a new tester's link, retrying after the server refuses it, and keeps no copy of the link once sent", async () => {
    const put = await t.call("PUT", "/v1/settings/smtp", {
      token: owner,
      body: { host: "127.0.0.1", port: smtp.port, secure: false, username: "ci", password: "s3cret-Pass", from: "Hangar <ci@example.com>" },
    });
    expect(put.status, put.text).toBe(200);
    const ch = (await t.call("POST", channelsPath, { token: dev, body: { name: "beta", pipeline_id: pipelineId, branches: ["main"] } })).body;
    smtp.refuseNext(1);
    const added = await t.call("POST", `${channelsPath}/${ch.id}/testers`, { token: dev, body: { email: "ada@example.com", name: "Ada" } });
    expect(added.status, added.text).toBe(200);
    const row = (await t.deps.db
      .select()
      .from(outbox)
      .where(and(eq(outbox.targetKind, "mail"), eq(outbox.targetId, added.body.id)))
      .get())!;
    // The link is in the outbox only sealed.
    expect(JSON.stringify(row.payload)).not.toContain(added.body.page_url.split("/apps/")[1]);
    await drainOutbox();
    const mails = mailsTo("ada@example.com");
    expect(mails).toHaveLength(1);
    expect(mails[0]!.from).toBe("ci@example.com");
    expect(mails[0]!.raw).toContain(added.body.page_url);
    expect(mails[0]!.raw).toContain("Hello Ada,");
    expect(smtp.logins).toContain("ci:s3cret-Pass");
    const attempts = await t.deps.db.select().from(outboxAttempts).where(eq(outboxAttempts.outboxSeq, row.seq)).orderBy(outboxAttempts.attempt);
    expect(attempts.map((a) => [a.attempt, a.statusCode, a.error?.slice(0, 10) ?? null])).toEqual([
      [1, 451, "smtp_error"],
      [2, 250, null],
    ]);
    const after = (await t.deps.db.select().from(outbox).where(eq(outbox.seq, row.seq)).get())!;
    expect([after.status, after.payload]).toEqual(["delivered", null]);
  });

  it("mails each tester of a channel on a new release; the opt-out link turns that tester's release mails off", async () => {
    const ch = (await t.call("GET", channelsPath, { token: dev })).body.find((c: { name: string }) => c.name === "beta");
    const bob = await t.call("POST", `${channelsPath}/${ch.id}/testers`, { token: dev, body: { email: "bob@example.com" } });
    expect(bob.status).toBe(200);
    await drainOutbox();
    await release("feature/x", 1); // not a release of the channel (branch)
    await release("main", 2);
    await drainOutbox();
    const adaReleases = mailsTo("ada@example.com").filter((m) => m.raw.includes("A new build"));
    const bobReleases = mailsTo("bob@example.com").filter((m) => m.raw.includes("A new build"));
    expect([adaReleases.length, bobReleases.length]).toEqual([1, 1]);
    const optOut = /http:\/\/localhost(\/apps\/opt-out\/[A-Za-z0-9_-]+)/.exec(adaReleases[0]!.raw)?.[1];
    expect(optOut).toBeDefined();
    expect(adaReleases[0]!.raw).toMatch(/List-Unsubscribe:\s+<http:\/\/localhost\/apps\/opt-out\//);

    // Opening the link only asks (mail scanners open links); the button turns mails off, without an account.
    const asked = await page(t, "GET", optOut!);
    expect(asked.status).toBe(200);
    expect(asked.text).toContain("Stop release mails");
    expect(
      (await t.call("GET", `${channelsPath}/${ch.id}/testers`, { token: dev })).body.find((x: { email: string }) => x.email === "ada@example.com")
        .mail_opt_out,
    ).toBe(false);
    const done = await page(t, "POST", optOut!, { origin: "null" });
    expect(done.status, done.text).toBe(200);
    expect(done.text).toContain("you get no more mails about new builds");
    expect(done.headers.get("referrer-policy")).toBe("no-referrer");
    const listed = (await t.call("GET", `${channelsPath}/${ch.id}/testers`, { token: dev })).body;
    expect(listed.find((x: { email: string }) => x.email === "ada@example.com").mail_opt_out).toBe(true);

    await release("main", 3);
    await drainOutbox();
    expect(mailsTo("ada@example.com").filter((m) => m.raw.includes("A new build"))).toHaveLength(1);
    expect(mailsTo("bob@example.com").filter((m) => m.raw.includes("A new build"))).toHaveLength(2);

    const unknown = await page(t, "GET", "/apps/opt-out/not-a-real-token");
    expect(unknown.status).toBe(404);
  });

  it("mails an invite with the instance's sign-in page", async () => {
    const r = await t.call("POST", "/v1/users/invite", { token: owner, body: { email: "new.dev@example.com", role: "developer" } });
    expect(r.status, r.text).toBe(200);
    await drainOutbox();
    const mails = mailsTo("new.dev@example.com");
    expect(mails).toHaveLength(1);
    expect(mails[0]!.raw).toContain("http://localhost/login");
    expect(mails[0]!.raw).toContain("as developer");
  });

  it("a tester removed before their mail left gets none, and the sealed link is dropped all the same", async () => {
    const ch = (await t.call("GET", channelsPath, { token: dev })).body.find((c: { name: string }) => c.name === "beta");
    const added = await t.call("POST", `${channelsPath}/${ch.id}/testers`, { token: dev, body: { email: "gone@example.com" } });
    expect((await t.call("DELETE", `${channelsPath}/${ch.id}/testers/${added.body.id}`, { token: dev })).status).toBe(204);
    await drainOutbox();
    const row = (await t.deps.db.select().from(outbox).where(eq(outbox.targetId, added.body.id)).get())!;
    expect([row.status, row.lastError, row.payload]).toEqual(["disabled", "tester removed", null]);
    expect(mailsTo("gone@example.com")).toEqual([]);
  });

  it("a mail to a host the outbound guard refuses fails at once with destination_not_allowed", async () => {
    const guarded = await makeTestApp({ config: { HANGAR_OUTBOUND_ALLOW: "" } });
    const w2 = await artifactWorld(guarded);
    // Saved while allowed (an operator narrowing HANGAR_OUTBOUND_ALLOW later), refused when sent.
    await writeSetting(guarded.deps, "smtp", {
      host: "127.0.0.1",
      port: smtp.port,
      secure: false,
      username: null,
      password_sealed: null,
      from: "ci@example.com",
    });
    const pid = (await guarded.deps.db.select().from(pipelines).where(eq(pipelines.projectId, w2.projectId)).get())!.id;
    const ch = (await guarded.call("POST", `/v1/projects/${w2.projectId}/channels`, { token: w2.ownerToken, body: { name: "b", pipeline_id: pid } }))
      .body;
    const added = await guarded.call("POST", `/v1/projects/${w2.projectId}/channels/${ch.id}/testers`, {
      token: w2.ownerToken,
      body: { email: "x@example.com" },
    });
    expect(added.status, added.text).toBe(200);
    await runOutboxOnce(guarded.deps, "guarded");
    const row = (await guarded.deps.db.select().from(outbox).where(eq(outbox.targetKind, "mail")).get())!;
    expect([row.status, row.lastError, row.payload]).toEqual(["failed", "destination_not_allowed", null]);
  });
});
