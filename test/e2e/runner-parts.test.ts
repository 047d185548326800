// The runner's parts that the end-to-end builds cannot pin down cheaply: artifact globs, log masking across
// write boundaries, UTF-8-safe chunk cuts, backoff bounds, and the SIGTERM → SIGKILL escalation on real processes.
import { mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { RunnerClient, backoffDelay } from "../../src/cli/runner/client.ts";
import { displayUrl, gitEnv } from "../../src/cli/runner/checkout.ts";
import { compileArtifactGlob, isSafeGlob, matchFiles } from "../../src/cli/runner/artifact-files.ts";
import { LogStream, maskSecrets, utf8SafeLength } from "../../src/cli/runner/logs.ts";
import { runStep } from "../../src/cli/runner/steps.ts";
import { removeDir } from "./runner-harness.ts";

const scratch = mkdtempSync(join(tmpdir(), "hangar-runner-parts-"));
afterAll(() => removeDir(scratch));

describe("artifact globs", () => {
  it("match across directories with ** and within one with *, ?, [..] and {a,b}", () => {
    const cases: Array<[string, string, boolean]> = [
      ["build/**/*.apk", "build/outputs/apk/release/app.apk", true],
      ["build/**/*.apk", "build/app.apk", true],
      ["build/**/*.apk", "other/app.apk", false],
      ["out/*.ipa", "out/App.ipa", true],
      ["out/*.ipa", "out/sub/App.ipa", false],
      ["out/*.{ipa,zip}", "out/App.zip", true],
      ["out/app-?.txt", "out/app-1.txt", true],
      ["out/app-[0-9].txt", "out/app-x.txt", false],
      ["./out/a.txt", "out/a.txt", true],
      ["dist/**", "dist/a/b/c", true],
    ];
    for (const [glob, path, expected] of cases) expect(compileArtifactGlob(glob)!.test(path), `${glob} ~ ${path}`).toBe(expected);
    expect(isSafeGlob("../secrets/*")).toBe(false);
    expect(isSafeGlob("/etc/*")).toBe(false);
    expect(isSafeGlob("out/*.apk")).toBe(true);
  });

  it("find regular files only, skip .git, refuse paths outside the checkout and never follow links", async () => {
    const root = join(scratch, "tree");
    mkdirSync(join(root, "build/outputs/apk"), { recursive: true });
    mkdirSync(join(root, ".git"), { recursive: true });
    writeFileSync(join(root, "build/outputs/apk/app-release.apk"), "apk");
    writeFileSync(join(root, "build/app.aab"), "aab");
    writeFileSync(join(root, ".git/config.apk"), "not an artifact");
    writeFileSync(join(scratch, "outside.apk"), "outside");
    symlinkSync(join(scratch, "outside.apk"), join(root, "build/link.apk"));
    expect(await matchFiles(root, ["**/*.apk", "build/*.aab", "../*.apk", "missing/exact.txt"])).toEqual({
      files: ["build/app.aab", "build/outputs/apk/app-release.apk"],
      refused: ["../*.apk"],
    });
  });

  it("match in linear time: globs that make a backtracking matcher take hours answer at once, on a real tree", async () => {
    // 160 nested `a` directories holding `c`: `**/a/**/a/**/a/**/a/**/b` as a backtracking regular expression
    // ((?:.*/)?a/(?:.*/)?a/…) tries every way to split the path among the five `**` before failing; picomatch
    // took 31 s at 160 segments. The same for `*a*a*a*a*a*a*b` within one 20,000-character name.
    const deep = join(scratch, "deep");
    const dirs = Array.from({ length: 160 }, () => "a");
    mkdirSync(join(deep, ...dirs), { recursive: true });
    writeFileSync(join(deep, ...dirs, "c"), "leaf");
    const longName = "a".repeat(20_000);
    const started = performance.now();
    expect(compileArtifactGlob("**/a/**/a/**/a/**/a/**/b")!.test(`${dirs.join("/")}/c`)).toBe(false);
    expect(compileArtifactGlob("out/*a*a*a*a*a*a*b")!.test(`out/${longName}`)).toBe(false);
    expect(compileArtifactGlob("out/*a*a*a*a*a*a*b")!.test(`out/${longName}b`)).toBe(true);
    const walked = await matchFiles(deep, ["**/a/**/a/**/a/**/a/**/b", "**/a/**/a/**/a/**/a/**/c"]);
    const elapsed = performance.now() - started;
    expect(walked.files).toEqual([`${dirs.join("/")}/c`]);
    // Milliseconds here; the bound only has to separate linear from exponential, with room for a loaded machine.
    expect(elapsed).toBeLessThan(3_000);
    // A glob the matcher will not take (more than 256 brace alternatives) is reported, not silently dropped.
    expect(compileArtifactGlob("{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}")).toBeNull();
    expect((await matchFiles(deep, ["{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}"])).refused).toHaveLength(1);
  });
});

describe("log masking and chunking", () => {
  it("replaces every occurrence of each secret, longest first", () => {
    const out = maskSecrets(Buffer.from("a s3cret-token b s3cret c"), [Buffer.from("s3cret-token"), Buffer.from("s3cret")]);
    expect(out.toString()).toBe("a *** b *** c");
  });

  it("masks a secret split across writes: the spool never holds a piece of it", async () => {
    const spool = join(scratch, "build.log");
    const quiet = { info: () => {}, warn: () => {}, error: () => {} };
    // An unreachable daemon: everything stays in the spool file, which is what is inspected here.
    const stream = new LogStream(new RunnerClient("http://127.0.0.1:9", "t", "r", quiet), "job", spool, quiet);
    stream.addSecret("s3cret-token");
    stream.addSecret("ab"); // too short to mask
    stream.write("abc s3cr");
    stream.write("et-to");
    expect(readFileSync(spool, "utf8")).not.toContain("s3cr");
    stream.write("ken def s3cret-tok");
    expect(await stream.close(0)).toBe(false);
    expect(readFileSync(spool, "utf8")).toBe("abc *** def s3cret-tok");
  });

  it("never cuts a chunk inside a UTF-8 character", () => {
    const text = Buffer.from("ab€"); // € is 3 bytes
    expect(utf8SafeLength(text)).toBe(text.length);
    expect(utf8SafeLength(text.subarray(0, 4))).toBe(2);
    expect(utf8SafeLength(text.subarray(0, 3))).toBe(2);
    expect(utf8SafeLength(Buffer.from("😀").subarray(0, 3))).toBe(0);
  });
});

describe("backoff and git environment", () => {
  it("grows exponentially with jitter and stays under its cap", () => {
    for (let attempt = 0; attempt < 30; attempt++) {
      const delay = backoffDelay(attempt, 250, 5000);
      expect(delay).toBeGreaterThanOrEqual(125);
      expect(delay).toBeLessThanOrEqual(5000);
    }
    const early = Math.max(...Array.from({ length: 50 }, () => backoffDelay(0, 250, 5000)));
    expect(early).toBeLessThanOrEqual(250);
  });

  it("hands git the credentials only through GIT_CONFIG_* variables scoped to the repository's origin", () => {
    const env = gitEnv({ PATH: "/bin", GIT_TRACE_CURL: "1" }, "https://git.example.com/team/app.git", { username: "bot", password: "tok" });
    expect(env.GIT_TERMINAL_PROMPT).toBe("0");
    expect(env.GIT_TRACE_CURL).toBeUndefined();
    const config = Array.from({ length: Number(env.GIT_CONFIG_COUNT) }, (_, i) => [env[`GIT_CONFIG_KEY_${i}`], env[`GIT_CONFIG_VALUE_${i}`]]);
    expect(config).toEqual([
      ["credential.helper", ""],
      // No proxy: git connects to the address the outbound guard checked, or not at all.
      ["http.proxy", ""],
      // A reused workspace's hooks or fsmonitor (written by an earlier build) never run in the runner's git.
      ["core.hooksPath", "/dev/null"],
      ["core.fsmonitor", "false"],
      ["http.https://git.example.com/.extraHeader", `Authorization: Basic ${Buffer.from("bot:tok").toString("base64")}`],
      ["http.followRedirects", "false"],
    ]);
    expect(displayUrl("https://bot:tok@git.example.com/app.git")).toBe("https://git.example.com/app.git");
  });
});

describe("stopping a step", () => {
  it("SIGTERMs the whole process group and SIGKILLs it when it ignores SIGTERM", async () => {
    const controller = new AbortController();
    let output = "";
    const started = Date.now();
    const done = runStep("trap '' TERM; echo ready; sleep 30 & wait; echo survived", {
      cwd: scratch,
      env: process.env,
      onOutput: (b) => {
        output += b.toString();
        if (output.includes("ready") && !controller.signal.aborted) controller.abort();
      },
      signal: controller.signal,
      killGraceMs: 500,
    });
    const result = await done;
    expect(result.stopped).toBe(true);
    expect(result.signal).toBe("SIGKILL");
    expect(result.exitCode).toBe(137);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(output).not.toContain("survived");
  });

  it("reports the step's own exit code and keeps stdout and stderr", async () => {
    let output = "";
    const result = await runStep("echo out; echo err >&2; exit 42", { cwd: scratch, env: process.env, onOutput: (b) => (output += b.toString()) });
    expect(result).toEqual({ exitCode: 42, signal: null, stopped: false });
    expect(output).toContain("out");
    expect(output).toContain("err");
  });
});
