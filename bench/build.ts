// `npm run bench:build`: what caches and persistent workspaces save a build (docs/caches.md, docs/benchmarks.md).
//
// 1. Cold vs warm: a repository whose first step downloads ~100 MB of "dependencies" from a local HTTP server
//    throttled to ~50 MB/s into a cached path (skipped when they are there), then "compiles" (SHA-256 over every
//    file, several rounds, each output kept when present). The real daemon and the real runner (long-polling, one
//    process for all builds); wall time from queueing to the final status. Cold: a fresh workspace and an empty
//    cache. Warm: the next build of the same commit (cache exact hit, persistent workspace). Goal warm ≤ 0.2 × cold.
// 2. Restore vs raw tar: an entry of BENCH_RESTORE_MB (default 256; 1024 for the 1 GiB figure) restored by the
//    runner's cache code into an empty directory, beside `tar -xf` of the same archive. Goal ≥ 0.8.
// 3. The runner's own overhead: a build whose single step is `true` (a fresh workspace: a clone), from queueing to
//    the daemon's acknowledgement of the final report (the runner's log line of it), beside the same by hand
//    (`git clone` of the commit + `sh -c true`), rounds interleaved (BENCH_OVERHEAD_ROUNDS, default 9), medians.
//    Daemon and runner run from dist/hangar.cjs, built first if older than the sources (as `npm install` leaves
//    them). Goal (by hand / runner) ≥ 0.8.
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { JobCaches } from "../src/cli/runner/cache.ts";
import { CacheStore } from "../src/cli/runner/cache-store.ts";
import { createPipeline, createProject, makeGitRepo, queueBuild, registerRunner } from "../test/helpers/builds.ts";
import { getBuild, type RunnerProcess, startReadyDaemon, startRunner, stopRunner, waitForFinal } from "../test/e2e/runner-harness.ts";
import { PROJECT_ROOT } from "../test/helpers/daemon.ts";

const DEP_FILES = 10;
const DEP_BYTES = 10 * 1024 * 1024;
const RATE_BYTES_PER_S = 50 * 1024 * 1024;
const RESTORE_MB = Number(process.env.BENCH_RESTORE_MB ?? 256);

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** Serves /dep/N (10 MiB of fixed pseudo-random bytes each), all responses together held to ~50 MB/s. */
async function depServer(): Promise<{ url: string; server: Server }> {
  const blob = Buffer.alloc(DEP_BYTES);
  for (let i = 0; i < DEP_BYTES; i += 4) blob.writeUInt32LE((i * 2654435761) >>> 0, i);
  let budgetAt = Date.now();
  const server = createServer(async (req, res) => {
    res.writeHead(200, { "content-type": "application/octet-stream", "content-length": String(DEP_BYTES) });
    const chunk = 256 * 1024;
    for (let off = 0; off < DEP_BYTES; off += chunk) {
      // One shared clock: each chunk is sent no earlier than the rate allows.
      budgetAt = Math.max(budgetAt, Date.now()) + (chunk / RATE_BYTES_PER_S) * 1000;
      const wait = budgetAt - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      if (!res.write(blob.subarray(off, off + chunk))) await new Promise((r) => res.once("drain", r));
    }
    res.end();
    void req;
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

async function coldWarm(): Promise<{ cold: number; warm: number[] }> {
  const deps = await depServer();
  const d = await startReadyDaemon();
  const scratch = mkdtempSync(join(tmpdir(), "hangar-bench-build-"));
  const sources: Record<string, string> = { "deps.lock": Array.from({ length: DEP_FILES }, (_, i) => `${deps.url}/dep/${i}`).join("\n") };
  for (let i = 0; i < 50; i++) sources[`src${i}.txt`] = `source file ${i}\n`.repeat(2000);
  const repo = makeGitRepo(sources);
  const fetchStep = [
    "mkdir -p deps",
    'if [ ! -f deps/.complete ]; then i=0; while read url; do curl -sf -o "deps/d$i" "$url"; i=$((i+1)); done < deps.lock; touch deps/.complete; fi',
  ].join("\n");
  // Object files next to the deps (a cached path): an incremental compiler only redoes what is missing.
  const compileStep = [
    "mkdir -p build",
    'for f in deps/d* src*.txt; do o="build/$(basename $f).o"; [ -f "$o" ] || { for r in 1 2 3 4 5 6; do cat "$f"; done | sha256sum > "$o"; }; done',
    "ls build | wc -l",
  ].join("\n");
  const project = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
  const pipeline = await createPipeline(d.api, d.ownerToken, project.id, {
    steps: [
      { name: "fetch dependencies", run: fetchStep },
      { name: "compile", run: compileStep },
    ],
    cache: [{ key: 'deps-{{ hash "deps.lock" }}', paths: ["deps", "build"], restore_keys: ["deps-"] }],
  });
  const runner = await registerRunner(d.api, d.ownerToken);
  const home = join(scratch, "home");
  mkdirSync(home);
  const r = startRunner(d.daemon.url, runner, ["--cache-dir", join(scratch, "caches"), "--min-free-gb", "0"], join(scratch, "work"), { HOME: home });
  const one = async (): Promise<number> => {
    const started = performance.now();
    const b = await queueBuild(d.api, d.ownerToken, project.id, pipeline.id, { commit_sha: repo.shas.main });
    const done = await waitForFinal(d, b.id, 300_000);
    const took = performance.now() - started;
    if (done.status !== "succeeded") throw new Error(`build ${b.id} ${done.status}`);
    return took;
  };
  try {
    const cold = await one();
    const warm = [await one(), await one(), await one()];
    return { cold, warm };
  } finally {
    await stopRunner(r);
    await d.daemon.stop("SIGKILL");
    deps.server.close();
    repo.remove();
    rmSync(scratch, { recursive: true, force: true });
    rmSync(d.dataDir, { recursive: true, force: true });
  }
}

async function restoreVsTar(): Promise<{ archiveBytes: number; restore: number; tar: number }> {
  const scratch = mkdtempSync(join(tmpdir(), "hangar-bench-restore-"));
  try {
    const src = join(scratch, "src");
    // Files of 1 MiB and many small ones: dependency caches have both.
    mkdirSync(join(src, "big"), { recursive: true });
    mkdirSync(join(src, "small"), { recursive: true });
    const big = Buffer.alloc(1024 * 1024, 7);
    const bigCount = Math.floor((RESTORE_MB * 0.9) | 0);
    for (let i = 0; i < bigCount; i++) writeFileSync(join(src, "big", `f${i}`), big);
    const small = Buffer.alloc(4096, 3);
    const smallCount = Math.floor((RESTORE_MB * 0.1 * 1024) / 4);
    for (let i = 0; i < smallCount; i++) {
      if (i % 1000 === 0) mkdirSync(join(src, "small", `d${i / 1000}`), { recursive: true });
      writeFileSync(join(src, "small", `d${Math.floor(i / 1000)}`, `s${i}`), small);
    }
    const store = new CacheStore(join(scratch, "store"), 1e15);
    const say = () => undefined;
    const make = (workspace: string) =>
      new JobCaches({
        entries: [{ key: "bench", paths: ["big", "small"] }],
        store,
        remote: null,
        scope: "bench/open",
        workspace,
        home: join(scratch, "home"),
        stageDir: scratch,
        identity: {},
        values: { branch: "main", platform: "any", os: "linux", arch: "x64", pipeline: "bench" },
        say,
      });
    const saver = make(src);
    await saver.resolveKeys();
    await saver.save({ sizes: new Set(), hashes: new Set() });
    const entry = await store.find("bench/open", "bench", []);
    if (!entry) throw new Error("the entry was not saved");
    rmSync(src, { recursive: true, force: true });
    const restores: number[] = [];
    const tars: number[] = [];
    for (let round = 0; round < 3; round++) {
      const a = join(scratch, `a${round}`);
      mkdirSync(a);
      const restorer = make(a);
      await restorer.resolveKeys();
      let t = performance.now();
      await restorer.restore();
      restores.push(performance.now() - t);
      if (restorer.hitVariable() !== "exact") throw new Error("the restore missed");
      rmSync(a, { recursive: true, force: true });
      const b = join(scratch, `b${round}`);
      mkdirSync(b);
      t = performance.now();
      // The same members the runner extracts (its archives keep workspace paths under `w/`).
      const raw = spawnSync("tar", ["-xf", entry.file, "-C", b, "--strip-components=1", "w"]);
      tars.push(performance.now() - t);
      if (raw.status !== 0) throw new Error(`tar -x: ${raw.stderr}`);
      rmSync(b, { recursive: true, force: true });
    }
    return { archiveBytes: entry.size_bytes, restore: median(restores), tar: median(tars) };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/**
 * Resolves with the wall time (epoch ms) of the runner's "build <id>: succeeded (reported)" line, written the moment
 * the daemon acknowledged the final report: no observer (a poll, a live page) adds its own interval or load.
 */
async function reportedAt(r: RunnerProcess, buildId: string, timeoutMs: number): Promise<{ at: number; status: string }> {
  const line = new RegExp(`^(\\S+) hangar runner info: build ${buildId}: (\\w+) \\(reported\\)$`, "m");
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = line.exec(r.stderr());
    if (m) return { at: Date.parse(m[1]!), status: m[2]! };
    if (Date.now() > deadline) throw new Error(`build ${buildId} was not reported in time:\n${r.stderr().slice(-2000)}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** When the runner logged that it claimed the build (its own clock, as the "(reported)" line). */
function claimedAt(r: RunnerProcess, buildId: string): number {
  const m = new RegExp(`^(\\S+) hangar runner info: claimed build ${buildId} `, "m").exec(r.stderr());
  if (!m) throw new Error(`no claim line for build ${buildId}:\n${r.stderr().slice(-2000)}`);
  return Date.parse(m[1]!);
}

/** What `npm install` leaves: dist/hangar.cjs built from these sources (else bin/hangar.mjs runs them through tsx). */
function buildBundleIfStale(): void {
  const newest = (dir: string): number =>
    readdirSync(dir, { withFileTypes: true }).reduce(
      (m, e) => Math.max(m, e.isDirectory() ? newest(join(dir, e.name)) : statSync(join(dir, e.name)).mtimeMs),
      0,
    );
  const bundle = join(PROJECT_ROOT, "dist", "hangar.cjs");
  if (existsSync(bundle) && statSync(bundle).mtimeMs >= newest(join(PROJECT_ROOT, "src"))) return;
  const built = spawnSync(process.execPath, [join(PROJECT_ROOT, "scripts", "build.mjs")], { cwd: PROJECT_ROOT, stdio: "inherit" });
  if (built.status !== 0) throw new Error("scripts/build.mjs failed");
}

const OVERHEAD_ROUNDS = Number(process.env.BENCH_OVERHEAD_ROUNDS ?? 9);

async function overhead(): Promise<{ runner: number; hand: number; runs: number[]; hands: number[]; fromClaim: number[] }> {
  const d = await startReadyDaemon();
  const scratch = mkdtempSync(join(tmpdir(), "hangar-bench-overhead-"));
  const repo = makeGitRepo({ "README.md": "overhead\n" });
  const pause = () => new Promise((r) => setTimeout(r, 300));
  try {
    const project = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const pipeline = await createPipeline(d.api, d.ownerToken, project.id, { steps: [{ name: "nothing", run: "true" }], workspace: "fresh" });
    const runner = await registerRunner(d.api, d.ownerToken);
    const r = startRunner(d.daemon.url, runner, ["--cache-dir", join(scratch, "caches"), "--min-free-gb", "0"], join(scratch, "work"));
    const runs: number[] = [];
    const fromClaim: number[] = [];
    const hands: number[] = [];
    try {
      // One build first, not counted: the runner process starts (and first compiles through tsx) meanwhile.
      for (let i = -1; i < OVERHEAD_ROUNDS; i++) {
        const started = Date.now();
        const b = await queueBuild(d.api, d.ownerToken, project.id, pipeline.id, { commit_sha: repo.shas.main });
        const final = await reportedAt(r, b.id, 60_000);
        const took = final.at - started;
        if (final.status !== "succeeded") throw new Error(`build ${(await getBuild(d, b.id)).status}`);
        if (i < 0) continue;
        runs.push(took);
        // The runner's own part (docs/benchmarks.md): from its claim to its final report, without the trigger's
        // request (which reads the pipeline file at the commit) and the long-poll's wake-up.
        fromClaim.push(final.at - claimedAt(r, b.id));
        // The runner cleans up after its final report: let it finish before the hand-run is timed (and after, so
        // the next build's clock starts on an idle runner too).
        await pause();
        const dir = join(scratch, `hand${i}`);
        const t = performance.now();
        execFileSync("git", ["clone", "-q", "--depth=50", repo.url, dir]);
        execFileSync("git", ["checkout", "-q", "--detach", repo.shas.main!], { cwd: dir });
        execFileSync("sh", ["-c", "true"], { cwd: dir });
        hands.push(performance.now() - t);
        await pause();
      }
    } finally {
      await stopRunner(r);
    }
    return { runner: median(runs), hand: median(hands), runs, hands, fromClaim };
  } finally {
    await d.daemon.stop("SIGKILL");
    repo.remove();
    rmSync(scratch, { recursive: true, force: true });
    rmSync(d.dataDir, { recursive: true, force: true });
  }
}

const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
// BENCH_ONLY=coldwarm|restore|overhead runs one part; BENCH_SKIP_COLD=1 skips the cold/warm builds (the longest part).
const only = process.env.BENCH_ONLY;
const part = (name: string) => (only ? only === name : name !== "coldwarm" || !process.env.BENCH_SKIP_COLD);
if (part("coldwarm")) {
  const { cold, warm } = await coldWarm();
  const warmMedian = median(warm);
  console.log(
    `cold build ${s(cold)}; warm builds ${warm.map(s).join(", ")} (median ${s(warmMedian)}); warm/cold ${(warmMedian / cold).toFixed(2)} (goal ≤ 0.2)`,
  );
}
if (part("restore")) {
  const restore = await restoreVsTar();
  console.log(
    `restore of ${(restore.archiveBytes / 2 ** 20).toFixed(0)} MiB: runner ${s(restore.restore)}, tar -x ${s(restore.tar)}; tar/runner ${(restore.tar / restore.restore).toFixed(2)} (goal ≥ 0.8)`,
  );
}
if (part("overhead")) {
  buildBundleIfStale();
  const over = await overhead();
  const ms = (v: number[]) => v.map((x) => x.toFixed(0)).join(" ");
  console.log(`trivial build, runner queue-to-final (ms): ${ms(over.runs)}; by hand clone + sh (ms): ${ms(over.hands)}`);
  console.log(`trivial build, runner claim-to-final (ms): ${ms(over.fromClaim)}`);
  console.log(
    `trivial build: runner queue-to-final ${s(over.runner)}, by hand (clone + sh) ${s(over.hand)} (medians of ${OVERHEAD_ROUNDS}); hand/runner ${(over.hand / over.runner).toFixed(2)}`,
  );
  const claimToFinal = median(over.fromClaim);
  console.log(
    `trivial build: runner claim-to-final ${s(claimToFinal)} (its own part); hand/runner ${(over.hand / claimToFinal).toFixed(2)} (goal ≥ 0.8)`,
  );
}
process.exit(0);
