// Runner trust, build trust, max_jobs and protection by ref kind (docs/runner-isolation.md): which runner takes
// which build, decided inside the claim statement, and credentials only for protected builds on protected runners.
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { createApp } from "../../src/app.ts";
import { openDb } from "../../src/db/client.ts";
import { builds } from "../../src/db/schema/index.ts";
import { makeTestApp, toCallResult, type TestApp } from "../helpers/app.ts";
import { buildWorld, claim, createPipeline, createProject, queueBuild, reportStatus } from "../helpers/builds.ts";
import { userWithRole } from "../helpers/factories.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON
type Json = any;

const ALL = ["ios", "android", "macos"];

async function register(t: TestApp, owner: string, body: Record<string, unknown> = {}): Promise<Json> {
  const res = await t.call("POST", "/v1/runners/register", { token: owner, body: { capabilities: { platforms: ALL }, ...body } });
  expect(res.status).toBe(200);
  return res.body;
}

/** A project whose builds are protected: it holds a secret variable, and protects every branch and tag. */
async function protectedProject(t: TestApp, owner: string, name = "signed") {
  const project = await createProject(t, owner, { name, repo_url: `https://example.com/${name}.git` });
  const pipeline = await createPipeline(t, owner, project.id, { platform: "any" });
  expect((await t.call("PUT", `/v1/projects/${project.id}/secrets/STORE_KEY`, { token: owner, body: { value: "store-key-value" } })).status).toBe(
    200,
  );
  return { project, pipeline };
}

async function finish(t: TestApp, runner: Json, buildId: string) {
  await reportStatus(t, runner, buildId, { status: "running" });
  expect((await reportStatus(t, runner, buildId, { status: "succeeded" })).status).toBe(200);
}

describe("runner trust: registration and changes", () => {
  it("defaults to protected, takes open at registration, and only an owner or admin changes it", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    expect(w.runner.trust).toBe("protected");
    const open = await register(t, w.ownerToken, { trust: "open" });
    expect(open.trust).toBe("open");
    const bad = await t.call("POST", "/v1/runners/register", { token: w.ownerToken, body: { trust: "trusted" } });
    expect([bad.status, bad.body.code]).toEqual([400, "invalid_input"]);

    // The runner's own token cannot raise (or lower) its trust.
    const self = await t.call("PATCH", `/v1/runners/${open.id}`, { token: open.token, body: { trust: "protected" } });
    expect([self.status, self.body.code]).toEqual([403, "forbidden"]);
    const dev = await userWithRole(t, "developer");
    const byDev = await t.call("PATCH", `/v1/runners/${open.id}`, { token: dev.token, body: { trust: "protected" } });
    expect([byDev.status, byDev.body.code]).toEqual([403, "forbidden"]);
    const admin = await userWithRole(t, "admin");
    const raised = await t.call("PATCH", `/v1/runners/${open.id}`, { token: admin.token, body: { trust: "protected" } });
    expect([raised.status, raised.body.trust]).toEqual([200, "protected"]);
    const invalid = await t.call("PATCH", `/v1/runners/${open.id}`, { token: w.ownerToken, body: { trust: "fork" } });
    expect([invalid.status, invalid.body.code]).toEqual([400, "invalid_input"]);
    const list = await t.call("GET", "/v1/runners", { token: w.ownerToken });
    expect(list.body.map((r: Json) => r.trust)).toEqual(["protected", "protected"]);
  });

  it("accepts the runner's own isolation report, keeps it through an admin's edit, and refuses a bad value", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const reported = await t.call("PATCH", `/v1/runners/${w.runner.id}`, {
      token: w.runner.token,
      body: { capabilities: { platforms: ["ios"], isolation: "user" } },
    });
    expect([reported.status, reported.body.capabilities]).toEqual([200, { platforms: ["ios"], isolation: "user" }]);
    const edited = await t.call("PATCH", `/v1/runners/${w.runner.id}`, { token: w.ownerToken, body: { capabilities: { platforms: ALL } } });
    expect(edited.body.capabilities).toEqual({ platforms: ALL, isolation: "user" });
    // The platform rule still holds with an isolation report beside it.
    const widened = await t.call("PATCH", `/v1/runners/${w.runner.id}`, {
      token: w.runner.token,
      body: { capabilities: { platforms: ["ios"], isolation: "none" } },
    });
    expect(widened.status).toBe(200);
    const back = await t.call("PATCH", `/v1/runners/${w.runner.id}`, {
      token: w.runner.token,
      body: { capabilities: { platforms: ALL, isolation: "none" } },
    });
    expect([back.status, back.body.code]).toEqual([403, "forbidden"]);
    const bad = await t.call("PATCH", `/v1/runners/${w.runner.id}`, {
      token: w.runner.token,
      body: { capabilities: { platforms: ["ios"], isolation: "chroot" } },
    });
    expect([bad.status, bad.body.code]).toEqual([400, "invalid_input"]);
  });
});

describe("build trust at queue time", () => {
  it("is protected only with credentials and a protected ref; open otherwise; on manual triggers and reruns", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const plain = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    expect((await t.call("GET", `/v1/builds/${plain.id}`, { token: w.ownerToken })).body.trust).toBe("open");

    const { project, pipeline } = await protectedProject(t, w.ownerToken);
    await t.call("PUT", `/v1/projects/${project.id}/protection`, { token: w.ownerToken, body: { branches: ["main"], tags: ["v*"] } });
    const cases: Array<[Record<string, string>, string]> = [
      [{ branch: "main" }, "protected"],
      [{ branch: "feature/x" }, "open"],
      [{ branch: "main", trigger_ref: "refs/tags/v1.0" }, "protected"],
      // A tag named main is not branch main.
      [{ branch: "main", trigger_ref: "refs/tags/main" }, "open"],
    ];
    for (const [options, trust] of cases) {
      const b = await queueBuild(t, w.ownerToken, project.id, pipeline.id, options);
      const read = await t.call("GET", `/v1/builds/${b.id}`, { token: w.ownerToken });
      expect([options, read.body.trust]).toEqual([options, trust]);
      const rerun = await t.call("POST", `/v1/builds/${b.id}/rerun`, { token: w.ownerToken });
      expect([options, (await t.call("GET", `/v1/builds/${rerun.body.id}`, { token: w.ownerToken })).body.trust]).toEqual([options, trust]);
    }
  });

  it("a tag named like a protected branch gets 403 secrets_withheld; the branch itself gets its secrets", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const { project, pipeline } = await protectedProject(t, w.ownerToken);
    const put = await t.call("PUT", `/v1/projects/${project.id}/protection`, {
      token: w.ownerToken,
      body: { branches: ["main"], tags: ["release-*"] },
    });
    expect([put.status, put.body]).toEqual([200, { branches: ["main"], tags: ["release-*"] }]);
    // The old body ({branches} only) keeps the tag rules as they were.
    const old = await t.call("PUT", `/v1/projects/${project.id}/protection`, { token: w.ownerToken, body: { branches: ["main"] } });
    expect(old.body).toEqual({ branches: ["main"], tags: ["release-*"] });

    const tag = await queueBuild(t, w.ownerToken, project.id, pipeline.id, { branch: "main", trigger_ref: "refs/tags/main" });
    expect((await claim(t, w.runner)).build_id).toBe(tag.id);
    for (const kind of ["secrets", "android-signing", "ios-signing"]) {
      const res = await t.call("GET", `/v1/runners/${w.runner.id}/jobs/${tag.id}/${kind}`, { token: w.runner.token });
      expect([kind, res.status, res.body.code]).toEqual([kind, 403, "secrets_withheld"]);
    }
    await finish(t, w.runner, tag.id);
    const branch = await queueBuild(t, w.ownerToken, project.id, pipeline.id, { branch: "main" });
    expect((await claim(t, w.runner)).build_id).toBe(branch.id);
    const res = await t.call("GET", `/v1/runners/${w.runner.id}/jobs/${branch.id}/secrets`, { token: w.runner.token });
    expect([res.status, res.body]).toEqual([200, { STORE_KEY: "store-key-value" }]);
    await finish(t, w.runner, branch.id);
    const release = await queueBuild(t, w.ownerToken, project.id, pipeline.id, { branch: "main", trigger_ref: "refs/tags/release-1" });
    expect((await claim(t, w.runner)).build_id).toBe(release.id);
    expect((await t.call("GET", `/v1/runners/${w.runner.id}/jobs/${release.id}/secrets`, { token: w.runner.token })).status).toBe(200);

    for (const body of [{}, { tags: "v*" }, { tags: ["a b"] }, { tags: [""] }, { branches: ["main"], extra: [] }]) {
      const bad = await t.call("PUT", `/v1/projects/${project.id}/protection`, { token: w.ownerToken, body });
      expect([JSON.stringify(body), bad.status, bad.body.code]).toEqual([JSON.stringify(body), 400, "invalid_input"]);
    }
  });
});

describe("claims matched by trust", () => {
  it("a protected runner takes protected and open builds, an open runner only open ones; why queued says no_runner_of_trust", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const { project, pipeline } = await protectedProject(t, w.ownerToken);
    const open = await register(t, w.ownerToken, { trust: "open" });
    const guarded = await queueBuild(t, w.ownerToken, project.id, pipeline.id);
    const plain = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    // The open runner skips the older protected build.
    const openJob = await claim(t, open);
    expect([openJob.build_id, openJob.trust]).toEqual([plain.id, "open"]);
    expect(await claim(t, open)).toBeNull();
    // With only open runners online, the protected build can never start: said as such.
    await t.call("PATCH", `/v1/runners/${w.runner.id}`, { token: w.ownerToken, body: { status: "draining" } });
    await t.call("DELETE", `/v1/runners/${w.runner.id}`, { token: w.ownerToken });
    const why = await t.call("GET", `/v1/builds/${guarded.id}`, { token: w.ownerToken });
    expect(why.body.queue.reason).toBe("no_runner_of_trust");
    const prot = await register(t, w.ownerToken);
    expect((await t.call("GET", `/v1/builds/${guarded.id}`, { token: w.ownerToken })).body.queue.reason).toBe("waiting_for_runner");
    const job = await claim(t, prot);
    expect([job.build_id, job.trust]).toEqual([guarded.id, "protected"]);
  });

  it("a protected build is not handed to a runner while it holds an open job", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const { project, pipeline } = await protectedProject(t, w.ownerToken);
    const plain = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    const guarded = await queueBuild(t, w.ownerToken, project.id, pipeline.id);
    const plainTwo = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    expect((await claim(t, w.runner)).build_id).toBe(plain.id);
    // It holds an open job: the older protected build is skipped, the next open one taken.
    expect((await claim(t, w.runner)).build_id).toBe(plainTwo.id);
    expect(await claim(t, w.runner)).toBeNull();
    await finish(t, w.runner, plain.id);
    expect(await claim(t, w.runner)).toBeNull();
    await finish(t, w.runner, plainTwo.id);
    expect((await claim(t, w.runner)).build_id).toBe(guarded.id);
  });

  it("a runner demoted to open while it holds a protected job gets 403 secrets_withheld from then on", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const { project, pipeline } = await protectedProject(t, w.ownerToken);
    await t.call("PUT", `/v1/projects/${project.id}/signing/android`, {
      token: w.ownerToken,
      body: { keystore_base64: "AAAA", keystore_password: "store-pass", key_alias: "k", key_password: "key-pass" },
    });
    const b = await queueBuild(t, w.ownerToken, project.id, pipeline.id);
    const job = await claim(t, w.runner);
    const path = `/v1/runners/${w.runner.id}/jobs/${b.id}`;
    expect((await t.call("GET", `${path}/secrets`, { token: job.job_token })).status).toBe(200);
    expect((await t.call("PATCH", `/v1/runners/${w.runner.id}`, { token: w.ownerToken, body: { trust: "open" } })).body.trust).toBe("open");
    for (const kind of ["secrets", "android-signing"]) {
      for (const token of [job.job_token, w.runner.token]) {
        const res = await t.call("GET", `${path}/${kind}`, { token });
        expect([kind, res.status, res.body.code]).toEqual([kind, 403, "secrets_withheld"]);
      }
    }
    // Cloning is still allowed (checkout is released to every build).
    const checkout = await t.call("GET", `${path}/checkout-auth`, { token: job.job_token });
    expect([checkout.status, checkout.body.code]).toEqual([404, "no_credentials"]);
  });

  it("20 concurrent runners on two daemons: every build claimed once, no protected build to an open runner, none to a runner holding an open job", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const { project, pipeline } = await protectedProject(t, w.ownerToken);
    const opened = await openDb(`file:${t.dbPath}`);
    const second = createApp({ ...t.deps, db: opened.db });
    const viaSecond = async (path: string, token: string) =>
      toCallResult(await second.request(path, { method: "POST", headers: { authorization: `Bearer ${token}` } }, { peerAddress: "127.0.0.1" }));
    try {
      const protectedRunners = await Promise.all(Array.from({ length: 10 }, () => register(t, w.ownerToken)));
      const openRunners = await Promise.all(Array.from({ length: 10 }, () => register(t, w.ownerToken, { trust: "open" })));
      const trustOf = new Map<string, string>();
      for (let i = 0; i < 120; i++) {
        const guarded = i % 2 === 0;
        const b = await queueBuild(t, w.ownerToken, guarded ? project.id : w.project.id, guarded ? pipeline.id : w.pipeline.id);
        trustOf.set(b.id, guarded ? "protected" : "open");
      }
      // Each runner claims until 204 and never finishes a job, so what it holds only grows: once it holds an open
      // job, no protected build may follow in its sequence.
      const sequences = new Map<string, string[]>();
      const all = [...protectedRunners, ...openRunners];
      await Promise.all(
        all.map(async (r, i) => {
          const seq: string[] = [];
          sequences.set(r.id, seq);
          for (;;) {
            const res =
              i % 2 === 0
                ? await t.call("POST", `/v1/runners/${r.id}/claim`, { token: r.token })
                : await viaSecond(`/v1/runners/${r.id}/claim`, r.token);
            if (res.status === 204) return;
            expect(res.status).toBe(200);
            seq.push(res.body.build_id);
          }
        }),
      );
      const claimed = [...sequences.values()].flat();
      expect(new Set(claimed).size).toBe(claimed.length);
      // Every open build went somewhere; a protected build stays queued only when every protected runner holds an open job.
      for (const r of openRunners) {
        expect(sequences.get(r.id)!.every((id) => trustOf.get(id) === "open")).toBe(true);
      }
      for (const r of protectedRunners) {
        const seq = sequences.get(r.id)!;
        const firstOpen = seq.findIndex((id) => trustOf.get(id) === "open");
        if (firstOpen >= 0) expect(seq.slice(firstOpen).every((id) => trustOf.get(id) === "open")).toBe(true);
      }
      const rows = await t.deps.db.select().from(builds);
      for (const row of rows) {
        if (row.status === "assigned") expect(claimed).toContain(row.id);
        else expect([row.status, row.trust]).toEqual(["queued", "protected"]);
      }
      expect(rows.filter((r) => r.trust === "open").every((r) => r.status === "assigned")).toBe(true);
      expect(claimed.length).toBe(rows.filter((r) => r.status === "assigned").length);
      const assigned = rows.filter((r) => r.status === "assigned");
      expect(assigned.every((r) => r.attemptCount === 1)).toBe(true);
      // Not vacuous: protected builds were handed out, and open runners took work.
      expect(assigned.filter((r) => r.trust === "protected").length).toBeGreaterThan(0);
      expect(openRunners.some((r) => sequences.get(r.id)!.length > 0)).toBe(true);
    } finally {
      opened.close();
    }
  });
});

describe("max_jobs", () => {
  it("caps the assigned and running jobs a runner holds; only an owner or admin sets it", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const capped = await register(t, w.ownerToken, { capabilities: { platforms: ALL, max_jobs: 2 } });
    expect(capped.capabilities).toEqual({ platforms: ALL, max_jobs: 2 });
    const ids = [];
    for (let i = 0; i < 4; i++) ids.push((await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id)).id);
    expect((await claim(t, capped)).build_id).toBe(ids[0]);
    expect((await claim(t, capped)).build_id).toBe(ids[1]);
    const atCap = await t.call("POST", `/v1/runners/${capped.id}/claim`, { token: capped.token });
    expect([atCap.status, atCap.text]).toEqual([204, ""]);
    await reportStatus(t, capped, ids[0], { status: "running" });
    expect(await claim(t, capped)).toBeNull();

    // The runner's token cannot lift or change its cap; reporting its platforms without the key keeps it.
    for (const max_jobs of [null, 5]) {
      const res = await t.call("PATCH", `/v1/runners/${capped.id}`, { token: capped.token, body: { capabilities: { platforms: ALL, max_jobs } } });
      expect([max_jobs, res.status, res.body.code]).toEqual([max_jobs, 403, "forbidden"]);
    }
    const kept = await t.call("PATCH", `/v1/runners/${capped.id}`, { token: capped.token, body: { capabilities: { platforms: ALL } } });
    expect(kept.body.capabilities.max_jobs).toBe(2);
    expect(await claim(t, capped)).toBeNull();

    await reportStatus(t, capped, ids[0], { status: "succeeded" });
    expect((await claim(t, capped)).build_id).toBe(ids[2]);
    expect(await claim(t, capped)).toBeNull();
    const bad = await t.call("PATCH", `/v1/runners/${capped.id}`, { token: w.ownerToken, body: { capabilities: { platforms: ALL, max_jobs: 0 } } });
    expect([bad.status, bad.body.code]).toEqual([400, "invalid_input"]);
    const lifted = await t.call("PATCH", `/v1/runners/${capped.id}`, {
      token: w.ownerToken,
      body: { capabilities: { platforms: ALL, max_jobs: null } },
    });
    expect(lifted.body.capabilities).toEqual({ platforms: ALL });
    expect((await claim(t, capped)).build_id).toBe(ids[3]);
    const row = await t.deps.db.select().from(builds).where(eq(builds.id, ids[3])).get();
    expect(row?.runnerId).toBe(capped.id);
  });
});
