// Log search (docs/log-search.md): lines indexed as logs arrive and when a build ends, FTS5 terms, phrases and
// prefixes, filters, newest builds first, 400 for a malformed query, entries dropped with their log.
import { sql } from "drizzle-orm";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { artifactWorld, insertBuild, type ArtifactWorld } from "../helpers/artifact-world.ts";
import { appendLog, reportStatus } from "../helpers/builds.ts";
import { dropLogSearchEntries } from "../../src/domain/logs/log-search.ts";
import { runMaintenance } from "../../src/domain/setup/maintenance.ts";

let t: TestApp;
let w: ArtifactWorld;
beforeEach(async () => {
  t = await makeTestApp();
  w = await artifactWorld(t);
});
afterEach(async () => t.close());

async function search(query: string) {
  const r = await t.call("GET", `/v1/search?${query}`, { token: w.ownerToken });
  expect(r.status, r.text).toBe(200);
  return r.body.matches as Array<{ build_id: string; build_number: number; project_id: string; line_number: number; line: string }>;
}

async function log(buildId: string, text: string, offset = 0) {
  const r = await appendLog(t, w.runner, buildId, offset, text);
  expect(r.status, r.text).toBe(200);
}

describe("log search", () => {
  it("finds terms, phrases and prefixes in lines as they arrive, with 1-based line numbers and ANSI colours removed", async () => {
    await log(w.buildId, "Cloning repository\n\x1b[31merror:\x1b[0m Signing certificate expired\nCompiling FooTests.swift\npartial li");
    expect(await search("q=signing")).toEqual([
      { build_id: w.buildId, build_number: expect.any(Number), project_id: w.projectId, line_number: 2, line: "error: Signing certificate expired" },
    ]);
    expect((await search(`q=${encodeURIComponent('"certificate expired"')}`)).map((m) => m.line_number)).toEqual([2]);
    expect(await search(`q=${encodeURIComponent('"expired certificate"')}`)).toEqual([]);
    expect((await search("q=FooTest*")).map((m) => m.line)).toEqual(["Compiling FooTests.swift"]);
    // Not yet: the unterminated last line waits for its newline (or the end of the build).
    expect(await search("q=partial")).toEqual([]);
    await log(
      w.buildId,
      "ne done\n",
      "Cloning repository\n\x1b[31merror:\x1b[0m Signing certificate expired\nCompiling FooTests.swift\npartial li".length,
    );
    expect((await search("q=partial")).map((m) => [m.line_number, m.line])).toEqual([[4, "partial line done"]]);
  });

  it("indexes a chunk shortly after answering its append, and a search first has what this process was sent indexed", async () => {
    const rows = async () =>
      Number(
        (
          await t.deps.db.get<{ n: number }>(sql`SELECT count(*) AS n FROM log_search s
            JOIN log_search_builds l ON l.seq = s.rowid / 134217728 WHERE l.build_id = ${w.buildId}`)
        )?.n ?? 0,
      );
    // The append is answered before its lines are indexed (the runner's final report waits for that answer).
    await log(w.buildId, "first line\nsecond line\n");
    expect(await rows()).toBe(0);
    // A search starts the waiting run and finds the lines.
    expect((await search("q=second")).map((m) => m.line_number)).toEqual([2]);
    expect(await rows()).toBe(2);
    // Left alone, a chunk is indexed within the delay (200 ms), by one run for every chunk sent meanwhile.
    await log(w.buildId, "third line\n", "first line\nsecond line\n".length);
    await log(w.buildId, "fourth line\n", "first line\nsecond line\nthird line\n".length);
    const until = Date.now() + 5000;
    while ((await rows()) < 4 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    expect(await rows()).toBe(4);
  });

  it("indexes a final build's unterminated last line once the build ends; words with punctuation search as phrases", async () => {
    await log(w.buildId, "step 1\nld: framework not found Pods_App.framework at Main.swift:42");
    await reportStatus(t, w.runner, w.buildId, { status: "running" });
    await reportStatus(t, w.runner, w.buildId, { status: "failed", exit_code: 1 });
    t.clock.advance(t.deps.config.logGraceS + 1);
    await runMaintenance(t.deps);
    expect((await search(`q=${encodeURIComponent("Main.swift:42")}`)).map((m) => m.line_number)).toEqual([2]);
    expect((await search(`q=${encodeURIComponent("Pods_App.framework")}`)).map((m) => m.line_number)).toEqual([2]);
  });

  it("newest builds first, lines of one build in order; filters by project, pipeline and branch; limit", async () => {
    await log(w.buildId, "flaky network timeout\nnothing\nnetwork timeout again\n");
    const newer = await insertBuild(t, w.projectId, w.pipelineId, w.runner.id, "running", { buildNumber: 7, branch: "develop" });
    await log(newer, "network timeout on develop\n");
    const all = await search("q=network");
    expect(all.map((m) => [m.build_id, m.line_number])).toEqual([
      [newer, 1],
      [w.buildId, 1],
      [w.buildId, 3],
    ]);
    expect((await search("q=network&branch=develop")).map((m) => m.build_id)).toEqual([newer]);
    expect((await search(`q=network&project_id=${w.projectId}&pipeline_id=${w.pipelineId}&limit=1`)).map((m) => m.build_id)).toEqual([newer]);
    expect(await search(`q=network&project_id=${crypto.randomUUID()}`)).toEqual([]);
  });

  it("a malformed query is 400 invalid_input, not 500; an empty or missing one too", async () => {
    await log(w.buildId, "hello world\n");
    for (const q of ['"unterminated', "AND", "hello OR", "(hello", "NEAR(hello"]) {
      const r = await t.call("GET", `/v1/search?q=${encodeURIComponent(q)}`, { token: w.ownerToken });
      expect([q, r.status, r.body.code]).toEqual([q, 400, "invalid_input"]);
    }
    for (const path of ["/v1/search", "/v1/search?q=", "/v1/search?q=a&limit=0"]) {
      const r = await t.call("GET", path, { token: w.ownerToken });
      expect([path, r.status, r.body.code]).toEqual([path, 400, "invalid_input"]);
    }
    const anonymous = await t.call("GET", "/v1/search?q=hello");
    expect(anonymous.status).toBe(401);
  });

  it("a line longer than an indexing page is indexed by its start, and the lines after it still are (as they arrive and once ended)", async () => {
    // 200 KiB of one line in 40 KiB appends: every page the indexer reads from inside it holds no newline.
    const long = `LONGHEAD ${"x".repeat(200 * 1024)} LONGTAIL\nafter the long line\nlast`;
    let offset = 0;
    for (const piece of ["before it\n", ...(long.match(/[\s\S]{1,40960}/g) ?? [])]) {
      await log(w.buildId, piece, offset);
      offset += piece.length;
    }
    expect((await search("q=after")).map((m) => [m.line_number, m.line])).toEqual([[3, "after the long line"]]);
    expect((await search("q=LONGHEAD")).map((m) => [m.line_number, m.line.length])).toEqual([[2, 2000]]);
    await reportStatus(t, w.runner, w.buildId, { status: "running" });
    await reportStatus(t, w.runner, w.buildId, { status: "succeeded" });
    t.clock.advance(t.deps.config.logGraceS + 1);
    await runMaintenance(t.deps);
    await runMaintenance(t.deps);
    expect((await search("q=before OR LONGHEAD OR after OR last")).map((m) => m.line_number)).toEqual([1, 2, 3, 4]);
    const state = await t.deps.db.get<{ complete: number }>(sql`SELECT complete FROM log_search_builds WHERE build_id = ${w.buildId}`);
    expect(state?.complete).toBe(1);
  });

  it("dropLogSearchEntries removes a build's lines, and nothing indexes them again", async () => {
    await log(w.buildId, "secret sauce recipe\n");
    const other = await insertBuild(t, w.projectId, w.pipelineId, w.runner.id);
    await log(other, "secret sauce elsewhere\n");
    await dropLogSearchEntries(t.deps.db, [w.buildId]);
    await reportStatus(t, w.runner, w.buildId, { status: "running" });
    await reportStatus(t, w.runner, w.buildId, { status: "succeeded" });
    t.clock.advance(t.deps.config.logGraceS + 1);
    await runMaintenance(t.deps);
    expect((await search("q=sauce")).map((m) => m.build_id)).toEqual([other]);
  });
});
