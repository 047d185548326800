// The reference runner end to end: a real daemon process, a real `hangar runner` process, a real git repository.
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createPipeline, createProject, makeGitRepo, queueBuild, registerRunner, type GitRepo } from "../helpers/builds.ts";
import { runCli } from "../helpers/daemon.ts";
import {
  getBuild,
  getLog,
  removeDir,
  startReadyDaemon,
  startRunner,
  stopRunner,
  waitFor,
  waitForFinal,
  type ReadyDaemon,
  type RunnerProcess,
} from "./runner-harness.ts";
import { androidSigningBody, iosSigningBody } from "../helpers/signing-material.ts";

let d: ReadyDaemon;
let repo: GitRepo;
let scratch: string;
const runners: RunnerProcess[] = [];

beforeAll(async () => {
  d = await startReadyDaemon();
  repo = makeGitRepo({ "README.md": "hello from the repository\n" });
  scratch = mkdtempSync(join(tmpdir(), "hangar-runner-e2e-"));
});

afterEach(async () => {
  // A test that failed halfway must not leave a queued build for the next test's runner.
  const list = await d.api.call("GET", "/v1/builds", { token: d.ownerToken });
  for (const b of list.body as Array<{ id: string; status: string }>) {
    if (["queued", "assigned", "running"].includes(b.status)) await d.api.call("POST", `/v1/builds/${b.id}/cancel`, { token: d.ownerToken });
  }
  for (const r of runners.splice(0)) await stopRunner(r);
});

afterAll(async () => {
  await d?.daemon.stop("SIGKILL");
  removeDir(d.dataDir);
  repo?.remove();
  removeDir(scratch);
});

function run(runner: { id: string; token: string }, args: string[], env: Record<string, string> = {}): RunnerProcess {
  const r = startRunner(d.daemon.url, runner, args, join(scratch, `work-${runner.id}`), env);
  runners.push(r);
  return r;
}

async function project(config: Parameters<typeof createPipeline>[3]) {
  const p = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
  const pipeline = await createPipeline(d.api, d.ownerToken, p.id, config);
  return { project: p, pipeline };
}

const INFO_PLIST =
  '<?xml version="1.0" encoding="UTF-8"?><plist version="1.0"><dict>' +
  "<key>CFBundleIdentifier</key><string>com.example.demo</string><key>CFBundleVersion</key><string>42</string>" +
  "<key>CFBundleDisplayName</key><string>Demo</string></dict></plist>";

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("hangar runner register and --help", () => {
  it("prints its help, refuses missing settings, and registration prints exactly the two env lines", async () => {
    // Independent commands, run side by side to keep the test quick.
    const [help, missing, reg, refused] = await Promise.all([
      runCli(["runner", "--help"], {}),
      runCli(["runner", "--once"], { HANGAR_URL: "", HANGAR_RUNNER_ID: "", HANGAR_RUNNER_TOKEN: "" }),
      runCli(
        [
          "runner",
          "register",
          "--url",
          d.daemon.url,
          "--session",
          d.ownerToken,
          "--name",
          "mac-mini",
          "--platform",
          "ios",
          "--platform",
          "android,macos",
        ],
        {},
      ),
      runCli(["runner", "register", "--url", d.daemon.url, "--session", "not-a-session"], {}),
    ]);
    expect(help.code).toBe(0);
    for (const word of ["--url", "--token", "--id", "--workdir", "--once", "register", "--session", "--platform", "HANGAR_RUNNER_TOKEN"]) {
      expect(help.stdout).toContain(word);
    }
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("URL is missing");
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe("");
    expect(refused.stderr).toContain("401");

    expect(reg.code).toBe(0);
    const lines = reg.stdout.split("\n").filter(Boolean);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^HANGAR_RUNNER_ID=[\w-]+$/);
    expect(lines[1]).toMatch(/^HANGAR_RUNNER_TOKEN=hgr_[A-Za-z0-9_-]{43}$/);
    const id = lines[0]!.split("=")[1];
    const listed = await d.api.call("GET", "/v1/runners", { token: d.ownerToken });
    const mine = (listed.body as Array<{ id: string; name: string; capabilities: { platforms: string[] } }>).find((r) => r.id === id);
    expect(mine?.name).toBe("mac-mini");
    expect(mine?.capabilities.platforms).toEqual(["ios", "android", "macos"]);
  });
});

describe("a build on the reference runner", () => {
  it("runs the steps with the build's environment, streams the log and uploads the artifacts byte-identical", async () => {
    const keep = mkdtempSync(join(scratch, "keep-"));
    const { project: p, pipeline } = await project({
      platform: "any",
      env: { GREETING: "bonjour", KEEP: keep },
      steps: [
        {
          name: "hello",
          run: 'echo "greeting=$GREETING"; cat README.md; echo "number=$HANGAR_BUILD_NUMBER branch=$HANGAR_BRANCH"; echo "sha=$HANGAR_COMMIT_SHA id=$HANGAR_BUILD_ID"',
        },
        { name: "secrets stay out", run: 'test -z "$HANGAR_RUNNER_TOKEN" && test -z "$HANGAR_URL" && echo "no runner settings in the step"' },
        {
          name: "package",
          run: 'mkdir -p out/reports && head -c 300000 /dev/urandom > out/app-release.apk && cp out/app-release.apk "$KEEP/" && echo "all green" > out/reports/summary.txt && echo not-an-artifact > out/notes.md',
        },
        {
          // An IPA is a zip with Payload/<App>.app/Info.plist; the daemon reads its install metadata.
          name: "ipa",
          run: [
            "mkdir -p ipa/Payload/Demo.app",
            `printf '%s' '${INFO_PLIST}' > ipa/Payload/Demo.app/Info.plist`,
            "(cd ipa && zip -qr ../out/Demo.ipa Payload)",
          ].join(" && "),
        },
      ],
      artifacts: ["out/*.apk", "out/*.ipa", "out/**/*.txt"],
    });
    const runner = await registerRunner(d.api, d.ownerToken, { platforms: ["android"] });
    const build = await queueBuild(d.api, d.ownerToken, p.id, pipeline.id, { commit_sha: undefined });
    const r = run(runner, ["--once"]);
    expect(await r.exited).toBe(0);

    const done = await getBuild(d, build.id);
    expect(done.status).toBe("succeeded");
    expect(done.exit_code).toBe(0);
    expect(done.commit_sha).toBe(repo.shas.main);
    expect(done.runner_id).toBe(runner.id);
    expect(done.step_results.map((s: { name: string; status: string; exit_code: number }) => [s.name, s.status, s.exit_code])).toEqual([
      ["hello", "succeeded", 0],
      ["secrets stay out", "succeeded", 0],
      ["package", "succeeded", 0],
      ["ipa", "succeeded", 0],
    ]);
    for (const s of done.step_results) expect(s.finished_at).toBeGreaterThanOrEqual(s.started_at);

    const log = await getLog(d, build.id);
    expect(log).toContain("greeting=bonjour");
    expect(log).toContain("hello from the repository");
    expect(log).toContain(`number=${build.build_number} branch=main`);
    expect(log).toContain(`sha=${repo.shas.main} id=${build.id}`);
    expect(log).toContain("no runner settings in the step");
    expect(log.indexOf("greeting=bonjour")).toBeLessThan(log.indexOf("no runner settings"));

    const artifacts = (await d.api.call("GET", `/v1/builds/${build.id}/artifacts`, { token: d.ownerToken })).body as Array<{
      id: string;
      filename: string;
      size_bytes: number;
      content_type: string;
    }>;
    expect(artifacts.map((a) => a.filename).sort()).toEqual(["Demo.ipa", "app-release.apk", "summary.txt"]);
    const ipa = artifacts.find((a) => a.filename === "Demo.ipa") as unknown as { install_metadata: unknown };
    expect(ipa.install_metadata).toEqual({ bundle_identifier: "com.example.demo", bundle_version: "42", title: "Demo" });
    const apk = artifacts.find((a) => a.filename === "app-release.apk")!;
    expect(apk.size_bytes).toBe(300_000);
    expect(apk.content_type).toBe("application/vnd.android.package-archive");
    const link = await d.api.call("POST", `/v1/artifacts/${apk.id}/download-link`, { token: d.ownerToken });
    expect(link.status).toBe(200);
    const download = await fetch(new URL(link.body.url, d.daemon.url));
    expect(download.status).toBe(200);
    const bytes = Buffer.from(await download.arrayBuffer());
    expect(bytes.equals(readFileSync(join(keep, "app-release.apk")))).toBe(true);

    // The token was never printed or logged by the runner; the job's directory is gone (the cache store, the
    // pipeline's persistent workspace and at most one spare repository for the next checkout stay, docs/caches.md).
    expect(r.stdout() + r.stderr()).not.toContain(runner.token);
    const left = readdirSync(join(scratch, `work-${runner.id}`)).sort();
    expect(left.filter((name) => !name.startsWith("spare-repo-"))).toEqual(["caches", "workspaces"]);
    expect(left.filter((name) => name.startsWith("spare-repo-")).length).toBeLessThanOrEqual(1);
  });

  it("ends failed with the failing step's exit code and skips the steps after it", async () => {
    const { project: p, pipeline } = await project({
      platform: "any",
      steps: [
        { name: "fine", run: "echo fine" },
        { name: "boom", run: "echo about-to-fail; exit 7" },
        { name: "never", run: "echo never-printed" },
      ],
    });
    const runner = await registerRunner(d.api, d.ownerToken);
    const build = await queueBuild(d.api, d.ownerToken, p.id, pipeline.id, { commit_sha: repo.shas.main });
    const r = run(runner, ["--once"]);
    expect(await r.exited).toBe(1);
    const done = await getBuild(d, build.id);
    expect(done.status).toBe("failed");
    expect(done.exit_code).toBe(7);
    expect(done.step_results.map((s: { status: string; exit_code?: number }) => [s.status, s.exit_code])).toEqual([
      ["succeeded", 0],
      ["failed", 7],
      ["skipped", undefined],
    ]);
    const log = await getLog(d, build.id);
    expect(log).toContain("about-to-fail");
    expect(log).toContain("exited with code 7");
    expect(log).not.toContain("never-printed");
  });

  it("uploads `when: always` artifacts of a failed build, and only those", async () => {
    const { project: p, pipeline } = await project({
      platform: "any",
      steps: [
        { name: "test", run: "mkdir -p out reports && echo apk > out/app.apk && echo '<testsuite failures=\"1\"/>' > reports/junit.xml && exit 3" },
      ],
      artifacts: ["out/*.apk", { path: "reports/*.xml", when: "always" }],
    });
    const runner = await registerRunner(d.api, d.ownerToken);
    const build = await queueBuild(d.api, d.ownerToken, p.id, pipeline.id, { commit_sha: repo.shas.main });
    const r = run(runner, ["--once"]);
    expect(await r.exited).toBe(1);
    const done = await getBuild(d, build.id);
    expect([done.status, done.exit_code]).toEqual(["failed", 3]);
    const artifacts = (await d.api.call("GET", `/v1/builds/${build.id}/artifacts`, { token: d.ownerToken })).body as Array<{
      filename: string;
      status: string;
    }>;
    expect(artifacts.map((a) => [a.filename, a.status])).toEqual([["junit.xml", "available"]]);
  });

  it("a failing step still uploads its test report: the build's tests, summary and log search show the failure", async () => {
    const report = readFileSync(join(import.meta.dirname, "../fixtures/junit/gradle.xml"), "utf8").replace(/'/g, "'\\''");
    const { project: p, pipeline } = await project({
      platform: "any",
      steps: [
        {
          name: "test",
          run: `mkdir -p build/test-results && printf '%s' '${report}' > build/test-results/TEST-Login.xml && echo "FAILURE: Build failed with an exception" && exit 3`,
        },
      ],
      artifacts: [{ path: "build/**/*.xml", when: "always" }],
      reports: { junit: ["build/test-results/*.xml"] },
    });
    const runner = await registerRunner(d.api, d.ownerToken);
    const build = await queueBuild(d.api, d.ownerToken, p.id, pipeline.id, { commit_sha: repo.shas.main });
    expect(await run(runner, ["--once"]).exited).toBe(1);
    const done = await getBuild(d, build.id);
    expect([done.status, done.exit_code]).toEqual(["failed", 3]);
    expect(done.tests_summary).toMatchObject({ total: 4, failed: 1, errored: 1 });
    // Uploaded once, as a report (the artifact glob matching it too does not upload a second copy).
    const artifacts = (await d.api.call("GET", `/v1/builds/${build.id}/artifacts`, { token: d.ownerToken })).body as Array<{
      filename: string;
      kind: string;
    }>;
    expect(artifacts.map((a) => [a.filename, a.kind])).toEqual([["TEST-Login.xml", "junit"]]);
    const failed = (await d.api.call("GET", `/v1/builds/${build.id}/tests?status=failed`, { token: d.ownerToken })).body;
    expect(failed.tests.map((c: { name: string }) => c.name)).toEqual(["wrongPasswordShowsError"]);
    const found = await waitFor("the log line in search", async () => {
      const r = await d.api.call("GET", `/v1/search?q=${encodeURIComponent('"build failed" exception')}&project_id=${p.id}`, { token: d.ownerToken });
      return r.body.matches.length > 0 ? r.body.matches : undefined;
    });
    // The step's command line (echoed into the log) matches too; the output line is among the matches.
    expect(found).toContainEqual(expect.objectContaining({ build_id: build.id, line: "FAILURE: Build failed with an exception" }));
  });

  it("fails the build when the commit cannot be checked out", async () => {
    const { project: p, pipeline } = await project({ platform: "any", steps: [{ name: "never", run: "echo never-printed" }] });
    const runner = await registerRunner(d.api, d.ownerToken);
    const build = await queueBuild(d.api, d.ownerToken, p.id, pipeline.id, { commit_sha: "deadbeefdeadbeefdeadbeefdeadbeefdeadbeef" });
    const r = run(runner, ["--once"]);
    expect(await r.exited).toBe(1);
    const done = await getBuild(d, build.id);
    expect(done.status).toBe("failed");
    expect(done.exit_code).not.toBe(0);
    expect(done.step_results.map((s: { status: string }) => s.status)).toEqual(["skipped"]);
    expect(await getLog(d, build.id)).toContain("checkout of deadbeef");
  });

  it("fails the build at once when the work directory cannot be made", async () => {
    const { project: p, pipeline } = await project({ platform: "any", steps: [{ name: "never", run: "echo never-printed" }] });
    const runner = await registerRunner(d.api, d.ownerToken);
    const build = await queueBuild(d.api, d.ownerToken, p.id, pipeline.id, { commit_sha: repo.shas.main });
    // A path below a regular file can never be a directory, even for root.
    const blocker = join(scratch, "a-file");
    writeFileSync(blocker, "not a directory");
    const r = startRunner(d.daemon.url, runner, ["--once"], join(blocker, "work"));
    runners.push(r);
    expect(await r.exited).toBe(1);
    expect((await getBuild(d, build.id)).status).toBe("failed");
    expect(r.stderr()).toContain("cannot prepare a work directory");
  });

  it("stops a canceled build's step within seconds (SIGTERM to the whole process group), then takes the next job", async () => {
    const marks = mkdtempSync(join(scratch, "cancel-"));
    const { project: p, pipeline } = await project({
      platform: "any",
      env: { MARK: join(marks, "term"), PIDFILE: join(marks, "pid") },
      steps: [
        { name: "wait", run: `trap 'echo got-sigterm > "$MARK"; exit 143' TERM; sleep 60 & echo $! > "$PIDFILE"; echo sleeping; wait` },
        { name: "never", run: "echo never-printed" },
      ],
    });
    const runner = await registerRunner(d.api, d.ownerToken);
    const build = await queueBuild(d.api, d.ownerToken, p.id, pipeline.id, { commit_sha: repo.shas.main });
    const r = run(runner, []);
    const sleepPid = await waitFor("the step's sleep to start", () => {
      const text = existsSync(join(marks, "pid")) ? readFileSync(join(marks, "pid"), "utf8").trim() : "";
      return text ? Number(text) : undefined;
    });
    await waitFor("the log to show the step", async () => (await getLog(d, build.id)).includes("sleeping"));
    expect(alive(sleepPid)).toBe(true);

    const started = Date.now();
    const canceled = await d.api.call("POST", `/v1/builds/${build.id}/cancel`, { token: d.ownerToken });
    expect(canceled.status).toBe(200);
    expect(canceled.body.status).toBe("canceled");
    await waitFor("the sleep (a child of the step) to die", () => !alive(sleepPid), 8000);
    expect(Date.now() - started).toBeLessThan(6000);
    await waitFor("the step's trap to run", () => existsSync(join(marks, "term")), 5000);
    expect(readFileSync(join(marks, "term"), "utf8")).toContain("got-sigterm");
    expect((await getBuild(d, build.id)).status).toBe("canceled");
    await waitFor("the runner to log the cancel", () => r.stderr().includes(`build ${build.id}: canceled`));
    expect(await getLog(d, build.id)).not.toContain("never-printed");

    // The same runner process goes on with the next build.
    const next = await createPipeline(d.api, d.ownerToken, p.id, { platform: "any", steps: [{ name: "after", run: "echo next-build-ran" }] }, "next");
    const second = await queueBuild(d.api, d.ownerToken, p.id, next.id, { commit_sha: repo.shas.main });
    expect((await waitForFinal(d, second.id)).status).toBe("succeeded");
    expect(await getLog(d, second.id)).toContain("next-build-ran");
    r.proc.kill("SIGTERM");
    expect(await r.exited).toBe(0);
  });

  it("ends timed_out when the pipeline's timeout_s passes, stopping the step", async () => {
    const { project: p, pipeline } = await project({ platform: "any", timeout_s: 2, steps: [{ name: "forever", run: "echo waiting; sleep 60" }] });
    const runner = await registerRunner(d.api, d.ownerToken);
    const build = await queueBuild(d.api, d.ownerToken, p.id, pipeline.id, { commit_sha: repo.shas.main });
    const started = Date.now();
    const r = run(runner, ["--once"]);
    expect(await r.exited).toBe(1);
    expect(Date.now() - started).toBeLessThan(15_000);
    const done = await getBuild(d, build.id);
    expect(done.status).toBe("timed_out");
    expect(done.step_results[0].status).toBe("failed");
    expect(await getLog(d, build.id)).toContain("step stopped (timed_out)");
  });

  it("drains on SIGTERM: finishes the current build, marks itself draining, exits 0", async () => {
    const { project: p, pipeline } = await project({
      platform: "any",
      steps: [{ name: "slow", run: "echo begin; sleep 2; echo finished-after-sigterm" }],
    });
    const runner = await registerRunner(d.api, d.ownerToken);
    const build = await queueBuild(d.api, d.ownerToken, p.id, pipeline.id, { commit_sha: repo.shas.main });
    const r = run(runner, []);
    await waitFor("the step to begin", async () => (await getLog(d, build.id)).includes("begin"));
    r.proc.kill("SIGTERM");
    expect(await r.exited).toBe(0);
    const done = await getBuild(d, build.id);
    expect(done.status).toBe("succeeded");
    expect(await getLog(d, build.id)).toContain("finished-after-sigterm");
    const listed = await d.api.call("GET", "/v1/runners", { token: d.ownerToken });
    expect((listed.body as Array<{ id: string; status: string }>).find((x) => x.id === runner.id)?.status).toBe("draining");
    expect(r.stderr()).toContain("draining");
  });

  it("--once without a job waits for one, then exits 1", async () => {
    const runner = await registerRunner(d.api, d.ownerToken, { platforms: ["macos"] });
    // Only macOS pipelines would match; there are none, so the claim long-polls and comes back empty.
    // The 30 s wait of docs/api.md §9 is shortened to 3 s here.
    const r = run(runner, ["--once"], { HANGAR_RUNNER_ONCE_WAIT_S: "3" });
    const started = Date.now();
    expect(await r.exited).toBe(1);
    expect(Date.now() - started).toBeGreaterThan(2500);
    expect(r.stderr()).toContain("no job arrived in time");
  });
});

describe("signing material", () => {
  it("reaches Android and iOS steps as 0600 files and variables, is masked in the log and removed after the job", async () => {
    const androidBody = androidSigningBody({ storePassword: "ks-SECRET-4711", keyPassword: "key-SECRET-0815", alias: "release" });
    const iosBody = iosSigningBody("p12-SECRET-2323");
    const keystore = Buffer.from(androidBody.keystore_base64, "base64");
    const cert = Buffer.from(iosBody.certificate_p12_base64, "base64");
    const p = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const android = await d.api.call("PUT", `/v1/projects/${p.id}/signing/android`, {
      token: d.ownerToken,
      body: androidBody,
    });
    expect(android.status).toBe(200);
    const ios = await d.api.call("PUT", `/v1/projects/${p.id}/signing/ios`, {
      token: d.ownerToken,
      body: iosBody,
    });
    expect(ios.status).toBe(200);
    // GNU stat, then BSD stat (macOS).
    const mode = (v: string) => `echo "mode=$(stat -c %a "$${v}" 2>/dev/null || stat -f %Lp "$${v}")"`;
    const androidPipeline = await createPipeline(
      d.api,
      d.ownerToken,
      p.id,
      {
        platform: "android",
        steps: [
          {
            name: "sign",
            run: [
              'echo "keystore-path=$HANGAR_ANDROID_KEYSTORE_PATH"',
              mode("HANGAR_ANDROID_KEYSTORE_PATH"),
              'echo "keystore-b64=$(base64 < "$HANGAR_ANDROID_KEYSTORE_PATH" | tr -d "\\n")"',
              'echo "alias=$HANGAR_ANDROID_KEY_ALIAS"',
              'echo "kspass=$HANGAR_ANDROID_KEYSTORE_PASSWORD keypass=$HANGAR_ANDROID_KEY_PASSWORD"',
              'echo "keypass-b64=$(printf %s "$HANGAR_ANDROID_KEY_PASSWORD" | base64)"',
            ].join("\n"),
          },
        ],
      },
      "android",
    );
    const iosPipeline = await createPipeline(
      d.api,
      d.ownerToken,
      p.id,
      {
        platform: "ios",
        steps: [
          {
            name: "sign",
            run: [
              'echo "cert-path=$HANGAR_IOS_CERTIFICATE_PATH"',
              mode("HANGAR_IOS_CERTIFICATE_PATH"),
              'echo "cert-b64=$(base64 < "$HANGAR_IOS_CERTIFICATE_PATH" | tr -d "\\n")"',
              'echo "profile-b64=$(base64 < "$HANGAR_IOS_PROVISIONING_PROFILE_PATH" | tr -d "\\n")"',
              'echo "p12pass=$HANGAR_IOS_CERTIFICATE_PASSWORD"',
            ].join("\n"),
          },
        ],
      },
      "ios",
    );
    const runner = await registerRunner(d.api, d.ownerToken, { platforms: ["android", "ios"] });

    const androidBuild = await queueBuild(d.api, d.ownerToken, p.id, androidPipeline.id, { commit_sha: repo.shas.main });
    expect(await run(runner, ["--once"]).exited).toBe(0);
    const alog = await getLog(d, androidBuild.id);
    const keystorePath = /keystore-path=(\S+)/.exec(alog)?.[1];
    expect(keystorePath).toBeTruthy();
    expect(alog).toContain("mode=600");
    expect(alog).toContain(`keystore-b64=${keystore.toString("base64")}`);
    expect(alog).toContain("alias=release");
    expect(alog).toContain("kspass=*** keypass=***");
    expect(alog).toContain(`keypass-b64=${Buffer.from("key-SECRET-0815").toString("base64")}`);
    expect(alog).not.toContain("SECRET");
    expect(existsSync(keystorePath!)).toBe(false);

    const iosBuild = await queueBuild(d.api, d.ownerToken, p.id, iosPipeline.id, { commit_sha: repo.shas.main });
    expect(await run(runner, ["--once"]).exited).toBe(0);
    const ilog = await getLog(d, iosBuild.id);
    const certPath = /cert-path=(\S+)/.exec(ilog)?.[1];
    expect(ilog).toContain("mode=600");
    expect(ilog).toContain(`cert-b64=${cert.toString("base64")}`);
    expect(ilog).toContain(`profile-b64=${iosBody.provisioning_profiles_base64[0]}`);
    expect(ilog).toContain("p12pass=***");
    expect(ilog).not.toContain("SECRET");
    expect(existsSync(certPath!)).toBe(false);
  });
});
