// Test reports (docs/test-reports.md): JUnit artifacts parsed on complete into test_cases, the per-build tests
// API and summary, the history of one test and flaky detection.
import { and, asc, desc, eq, gt, inArray, sql } from "drizzle-orm";
import { z } from "zod";
import { testCases, testReports } from "../../db/schema/index.ts";
import { TEST_CASE_STATUSES, type TestCaseStatus, type TestReportStatus } from "../../db/schema/constants.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import type { StorageLocation } from "../../storage/types.ts";
import { base64UrlToBytes, bytesToBase64Url } from "../common/crypto.ts";
import { getBuild } from "../builds/builds.ts";
import { getProject } from "../projects/projects.ts";
import { parseJunit } from "./junit.ts";
import type { ArtifactStore } from "../../storage/types.ts";

/** Per build: at most this much XML is read and this many cases kept. */
export const MAX_REPORT_BYTES_PER_BUILD = 50 * 1024 * 1024;
export const MAX_CASES_PER_BUILD = 100_000;
/** Cases per INSERT statement (one JSON array each). */
const INSERT_ROWS = 5000;

/** A macrotask turn: lets requests and timers run between slices of a long parse. */
function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

import { toTestsSummary, type TestsSummary } from "./tests-summary.ts";

export { toTestsSummary, type TestsSummary };

/** UTF-8 decoding a megabyte at a time with an event-loop turn between (50 MiB in one call stalls the daemon). */
async function decodeInSlices(bytes: Uint8Array): Promise<string> {
  const decoder = new TextDecoder();
  const SLICE = 1024 * 1024;
  let text = "";
  for (let at = 0; at < bytes.length; at += SLICE) {
    text += decoder.decode(bytes.subarray(at, at + SLICE), { stream: at + SLICE < bytes.length });
    if (at + SLICE < bytes.length) await yieldToEventLoop();
  }
  return text;
}

async function readAll(stream: ReadableStream<Uint8Array>, maxBytes: number): Promise<Uint8Array | null> {
  const parts: Uint8Array[] = [];
  let total = 0;
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > maxBytes) {
      await reader.cancel();
      return null;
    }
    parts.push(value);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** The summary recomputed from the build's cases in SQL, so two reports finishing together both count. */
function summaryUpdate(deps: Pick<AppDeps, "db">, buildId: string) {
  return deps.db.run(sql`UPDATE builds SET tests_summary = (
      SELECT json_object('total', count(*), 'passed', coalesce(sum(status = 'passed'), 0), 'failed', coalesce(sum(status = 'failed'), 0),
        'skipped', coalesce(sum(status = 'skipped'), 0), 'errored', coalesce(sum(status = 'errored'), 0), 'duration_ms', coalesce(sum(duration_ms), 0))
      FROM test_cases WHERE build_id = ${buildId})
    WHERE id = ${buildId}`);
}

/**
 * Parses a completed `junit` artifact into the build's cases. Within the per-build limits: XML past 50 MiB is
 * not read (unparsed), cases past 100,000 are dropped (truncated). Each report is recorded once (its row is the
 * primary key: a second call finds it and does nothing).
 */
export async function ingestJunitReport(
  deps: Pick<AppDeps, "db" | "clock">,
  artifact: { id: string; buildId: string; sizeBytes: number; storageLocation: unknown },
  store: ArtifactStore,
): Promise<{ status: TestReportStatus; message: string | null }> {
  const existing = await deps.db.select().from(testReports).where(eq(testReports.artifactId, artifact.id)).get();
  if (existing) return { status: existing.status, message: existing.message };
  const build = await getBuild(deps, artifact.buildId);
  const used = await deps.db
    .select({ bytes: sql<number>`coalesce(sum(${testReports.xmlBytes}), 0)` })
    .from(testReports)
    .where(eq(testReports.buildId, build.id))
    .get();
  const counted = await deps.db.select({ n: sql<number>`count(*)` }).from(testCases).where(eq(testCases.buildId, build.id)).get();
  const roomBytes = MAX_REPORT_BYTES_PER_BUILD - Number(used?.bytes ?? 0);
  const roomCases = MAX_CASES_PER_BUILD - Number(counted?.n ?? 0);

  let status: TestReportStatus;
  let message: string | null = null;
  let parsed: Awaited<ReturnType<typeof parseJunit>> | null = null;
  let xmlBytes = 0;
  if (artifact.sizeBytes > roomBytes) {
    status = "unparsed";
    message = `over the limit of ${MAX_REPORT_BYTES_PER_BUILD} bytes of test reports per build`;
  } else {
    const location = artifact.storageLocation as StorageLocation;
    const bytes = artifact.sizeBytes === 0 ? new Uint8Array(0) : await readAll(await store.read(location.key), roomBytes);
    if (!bytes) {
      status = "unparsed";
      message = `over the limit of ${MAX_REPORT_BYTES_PER_BUILD} bytes of test reports per build`;
    } else {
      xmlBytes = bytes.length;
      parsed = await parseJunit(await decodeInSlices(bytes), Math.max(0, roomCases), yieldToEventLoop);
      if (!parsed.ok) {
        status = "unparsed";
        message = parsed.message;
      } else if (parsed.truncated) {
        status = "truncated";
        message = `only the first ${MAX_CASES_PER_BUILD} test cases of a build are kept`;
      } else status = "parsed";
    }
  }
  const now = deps.clock.now();
  const cases = parsed?.ok === true ? parsed.cases : [];
  // Cases go in as JSON arrays unpacked by SQLite (json_each): one statement per few thousand cases instead of
  // thousands of bound parameters each.
  const inserts = [];
  for (let i = 0; i < cases.length; i += INSERT_ROWS) {
    const chunk = JSON.stringify(
      cases.slice(i, i + INSERT_ROWS).map((c) => [c.suite, c.classname, c.name, c.status, c.durationMs, c.message, c.output]),
    );
    inserts.push(
      deps.db.run(sql`INSERT INTO test_cases (build_id, artifact_id, project_id, pipeline_id, build_number, branch, commit_sha, suite, classname, name, status, duration_ms, message, output, created_at)
        SELECT ${build.id}, ${artifact.id}, ${build.projectId}, ${build.pipelineId}, ${build.buildNumber}, ${build.branch}, ${build.commitSha},
          value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, value ->> 6, ${now}
        FROM json_each(${chunk}) ORDER BY key`),
    );
  }
  try {
    // One transaction: the report row (primary key: a racing second ingest fails here as a whole), its cases,
    // and the build's summary.
    await deps.db.batch([
      deps.db.insert(testReports).values({ artifactId: artifact.id, buildId: build.id, status, message, xmlBytes, createdAt: now }),
      ...inserts,
      summaryUpdate(deps, build.id),
    ]);
  } catch (err) {
    const again = await deps.db.select().from(testReports).where(eq(testReports.artifactId, artifact.id)).get();
    if (again) return { status: again.status, message: again.message };
    throw err;
  }
  return { status, message };
}

// ---------------------------------------------------------------------------------------------------------
// The tests API

export const listTestsSchema = z.object({
  status: z.enum(TEST_CASE_STATUSES).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  cursor: z.string().max(100).optional(),
});

function encodeCursor(id: number): string {
  return bytesToBase64Url(new TextEncoder().encode(`t${id}`));
}

function decodeCursor(cursor: string): number {
  try {
    const text = new TextDecoder().decode(base64UrlToBytes(cursor));
    if (/^t\d{1,15}$/.test(text)) return Number(text.slice(1));
  } catch {
    // fall through to the error below
  }
  throw new ApiError("invalid_input", "the cursor is not valid");
}

export interface TestCaseJson {
  id: string;
  suite: string;
  classname: string;
  name: string;
  status: TestCaseStatus;
  duration_ms: number | null;
  message: string | null;
  output: string | null;
}

const EMPTY_SUMMARY: TestsSummary = { total: 0, passed: 0, failed: 0, skipped: 0, errored: 0, duration_ms: 0 };

/** GET /v1/builds/{id}/tests: the summary, one page of cases (in report order), each report's fate. */
export async function listBuildTests(deps: Pick<AppDeps, "db">, buildId: string, query: z.infer<typeof listTestsSchema>) {
  const build = await getBuild(deps, buildId);
  const conditions = [eq(testCases.buildId, build.id)];
  if (query.status) conditions.push(eq(testCases.status, query.status));
  if (query.cursor !== undefined) conditions.push(gt(testCases.id, decodeCursor(query.cursor)));
  const rows = await deps.db
    .select()
    .from(testCases)
    .where(and(...conditions))
    .orderBy(asc(testCases.id))
    .limit(query.limit + 1);
  const page = rows.slice(0, query.limit);
  const reports = await deps.db.select().from(testReports).where(eq(testReports.buildId, build.id)).orderBy(sql`${testReports}.rowid`);
  const last = page[page.length - 1];
  return {
    summary: toTestsSummary(build.testsSummary) ?? EMPTY_SUMMARY,
    tests: page.map(
      (r): TestCaseJson => ({
        id: String(r.id),
        suite: r.suite,
        classname: r.classname,
        name: r.name,
        status: r.status,
        duration_ms: r.durationMs,
        message: r.message,
        output: r.output,
      }),
    ),
    reports: reports.map((r) => ({ artifact_id: r.artifactId, status: r.status, message: r.message })),
    next_cursor: rows.length > query.limit && last ? encodeCursor(last.id) : null,
  };
}

/** The first failing (failed or errored) tests of a build, for notifications and commit statuses. */
export async function firstFailingTests(deps: Pick<AppDeps, "db">, buildId: string, limit: number): Promise<string[]> {
  const rows = await deps.db
    .select({ classname: testCases.classname, name: testCases.name })
    .from(testCases)
    .where(and(eq(testCases.buildId, buildId), inArray(testCases.status, ["failed", "errored"])))
    .orderBy(asc(testCases.id))
    .limit(limit);
  return rows.map((r) => testLabel(r.classname, r.name));
}

/** How a test is named to people: `Class.name`, or the bare name when the report gave no class. */
export function testLabel(classname: string, name: string): string {
  return classname ? `${classname}.${name}` : name;
}

/** "3 tests failed: A.a, B.b, C.c and 2 more", or null when none failed (failed and errored both count). */
export function failedTestsSentence(summary: TestsSummary | null, names: string[]): string | null {
  if (!summary) return null;
  const failed = summary.failed + summary.errored;
  if (failed === 0) return null;
  const more = failed - names.length;
  const list = names.length > 0 ? `: ${names.join(", ")}${more > 0 ? ` and ${more} more` : ""}` : "";
  return `${failed} ${failed === 1 ? "test" : "tests"} failed${list}`;
}

// ---------------------------------------------------------------------------------------------------------
// History and flaky tests

export const testHistorySchema = z.object({
  name: z.string().min(1).max(2000),
  classname: z.string().max(2000).optional(),
  pipeline_id: z.string().max(100).optional(),
});

const HISTORY_LIMIT = 50;

/** GET /v1/projects/{id}/tests: the last 50 outcomes of one test, newest build first. */
export async function testHistory(deps: Pick<AppDeps, "db">, projectId: string, query: z.infer<typeof testHistorySchema>) {
  await getProject(deps, projectId);
  const conditions = [eq(testCases.projectId, projectId), eq(testCases.name, query.name)];
  if (query.classname !== undefined) conditions.push(eq(testCases.classname, query.classname));
  if (query.pipeline_id !== undefined) conditions.push(eq(testCases.pipelineId, query.pipeline_id));
  const rows = await deps.db
    .select()
    .from(testCases)
    .where(and(...conditions))
    .orderBy(desc(testCases.buildNumber), desc(testCases.id))
    .limit(HISTORY_LIMIT);
  return {
    name: query.name,
    classname: query.classname ?? null,
    outcomes: rows.map((r) => ({
      build_id: r.buildId,
      build_number: r.buildNumber,
      pipeline_id: r.pipelineId,
      commit_sha: r.commitSha,
      branch: r.branch,
      classname: r.classname,
      status: r.status,
      duration_ms: r.durationMs,
      created_at: r.createdAt,
    })),
  };
}

/** How many of the project's latest cases flaky detection looks through. */
const FLAKY_WINDOW_CASES = 200_000;
const FLIP_RUNS = 20;
const MIN_FLIPS = 3;

export interface FlakyEvidence {
  build_id: string;
  build_number: number;
  commit_sha: string;
  branch: string;
  status: TestCaseStatus;
}

export interface FlakyTest {
  classname: string;
  name: string;
  /** `same_commit`: passed and failed on one commit; `flips`: ≥3 pass/fail flips in its last 20 runs on a branch. */
  reasons: Array<"same_commit" | "flips">;
  evidence: FlakyEvidence[];
}

const failing = (s: TestCaseStatus) => s === "failed" || s === "errored";

/**
 * GET /v1/projects/{id}/tests/flaky. Only tests that failed at least once among the project's recent cases are
 * looked at; their outcomes (skipped ones ignored) are grouped by commit and by branch.
 */
export async function flakyTests(deps: Pick<AppDeps, "db">, projectId: string): Promise<{ tests: FlakyTest[] }> {
  await getProject(deps, projectId);
  const floor = await deps.db
    .select({ id: testCases.id })
    .from(testCases)
    .where(eq(testCases.projectId, projectId))
    .orderBy(desc(testCases.id))
    .limit(1)
    .offset(FLAKY_WINDOW_CASES)
    .get();
  const minId = floor?.id ?? 0;
  const rows = await deps.db.all<{
    classname: string;
    name: string;
    build_id: string;
    build_number: number;
    commit_sha: string;
    branch: string;
    status: TestCaseStatus;
  }>(sql`
    SELECT c.classname, c.name, c.build_id, c.build_number, c.commit_sha, c.branch, c.status FROM test_cases c
    WHERE c.project_id = ${projectId} AND c.id > ${minId} AND c.status != 'skipped'
      AND EXISTS (SELECT 1 FROM test_cases f WHERE f.project_id = c.project_id AND f.name = c.name AND f.classname = c.classname
                  AND f.id > ${minId} AND f.status IN ('failed', 'errored'))
    ORDER BY c.build_number, c.id`);
  const byTest = new Map<string, typeof rows>();
  for (const row of rows) {
    const key = `${row.classname}\u0000${row.name}`;
    let list = byTest.get(key);
    if (!list) byTest.set(key, (list = []));
    list.push(row);
  }
  const tests: FlakyTest[] = [];
  for (const list of byTest.values()) {
    const reasons: FlakyTest["reasons"] = [];
    const evidence = new Map<string, FlakyEvidence>();
    const add = (r: (typeof rows)[number]) =>
      evidence.set(r.build_id, { build_id: r.build_id, build_number: r.build_number, commit_sha: r.commit_sha, branch: r.branch, status: r.status });
    const byCommit = new Map<string, typeof rows>();
    for (const r of list) (byCommit.get(r.commit_sha) ?? byCommit.set(r.commit_sha, []).get(r.commit_sha)!).push(r);
    for (const runs of byCommit.values()) {
      if (runs.some((r) => r.status === "passed") && runs.some((r) => failing(r.status))) {
        if (!reasons.includes("same_commit")) reasons.push("same_commit");
        runs.forEach(add);
      }
    }
    const byBranch = new Map<string, typeof rows>();
    for (const r of list) (byBranch.get(r.branch) ?? byBranch.set(r.branch, []).get(r.branch)!).push(r);
    for (const runs of byBranch.values()) {
      const lastRuns = runs.slice(-FLIP_RUNS);
      let flips = 0;
      for (let i = 1; i < lastRuns.length; i++) if (failing(lastRuns[i]!.status) !== failing(lastRuns[i - 1]!.status)) flips++;
      if (flips >= MIN_FLIPS) {
        if (!reasons.includes("flips")) reasons.push("flips");
        lastRuns.forEach(add);
      }
    }
    if (reasons.length > 0) {
      const first = list[0]!;
      tests.push({
        classname: first.classname,
        name: first.name,
        reasons,
        evidence: [...evidence.values()].sort((a, b) => b.build_number - a.build_number),
      });
    }
  }
  tests.sort((a, b) => testLabel(a.classname, a.name).localeCompare(testLabel(b.classname, b.name)));
  return { tests };
}
