// `npm run bench:search`: log search and test-report parsing, each against a limit measured in the same run.
//  1. Indexing: BENCH_SEARCH_MB of realistic log lines (default 200 MB, ~100 KB per build, so 2,000 builds;
//     BENCH_SEARCH_MB=2048 is 2 GB in 20,972 builds) stored as the daemon stores them (written in bulk, 200 builds
//     per transaction, through a second connection), then indexed by
//     the maintenance pass (indexEndedLogs: read the chunks, split lines, strip ANSI, INSERT into FTS5).
//     The limit: the same lines inserted straight into a bare FTS5 table of a plain SQLite file (libsql, one
//     transaction per 250-row INSERT like the daemon) — the FTS5 tokenizer and b-tree cost alone;
//     BENCH_SEARCH_BARE=0 skips it (and the bare query limits) to halve a large run.
//     Index size: database pages added by indexing, as a share of the stored log bytes.
//  2. Queries: terms, phrases and prefixes through searchLogs (p50/p99 over the mix), vs the same MATCH with
//     ORDER BY rowid DESC LIMIT 50 on the bare table.
//  3. JUnit: a ~50 MiB report through parseJunit (with event-loop yields, as the daemon runs it; longest
//     event-loop stall measured), vs reading the file and decoding it (the floor) and vs a bare
//     fast-xml-parser parse of the same text (the issue's yardstick).
//  4. Storing: a 50 MiB report of 100,000 cases (both per-build limits) through ingestJunitReport as the
//     complete call runs it (read from a local store, parse in slices, batched inserts, the flip), with the
//     longest event-loop stall seen by monitorEventLoopDelay and by a 1 ms setInterval probe (with the most CPU
//     time between two of its ticks); then flaky detection over the stored cases, with the same probe.
//  5. Log indexing blocks: one ended build's 16 MiB log indexed by the maintenance pass, with the longest
//     event-loop stall (BENCH_SEARCH_PARTS=logblock only: not in the default set).
//  BENCH_SEARCH_PARTS=search,junit,store,logblock picks parts (default the first three).
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay, PerformanceObserver } from "node:perf_hooks";
import { sql } from "drizzle-orm";
import Database from "libsql";
import { XMLParser } from "fast-xml-parser";
import { openDb } from "../src/db/client.ts";
import { migrateDb } from "../src/db/migrate.ts";
import { loadConfig } from "../src/config.ts";
import { indexEndedLogs, searchLogs, searchableLine, toFtsQuery } from "../src/domain/logs/log-search.ts";
import { parseJunit } from "../src/domain/tests/junit.ts";
import { flakyTests, ingestJunitReport, pendingReportStatement } from "../src/domain/tests/test-reports.ts";
import { createLocalDiskStore } from "../src/storage/local-disk.ts";

const TOTAL_MB = Number(process.env.BENCH_SEARCH_MB ?? 200);
const PARTS = new Set((process.env.BENCH_SEARCH_PARTS ?? "search,junit,store").split(","));
const PER_BUILD = 100 * 1024;
/** BENCH_SEARCH_BARE=0 skips the bare FTS5 table (the limits), which doubles a large run's time. */
const BARE = process.env.BENCH_SEARCH_BARE !== "0";
const CHUNK = 64 * 1024;
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
const f = (n: number, d = 1) => n.toFixed(d);

const MODULES = ["app", "core", "network", "ui", "payments", "login", "profile", "feed", "settings", "analytics"];
const WORDS = ["compile", "link", "sign", "archive", "resolve", "download", "transform", "merge", "dex", "lint", "test", "cache"];
let seed = 42;
const rand = (n: number) => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff;
  return seed % n;
};

/** One line of a mobile build log: Gradle tasks, Xcode compile lines, test output, some coloured, some errors. */
function logLine(i: number): string {
  const m = MODULES[rand(MODULES.length)]!;
  const w = WORDS[rand(WORDS.length)]!;
  switch (rand(12)) {
    case 0:
      return `> Task :${m}:${w}DebugKotlin UP-TO-DATE`;
    case 1:
      return `CompileSwift normal arm64 /Users/ci/work/${m}/Sources/${m[0]!.toUpperCase()}${m.slice(1)}View${rand(300)}.swift (in target '${m}' from project 'App')`;
    case 2:
      return `\x1b[32m✓\x1b[0m ${m}Tests.test${w[0]!.toUpperCase()}${w.slice(1)}${rand(500)} (${rand(900)} ms)`;
    case 3:
      return `w: /Users/ci/work/${m}/src/main/kotlin/com/example/${m}/${w}Manager.kt: (${rand(400)}, ${rand(80)}): Parameter 'ctx${rand(9)}' is never used`;
    case 4:
      return rand(20) === 0
        ? `\x1b[31merror:\x1b[0m ${m}: Provisioning profile "App ${m} AdHoc" expired on 2026-0${1 + rand(9)}-1${rand(9)}`
        : `Downloading https://repo.maven.apache.org/maven2/org/${m}/${w}/${rand(9)}.${rand(20)}.${rand(9)}/${w}-${rand(9)}.jar`;
    case 5:
      return `Ld /Users/ci/Library/Developer/Xcode/DerivedData/App-${(i * 7919).toString(36)}/Build/Products/Debug-iphonesimulator/${m}.framework/${m} normal`;
    case 6:
      return `[${String(rand(24)).padStart(2, "0")}:${String(rand(60)).padStart(2, "0")}:${String(rand(60)).padStart(2, "0")}] ${w} ${m} ${rand(100)}% (${rand(5000)}/${5000})`;
    default:
      return `    at com.example.${m}.${w[0]!.toUpperCase()}${w.slice(1)}Service.run(${w}Service.kt:${rand(500)}) request_id=${((i * 2654435761) >>> 0).toString(16)}`;
  }
}

function buildLog(buildIndex: number, bytes = PER_BUILD): { bytes: Uint8Array; lines: string[] } {
  const lines: string[] = [];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    const line = logLine(buildIndex * 1000 + i);
    lines.push(line);
    size += Buffer.byteLength(line) + 1;
  }
  return { bytes: new TextEncoder().encode(lines.join("\n") + "\n"), lines };
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "hangar-bench-search-"));
  const builds = Math.max(1, Math.round((TOTAL_MB * 1024 * 1024) / PER_BUILD));
  console.log(
    `bench:search — ${builds} builds × ${PER_BUILD / 1024} KiB = ${f((builds * PER_BUILD) / 2 ** 20, 0)} MiB of log; ${cpus().length} cores, load ${loadavg()
      .map((l) => f(l, 2))
      .join(" ")}`,
  );
  try {
    if (PARTS.has("search")) await searchPart(dir, builds);
    if (PARTS.has("junit")) await junitPart(dir);
    if (PARTS.has("store")) await storePart(dir);
    if (PARTS.has("logblock")) await logBlockPart(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function searchPart(dir: string, builds: number) {
  {
    const opened = await openDb(`file:${join(dir, "hangar.db")}`);
    const { db } = opened;
    await migrateDb(db);
    const config = loadConfig({});
    const deps = { db, clock: { now: () => 2_000_000_000 }, config };
    const raw = new Database(join(dir, "raw.db"));
    raw.exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; CREATE VIRTUAL TABLE raw_search USING fts5(line, columnsize=0)");

    // Store the logs as appendLog leaves them (chunks with newline counts), final builds past their grace:
    // written straight through a second connection to the same file, 200 builds per transaction, so 2 GB is
    // generated in minutes (the daemon's append path is not what is measured here).
    const bulk = new Database(join(dir, "hangar.db"));
    bulk.exec("PRAGMA busy_timeout=5000");
    const insertBuild =
      bulk.prepare(`INSERT INTO builds (id, project_id, pipeline_id, build_number, status, platform, trigger_type, commit_sha, branch, config_snapshot, timeout_s, log_bytes, queued_at, finished_at, created_at, updated_at)
      VALUES (?, 'p', 'pl', ?, 'succeeded', 'any', 'manual', '${"a".repeat(40)}', ?, '{}', 3600, ?, ?, ?, ?, ?)`);
    const insertChunk = bulk.prepare("INSERT INTO build_log_chunks (build_id, start_offset, content, newlines) VALUES (?, ?, ?, ?)");
    let logBytes = 0;
    let rawMs = 0;
    const genStart = performance.now();
    const insertRaw = (rows: Array<[number, string]>) => {
      const t0 = performance.now();
      raw.exec("BEGIN");
      for (let i = 0; i < rows.length; i += 250) {
        const part = rows.slice(i, i + 250);
        raw.prepare(`INSERT INTO raw_search (rowid, line) VALUES ${part.map(() => "(?, ?)").join(", ")}`).run(part.flat());
      }
      raw.exec("COMMIT");
      rawMs += performance.now() - t0;
    };
    for (let b = 0; b < builds; b++) {
      if (b % 200 === 0) bulk.exec("BEGIN");
      const id = `00000000-0000-4000-8000-${String(b).padStart(12, "0")}`;
      const { bytes, lines } = buildLog(b);
      logBytes += bytes.length;
      insertBuild.run([id, b + 1, b % 5 === 0 ? "develop" : "main", bytes.length, b, b, b, b]);
      for (let at = 0; at < bytes.length; at += CHUNK) {
        const part = bytes.subarray(at, at + CHUNK);
        let n = 0;
        for (const byte of part) if (byte === 10) n++;
        insertChunk.run([id, at, Buffer.from(part), n]);
      }
      if (b % 200 === 199 || b === builds - 1) bulk.exec("COMMIT");
      if (BARE) insertRaw(lines.map((l, i) => [(b + 1) * 134_217_728 + i + 1, searchableLine(l)]));
    }
    bulk.close();
    console.log(`generated ${builds} builds in ${f((performance.now() - genStart) / 1000)} s`);
    const pageBytes = async () =>
      Number((await db.get<{ n: number }>(sql`SELECT page_count * page_size AS n FROM pragma_page_count(), pragma_page_size()`))!.n);
    const before = await pageBytes();

    // 1. Indexing through the maintenance pass.
    const t0 = performance.now();
    for (;;) if ((await indexEndedLogs(deps, 50)) === 0) break;
    const indexMs = performance.now() - t0;
    const after = await pageBytes();
    const mib = logBytes / 2 ** 20;
    console.log(
      `indexing: ${f(mib / (indexMs / 1000))} MiB/s through indexEndedLogs (${f(indexMs / 1000)} s)${BARE ? `; bare FTS5 inserts ${f(mib / (rawMs / 1000))} MiB/s (${f(rawMs / 1000)} s): ratio ${f(rawMs / indexMs, 2)}` : ""}`,
    );
    console.log(
      `index size: ${f((after - before) / 2 ** 20)} MiB for ${f(mib)} MiB of stored log = ${f(((after - before) / logBytes) * 100, 0)} % (line text kept in the FTS table + the inverted index, pages after indexing); bare FTS5 file ${f(statSync(join(dir, "raw.db")).size / 2 ** 20)} MiB`,
    );

    // 2. Queries.
    const queries = [
      "expired",
      '"Provisioning profile"',
      "Provision*",
      "request_id",
      '"normal arm64" payments',
      "Downloading maven",
      "nomatchword",
      "Service.kt:12",
      "feed AND lint",
    ];
    const ours: number[] = [];
    const bare: number[] = [];
    const rawStmt = raw.prepare(
      "SELECT rowid, line, highlight(raw_search, 0, '[', ']') FROM raw_search WHERE raw_search MATCH ? ORDER BY rowid DESC LIMIT 50",
    );
    // The event loop during each searchLogs call (the log search runs on the driver's read thread): the longest
    // gap of a 1 ms timer, what a request arriving meanwhile waits.
    let longestStall = 0;
    for (let round = 0; round < 20; round++) {
      for (const q of queries) {
        const probe = intervalProbe();
        const a = performance.now();
        await searchLogs(deps, { q, limit: 50 });
        ours.push(performance.now() - a);
        longestStall = Math.max(longestStall, probe.stop().wallMs);
        if (!BARE) continue;
        const c = performance.now();
        rawStmt.all(toFtsQuery(q));
        bare.push(performance.now() - c);
      }
    }
    ours.sort((x, y) => x - y);
    bare.sort((x, y) => x - y);
    const bareQueries = BARE
      ? `; bare MATCH p50 ${f(pct(bare, 50), 2)} ms p99 ${f(pct(bare, 99), 2)} ms: ratio p50 ${f(pct(bare, 50) / pct(ours, 50), 2)}, p99 ${f(pct(bare, 99) / pct(ours, 99), 2)}`
      : "";
    console.log(
      `queries (${ours.length}, ${queries.length} kinds): searchLogs p50 ${f(pct(ours, 50), 2)} ms p99 ${f(pct(ours, 99), 2)} ms, longest ${f(ours.at(-1)!, 1)} ms; longest event-loop stall during one ${f(longestStall, 1)} ms${bareQueries}`,
    );
    const filtered: number[] = [];
    for (let round = 0; round < 20; round++) {
      const a = performance.now();
      await searchLogs(deps, { q: "expired", branch: "develop", limit: 50 });
      filtered.push(performance.now() - a);
    }
    filtered.sort((x, y) => x - y);
    console.log(`filtered (branch=develop, 1 build in 5): p50 ${f(pct(filtered, 50), 2)} ms p99 ${f(pct(filtered, 99), 2)} ms`);
    raw.close();
    opened.close();
  }
}

async function junitPart(dir: string) {
  {
    const cases: string[] = [];
    let size = 0;
    for (let i = 0; size < 50 * 2 ** 20 - 4096; i++) {
      const fail = i % 7 === 0;
      const c = `<testcase classname="com.example.${MODULES[i % 10]}.Suite${i % 300}" name="test${i}" time="0.${i % 1000}">${fail ? `<failure message="expected:&lt;${i}&gt; but was:&lt;${i + 1}&gt;" type="AssertionError"><![CDATA[java.lang.AssertionError: expected ${i}\n\tat com.example.Suite.test${i}(Suite.kt:${i % 500})\n\tat org.junit.Assert.fail(Assert.java:89)]]></failure><system-out>log line ${i} &amp; more</system-out>` : ""}</testcase>\n`;
      cases.push(c);
      size += c.length;
    }
    const xml = `<?xml version="1.0" encoding="UTF-8"?>\n<testsuites><testsuite name="all">\n${cases.join("")}</testsuite></testsuites>\n`;
    const file = join(dir, "report.xml");
    writeFileSync(file, xml);
    const reportMib = statSync(file).size / 2 ** 20;
    const r0 = performance.now();
    const text = new TextDecoder().decode(readFileSync(file));
    const readMs = performance.now() - r0;
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    const p0 = performance.now();
    const parsed = await parseJunit(text, Number.MAX_SAFE_INTEGER, () => new Promise((r) => setImmediate(r)));
    const parseMs = performance.now() - p0;
    delay.disable();
    const x0 = performance.now();
    new XMLParser({ ignoreAttributes: false, processEntities: false }).parse(text);
    const fxpMs = performance.now() - x0;
    console.log(
      `junit: ${f(reportMib)} MiB, ${parsed.ok ? parsed.cases.length : 0} cases: parseJunit ${f(reportMib / (parseMs / 1000))} MiB/s (${f(parseMs)} ms), longest event-loop stall ${f(delay.max / 1e6)} ms; ` +
        `read+decode ${f(reportMib / (readMs / 1000))} MiB/s (${f(readMs)} ms): ratio ${f(readMs / parseMs, 3)}; bare fast-xml-parser ${f(reportMib / (fxpMs / 1000))} MiB/s (${f(fxpMs)} ms): ratio ${f(fxpMs / parseMs, 2)}`,
    );
  }
}

/**
 * The longest gap between ticks of a 1 ms interval, minus the interval: what a request arriving then waits. And
 * the process's CPU time within each gap (process.cpuUsage: user + system, all threads, so GC helper threads
 * count): what the longest block costs with a core to itself, which a loaded machine does not change much.
 */
function intervalProbe(): { stop: () => { wallMs: number; cpuMs: number } } {
  let last = performance.now();
  let lastCpu = process.cpuUsage();
  let worst = 0;
  let worstCpu = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    const cpu = process.cpuUsage(lastCpu);
    worst = Math.max(worst, now - last - 1);
    worstCpu = Math.max(worstCpu, (cpu.user + cpu.system) / 1000);
    last = now;
    lastCpu = process.cpuUsage();
  }, 1);
  return {
    stop: () => {
      clearInterval(timer);
      // The gap still open when the work ends (the whole run, when the loop never turned).
      const cpu = process.cpuUsage(lastCpu);
      return { wallMs: Math.max(worst, performance.now() - last - 1), cpuMs: Math.max(worstCpu, (cpu.user + cpu.system) / 1000) };
    },
  };
}

/**
 * Writes the store part's report: 100,000 cases padded to an equal share of 50 MiB, a failure with its trace in one
 * case of 7, system-out in all. In a function of its own so the text is garbage by the time the daemon's path
 * runs (a daemon does not hold the file in memory; a 100 MiB live heap would lengthen its collections).
 */
function writeStoreReport(path: string): number {
  const CASES = 100_000;
  const target = 50 * 2 ** 20 - 4096;
  const per = Math.floor(target / CASES);
  const parts: string[] = [];
  for (let i = 0; i < CASES; i++) {
    const fail = i % 7 === 0;
    const head = `<testcase classname="com.example.${MODULES[i % 10]}.Suite${i % 300}" name="test${i}" time="0.${i % 1000}">${fail ? `<failure message="expected:&lt;${i}&gt; but was:&lt;${i + 1}&gt;" type="AssertionError"><![CDATA[java.lang.AssertionError: expected ${i}\n\tat com.example.Suite.test${i}(Suite.kt:${i % 500})]]></failure>` : ""}<system-out>`;
    const tail = `</system-out></testcase>\n`;
    parts.push(head + "x".repeat(Math.max(1, per - head.length - tail.length)) + tail);
  }
  writeFileSync(path, `<?xml version="1.0" encoding="UTF-8"?>\n<testsuites><testsuite name="all">\n${parts.join("")}</testsuite></testsuites>\n`);
  return statSync(path).size;
}

/** The database options the daemon opens its file with (src/runtime/node-deps.ts). */
function daemonDbOptions(config: ReturnType<typeof loadConfig>) {
  return { synchronous: config.dbSynchronous, checkpointEveryMs: config.dbCheckpointMs };
}

async function storePart(dir: string) {
  const storeDir = join(dir, "artifacts");
  const key = "report.xml";
  mkdirSync(storeDir, { recursive: true });
  const size = writeStoreReport(join(storeDir, key));
  const config = loadConfig({});
  // Opened as the daemon opens it: WAL checkpoints from the timer, on the checkpoint thread (docs/decisions.md).
  const opened = await openDb(`file:${join(dir, "store.db")}`, undefined, daemonDbOptions(config));
  const { db } = opened;
  await migrateDb(db);
  const deps = { db, clock: { now: () => 2_000_000_000 }, config };
  const buildId = "00000000-0000-4000-8000-000000000001";
  const artifactId = "00000000-0000-4000-8000-0000000000a1";
  await db.run(sql`INSERT INTO builds (id, project_id, pipeline_id, build_number, status, platform, trigger_type, commit_sha, branch, config_snapshot, timeout_s, queued_at, created_at, updated_at)
    VALUES (${buildId}, 'p', 'pl', 1, 'running', 'any', 'manual', ${"a".repeat(40)}, 'main', '{}', 3600, 1, 1, 1)`);
  await db.run(sql`INSERT INTO artifacts (id, build_id, runner_id, filename, size_bytes, content_type, status, kind, storage_location, created_at, updated_at)
    VALUES (${artifactId}, ${buildId}, 'r', 'report.xml', ${size}, 'application/xml', 'available', 'junit',
      ${JSON.stringify({ provider: "local", base_dir: storeDir, key })}, 1, 1)`);
  await pendingReportStatement(db, artifactId, 1);
  const store = createLocalDiskStore(storeDir);
  // The floor: the same probes on an idle event loop for 5 s just before (at a high load average the process
  // waits for a core however little it does).
  const idleDelay = monitorEventLoopDelay({ resolution: 1 });
  const idleProbe = intervalProbe();
  idleDelay.enable();
  await new Promise((r) => setTimeout(r, 5000));
  idleDelay.disable();
  const idleMax = idleProbe.stop();
  const gcPauses: number[] = [];
  const gc = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) gcPauses.push(entry.duration);
  });
  gc.observe({ entryTypes: ["gc"] });
  const delay = monitorEventLoopDelay({ resolution: 1 });
  const probe = intervalProbe();
  delay.enable();
  const t0 = performance.now();
  await ingestJunitReport(deps, artifactId, async () => store);
  const ms = performance.now() - t0;
  delay.disable();
  const probeMax = probe.stop();
  gc.disconnect();
  gcPauses.sort((a, b) => b - a);
  const summary = await db.get<{ s: string }>(sql`SELECT tests_summary AS s FROM builds WHERE id = ${buildId}`);
  console.log(
    `store: ${f(size / 2 ** 20)} MiB report, ${JSON.parse(summary!.s).total} cases stored in ${f(ms)} ms (${f(size / 2 ** 20 / (ms / 1000))} MiB/s); ` +
      `longest event-loop stall: monitorEventLoopDelay ${f(delay.max / 1e6)} ms (p99 ${f(delay.percentile(99) / 1e6)} ms), 1 ms interval probe ${f(probeMax.wallMs)} ms (most CPU between two ticks ${f(probeMax.cpuMs)} ms); ` +
      `garbage collection: ${gcPauses.length} pauses, longest ${gcPauses
        .slice(0, 3)
        .map((d) => f(d))
        .join(", ")} ms; ` +
      `idle event loop before, 5 s: monitorEventLoopDelay ${f(idleDelay.max / 1e6)} ms, probe ${f(idleMax.wallMs)} ms (CPU ${f(idleMax.cpuMs)} ms)`,
  );
  // Flaky detection (a GET of the project's flaky tests) over these 100,000 cases: one query and a grouping pass,
  // neither sliced, so its time is a block of the event loop.
  await db.run(
    sql`INSERT INTO projects (id, name, repo_url, default_branch, created_at, updated_at) VALUES ('p', 'p', 'https://example.com/r.git', 'main', 1, 1)`,
  );
  const flaky: number[] = [];
  const flakyProbe = intervalProbe();
  for (let round = 0; round < 5; round++) {
    const a = performance.now();
    await flakyTests(deps, "p");
    flaky.push(performance.now() - a);
  }
  const flakyBlock = flakyProbe.stop();
  flaky.sort((x, y) => x - y);
  console.log(
    `flaky detection over the ${JSON.parse(summary!.s).total} stored cases: median ${f(flaky[2]!)} ms, longest ${f(flaky[4]!)} ms (5 runs); longest event-loop stall ${f(flakyBlock.wallMs)} ms (most CPU between two ticks ${f(flakyBlock.cpuMs)} ms)`,
  );
  opened.close();
}

/**
 * The event loop while the maintenance pass indexes one ended build's 16 MiB log (a log appendLog could not index
 * as it came: a crash, or logs stored before the index existed): the longest stall and the most CPU between two
 * ticks of a 1 ms interval, beside the idle loop just before.
 */
async function logBlockPart(dir: string) {
  const config = loadConfig({});
  const opened = await openDb(`file:${join(dir, "block.db")}`, undefined, daemonDbOptions(config));
  const { db } = opened;
  await migrateDb(db);
  const deps = { db, clock: { now: () => 2_000_000_000 }, config };
  const id = "00000000-0000-4000-8000-00000000b10c";
  const { bytes } = buildLog(7, 16 * 2 ** 20);
  await db.run(sql`INSERT INTO builds (id, project_id, pipeline_id, build_number, status, platform, trigger_type, commit_sha, branch, config_snapshot, timeout_s, log_bytes, queued_at, finished_at, created_at, updated_at)
    VALUES (${id}, 'p', 'pl', 1, 'succeeded', 'any', 'manual', ${"a".repeat(40)}, 'main', '{}', 3600, ${bytes.length}, 1, 1, 1, 1)`);
  for (let at = 0; at < bytes.length; at += CHUNK) {
    const part = bytes.subarray(at, at + CHUNK);
    let n = 0;
    for (const byte of part) if (byte === 10) n++;
    await db.run(sql`INSERT INTO build_log_chunks (build_id, start_offset, content, newlines) VALUES (${id}, ${at}, ${Buffer.from(part)}, ${n})`);
  }
  const idle = intervalProbe();
  await new Promise((r) => setTimeout(r, 2000));
  const idleMax = idle.stop();
  const delay = monitorEventLoopDelay({ resolution: 1 });
  const probe = intervalProbe();
  delay.enable();
  const t0 = performance.now();
  while ((await indexEndedLogs(deps, 50)) > 0);
  const ms = performance.now() - t0;
  delay.disable();
  const worst = probe.stop();
  console.log(
    `logblock: one build's ${f(bytes.length / 2 ** 20)} MiB log indexed by the maintenance pass in ${f(ms)} ms; longest event-loop stall: monitorEventLoopDelay ${f(delay.max / 1e6)} ms, 1 ms interval probe ${f(worst.wallMs)} ms (most CPU between two ticks ${f(worst.cpuMs)} ms); idle loop before, 2 s: probe ${f(idleMax.wallMs)} ms (CPU ${f(idleMax.cpuMs)} ms)`,
  );
  opened.close();
}

await main();
