// Test reports (docs/test-reports.md): JUnit artifacts parsed on complete into test_cases, the per-build tests
// API and summary, the history of one test and flaky detection.
//
// Storing a report (docs/decisions.md "Test reports and log search"): the artifact turns available together with
// a `pending` report row, so a crash before the parse leaves work that the maintenance pass resumes. One daemon
// claims the row (`storing`, under a lease), parses in slices and inserts the cases a batch per statement with an
// event-loop turn between batches; readers ignore the cases of any report not yet `stored`, and the last
// statement flips the row to `stored` together with the build's summary, so a report is seen whole or not at all.
// A lapsed lease (the daemon died while storing) lets the next claimant delete the leftovers and start over.
import { and, asc, desc, eq, gt, inArray, sql } from "drizzle-orm";
import { z } from "zod";
import { artifacts, testCases, testReports } from "../../db/schema/index.ts";
import { TEST_CASE_STATUSES, type TestCaseStatus, type TestReportStatus } from "../../db/schema/constants.ts";
import type { Db } from "../../db/types.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError, describeError } from "../../errors.ts";
import type { ArtifactStore, StorageLocation } from "../../storage/types.ts";
import { base64UrlToBytes, bytesToBase64Url } from "../common/crypto.ts";
import { getBuild } from "../builds/builds.ts";
import { getProject } from "../projects/projects.ts";
import { JunitScanner, junitRefusal, type ParsedTestCase, SLICE_CHARS } from "./junit.ts";
import { toTestsSummary, type TestsSummary } from "./tests-summary.ts";

export { toTestsSummary, type TestsSummary };

/** Per build: at most this much XML is read and this many cases kept. */
export const MAX_REPORT_BYTES_PER_BUILD = 50 * 1024 * 1024;
export const MAX_CASES_PER_BUILD = 100_000;
/** Cases per INSERT statement (one JSON array each); each statement is its own short write between event-loop turns. */
const INSERT_ROWS = 500;
/** Leftover cases of an interrupted report deleted per statement. */
const DELETE_ROWS = 500;

type IngestDeps = Pick<AppDeps, "db" | "clock" | "config"> & Partial<Pick<AppDeps, "log">>;
/** Opens the store an artifact's bytes live in (the artifacts domain's openStoreAt). */
export type OpenReportStore = (location: StorageLocation) => Promise<ArtifactStore>;

/** An event-loop turn: lets requests and timers run between slices of a long parse or store. */
function yieldToEventLoop(): Promise<void> {
  // setImmediate runs after pending I/O without setTimeout's 1 ms floor; Workers have only setTimeout.
  if (typeof setImmediate === "function") return new Promise((resolve) => setImmediate(resolve));
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/**
 * The `pending` report row for a `junit` artifact, written in the same batch as the statement that makes the
 * artifact available (it inserts only once the artifact is available, and only once).
 */
export function pendingReportStatement(db: Db, artifactId: string, now: number) {
  return db.run(sql`INSERT INTO test_reports (artifact_id, build_id, status, message, xml_bytes, created_at, state)
    SELECT id, build_id, 'unparsed', NULL, 0, ${now}, 'pending' FROM artifacts WHERE id = ${artifactId} AND status = 'available' AND kind = 'junit'
    ON CONFLICT (artifact_id) DO NOTHING`);
}

/** Cases of reports not yet stored are invisible to every reader. */
const STORED_CASES = sql`${testCases.artifactId} NOT IN (SELECT artifact_id FROM test_reports WHERE state != 'stored')`;

class LeaseLost extends Error {}

/** A claim on one report, renewed while the work goes on; every write is guarded by it. */
class ReportLease {
  readonly owner = crypto.randomUUID();
  private renewedAt = Date.now();
  constructor(
    private readonly deps: IngestDeps,
    readonly artifactId: string,
  ) {}

  /** The condition "this report is still ours", for guarded statements. */
  get ours() {
    return sql`EXISTS (SELECT 1 FROM test_reports WHERE artifact_id = ${this.artifactId} AND lease_owner = ${this.owner} AND state = 'storing')`;
  }

  /** An event-loop turn, and the lease renewed once a third of it has passed; throws LeaseLost if another took it. */
  async turn(): Promise<void> {
    await yieldToEventLoop();
    const now = Date.now();
    if (now - this.renewedAt < this.deps.config.reportLeaseMs / 3) return;
    const renewed = await this.deps.db
      .update(testReports)
      .set({ leaseUntilMs: now + this.deps.config.reportLeaseMs })
      .where(and(eq(testReports.artifactId, this.artifactId), eq(testReports.leaseOwner, this.owner), eq(testReports.state, "storing")))
      .returning({ id: testReports.artifactId });
    if (renewed.length === 0) throw new LeaseLost();
    this.renewedAt = now;
  }
}

/** Reports this process is storing: a second caller (the complete call, the sweep) waits on the same work. */
const ingesting = new Map<string, Promise<void>>();
/** Per build, this process's last ingestion: a build's reports are stored one at a time (its limits count them). */
const buildTails = new Map<string, Promise<void>>();

/**
 * Stores a `junit` artifact's report (its row must exist: pendingReportStatement). Resolves once it is stored,
 * or once it is clear that another daemon holds it. Within the per-build limits: XML past 50 MiB is not read
 * (unparsed), cases past 100,000 are dropped (truncated).
 */
export function ingestJunitReport(deps: IngestDeps, artifactId: string, openStore: OpenReportStore): Promise<void> {
  const running = ingesting.get(artifactId);
  if (running) return running;
  const work = (async () => {
    const row = await deps.db
      .select({ buildId: testReports.buildId, state: testReports.state })
      .from(testReports)
      .where(eq(testReports.artifactId, artifactId))
      .get();
    if (!row || row.state === "stored") return;
    const previous = buildTails.get(row.buildId) ?? Promise.resolve();
    const mine = previous.then(() => storeReport(deps, artifactId, openStore));
    buildTails.set(
      row.buildId,
      mine.catch(() => undefined),
    );
    try {
      await mine;
    } finally {
      if (buildTails.get(row.buildId) === mine) buildTails.delete(row.buildId);
    }
  })().finally(() => ingesting.delete(artifactId));
  ingesting.set(artifactId, work);
  return work;
}

/**
 * The maintenance pass: reports left `pending` (a crash between the upload's completion and the parse) or
 * `storing` under a lapsed lease (a crash while storing) are started again, a few at a time, in the background
 * (a 50 MiB report must not hold the other periodic jobs).
 */
export async function resumeTestReports(deps: IngestDeps, openStore: OpenReportStore, limit = 4): Promise<number> {
  const now = Date.now();
  const rows = await deps.db.all<{ artifact_id: string }>(sql`SELECT artifact_id FROM test_reports
    WHERE state != 'stored' AND (state = 'pending' OR lease_until_ms IS NULL OR lease_until_ms < ${now}) LIMIT ${limit}`);
  let started = 0;
  for (const { artifact_id: artifactId } of rows) {
    if (ingesting.has(artifactId)) continue;
    started++;
    ingestJunitReport(deps, artifactId, openStore).catch((err) => logIngestError(deps, artifactId, err));
  }
  return started;
}

export function logIngestError(deps: IngestDeps, artifactId: string, err: unknown): void {
  deps.log?.({ time: new Date().toISOString(), level: "error", msg: "test report not stored", artifact_id: artifactId, error: describeError(err) });
}

/** Claims the report, reads and parses it, stores its cases by batches and flips it to `stored`. */
async function storeReport(deps: IngestDeps, artifactId: string, openStore: OpenReportStore): Promise<void> {
  const lease = new ReportLease(deps, artifactId);
  const now = Date.now();
  // Pending, or storing under a lapsed lease; and no other report of the build being stored by a live daemon.
  const claimed = await deps.db
    .update(testReports)
    .set({ state: "storing", leaseOwner: lease.owner, leaseUntilMs: now + deps.config.reportLeaseMs })
    .where(
      and(
        eq(testReports.artifactId, artifactId),
        sql`(${testReports.state} = 'pending' OR (${testReports.state} = 'storing' AND coalesce(${testReports.leaseUntilMs}, 0) < ${now}))`,
        sql`NOT EXISTS (SELECT 1 FROM test_reports o WHERE o.build_id = test_reports.build_id AND o.artifact_id != ${artifactId}
          AND o.state = 'storing' AND o.lease_until_ms >= ${now})`,
      ),
    )
    .returning({ buildId: testReports.buildId, leaseOwner: testReports.leaseOwner })
    .get();
  if (!claimed) return;
  try {
    await deleteCases(deps, claimed.buildId, lease);
    const build = await getBuild(deps, claimed.buildId);
    const created = deps.clock.now();
    const totals = { total: 0, passed: 0, failed: 0, skipped: 0, errored: 0, duration_ms: 0 };
    // Cases go in as the scan finishes them, a batch per statement between event-loop turns, as JSON arrays
    // unpacked by SQLite (json_each): one bound parameter per batch.
    const insert = async (cases: ParsedTestCase[]) => {
      for (let i = 0; i < cases.length; i += INSERT_ROWS) {
        // A turn before each statement, so the scan slice that finished these cases and the insert are two blocks.
        await lease.turn();
        const batch = cases.slice(i, i + INSERT_ROWS);
        const chunk = JSON.stringify(batch.map((c) => [c.suite, c.classname, c.name, c.status, c.durationMs, c.message, c.output]));
        const inserted =
          await deps.db.run(sql`INSERT INTO test_cases (build_id, artifact_id, project_id, pipeline_id, build_number, branch, commit_sha, suite, classname, name, status, duration_ms, message, output, created_at)
          SELECT ${build.id}, ${artifactId}, ${build.projectId}, ${build.pipelineId}, ${build.buildNumber}, ${build.branch}, ${build.commitSha},
            value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, value ->> 6, ${created}
          FROM json_each(${chunk}) WHERE ${lease.ours} ORDER BY key`);
        if (inserted.rowsAffected === 0) throw new LeaseLost();
        for (const c of batch) {
          totals.total++;
          totals[c.status]++;
          totals.duration_ms += c.durationMs ?? 0;
        }
      }
    };
    const outcome = await scanReport(deps, artifactId, claimed.buildId, openStore, lease, insert);
    if (outcome.status === "unparsed" && totals.total > 0) {
      // A document found broken after some of its cases went in: none of them stay.
      await deleteCases(deps, claimed.buildId, lease);
      for (const key of Object.keys(totals) as Array<keyof typeof totals>) totals[key] = 0;
    }
    await lease.turn();
    // The flip: the build's summary grows by this report's cases and the report turns stored, in one transaction
    // and only while the lease is ours, so every reader sees both or neither.
    const add = (key: keyof typeof totals) => sql`coalesce(tests_summary ->> ${key}, 0) + ${totals[key]}`;
    await deps.db.batch([
      deps.db.run(sql`UPDATE builds SET tests_summary = json_object('total', ${add("total")}, 'passed', ${add("passed")},
          'failed', ${add("failed")}, 'skipped', ${add("skipped")}, 'errored', ${add("errored")}, 'duration_ms', ${add("duration_ms")})
        WHERE id = ${build.id} AND ${lease.ours}`),
      deps.db
        .update(testReports)
        .set({ state: "stored", status: outcome.status, message: outcome.message, xmlBytes: outcome.xmlBytes, leaseOwner: null, leaseUntilMs: null })
        .where(and(eq(testReports.artifactId, artifactId), eq(testReports.leaseOwner, lease.owner), eq(testReports.state, "storing"))),
    ]);
  } catch (err) {
    // Another daemon took the report over (this one stalled past its lease): its attempt stands.
    if (err instanceof LeaseLost) return;
    throw err;
  }
}

/** Deletes the report's cases a batch at a time (leftovers of an interrupted attempt, or of a broken document). */
async function deleteCases(deps: IngestDeps, buildId: string, lease: ReportLease): Promise<void> {
  for (;;) {
    const removed = await deps.db.run(sql`DELETE FROM test_cases WHERE id IN (SELECT id FROM test_cases
      WHERE build_id = ${buildId} AND artifact_id = ${lease.artifactId} LIMIT ${DELETE_ROWS}) AND ${lease.ours}`);
    if (removed.rowsAffected < DELETE_ROWS) return;
    await lease.turn();
  }
}

interface ScanOutcome {
  status: TestReportStatus;
  message: string | null;
  xmlBytes: number;
}

/**
 * The report's bytes read from the store as they stream, within what the build has left of its limits, decoded
 * and scanned a piece at a time; `insert` gets the cases as they are finished.
 */
async function scanReport(
  deps: IngestDeps,
  artifactId: string,
  buildId: string,
  openStore: OpenReportStore,
  lease: ReportLease,
  insert: (cases: ParsedTestCase[]) => Promise<void>,
): Promise<ScanOutcome> {
  const tooBig = `over the limit of ${MAX_REPORT_BYTES_PER_BUILD} bytes of test reports per build`;
  const artifact = await deps.db.select().from(artifacts).where(eq(artifacts.id, artifactId)).get();
  if (!artifact || artifact.status !== "available" || artifact.storageRemovedAt !== null) {
    return { status: "unparsed", message: "the report's file is no longer stored", xmlBytes: 0 };
  }
  // What the build's stored reports already used: the summary counts their cases.
  const used = await deps.db.get<{ bytes: number; cases: number }>(sql`SELECT
      (SELECT coalesce(sum(xml_bytes), 0) FROM test_reports WHERE build_id = ${buildId} AND state = 'stored') AS bytes,
      (SELECT coalesce(tests_summary ->> 'total', 0) FROM builds WHERE id = ${buildId}) AS cases`);
  const roomBytes = MAX_REPORT_BYTES_PER_BUILD - Number(used?.bytes ?? 0);
  const roomCases = Math.max(0, MAX_CASES_PER_BUILD - Number(used?.cases ?? 0));
  if (artifact.sizeBytes > roomBytes) return { status: "unparsed", message: tooBig, xmlBytes: 0 };
  const scanner = new JunitScanner(roomCases);
  const decoder = new TextDecoder();
  let xmlBytes = 0;
  const scanFed = async () => {
    while (!scanner.done && !scanner.hungry) {
      scanner.step(SLICE_CHARS);
      await insert(scanner.takeCases());
      await lease.turn();
    }
  };
  try {
    if (artifact.sizeBytes > 0) {
      const location = artifact.storageLocation as StorageLocation;
      const reader = (await (await openStore(location)).read(location.key)).getReader();
      try {
        while (!scanner.done) {
          const { done, value } = await reader.read();
          if (done) break;
          xmlBytes += value.length;
          if (xmlBytes > roomBytes) return { status: "unparsed", message: tooBig, xmlBytes: 0 };
          // Pieces of at most 256 KiB: a store may hand over larger reads.
          for (let at = 0; at < value.length && !scanner.done; at += READ_SLICE) {
            scanner.feed(decoder.decode(value.subarray(at, at + READ_SLICE), { stream: true }), false);
            await scanFed();
          }
        }
      } finally {
        await reader.cancel().catch(() => undefined);
      }
    }
    if (!scanner.done) {
      scanner.feed(decoder.decode(), true);
      await scanFed();
    }
  } catch (err) {
    const message = junitRefusal(err);
    if (message === null) throw err;
    return { status: "unparsed", message, xmlBytes };
  }
  if (scanner.truncated) {
    return { status: "truncated", message: `only the first ${MAX_CASES_PER_BUILD} test cases of a build are kept`, xmlBytes };
  }
  return { status: "parsed", message: null, xmlBytes };
}

/** Bytes decoded and fed to the scanner at a time. */
const READ_SLICE = 256 * 1024;

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
  const conditions = [eq(testCases.buildId, build.id), STORED_CASES];
  if (query.status) conditions.push(eq(testCases.status, query.status));
  if (query.cursor !== undefined) conditions.push(gt(testCases.id, decodeCursor(query.cursor)));
  const rows = await deps.db
    .select()
    .from(testCases)
    .where(and(...conditions))
    .orderBy(asc(testCases.id))
    .limit(query.limit + 1);
  const page = rows.slice(0, query.limit);
  const reports = await deps.db
    .select()
    .from(testReports)
    .where(and(eq(testReports.buildId, build.id), eq(testReports.state, "stored")))
    .orderBy(sql`${testReports}.rowid`);
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
    .where(and(eq(testCases.buildId, buildId), inArray(testCases.status, ["failed", "errored"]), STORED_CASES))
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
  const conditions = [eq(testCases.projectId, projectId), eq(testCases.name, query.name), STORED_CASES];
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
/** Flaky detection's slices: case ids scanned for failures per statement, tests whose outcomes are read per statement. */
const FLAKY_SCAN_IDS = 5000;
const FLAKY_TESTS_PER_READ = 100;
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
  // In slices with an event-loop turn between two (one query over the window held the loop for seconds, a
  // correlated lookup per case; docs/benchmarks.md, "Test reports and log search"). First, newest first, ranges of
  // case ids in rowid order (`+project_id` keeps SQLite off the project's index, which would sort all its cases):
  // the project's cases counted to find where the window starts, and the tests that failed in it. Then all the
  // outcomes of those tests only, a batch of tests at a time.
  const last = await deps.db.get<{ id: number | null }>(sql`SELECT max(id) AS id FROM test_cases`);
  let minId = 0;
  let counted = 0;
  const failed = new Map<string, [string, string]>();
  for (let to = Number(last?.id ?? 0); to > minId; to -= FLAKY_SCAN_IDS) {
    let from = Math.max(0, to - FLAKY_SCAN_IDS);
    const inRange = await deps.db.get<{ n: number }>(sql`SELECT count(*) AS n FROM test_cases
      WHERE +project_id = ${projectId} AND id > ${from} AND id <= ${to}`);
    const n = Number(inRange?.n ?? 0);
    if (counted + n > FLAKY_WINDOW_CASES) {
      // The window's oldest case is in this range: the cases after the FLAKY_WINDOW_CASES newest are left out.
      const floor = await deps.db.get<{ id: number }>(sql`SELECT id FROM test_cases WHERE +project_id = ${projectId} AND id > ${from} AND id <= ${to}
        ORDER BY id DESC LIMIT 1 OFFSET ${FLAKY_WINDOW_CASES - counted}`);
      minId = from = Number(floor?.id ?? from);
    }
    counted += n;
    const keys = await deps.db.all<{ classname: string; name: string }>(sql`SELECT DISTINCT classname, name FROM test_cases
      WHERE +project_id = ${projectId} AND id > ${from} AND id <= ${to} AND status IN ('failed', 'errored')`);
    for (const k of keys) failed.set(`${k.classname}\u0000${k.name}`, [k.classname, k.name]);
    await yieldToEventLoop();
  }
  type Outcome = {
    id: number;
    classname: string;
    name: string;
    build_id: string;
    build_number: number;
    commit_sha: string;
    branch: string;
    status: TestCaseStatus;
  };
  const byTest = new Map<string, Outcome[]>();
  const failedTests = [...failed.values()];
  for (let i = 0; i < failedTests.length; i += FLAKY_TESTS_PER_READ) {
    const batch = JSON.stringify(failedTests.slice(i, i + FLAKY_TESTS_PER_READ));
    const rows = await deps.db.all<Outcome>(sql`
      SELECT c.id, c.classname, c.name, c.build_id, c.build_number, c.commit_sha, c.branch, c.status
      FROM json_each(${batch}) k CROSS JOIN test_cases c ON c.project_id = ${projectId} AND c.classname = k.value ->> 0 AND c.name = k.value ->> 1
      WHERE c.id > ${minId} AND c.status != 'skipped' AND c.artifact_id NOT IN (SELECT artifact_id FROM test_reports WHERE state != 'stored')`);
    for (const row of rows) {
      const key = `${row.classname}\u0000${row.name}`;
      let list = byTest.get(key);
      if (!list) byTest.set(key, (list = []));
      list.push(row);
    }
    await yieldToEventLoop();
  }
  const tests: FlakyTest[] = [];
  let looked = 0;
  for (const list of byTest.values()) {
    if (++looked % 1000 === 0) await yieldToEventLoop();
    // Their runs in build order (a test's stored outcomes may all pass: its failure was in a report not stored).
    list.sort((x, y) => x.build_number - y.build_number || x.id - y.id);
    const reasons: FlakyTest["reasons"] = [];
    const evidence = new Map<string, FlakyEvidence>();
    const add = (r: Outcome) =>
      evidence.set(r.build_id, { build_id: r.build_id, build_number: r.build_number, commit_sha: r.commit_sha, branch: r.branch, status: r.status });
    const byCommit = new Map<string, Outcome[]>();
    for (const r of list) (byCommit.get(r.commit_sha) ?? byCommit.set(r.commit_sha, []).get(r.commit_sha)!).push(r);
    for (const runs of byCommit.values()) {
      if (runs.some((r) => r.status === "passed") && runs.some((r) => failing(r.status))) {
        if (!reasons.includes("same_commit")) reasons.push("same_commit");
        runs.forEach(add);
      }
    }
    const byBranch = new Map<string, Outcome[]>();
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
