// Test reports across a kill -9 of the real daemon (docs/api.md §17, docs/decisions.md "Test reports and log
// search"): killed after a report's upload completed but before its cases were stored, and again while its cases
// were going in, the restarted daemon stores each report once, whole: every case, no duplicate.
import { createClient, type Client } from "@libsql/client";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { claim, createPipeline, createProject, daemonCaller, queueBuild, registerRunner, reportStatus } from "../helpers/builds.ts";
import { makeDataDir, runCli, startDaemon, type Daemon } from "../helpers/daemon.ts";
import { waitFor } from "../helpers/receiver.ts";

const CASES = 15_000;

/** A report of CASES cases, one in ten failing, each with some output (about 5 MB). */
function report(tag: string): Uint8Array {
  const cases: string[] = [];
  for (let i = 0; i < CASES; i++) {
    const failure = i % 10 === 0 ? `<failure message="boom ${i}">at ${tag}.kt:${i}</failure>` : "";
    cases.push(
      `<testcase classname="${tag}.Suite${i % 50}" name="test${i}" time="0.01">${failure}<system-out>${"out ".repeat(60)}</system-out></testcase>`,
    );
  }
  return new TextEncoder().encode(`<testsuites><testsuite name="${tag}">${cases.join("")}</testsuite></testsuites>`);
}

describe("test reports across kill -9", () => {
  const dataDir = makeDataDir();
  const env = { HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0", HANGAR_SWEEP_INTERVAL_MS: "100", HANGAR_REPORT_LEASE_MS: "1000" };
  let daemon: Daemon | undefined;
  let db: Client | undefined;
  afterAll(async () => {
    db?.close();
    await daemon?.stop("SIGKILL");
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("a report whose daemon died before or while storing it is stored once, whole, after the restart", async () => {
    daemon = await startDaemon(env);
    let c = daemonCaller(daemon.url);
    const setupToken = (await runCli(["setup-token"], env)).stdout.trim();
    const setup = (await c.call("POST", "/v1/setup/bootstrap-token/verify", { body: { token: setupToken } })).body.session_token;
    await c.call("POST", "/v1/setup/local-owner/create", { token: setup, body: { email: "owner@example.com" } });
    await c.call("POST", "/v1/setup/complete", { token: setup });
    const owner = (await c.call("POST", "/v1/auth/local/login", { body: { email: "owner@example.com" } })).body.session_token;
    const project = await createProject(c, owner);
    const pipeline = await createPipeline(c, owner, project.id);
    const runner = await registerRunner(c, owner);
    const build = await queueBuild(c, owner, project.id, pipeline.id);
    expect((await claim(c, runner))?.build_id).toBe(build.id);
    await reportStatus(c, runner, build.id, { status: "running" });
    db = createClient({ url: `file:${join(dataDir, "hangar.db")}` });
    const jobPath = `/v1/runners/${runner.id}/jobs/${build.id}/artifacts`;

    /** Uploads a report and kills the daemon once `killWhen` holds for it, while its complete call is in flight. */
    const uploadAndKill = async (tag: string, killWhen: (state: string | null, cases: number) => boolean) => {
      const bytes = report(tag);
      const created = await c.call("POST", jobPath, {
        token: runner.token,
        body: { filename: `${tag}.xml`, size_bytes: bytes.length, content_type: "application/xml", kind: "junit" },
      });
      expect(created.status).toBe(200);
      expect((await fetch(created.body.upload.url, { method: "PUT", body: bytes })).status).toBe(200);
      const artifactId: string = created.body.artifact.id;
      const completing = c.call("POST", `${jobPath}/${artifactId}/complete`, { token: runner.token }).catch(() => null);
      let seen: { state: string | null; cases: number } = { state: null, cases: 0 };
      await waitFor(
        async () => {
          const row = (await db!.execute({ sql: "SELECT state FROM test_reports WHERE artifact_id = ?", args: [artifactId] })).rows[0];
          const cases = Number(
            (await db!.execute({ sql: "SELECT count(*) AS n FROM test_cases WHERE artifact_id = ?", args: [artifactId] })).rows[0]!.n,
          );
          seen = { state: row ? String(row.state) : null, cases };
          return killWhen(seen.state, cases);
        },
        30_000,
        `${tag}: the kill window`,
      );
      await daemon!.stop("SIGKILL");
      await completing;
      return { artifactId, seen };
    };

    /** After a restart: the report is listed, stored, with exactly CASES cases in the database. */
    const expectStoredOnce = async (artifactId: string) => {
      await waitFor(
        async () => {
          const r = await c.call("GET", `/v1/builds/${build.id}/tests?limit=1`, { token: owner });
          return r.body.reports?.some((x: { artifact_id: string }) => x.artifact_id === artifactId);
        },
        90_000,
        "the report stored after the restart",
      ).catch((err) => {
        throw new Error(`${err}\n${daemon?.stderr()}`);
      });
      const rows = Number((await db!.execute({ sql: "SELECT count(*) AS n FROM test_cases WHERE artifact_id = ?", args: [artifactId] })).rows[0]!.n);
      expect(rows).toBe(CASES);
      const body = (await c.call("GET", `/v1/builds/${build.id}/tests?status=failed&limit=1`, { token: owner })).body;
      expect(body.reports.find((x: { artifact_id: string }) => x.artifact_id === artifactId)).toEqual({
        artifact_id: artifactId,
        status: "parsed",
        message: null,
      });
      return body.summary;
    };

    // 1. Killed once the upload completed (the artifact available, its report not stored).
    const first = await uploadAndKill("First", (state) => state !== null && state !== "stored");
    expect(first.seen.state).not.toBe("stored");
    daemon = await startDaemon(env);
    c = daemonCaller(daemon.url);
    expect(await expectStoredOnce(first.artifactId)).toEqual({
      total: CASES,
      passed: CASES * 0.9,
      failed: CASES * 0.1,
      skipped: 0,
      errored: 0,
      duration_ms: CASES * 10,
    });

    // 2. Killed while the cases were going in: the leftovers are removed and the report stored again, once.
    const second = await uploadAndKill("Second", (state, cases) => state === "storing" && cases >= 2000);
    expect(second.seen.cases).toBeLessThan(CASES);
    daemon = await startDaemon(env);
    c = daemonCaller(daemon.url);
    expect((await expectStoredOnce(second.artifactId)).total).toBe(CASES * 2);
    const build2 = await c.call("GET", `/v1/builds/${build.id}`, { token: owner });
    expect(build2.body.tests_summary).toMatchObject({ total: CASES * 2, failed: CASES * 0.2 });
    expect(daemon.stderr()).not.toContain('"level":"error"');
  }, 300_000);
});
