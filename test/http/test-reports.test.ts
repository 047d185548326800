// Test reports (docs/api.md §17 via docs/test-reports.md): JUnit artifacts in every dialect, hostile XML within the
// limits, the tests API, tests_summary, history and flaky detection, through the public API.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { artifactWorld, insertBuild, pathOf, uploadArtifact, type ArtifactWorld } from "../helpers/artifact-world.ts";
import { reportStatus } from "../helpers/builds.ts";
import { page } from "../helpers/web.ts";

const FIXTURES = join(import.meta.dirname, "../fixtures/junit");
const fixture = (name: string) => new Uint8Array(readFileSync(join(FIXTURES, name)));
const text = (s: string) => new TextEncoder().encode(s);

let t: TestApp;
let w: ArtifactWorld;
beforeEach(async () => {
  t = await makeTestApp();
  w = await artifactWorld(t);
});
afterEach(async () => t.close());

async function tests(buildId: string, query = "") {
  const r = await t.call("GET", `/v1/builds/${buildId}/tests${query}`, { token: w.ownerToken });
  expect(r.status, r.text).toBe(200);
  return r.body;
}

/** A world-like handle on another build of the same project, pipeline and runner. */
async function otherBuild(overrides: { buildNumber: number; commitSha?: string; branch?: string }): Promise<ArtifactWorld> {
  const buildId = await insertBuild(t, w.projectId, w.pipelineId, w.runner.id, "running", overrides);
  return { ...w, buildId, jobPath: `/v1/runners/${w.runner.id}/jobs/${buildId}/artifacts` };
}

describe("JUnit dialects", () => {
  it("Gradle: failure, error, skipped, entities decoded, system-out in the output, summary on the build", async () => {
    const artifact = await uploadArtifact(t, w, "TEST-LoginViewModelTest.xml", fixture("gradle.xml"), { kind: "junit" });
    expect(artifact.kind).toBe("junit");
    const body = await tests(w.buildId);
    expect(body.summary).toEqual({ total: 4, passed: 1, failed: 1, skipped: 1, errored: 1, duration_ms: 167 });
    expect(body.reports).toEqual([{ artifact_id: artifact.id, status: "parsed", message: null }]);
    const failed = body.tests.find((c: { name: string }) => c.name === "wrongPasswordShowsError");
    expect(failed).toMatchObject({
      suite: "com.example.app.LoginViewModelTest",
      classname: "com.example.app.LoginViewModelTest",
      status: "failed",
      duration_ms: 52,
    });
    expect(failed.message).toBe("org.junit.ComparisonFailure: expected:<[Wrong password]> but was:<[]>");
    expect(failed.output).toContain("LoginViewModelTest.kt:42");
    expect(body.tests.find((c: { name: string }) => c.name === "networkDown").status).toBe("errored");
    const build = await t.call("GET", `/v1/builds/${w.buildId}`, { token: w.ownerToken });
    expect(build.body.tests_summary).toEqual(body.summary);
  });

  it("Surefire: localized time, CDATA output with system-out, a flakyFailure that passed on rerun", async () => {
    await uploadArtifact(t, w, "TEST-PaymentServiceTest.xml", fixture("surefire.xml"), { kind: "junit" });
    const body = await tests(w.buildId);
    expect(body.summary).toMatchObject({ total: 4, passed: 2, failed: 1, skipped: 1, errored: 0 });
    const refund = body.tests.find((c: { name: string }) => c.name === "refundsTwice");
    expect(refund.message).toBe("expected: <1> but was: <2>");
    expect(refund.output).toContain("PaymentServiceTest.java:57");
    expect(refund.output).toContain("refund id=rf_123 & rf_124");
    expect(body.tests.find((c: { name: string }) => c.name === "retriesTimeout").status).toBe("passed");
    expect(body.tests.find((c: { name: string }) => c.name === "currencyConversion").message).toBe("@Disabled: rates service down");
  });

  it("xcpretty, xcbeautify, fastlane scan and converted xcresult: suites, nested suites, messages", async () => {
    await uploadArtifact(t, w, "xcpretty.xml", fixture("xcpretty.xml"), { kind: "junit" });
    await uploadArtifact(t, w, "xcbeautify.xml", fixture("xcbeautify.xml"), { kind: "junit" });
    await uploadArtifact(t, w, "report.junit", fixture("fastlane-scan.xml"), { kind: "junit" });
    await uploadArtifact(t, w, "xcresult.xml", fixture("xcresult-converted.xml"), { kind: "junit" });
    const body = await tests(w.buildId);
    expect(body.reports.map((r: { status: string }) => r.status)).toEqual(["parsed", "parsed", "parsed", "parsed"]);
    expect(body.summary).toMatchObject({ total: 12, failed: 4, skipped: 1, passed: 7 });
    const failed = (await tests(w.buildId, "?status=failed")).tests;
    expect(failed.map((c: { classname: string; name: string }) => `${c.classname}.${c.name}`)).toEqual([
      "AppTests.CartTests.testRemoveItem",
      "AppUITests.testCheckoutFlow",
      "AppTests.ProfileTests.testAvatarUpload()",
      "MyAppTests.NetworkTests.testFetchFeed()",
    ]);
    expect(failed[0].message).toBe('XCTAssertEqual failed: ("1") is not equal to ("0")');
    expect(failed[0].output).toBe("/Users/ci/app/AppTests/CartTests.swift:31");
    expect(failed[1].message).toContain("Pay button missing");
    expect(failed[3].suite).toBe("MyAppTests.NetworkTests");
    expect(failed[3].message).toBe('XCTAssertNil failed: "Error Domain=NSURLErrorDomain Code=-1009" \u2014 offline');
    expect(failed[3].output).toBe("NetworkTests.swift:88\n\nGET https://api.example.com/feed\nattempt 1");
  });

  it("pages through cases with limit and cursor; a bad cursor is 400 invalid_input", async () => {
    await uploadArtifact(t, w, "gradle.xml", fixture("gradle.xml"), { kind: "junit" });
    const first = await tests(w.buildId, "?limit=3");
    expect(first.tests).toHaveLength(3);
    const second = await tests(w.buildId, `?limit=3&cursor=${first.next_cursor}`);
    expect(second.tests.map((c: { name: string }) => c.name)).toEqual(["biometricPrompt"]);
    expect(second.next_cursor).toBeNull();
    const bad = await t.call("GET", `/v1/builds/${w.buildId}/tests?cursor=nope`, { token: w.ownerToken });
    expect([bad.status, bad.body.code]).toEqual([400, "invalid_input"]);
    const badStatus = await t.call("GET", `/v1/builds/${w.buildId}/tests?status=broken`, { token: w.ownerToken });
    expect([badStatus.status, badStatus.body.code]).toEqual([400, "invalid_input"]);
    const unknown = await t.call("GET", `/v1/builds/${crypto.randomUUID()}/tests`, { token: w.ownerToken });
    expect([unknown.status, unknown.body.code]).toEqual([404, "not_found"]);
  });

  it("a build without a report has tests_summary null and an empty tests answer; a plain file is not parsed", async () => {
    await uploadArtifact(t, w, "gradle.xml", fixture("gradle.xml"));
    const build = await t.call("GET", `/v1/builds/${w.buildId}`, { token: w.ownerToken });
    expect(build.body.tests_summary).toBeNull();
    const body = await tests(w.buildId);
    expect(body).toEqual({
      summary: { total: 0, passed: 0, failed: 0, skipped: 0, errored: 0, duration_ms: 0 },
      tests: [],
      reports: [],
      next_cursor: null,
    });
  });

  it("refuses an unknown artifact kind with 400 invalid_input", async () => {
    const r = await t.call("POST", w.jobPath, {
      token: w.runner.token,
      body: { filename: "a.xml", size_bytes: 1, content_type: "application/xml", kind: "html" },
    });
    expect([r.status, r.body.code]).toEqual([400, "invalid_input"]);
  });
});

describe("hostile reports", () => {
  it("billion laughs and an external entity are recorded unparsed, never expanded", async () => {
    const laughs = await uploadArtifact(t, w, "laughs.xml", fixture("billion-laughs.xml"), { kind: "junit" });
    const xxe = await uploadArtifact(t, w, "xxe.xml", fixture("external-entity.xml"), { kind: "junit" });
    const body = await tests(w.buildId);
    expect(body.tests).toEqual([]);
    expect(body.reports).toEqual(
      expect.arrayContaining([
        { artifact_id: laughs.id, status: "unparsed", message: expect.stringContaining("DOCTYPE") },
        { artifact_id: xxe.id, status: "unparsed", message: expect.stringContaining("DOCTYPE") },
      ]),
    );
    const build = await t.call("GET", `/v1/builds/${w.buildId}`, { token: w.ownerToken });
    expect(build.body.tests_summary).toMatchObject({ total: 0 });
  });

  it("malformed XML and a non-JUnit document are unparsed with a message; an undeclared entity stays literal", async () => {
    await uploadArtifact(t, w, "broken.xml", text("<testsuite><testcase name='a'>"), { kind: "junit" });
    await uploadArtifact(t, w, "html.xml", text("<html><body>hi</body></html>"), { kind: "junit" });
    await uploadArtifact(t, w, "ent.xml", text("<testsuite name='s'><testcase classname='c' name='&foo;'/></testsuite>"), { kind: "junit" });
    const body = await tests(w.buildId);
    expect(body.reports.map((r: { status: string }) => r.status)).toEqual(["unparsed", "unparsed", "parsed"]);
    expect(body.reports[0].message).toMatch(/not well-formed/);
    expect(body.reports[1].message).toMatch(/not a JUnit report/);
    expect(body.tests[0].name).toBe("&foo;");
  });

  it("100,001 cases: the first 100,000 are kept and the report is truncated; a later report of the build adds none", async () => {
    const cases = Array.from({ length: 100_001 }, (_, i) => `<testcase classname="c" name="t${i}"/>`).join("");
    await uploadArtifact(t, w, "huge.xml", text(`<testsuites><testsuite name="s">${cases}</testsuite></testsuites>`), { kind: "junit" });
    await uploadArtifact(t, w, "more.xml", fixture("gradle.xml"), { kind: "junit" });
    const body = await tests(w.buildId, "?limit=1");
    expect(body.summary.total).toBe(100_000);
    expect(body.reports.map((r: { status: string }) => r.status)).toEqual(["truncated", "truncated"]);
    expect(body.reports[0].message).toContain("100000");
  }, 60_000);

  it("past 50 MiB of XML in one build, a report is not read (unparsed)", async () => {
    const big = new Uint8Array(50 * 1024 * 1024 + 1).fill(0x20);
    big.set(text("<testsuite name='s'><testcase classname='c' name='n'/></testsuite>"));
    const artifact = await uploadArtifact(t, w, "big.xml", big, { kind: "junit" });
    const body = await tests(w.buildId);
    expect(body.reports).toEqual([{ artifact_id: artifact.id, status: "unparsed", message: expect.stringContaining("52428800") }]);
    expect(body.tests).toEqual([]);
  }, 60_000);
});

function junit(results: Record<string, "pass" | "fail">): Uint8Array {
  const cases = Object.entries(results)
    .map(
      ([name, r]) =>
        `<testcase classname="AppTests" name="${name}" time="0.1">${r === "fail" ? `<failure message="boom ${name}">trace</failure>` : ""}</testcase>`,
    )
    .join("");
  return text(`<testsuite name="AppTests">${cases}</testsuite>`);
}

describe("storing a report", () => {
  it("readers see a report whole or not at all while its cases go in by batches", async () => {
    const N = 8000;
    const cases = Array.from(
      { length: N },
      (_, i) => `<testcase classname="c" name="t${i}">${i % 4 === 0 ? "<failure message='x'/>" : ""}</testcase>`,
    );
    const xml = text(`<testsuite name="s">${cases.join("")}</testsuite>`);
    const created = await t.call("POST", w.jobPath, {
      token: w.runner.token,
      body: { filename: "r.xml", size_bytes: xml.length, content_type: "application/xml", kind: "junit" },
    });
    expect((await t.call("PUT", pathOf(created.body.upload.url), { rawBody: xml })).status).toBe(200);
    let completed = false;
    const completing = t
      .call("POST", `${w.jobPath}/${created.body.artifact.id}/complete`, { token: w.runner.token })
      .finally(() => (completed = true));
    const seen: Array<{ total: number; listed: number; reports: number; failing: number; rowsInDb: number }> = [];
    while (!completed) {
      // In process, these requests resolve without a macrotask: a timer turn lets the store's slices run.
      await new Promise((r) => setTimeout(r, 2));
      const [body, build, failing] = await Promise.all([
        tests(w.buildId, "?limit=1000"),
        t.call("GET", `/v1/builds/${w.buildId}`, { token: w.ownerToken }),
        t.call("GET", `/v1/projects/${w.projectId}/tests?name=t0&classname=c`, { token: w.ownerToken }),
      ]);
      const rows = await t.opened.client.execute("SELECT count(*) AS n FROM test_cases");
      seen.push({
        total: build.body.tests_summary?.total ?? 0,
        listed: body.tests.length,
        reports: body.reports.length,
        failing: failing.body.outcomes.length,
        rowsInDb: Number(rows.rows[0]!.n),
      });
    }
    expect((await completing).status).toBe(200);
    // Some answers came while part of the cases were stored: none of them showed any.
    const during = seen.filter((s) => s.rowsInDb > 0 && s.rowsInDb < N);
    expect(during.length).toBeGreaterThan(0);
    for (const s of seen) {
      const whole = s.total === N && s.listed === 1000 && s.reports === 1 && s.failing === 1;
      const none = s.total === 0 && s.listed === 0 && s.reports === 0 && s.failing === 0;
      expect(whole || none, JSON.stringify(s)).toBe(true);
    }
    const body = await tests(w.buildId, "?limit=1");
    expect(body.summary).toEqual({ total: N, passed: N * 0.75, failed: N * 0.25, skipped: 0, errored: 0, duration_ms: 0 });
  }, 60_000);

  it("a report read in many pieces keeps CDATA, comments, entities and tags cut at any boundary", async () => {
    // About 1.5 MB: the store hands it over in pieces, each cut somewhere inside a case.
    const N = 3000;
    const cases = Array.from(
      { length: N },
      (_, i) =>
        `<testcase classname="pkg.C${i % 7}" name="t${i}" time="0.00${i % 10}"><!-- case ${i} --><failure message="a &amp; b &lt;${i}&gt;"><![CDATA[trace ${i} ]] <x> ${"z".repeat(i % 300)}]]></failure><system-out>&#233;t&#xE9; ${i}${"é".repeat(i % 200)}</system-out></testcase>\n`,
    );
    const xml = `<?xml version="1.0"?><testsuites><testsuite name="s">${cases.join("")}</testsuite></testsuites>`;
    await uploadArtifact(t, w, "pieces.xml", text(xml), { kind: "junit" });
    const got: Array<{ name: string; message: string; output: string; duration_ms: number }> = [];
    let cursor = "";
    do {
      const body = await tests(w.buildId, `?limit=1000${cursor ? `&cursor=${cursor}` : ""}`);
      got.push(...body.tests);
      cursor = body.next_cursor ?? "";
    } while (cursor);
    expect(got).toHaveLength(N);
    got.forEach((c, i) => {
      expect(c.name).toBe(`t${i}`);
      expect(c.message).toBe(`a & b <${i}>`);
      expect(c.output).toBe(`${`trace ${i} ]] <x> ${"z".repeat(i % 300)}`.trim()}\n\nété ${i}${"é".repeat(i % 200)}`);
      expect(c.duration_ms).toBe(i % 10);
    });
  }, 60_000);
});

describe("history and flaky tests", () => {
  it("a test that passed and failed on one commit is flaky, with both builds as evidence; history lists its outcomes", async () => {
    const sha = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const one = await otherBuild({ buildNumber: 1, commitSha: sha });
    const two = await otherBuild({ buildNumber: 2, commitSha: sha });
    await uploadArtifact(t, one, "r.xml", junit({ testLogin: "fail", testStable: "pass" }), { kind: "junit" });
    await uploadArtifact(t, two, "r.xml", junit({ testLogin: "pass", testStable: "pass" }), { kind: "junit" });
    const flaky = await t.call("GET", `/v1/projects/${w.projectId}/tests/flaky`, { token: w.ownerToken });
    expect(flaky.status).toBe(200);
    expect(flaky.body.tests).toEqual([
      {
        classname: "AppTests",
        name: "testLogin",
        reasons: ["same_commit"],
        evidence: [
          { build_id: two.buildId, build_number: 2, commit_sha: sha, branch: "main", status: "passed" },
          { build_id: one.buildId, build_number: 1, commit_sha: sha, branch: "main", status: "failed" },
        ],
      },
    ]);
    const history = await t.call("GET", `/v1/projects/${w.projectId}/tests?name=testLogin&classname=AppTests`, { token: w.ownerToken });
    expect(history.status).toBe(200);
    expect(history.body.outcomes.map((o: { build_number: number; status: string }) => [o.build_number, o.status])).toEqual([
      [2, "passed"],
      [1, "failed"],
    ]);
    const filtered = await t.call("GET", `/v1/projects/${w.projectId}/tests?name=testLogin&pipeline_id=${crypto.randomUUID()}`, {
      token: w.ownerToken,
    });
    expect(filtered.body.outcomes).toEqual([]);
    const missing = await t.call("GET", `/v1/projects/${w.projectId}/tests`, { token: w.ownerToken });
    expect([missing.status, missing.body.code]).toEqual([400, "invalid_input"]);
    // The UI page lists it with its evidence, each build linked.
    const html = await page(t, "GET", `/projects/${w.projectId}/flaky-tests`, { session: w.ownerToken });
    expect(html.status).toBe(200);
    expect(html.text).toContain("AppTests.testLogin");
    expect(html.text).toContain("passed and failed on one commit");
    expect(html.text).toContain(`href="/builds/${one.buildId}#tests"`);
    expect(html.text).toContain(`href="/builds/${two.buildId}#tests"`);
    const noProject = await t.call("GET", `/v1/projects/${crypto.randomUUID()}/tests/flaky`, { token: w.ownerToken });
    expect([noProject.status, noProject.body.code]).toEqual([404, "not_found"]);
  });

  it("three flips in the last runs on one branch are flaky; two are not", async () => {
    const outcomes: Array<"pass" | "fail"> = ["pass", "fail", "pass", "fail", "fail"];
    for (const [i, r] of outcomes.entries()) {
      const b = await otherBuild({ buildNumber: 10 + i, commitSha: `${i}`.repeat(40), branch: "develop" });
      await uploadArtifact(t, b, "r.xml", junit({ testFlips: r, testTwoFlips: i === 1 || i === 2 ? "fail" : "pass" }), { kind: "junit" });
    }
    const flaky = await t.call("GET", `/v1/projects/${w.projectId}/tests/flaky`, { token: w.ownerToken });
    expect(flaky.body.tests.map((x: { name: string; reasons: string[] }) => [x.name, x.reasons])).toEqual([["testFlips", ["flips"]]]);
    expect(flaky.body.tests[0].evidence.map((e: { build_number: number }) => e.build_number)).toEqual([14, 13, 12, 11, 10]);
  });
});

describe("the runner's upload of a report to a finished build", () => {
  it("a failed build still takes its report (uploads happen before the final status) and keeps it after", async () => {
    await reportStatus(t, w.runner, w.buildId, { status: "failed", exit_code: 1 });
    const created = await t.call("POST", w.jobPath, {
      token: w.runner.token,
      body: { filename: "r.xml", size_bytes: 10, content_type: "application/xml", kind: "junit" },
    });
    expect(created.status).toBe(200);
    expect(pathOf(created.body.upload.url)).toMatch(/^\/v1\/artifacts\/local-upload\//);
  });
});
