// Requests racing on the same state, in-process (Promise.all). Each race is run many times so the awaits of the
// two sides interleave differently; where one interleaving is too rare to hit by chance, a gate on the database
// handle holds one side at an exact point (a slow disk, another daemon) while the other side runs.
import { eq, SQL } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { artifacts, instance, urlTokens, userSessions, users } from "../../src/db/schema/index.ts";
import { readActiveStorageSettings } from "../../src/domain/settings/artifact-storage-settings.ts";
import { writeSetting } from "../../src/domain/settings/instance-settings.ts";
import { OIDC_SETTING } from "../../src/domain/setup/preflight.ts";
import type { Db } from "../../src/db/types.ts";
import { sweep } from "../../src/domain/builds/sweeper.ts";
import { makeTestApp, type CallResult, type TestApp } from "../helpers/app.ts";
import { buildWorld, claim, queueBuild, registerRunner, reportStatus } from "../helpers/builds.ts";
import { createUser, sessionFor } from "../helpers/factories.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON shapes are asserted by the tests
type Json = any;

const pathOf = (url: string): string => new URL(url).pathname + new URL(url).search;

/** Waits `n` turns of the event loop: staggers the start of one side of a race so the interleavings vary. */
function hops(n: number): Promise<void> {
  return new Promise((resolve) => setImmediate(() => (n > 0 ? hops(n - 1).then(resolve) : resolve())));
}

/** A GET through the app whose body is left unread (it streams when read). */
function startGet(t: TestApp, path: string): Promise<Response> {
  return Promise.resolve(t.app.request(path, { method: "GET" }, { peerAddress: "127.0.0.1" }));
}

/** No answer in a race may be a server error. */
function expectNoServerError(...answers: CallResult[]): void {
  for (const a of answers) expect(a.status, a.text).toBeLessThan(500);
}

/**
 * Holds the next call of one of `methods` on the app's database handle whose first argument passes `match`,
 * until `release()`; `reached` resolves when it is held. The app reads `deps.db` on every call, so swapping
 * the handle on the shared deps object intercepts every domain function.
 */
function gateDb(t: TestApp, methods: Array<"batch" | "insert" | "update" | "run">, match: (arg: unknown) => boolean = () => true) {
  const original = t.deps.db;
  let armed = true;
  let release!: () => void;
  let reached!: () => void;
  const opened = new Promise<void>((r) => (release = r));
  const reachedPromise = new Promise<void>((r) => (reached = r));
  t.deps.db = new Proxy(original, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      if (!armed || !(methods as string[]).includes(String(prop))) return value.bind(target);
      return (...args: unknown[]) => {
        if (!armed || !match(args[0])) return value.apply(target, args);
        armed = false;
        reached();
        if (prop === "batch") return opened.then(() => value.apply(target, args));
        // insert/update/run build a query synchronously and run it when awaited: hold the await.
        return wrapHeld(value.apply(target, args), opened);
      };
    },
  }) as Db;
  return {
    reached: reachedPromise,
    release: () => release(),
    restore: () => {
      t.deps.db = original;
    },
  };
}

/** Whether a table or raw SQL statement writes `table` (raw SQL interpolates the table object). */
const touches =
  (table: object) =>
  (arg: unknown): boolean =>
    arg === table || (arg instanceof SQL && arg.queryChunks.includes(table as never));

/** A query builder whose execution waits for `gate`; chaining keeps the hold. */
function wrapHeld<T extends object>(builder: T, gate: Promise<void>): T {
  return new Proxy(builder, {
    get(q, p) {
      const v = Reflect.get(q, p, q);
      if (typeof v !== "function") return v;
      if (p === "then") {
        return (onFulfilled: (x: unknown) => unknown, onRejected: (e: unknown) => unknown) =>
          gate.then(() => (v as (a: unknown, b: unknown) => Promise<unknown>).call(q, onFulfilled, onRejected));
      }
      return (...a: unknown[]) => {
        const next = (v as (...x: unknown[]) => unknown).apply(q, a);
        return next && typeof next === "object" && "then" in next ? wrapHeld(next as object, gate) : next;
      };
    },
  });
}

async function runningBuild(t: TestApp, w: Json, runner: Json = w.runner): Promise<string> {
  const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
  const job = await claim(t, runner);
  expect(job.build_id).toBe(b.id);
  expect((await reportStatus(t, runner, b.id, { status: "running" })).status).toBe(200);
  return b.id;
}

describe("cancel racing the runner's report", () => {
  it("one side wins cleanly: canceled with 409 build_canceled for the runner, or finished with cancel a no-op", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const outcomes = new Set<string>();
    for (let i = 0; i < 25; i++) {
      const buildId = await runningBuild(t, w);
      // Vary who starts first by a few microtask hops.
      const delay = (n: number) => new Promise<void>((r) => setImmediate(() => (n > 0 ? delay(n - 1).then(r) : r())));
      const [cancel, report] = await Promise.all([
        delay(i % 3).then(() => t.call("POST", `/v1/builds/${buildId}/cancel`, { token: w.ownerToken })),
        delay((i + 1) % 2).then(() => reportStatus(t, w.runner, buildId, { status: "succeeded", exit_code: 0 })),
      ]);
      expectNoServerError(cancel, report);
      const final = (await t.call("GET", `/v1/builds/${buildId}`, { token: w.ownerToken })).body;
      expect(cancel.status).toBe(200);
      if (final.status === "canceled") {
        expect(report.status).toBe(409);
        expect(report.body.code).toBe("build_canceled");
        expect(cancel.body.status).toBe("canceled");
        expect(final.failure_reason).toBe("canceled_by_user");
      } else {
        expect(final.status).toBe("succeeded");
        expect(report.status).toBe(200);
        expect(cancel.body.status).toBe("succeeded");
        expect(final.exit_code).toBe(0);
        expect(final.cancel_requested).toBe(false);
      }
      expect(final.finished_at).not.toBeNull();
      outcomes.add(final.status);
      // Either way the runner is free again.
      const runners = (await t.call("GET", "/v1/runners", { token: w.ownerToken })).body as Json[];
      expect(runners.find((r) => r.id === w.runner.id).status).toBe("online");
    }
    expect(outcomes.size).toBeGreaterThan(0);
  });

  it("cancel racing the first 'running' report of an assigned build", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    for (let i = 0; i < 15; i++) {
      const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
      await claim(t, w.runner);
      const [cancel, report] = await Promise.all([
        t.call("POST", `/v1/builds/${b.id}/cancel`, { token: w.ownerToken }),
        reportStatus(t, w.runner, b.id, { status: "running" }),
      ]);
      expectNoServerError(cancel, report);
      const final = (await t.call("GET", `/v1/builds/${b.id}`, { token: w.ownerToken })).body;
      // Cancel always wins in the end (running is not final); the report either landed before it or was refused.
      expect(final.status).toBe("canceled");
      expect(cancel.body.status).toBe("canceled");
      if (report.status !== 200) expect(report.body.code).toBe("build_canceled");
      const job = await t.call("GET", `/v1/runners/${w.runner.id}/jobs/${b.id}`, { token: w.runner.token });
      expect(job.body.cancel_requested).toBe(true);
    }
  });
});

describe("two runners on one job", () => {
  it("only the runner holding the job can report; the other gets 404 whatever the order", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const other = await registerRunner(t, w.ownerToken);
    for (let i = 0; i < 10; i++) {
      const buildId = await runningBuild(t, w);
      const [mine, theirs] = await Promise.all([
        reportStatus(t, w.runner, buildId, { status: "succeeded" }),
        reportStatus(t, other, buildId, { status: "failed", exit_code: 2 }),
      ]);
      expectNoServerError(mine, theirs);
      expect(mine.status).toBe(200);
      expect(theirs.status).toBe(404);
      expect(theirs.body.code).toBe("not_found");
      expect((await t.call("GET", `/v1/builds/${buildId}`, { token: w.ownerToken })).body.status).toBe("succeeded");
    }
  });

  it("after a lapsed lease hands the job to another runner, the old holder's late reports are refused", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const other = await registerRunner(t, w.ownerToken);
    const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
    await claim(t, w.runner);
    t.clock.advance(t.deps.config.jobLeaseS + 1);
    await sweep(t.deps);
    const job = await claim(t, other);
    expect(job.build_id).toBe(b.id);
    const [late, fresh] = await Promise.all([
      reportStatus(t, w.runner, b.id, { status: "running" }),
      reportStatus(t, other, b.id, { status: "running" }),
    ]);
    expectNoServerError(late, fresh);
    expect(late.status).toBe(404);
    expect(fresh.status).toBe(200);
    const final = (await t.call("GET", `/v1/builds/${b.id}`, { token: w.ownerToken })).body;
    expect(final).toMatchObject({ status: "running", runner_id: other.id, attempt_count: 2 });
  });

  it("one runner sending two final reports at once: exactly one lands", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    for (let i = 0; i < 15; i++) {
      const buildId = await runningBuild(t, w);
      const answers = await Promise.all([
        reportStatus(t, w.runner, buildId, { status: "succeeded" }),
        reportStatus(t, w.runner, buildId, { status: "failed", exit_code: 1 }),
        reportStatus(t, w.runner, buildId, { status: "timed_out" }),
      ]);
      expectNoServerError(...answers);
      const won = answers.filter((a) => a.status === 200);
      expect(won).toHaveLength(1);
      for (const lost of answers.filter((a) => a.status !== 200)) {
        expect(lost.status).toBe(409);
        expect(lost.body.code).toBe("invalid_transition");
      }
      const final = (await t.call("GET", `/v1/builds/${buildId}`, { token: w.ownerToken })).body;
      expect(final.status).toBe(won[0]!.body.status);
    }
  });
});

describe("artifact complete racing abort", () => {
  async function uploaded(t: TestApp, w: Json, buildId: string): Promise<{ id: string; base: string }> {
    const base = `/v1/runners/${w.runner.id}/jobs/${buildId}/artifacts`;
    const created = await t.call("POST", base, {
      token: w.runner.token,
      body: { filename: "app.apk", size_bytes: 5, content_type: "application/vnd.android.package-archive" },
    });
    expect(created.status).toBe(200);
    expect((await t.call("PUT", pathOf(created.body.upload.url), { rawBody: "hello" })).status).toBe(200);
    return { id: created.body.artifact.id, base };
  }

  it("exactly one wins; a completed artifact keeps its bytes, an aborted one loses them", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const buildId = await runningBuild(t, w);
    const seen = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const a = await uploaded(t, w, buildId);
      const calls = [
        () => t.call("POST", `${a.base}/${a.id}/complete`, { token: w.runner.token }),
        () => t.call("POST", `${a.base}/${a.id}/abort`, { token: w.runner.token }),
      ];
      if (i % 2) calls.reverse();
      const answers = await Promise.all(calls.map((c) => c()));
      expectNoServerError(...answers);
      const winners = answers.filter((x) => x.status === 200);
      expect(winners, answers.map((x) => x.text).join(" | ")).toHaveLength(1);
      const loser = answers.find((x) => x.status !== 200)!;
      expect(loser.status).toBe(409);
      expect(loser.body.code).toBe("invalid_transition");
      const row = await t.deps.db.select().from(artifacts).where(eq(artifacts.id, a.id)).get();
      expect(row!.status).toBe(winners[0]!.body.artifact.status);
      seen.add(row!.status);
      const listed = (await t.call("GET", `/v1/builds/${buildId}/artifacts`, { token: w.ownerToken })).body.map((x: Json) => x.id);
      const link = await t.call("POST", `/v1/artifacts/${a.id}/download-link`, { token: w.ownerToken });
      if (row!.status === "available") {
        expect(listed).toContain(a.id);
        const got = await t.call("GET", pathOf(link.body.url));
        expect(got.status).toBe(200);
        expect(got.text).toBe("hello");
      } else {
        expect(row!.status).toBe("aborted");
        expect(listed).not.toContain(a.id);
        expect(link.status).toBe(404);
      }
    }
    expect([...seen].every((s) => s === "available" || s === "aborted")).toBe(true);
  });

  it("an abort that loses to complete leaves the artifact's download links alone", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const buildId = await runningBuild(t, w);
    const a = await uploaded(t, w, buildId);
    // The abort has read the artifact as pending and is about to write when complete and a download link land.
    const gate = gateDb(t, ["batch"]);
    const abort = t.call("POST", `${a.base}/${a.id}/abort`, { token: w.runner.token });
    await gate.reached;
    gate.restore();
    const done = await t.call("POST", `${a.base}/${a.id}/complete`, { token: w.runner.token });
    expect(done.status).toBe(200);
    const link = await t.call("POST", `/v1/artifacts/${a.id}/download-link`, { token: w.ownerToken });
    expect(link.status).toBe(200);
    gate.release();
    const aborted = await abort;
    expect(aborted.status).toBe(409);
    expect(aborted.body.code).toBe("invalid_transition");
    const got = await t.call("GET", pathOf(link.body.url));
    expect(got.status, got.text).toBe(200);
    expect(got.text).toBe("hello");
    const tokens = await t.deps.db.select().from(urlTokens).where(eq(urlTokens.artifactId, a.id));
    expect(tokens.some((x) => x.kind === "download")).toBe(true);
  });
});

describe("link uses racing expiry", () => {
  it("download links: each concurrent use at the expiry edge is a whole file or 410, then always 410", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const buildId = await runningBuild(t, w);
    const base = `/v1/runners/${w.runner.id}/jobs/${buildId}/artifacts`;
    const data = "x".repeat(200_000);
    const created = await t.call("POST", base, {
      token: w.runner.token,
      body: { filename: "big.apk", size_bytes: data.length, content_type: "application/octet-stream" },
    });
    await t.call("PUT", pathOf(created.body.upload.url), { rawBody: data });
    await t.call("POST", `${base}/${created.body.artifact.id}/complete`, { token: w.runner.token });
    const link = await t.call("POST", `/v1/artifacts/${created.body.artifact.id}/download-link`, { token: w.ownerToken });
    t.clock.set(link.body.expires_at - 1);
    // Six uses answered (headers out) just before the edge; their bodies are read only after it has passed.
    const early = await Promise.all(Array.from({ length: 6 }, () => startGet(t, pathOf(link.body.url))));
    t.clock.set(link.body.expires_at);
    const late = await Promise.all(Array.from({ length: 6 }, () => startGet(t, pathOf(link.body.url))));
    for (const res of early) {
      expect(res.status).toBe(200);
      expect((await res.text()).length).toBe(data.length);
    }
    for (const res of late) {
      expect(res.status).toBe(410);
      expect(((await res.json()) as { code: string }).code).toBe("link_expired");
    }
    const after = await t.call("GET", pathOf(link.body.url));
    expect([after.status, after.body.code]).toEqual([410, "link_expired"]);
  });

  it("install links: manifest, artifact and download racing the one-hour edge answer whole or 410", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    await t.call("PUT", "/v1/settings/external-access/network", {
      token: w.ownerToken,
      body: { public_url: "https://ci.example.com", allowed_origins: ["https://ci.example.com"] },
    });
    const buildId = await runningBuild(t, w);
    const base = `/v1/runners/${w.runner.id}/jobs/${buildId}/artifacts`;
    const created = await t.call("POST", base, {
      token: w.runner.token,
      body: {
        filename: "app.ipa",
        size_bytes: 5,
        content_type: "application/octet-stream",
        install_metadata: { bundle_identifier: "com.example", bundle_version: "1", title: "App" },
      },
    });
    await t.call("PUT", pathOf(created.body.upload.url), { rawBody: "hello" });
    await t.call("POST", `${base}/${created.body.artifact.id}/complete`, { token: w.runner.token });
    const install = await t.call("POST", `/v1/artifacts/${created.body.artifact.id}/install-link`, { token: w.ownerToken });
    expect(install.status).toBe(200);
    const token = new URL(install.body.manifest_url).pathname.split("/")[3];
    const paths = [`/install/ios/${token}/manifest.plist`, `/install/artifact/${token}`, `/install/download/${token}`];
    t.clock.set(install.body.expires_at - 1);
    const early = await Promise.all(paths.map((p) => startGet(t, p)));
    t.clock.set(install.body.expires_at);
    const late = await Promise.all(paths.map((p) => startGet(t, p)));
    expect(early.map((r) => r.status)).toEqual([200, 302, 200]);
    expect(await early[2]!.text()).toBe("hello");
    expect(await early[0]!.text()).toContain("com.example");
    for (const res of late) {
      expect(res.status).toBe(410);
      expect(((await res.json()) as { code: string }).code).toBe("link_expired");
    }
    for (const p of paths) expect((await t.call("GET", p)).status).toBe(410);
  });
});

describe("disable racing sign-in", () => {
  it("a disabled user ends with no live session, whatever the interleaving, even after re-enabling", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const user = await createUser(t, { email: "racer@example.com", role: "developer" });
    for (let i = 0; i < 20; i++) {
      const [login, disable] = await Promise.all([
        t.call("POST", "/v1/auth/local/login", { body: { email: user.email } }),
        t.call("DELETE", `/v1/users/${user.id}`, { token: w.ownerToken }),
      ]);
      expectNoServerError(login, disable);
      expect(disable.status).toBe(200);
      if (login.status !== 200) expect([login.status, login.body.code]).toEqual([403, "user_not_found"]);
      // No session row survives the disable; the token (if any) never works again, not even after enable.
      expect(await t.deps.db.select().from(userSessions).where(eq(userSessions.userId, user.id))).toEqual([]);
      await t.call("POST", `/v1/users/${user.id}/enable`, { token: w.ownerToken });
      if (login.status === 200) expect((await t.call("GET", "/v1/users/me", { token: login.body.session_token })).status).toBe(401);
    }
  });

  it("the disable landing between the sign-in's user update and its session insert leaves no session", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const user = await createUser(t, { email: "racer@example.com", role: "developer" });
    // Hold the sign-in right before its session row is written; the disable runs in full meanwhile.
    const gate = gateDb(t, ["insert", "run"], touches(userSessions));
    const login = t.call("POST", "/v1/auth/local/login", { body: { email: user.email } });
    await gate.reached;
    gate.restore();
    const disable = await t.call("DELETE", `/v1/users/${user.id}`, { token: w.ownerToken });
    expect(disable.status).toBe(200);
    gate.release();
    const answer = await login;
    expectNoServerError(answer);
    expect([answer.status, answer.body.code]).toEqual([403, "user_not_found"]);
    expect(await t.deps.db.select().from(userSessions).where(eq(userSessions.userId, user.id))).toEqual([]);
    // Re-enabling does not bring back anything from the refused sign-in.
    await t.call("POST", `/v1/users/${user.id}/enable`, { token: w.ownerToken });
    expect(await t.deps.db.select().from(userSessions).where(eq(userSessions.userId, user.id))).toEqual([]);
    const row = await t.deps.db.select().from(users).where(eq(users.id, user.id)).get();
    expect(row!.status).toBe("active");
  });
});

describe("ownership and roles racing", () => {
  it("transfer-owner racing the disable (or a role change) of its target: one owner, active, and the instance agrees", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const owner = (await t.call("GET", "/v1/users/me", { token: w.ownerToken })).body;
    const admin = await createUser(t, { email: "admin@example.com", role: "admin" });
    const adminToken = await sessionFor(t, admin);
    const seen = new Set<string>();
    for (let i = 0; i < 24; i++) {
      const target = await createUser(t, { email: `target-${i}@example.com`, role: "developer" });
      const ownerToken = await sessionFor(t, { id: owner.id });
      // One of the two starts a few event-loop turns late, so the side request lands before, inside or after.
      const k = Math.floor(i / 2) % 6;
      const side = hops(Math.max(0, k - 3)).then(() =>
        i % 2
          ? t.call("DELETE", `/v1/users/${target.id}`, { token: adminToken })
          : t.call("PATCH", `/v1/users/${target.id}/role`, { token: adminToken, body: { role: "qa_viewer" } }),
      );
      const transferring = hops(Math.max(0, 3 - k)).then(() =>
        t.call("POST", "/v1/users/transfer-owner", { token: ownerToken, body: { email: target.email } }),
      );
      const [transfer, other] = await Promise.all([transferring, side]);
      seen.add(`${i % 2 ? "disable" : "role"}:${transfer.status}`);
      expectNoServerError(transfer, other);
      const owners = await t.deps.db.select().from(users).where(eq(users.role, "owner"));
      expect(owners).toHaveLength(1);
      expect(owners[0]!.status).toBe("active");
      expect((await t.deps.db.select().from(instance).get())!.ownerUserId).toBe(owners[0]!.id);
      if (i % 2) {
        // Disable and transfer exclude each other: a disabled user never becomes owner, the owner is never disabled.
        expect(
          [transfer.status, other.status].filter((x) => x === 200),
          `${transfer.text} | ${other.text}`,
        ).toHaveLength(1);
      }
      if (transfer.status === 200) {
        expect(owners[0]!.id).toBe(target.id);
        // After the transfer the admin's request meets the owner rule (403); a role change that landed before it is 200.
        if (other.status !== 200 || i % 2) expect([other.status, other.body.code]).toEqual([403, "forbidden"]);
        // Hand ownership back for the next round (sessions of both were revoked by the transfer).
        const back = await t.call("POST", "/v1/users/transfer-owner", { token: await sessionFor(t, target), body: { email: owner.email } });
        expect(back.status, back.text).toBe(200);
      } else {
        expect(owners[0]!.id).toBe(owner.id);
        expect(other.status).toBe(200);
        if (i % 2) expect([transfer.status, transfer.body.code]).toEqual([409, "user_not_active"]);
      }
    }
    // Both orders happened for both kinds of side request.
    expect([...seen].sort()).toEqual(["disable:200", "disable:409", "role:200"]);
  });
});

describe("claims and logs racing", () => {
  it("cancel racing a claim: the build ends canceled, and a runner that got it is told to stop", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const outcomes = new Set<number>();
    for (let i = 0; i < 16; i++) {
      const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
      const [cancel, claimed] = await Promise.all([
        hops(i % 4).then(() => t.call("POST", `/v1/builds/${b.id}/cancel`, { token: w.ownerToken })),
        hops((i >> 2) % 4).then(() => t.call("POST", `/v1/runners/${w.runner.id}/claim`, { token: w.runner.token })),
      ]);
      outcomes.add(claimed.status);
      expectNoServerError(cancel, claimed);
      expect(cancel.body.status).toBe("canceled");
      if (claimed.status === 200) {
        expect(claimed.body.build_id).toBe(b.id);
        const hb = await t.call("POST", `/v1/runners/${w.runner.id}/heartbeat`, { token: w.runner.token, body: {} });
        expect(hb.body.cancel_job_ids).toContain(b.id);
      } else {
        expect(claimed.status).toBe(204);
      }
      // Nothing stays assigned to the runner, so it is free.
      const runners = (await t.call("GET", "/v1/runners", { token: w.ownerToken })).body as Json[];
      expect(runners.find((r) => r.id === w.runner.id).status).toBe("online");
    }
    expect([...outcomes].sort()).toEqual([200, 204]);
  });

  it("the same chunk sent five times at once is stored once; different chunks at one offset leave one of them", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const buildId = await runningBuild(t, w);
    const logs = `/v1/runners/${w.runner.id}/jobs/${buildId}/logs`;
    const send = (offset: number, text: string) =>
      t.call("POST", `${logs}?offset=${offset}`, { token: w.runner.token, rawBody: text, headers: { "content-type": "text/plain" } });
    const same = await Promise.all(Array.from({ length: 5 }, () => send(0, "first line\n")));
    expectNoServerError(...same);
    for (const a of same) expect(a.status).toBe(200);
    const read = async () => (await t.call("GET", `/v1/builds/${buildId}/logs`, { token: w.ownerToken })).text;
    expect(await read()).toBe("first line\n");
    const rivals = ["second A\n", "second B\n", "second C\n"];
    const answers = await Promise.all(rivals.map((r) => send(11, r)));
    expectNoServerError(...answers);
    const log = await read();
    expect(rivals.map((r) => `first line\n${r}`)).toContain(log);
    for (const a of answers) if (a.status !== 200) expect([a.status, a.body.code]).toEqual([409, "log_offset_mismatch"]);
  });
});

describe("logout racing requests on the same session", () => {
  it("every answer is 200 or 401 invalid_session, and the session is dead afterwards", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const owner = (await t.call("GET", "/v1/users/me", { token: w.ownerToken })).body;
    for (let i = 0; i < 10; i++) {
      const token = await sessionFor(t, { id: owner.id });
      const answers = await Promise.all([
        t.call("GET", "/v1/users/me", { token }),
        t.call("POST", "/v1/auth/logout", { token }),
        t.call("GET", "/v1/builds", { token }),
        t.call("POST", "/v1/auth/logout", { token }),
        t.call("POST", "/v1/projects", { token, body: { name: `p${i}`, repo_url: "https://git.example.com/x.git" } }),
      ]);
      expectNoServerError(...answers);
      for (const a of answers) {
        if (a.status !== 200) expect([a.status, a.body.code]).toEqual([401, "invalid_session"]);
      }
      expect(answers[1]!.status === 200 || answers[3]!.status === 200).toBe(true);
      expect((await t.call("GET", "/v1/users/me", { token })).status).toBe(401);
    }
  });
});

describe("concurrent settings writes", () => {
  it("PUT network: the stored document is one of the bodies, whole, never a mix", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const bodies = Array.from({ length: 8 }, (_, i) => ({
      public_url: `https://ci${i}.example.com`,
      artifact_delivery_url: i % 2 ? `https://dl${i}.example.com` : null,
      allowed_origins: [`https://ci${i}.example.com`, `https://extra${i}.example.com`],
    }));
    const answers = await Promise.all(bodies.map((body) => t.call("PUT", "/v1/settings/external-access/network", { token: w.ownerToken, body })));
    expectNoServerError(...answers);
    for (const a of answers) expect(a.status).toBe(200);
    const got = (await t.call("GET", "/v1/settings/external-access/network", { token: w.ownerToken })).body.settings;
    const match = bodies.find((b) => b.public_url === got.public_url);
    expect(match).toBeDefined();
    expect({ public_url: got.public_url, artifact_delivery_url: got.artifact_delivery_url, allowed_origins: got.allowed_origins }).toEqual(match);
  });

  it("PUT artifact storage: S3 and local racing end as one whole document, secrets never paired with the wrong key", async () => {
    const t = await makeTestApp();
    const w = await buildWorld(t);
    const s3 = (i: number) => ({
      provider: "s3",
      s3: {
        endpoint: "https://s3.example.com",
        region: "eu-west-1",
        bucket: `bucket-${i}`,
        prefix: "",
        access_key_id: `AK${i}`,
        secret_access_key: `SK${i}`,
      },
    });
    const bodies = [s3(1), { provider: "local", local: { base_dir: t.dataDir } }, s3(2), s3(3), { provider: "local", local: { base_dir: null } }];
    const answers = await Promise.all(bodies.map((body) => t.call("PUT", "/v1/settings/artifact-storage", { token: w.ownerToken, body })));
    expectNoServerError(...answers);
    for (const a of answers) expect(a.status, a.text).toBe(200);
    const got = (await t.call("GET", "/v1/settings/artifact-storage", { token: w.ownerToken })).body;
    const last = answers.find((a) => JSON.stringify(a.body) === JSON.stringify(got));
    expect(last, "the stored settings equal one writer's answer").toBeDefined();
    // The stored key id and secret came from the same request.
    const active = await readActiveStorageSettings(t.deps);
    if (active.provider !== "local") expect(active.secretAccessKey).toBe(active.accessKeyId.replace("AK", "SK"));
  });

  it("PUT preferences: concurrent owner changes of the runtime mode leave one mode and revoke every session", async () => {
    const t = await makeTestApp({ config: { HANGAR_HOST: "0.0.0.0" } });
    const w = await buildWorld(t);
    // Remote mode's preflight: an HTTPS public URL in the allowlist and a remote sign-in configured.
    await t.call("PUT", "/v1/settings/external-access/network", {
      token: w.ownerToken,
      body: { public_url: "https://ci.example.com", allowed_origins: ["https://ci.example.com"] },
    });
    await writeSetting(t.deps, OIDC_SETTING, { issuer: "https://idp.example.com", client_id: "hangar" });
    expect((await t.call("GET", "/v1/settings/external-access/preflight", { token: w.ownerToken })).body.ready).toBe(true);
    const owner = (await t.call("GET", "/v1/users/me", { token: w.ownerToken })).body;
    for (let round = 0; round < 5; round++) {
      const tokens = await Promise.all(Array.from({ length: 6 }, () => sessionFor(t, { id: owner.id })));
      const modes = ["remote", "local", "remote", "local", "remote", "local"] as const;
      const answers = await Promise.all(
        modes.map((runtime_mode, i) => t.call("PUT", "/v1/settings/preferences", { token: tokens[i], body: { runtime_mode } })),
      );
      expectNoServerError(...answers);
      for (const a of answers) {
        // Refused only because an earlier change in the race already revoked this writer's session.
        if (a.status !== 200) expect([a.status, a.body.code]).toEqual([401, "invalid_session"]);
      }
      const mode = (await t.deps.db.select().from(instance).get())!.runtimeMode;
      expect(modes).toContain(mode);
      // Some change happened (the first writer always finds a mode to change), so no session of before survives.
      expect(answers.some((a) => a.status === 200 && a.body.sessions_revoked)).toBe(true);
      expect(await t.deps.db.select().from(userSessions)).toEqual([]);
    }
  });
});
