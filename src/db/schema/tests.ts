import { sql } from "drizzle-orm";
import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { TEST_CASE_STATUSES, TEST_REPORT_STATES, TEST_REPORT_STATUSES } from "./constants.ts";

/**
 * One JUnit report artifact and what became of it (parsed, truncated at the case limit, or unparsed and why).
 * The row is written `pending` in the statement that makes the artifact available, so a crash before the parse
 * leaves work to resume rather than nothing; `storing` while its cases go in by batches under a lease (a lapsed
 * one is cleaned and redone); `stored` once the cases and the build's summary are visible together.
 */
export const testReports = sqliteTable(
  "test_reports",
  {
    artifactId: text("artifact_id").primaryKey(),
    buildId: text("build_id").notNull(),
    /** Meaningful once `stored` (written `unparsed` before: never shown, readers list stored reports only). */
    status: text("status", { enum: TEST_REPORT_STATUSES }).notNull(),
    message: text("message"),
    /** Bytes of XML read (counted against the per-build limit). */
    xmlBytes: integer("xml_bytes").notNull(),
    createdAt: integer("created_at").notNull(),
    state: text("state", { enum: TEST_REPORT_STATES }).notNull().default("stored"),
    /** Who is storing the report and until when (ms since the epoch; renewed while it works). */
    leaseOwner: text("lease_owner"),
    leaseUntilMs: integer("lease_until_ms"),
  },
  (t) => [
    index("test_reports_build_id").on(t.buildId),
    // Only unfinished reports are in it: the sweep's and the readers' "not yet stored" look-ups stay tiny.
    index("test_reports_unfinished").on(t.state).where(sql`state != 'stored'`),
  ],
);

/**
 * One test case of a build. The build's project, pipeline, branch, commit and number are copied in, so history
 * and flaky detection read one table with one index instead of joining builds for every case.
 */
export const testCases = sqliteTable(
  "test_cases",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    buildId: text("build_id").notNull(),
    artifactId: text("artifact_id").notNull(),
    projectId: text("project_id").notNull(),
    pipelineId: text("pipeline_id").notNull(),
    buildNumber: integer("build_number").notNull(),
    branch: text("branch").notNull(),
    commitSha: text("commit_sha").notNull(),
    suite: text("suite").notNull(),
    classname: text("classname").notNull(),
    name: text("name").notNull(),
    status: text("status", { enum: TEST_CASE_STATUSES }).notNull(),
    durationMs: integer("duration_ms"),
    message: text("message"),
    output: text("output"),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [index("test_cases_build_status").on(t.buildId, t.status), index("test_cases_project_test").on(t.projectId, t.name, t.classname)],
);
