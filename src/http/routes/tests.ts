import { Hono } from "hono";
import { z } from "zod";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { TEST_CASE_STATUSES, TEST_REPORT_STATUSES } from "../../db/schema/constants.ts";
import { searchLogs, searchLogsSchema } from "../../domain/logs/log-search.ts";
import { flakyTests, listBuildTests, listTestsSchema, testHistory, testHistorySchema } from "../../domain/tests/test-reports.ts";
import { requireUser, ROLES } from "../middleware/auth.ts";
import { queryParams } from "../validate.ts";
import { apiDoc } from "../route-docs.ts";

// Answer schemas for the OpenAPI document, built on first use (the start-up rule of docs/benchmarks.md).
const status = () => z.enum(TEST_CASE_STATUSES);
const SummaryJson = z.lazy(() =>
  z.object({
    total: z.number().int(),
    passed: z.number().int(),
    failed: z.number().int(),
    skipped: z.number().int(),
    errored: z.number().int(),
    duration_ms: z.number().int(),
  }),
);
const BuildTestsJson = z.lazy(() =>
  z.object({
    summary: SummaryJson,
    tests: z.array(
      z.object({
        id: z.string(),
        suite: z.string(),
        classname: z.string(),
        name: z.string(),
        status: status(),
        duration_ms: z.number().int().nullable(),
        message: z.string().nullable(),
        output: z.string().nullable(),
      }),
    ),
    reports: z.array(z.object({ artifact_id: z.string(), status: z.enum(TEST_REPORT_STATUSES), message: z.string().nullable() })),
    next_cursor: z.string().nullable(),
  }),
);
const HistoryJson = z.lazy(() =>
  z.object({
    name: z.string(),
    classname: z.string().nullable(),
    outcomes: z.array(
      z.object({
        build_id: z.string(),
        build_number: z.number().int(),
        pipeline_id: z.string(),
        commit_sha: z.string(),
        branch: z.string(),
        classname: z.string(),
        status: status(),
        duration_ms: z.number().int().nullable(),
        created_at: z.number().int(),
      }),
    ),
  }),
);
const FlakyJson = z.lazy(() =>
  z.object({
    tests: z.array(
      z.object({
        classname: z.string(),
        name: z.string(),
        reasons: z.array(z.enum(["same_commit", "flips"])),
        evidence: z.array(
          z.object({ build_id: z.string(), build_number: z.number().int(), commit_sha: z.string(), branch: z.string(), status: status() }),
        ),
      }),
    ),
  }),
);
const SearchJson = z.lazy(() =>
  z.object({
    matches: z.array(
      z.object({ build_id: z.string(), build_number: z.number().int(), project_id: z.string(), line_number: z.number().int(), line: z.string() }),
    ),
  }),
);

/** Test reports of builds, the history and flakiness of tests, and log search (docs/test-reports.md, docs/log-search.md). */
export function testsRoutes(deps: AppDeps) {
  const readers = requireUser(deps, { roles: ROLES.everyone });
  return new Hono<AppEnv>()
    .get(
      "/v1/builds/:build_id/tests",
      apiDoc({
        summary: "A build's test results: summary, cases (one page), and each report's fate",
        responses: { 200: BuildTestsJson },
        example: { query: { status: "failed" } },
      }),
      readers,
      queryParams(listTestsSchema),
      async (c) => c.json(await listBuildTests(deps, c.req.param("build_id"), c.req.valid("query"))),
    )
    .get(
      "/v1/projects/:project_id/tests/flaky",
      apiDoc({
        summary: "Tests that passed and failed on one commit, or flipped at least 3 times in their last 20 runs on a branch",
        responses: { 200: FlakyJson },
      }),
      readers,
      async (c) => c.json(await flakyTests(deps, c.req.param("project_id"))),
    )
    .get(
      "/v1/projects/:project_id/tests",
      apiDoc({
        summary: "The last 50 outcomes of one test",
        responses: { 200: HistoryJson },
        example: { query: { name: "testLogin", classname: "AppTests.LoginTests" } },
      }),
      readers,
      queryParams(testHistorySchema),
      async (c) => c.json(await testHistory(deps, c.req.param("project_id"), c.req.valid("query"))),
    )
    .get(
      "/v1/search",
      apiDoc({
        summary: 'Search every build log: terms, "phrases", prefix*; newest builds first',
        responses: { 200: SearchJson },
        errors: { 400: ["invalid_input"] },
        example: { query: { q: '"build failed" Signing*' } },
      }),
      readers,
      queryParams(searchLogsSchema),
      async (c) => {
        const { matches } = await searchLogs(deps, c.req.valid("query"));
        return c.json({ matches: matches.map(({ marked: _marked, ...m }) => m) });
      },
    );
}
