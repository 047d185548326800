import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { makeTestApp } from "../helpers/app.ts";
import { userWithRole } from "../helpers/factories.ts";
import { artifactFile, DAY, madeBuild, makeWorld } from "../helpers/retention-world.ts";
import { page } from "../helpers/web.ts";

const lowOnSpace = async () => ({ freeBytes: 5 * 1024 ** 3, totalBytes: 100 * 1024 ** 3 });

describe("the nearly-full-disk banner", () => {
  it("shows on every signed-in page below 10 % free, with the way out for managers only", async () => {
    const t = await makeTestApp({ deps: { diskSpace: lowOnSpace } });
    const w = await makeWorld(t);
    const owner = await page(t, "GET", "/builds", { session: w.ownerToken });
    expect(owner.status).toBe(200);
    const banner = /<div class="flash flash-error" role="alert" id="disk-banner">([\s\S]*?)<\/div>/.exec(owner.text)?.[1] ?? "";
    expect(banner).toContain("5.0 GB free of 100.0 GB (5.0 %)");
    expect(banner).toContain('href="/settings#retention"');
    const dev = await userWithRole(t, "developer");
    const devPage = await page(t, "GET", "/projects", { session: dev.token });
    expect(devPage.text).toContain('id="disk-banner"');
    expect(devPage.text).not.toContain('href="/settings#retention"');
    // The settings page shows the failed preflight check too, as a warning: it does not gate External Access.
    const settings = await page(t, "GET", "/settings", { session: w.ownerToken });
    expect(settings.text).toMatch(/<li class="warn" data-check="data_dir_free_space">/);
  });

  it("is absent with room on the disk", async () => {
    const t = await makeTestApp({ deps: { diskSpace: async () => ({ freeBytes: 50 * 1024 ** 3, totalBytes: 100 * 1024 ** 3 }) } });
    const w = await makeWorld(t);
    const res = await page(t, "GET", "/builds", { session: w.ownerToken });
    expect(res.status).toBe(200);
    expect(res.text).not.toContain("disk-banner");
  });
});

describe("Settings: the retention section, its preview and run now; the disk section", () => {
  it("saves the policy, previews exactly what goes with its bytes, runs it, and shows the disk figures", async () => {
    const t = await makeTestApp();
    const w = await makeWorld(t);
    const now = t.clock.now();
    const old = await madeBuild(t, w, { finishedAt: now - 40 * DAY, files: 1, size: 2048, log: "old\n" });
    const young = await madeBuild(t, w, { finishedAt: now - DAY, files: 1, size: 2048 });

    const bad = await page(t, "POST", "/settings/retention", {
      session: w.ownerToken,
      form: { keep_last: "", artifacts_max_age_days: "-4", logs_max_age_days: "" },
    });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain('id="retention-error"');

    const saved = await page(t, "POST", "/settings/retention", {
      session: w.ownerToken,
      form: { keep_last: "", artifacts_max_age_days: "30", logs_max_age_days: "" },
    });
    expect(saved.status).toBe(303);
    const settings = await page(t, "GET", "/settings", { session: w.ownerToken });
    expect(settings.text).toMatch(/name="artifacts_max_age_days"[^>]*value="30"/);
    expect(settings.text).toContain("No pass has run yet.");
    expect(settings.text).toContain('id="disk-figures"');
    expect(settings.text).toMatch(/<dt>Artifacts<\/dt><dd>4\.0 KB<\/dd>/);

    const preview = await page(t, "POST", "/settings/retention/preview", { session: w.ownerToken });
    expect(preview.status).toBe(200);
    expect(preview.text).toContain("1 artifacts (2.0 KB) and 0 logs (0 B)");
    expect(preview.text).toContain(`href="/builds/${old.id}"`);
    expect(preview.text).not.toContain(`href="/builds/${young.id}"`);
    expect(existsSync(artifactFile(t, old.id, old.artifactIds[0]!))).toBe(true);

    const run = await page(t, "POST", "/settings/retention/run", { session: w.ownerToken });
    expect(run.status).toBe(303);
    expect(existsSync(artifactFile(t, old.id, old.artifactIds[0]!))).toBe(false);
    expect(existsSync(artifactFile(t, young.id, young.artifactIds[0]!))).toBe(true);
    const after = await page(t, "GET", "/settings", { session: w.ownerToken });
    expect(after.text).toContain("Last pass: 2.0 KB freed (1 artifacts, 0 logs)");

    // The build page marks the artifact expired, with no download button.
    const buildPage = await page(t, "GET", `/builds/${old.id}`, { session: w.ownerToken });
    expect(buildPage.text).toContain("Deleted by the retention policy");
    expect(buildPage.text).not.toContain(`/builds/${old.id}/artifacts/${old.artifactIds[0]}/download`);
  });
});

describe("the build page: pin and unpin, a deleted log", () => {
  it("pins with a button (builders), shows the badge, and says when the log was deleted", async () => {
    const t = await makeTestApp();
    const w = await makeWorld(t);
    const now = t.clock.now();
    const b = await madeBuild(t, w, { finishedAt: now - 10 * DAY, files: 0, log: "hello\n" });
    const before = await page(t, "GET", `/builds/${b.id}`, { session: w.ownerToken });
    expect(before.text).toContain(`action="/builds/${b.id}/pin"`);
    expect(before.text).not.toContain('id="pinned-badge"');
    const pinned = await page(t, "POST", `/builds/${b.id}/pin`, { session: w.ownerToken });
    expect(pinned.status).toBe(303);
    const after = await page(t, "GET", `/builds/${b.id}`, { session: w.ownerToken });
    expect(after.text).toContain('id="pinned-badge"');
    expect(after.text).toContain(`action="/builds/${b.id}/unpin"`);
    const qa = await userWithRole(t, "qa_viewer");
    expect((await page(t, "GET", `/builds/${b.id}`, { session: qa.token })).text).not.toContain("pin-form");
    expect((await page(t, "POST", `/builds/${b.id}/unpin`, { session: qa.token })).status).toBe(403);
    await page(t, "POST", `/builds/${b.id}/unpin`, { session: w.ownerToken });

    await t.call("PUT", "/v1/settings/retention", { token: w.ownerToken, body: { logs: { max_age_days: 1 } } });
    await t.call("POST", "/v1/settings/retention/run", { token: w.ownerToken, body: { dry_run: false } });
    const gone = await page(t, "GET", `/builds/${b.id}`, { session: w.ownerToken });
    expect(gone.text).toContain('id="log-expired"');
    expect(gone.text).not.toContain('id="log"');
    const raw = await page(t, "GET", `/builds/${b.id}/log?tail=1000`, { session: w.ownerToken });
    expect(raw.status).toBe(410);
  });
});
