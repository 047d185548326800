// `npm run bench:logs`: the build page with a 50 MiB log, in real Chromium against the daemon's HTTP listener.
//  1. First screen: performance.now() from navigation to the first log lines rendered (the viewer's
//     `hangar-log-first-screen` mark, then the next frame), and the longest main-thread task (PerformanceObserver
//     `longtask`) while the page loads. The limit: the time the same browser takes to fetch the same 50 MiB raw
//     from the log endpoint (`/builds/{id}/log`, one response), measured in the same run.
//     Then a jump to line 1 (`#L1`, which loads every earlier window): its time and longest task.
//  2. Live delivery: a runner's `POST …/logs` of one line → that line in the page's DOM, p50/p99 over 200 lines
//     (the page sends the runner's request itself, so both ends are read on one clock).
//     The limit: a bare node:http server pushing each POSTed line at once to an EventSource in the same browser
//     (no database, no polling), measured the same way.
// BENCH_LOG_MIB changes the log size; BENCH_LOG_LINES the number of live lines.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { createNodeListener, loadConfig } from "../src/index.ts";
import { createNodeDeps } from "../src/runtime/node-deps.ts";
import { issueBootstrapToken } from "../src/domain/setup/setup.ts";
import { launchBrowser, newContext } from "../test/helpers/browser.ts";

const LOG_MIB = Number(process.env.BENCH_LOG_MIB ?? 50);
const LIVE_LINES = Number(process.env.BENCH_LOG_LINES ?? 200);
const CHUNK = 256 * 1024; // what the reference runner sends at most per POST

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
const f = (n: number) => n.toFixed(1);

function listen(server: Server): Promise<string> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)));
}

/** A build log as a mobile build prints it: Gradle-ish lines, some coloured, ~100 bytes each. */
function makeLog(bytes: number): Buffer {
  const parts: string[] = [];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    const line =
      i % 50 === 0
        ? `\u001b[1;34m> Task :app:compileReleaseKotlin\u001b[0m step ${i}\n`
        : i % 17 === 0
          ? `\u001b[33mw: file:///work/app/src/main/kotlin/com/example/Feature${i % 300}.kt:${i % 900}:13 'x' is deprecated\u001b[0m\n`
          : `e: compiling com.example.module${i % 97}.Class${i} (${i} of many) ok, ${(i * 7919) % 10007} ms\n`;
    parts.push(line);
    size += Buffer.byteLength(line);
  }
  return Buffer.from(parts.join("")).subarray(0, bytes);
}

/** Installs, before any page script runs: long-task collection and a hook for the live lines' first sight. */
const INIT_SCRIPT = `
  window.__longtasks = [];
  try {
    new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__longtasks.push([e.startTime, e.duration]); })
      .observe({ type: "longtask", buffered: true });
  } catch {}
  window.__seen = {};
  const look = () => {
    for (const el of document.querySelectorAll(".ln-text, .live-line")) {
      const m = /^live (\\d+) /.exec(el.textContent);
      if (m && !(m[1] in window.__seen)) window.__seen[m[1]] = performance.now();
    }
  };
  new MutationObserver(look).observe(document, { subtree: true, childList: true, characterData: true });
`;

/** Polls a page expression until it is truthy (page.evaluate goes through the debugger, which the page's CSP
 *  does not govern; waitForFunction's string predicates would be evaluated by the page and refused). */
async function until(page: Page, expression: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await page.evaluate(expression))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${expression}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function longestTask(page: Page, from: number, to: number): Promise<number> {
  const tasks = (await page.evaluate("window.__longtasks")) as Array<[number, number]>;
  // A task counts when it overlaps [from, to] (page time).
  return tasks.filter(([s, d]) => s + d >= from && s <= to).reduce((m, [, d]) => Math.max(m, d), 0);
}

/**
 * Posts `n` lines one at a time from inside the page (`post(i)` is a page expression: a fetch whose answer is
 * awaited), waiting for each to show in the DOM; latencies in ms. Both ends are read on the page's clock.
 */
async function liveLatency(page: Page, n: number, post: (i: number) => string): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const sent = (await page.evaluate(`(async () => { await (${post(i)}); return performance.now(); })()`)) as number;
    await until(page, `window.__seen[${i}] !== undefined`, 10_000);
    const seen = (await page.evaluate(`window.__seen[${i}]`)) as number;
    out.push(seen - sent);
    // A short gap: the lines of a real build come spread out, not back to back.
    await new Promise((r) => setTimeout(r, 20));
  }
  return out.sort((a, b) => a - b);
}

/** The floor of live delivery: a bare server pushing each POSTed line to its EventSource clients at once. */
async function bareSse(): Promise<{ url: string; close(): Promise<void> }> {
  const clients = new Set<ServerResponse>();
  const html = `<!doctype html><meta charset="utf-8"><div id="log"></div><script>
    const es = new EventSource("/events");
    es.onmessage = (e) => { const d = document.createElement("div"); d.className = "live-line"; d.textContent = e.data; document.getElementById("log").appendChild(d); };
    es.onopen = () => { document.body.dataset.open = "1"; };
  </script>`;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.url === "/events") {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-store" });
      res.write(": hi\n\n");
      clients.add(res);
      req.on("close", () => clients.delete(res));
      return;
    }
    if (req.method === "POST") {
      let body = "";
      req.on("data", (d: Buffer) => (body += d.toString()));
      req.on("end", () => {
        for (const c of clients) c.write(`data: ${body.replace(/\n$/, "")}\n\n`);
        res.writeHead(204);
        res.end();
      });
      return;
    }
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(html);
  });
  const url = await listen(server);
  return {
    url,
    close: () =>
      new Promise<void>((r) => {
        for (const c of clients) c.end();
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), "hangar-bench-logs-"));
  const { deps, close } = await createNodeDeps(
    loadConfig({ HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0", HANGAR_MAX_LOG_BYTES: String((LOG_MIB + 8) * 1024 * 1024) }),
  );
  // Made before any request: building it takes seconds, longer than an idle keep-alive connection lives.
  const log = makeLog(LOG_MIB * 1024 * 1024);
  const server = createServer(createNodeListener(deps));
  // The live part's page sits idle between phases; the bench's own fetches must not meet a closed socket.
  server.keepAliveTimeout = 60_000;
  const base = await listen(server);
  const call = async (method: string, path: string, token: string | undefined, body?: unknown, raw?: Buffer) => {
    const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
    if (body !== undefined) headers["content-type"] = "application/json";
    if (raw !== undefined) headers["content-type"] = "text/plain; charset=utf-8";
    const res = await fetch(base + path, { method, headers, body: raw ?? (body === undefined ? undefined : JSON.stringify(body)) });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return text ? (JSON.parse(text) as Record<string, any>) : {}; // eslint-disable-line @typescript-eslint/no-explicit-any -- bench reads API JSON loosely
  };
  const { token } = await issueBootstrapToken(deps);
  const setup = (await call("POST", "/v1/setup/bootstrap-token/verify", undefined, { token })).session_token as string;
  await call("POST", "/v1/setup/local-owner/create", setup, { email: "owner@example.com" });
  await call("POST", "/v1/setup/complete", setup);
  const session = (await call("POST", "/v1/auth/local/login", undefined, {})).session_token as string;
  const project = await call("POST", "/v1/projects", session, { name: "bench", repo_url: "https://git.example.com/app.git" });
  const pipeline = await call("POST", `/v1/projects/${project.id}/pipelines`, session, {
    name: "build",
    config: { platform: "any", steps: [{ name: "build", run: "./gradlew assembleRelease" }] },
  });
  const runner = await call("POST", "/v1/runners/register", session, { name: "bench-runner", capabilities: { platforms: ["android"] } });
  const startBuild = async () => {
    const b = await call("POST", `/v1/projects/${project.id}/builds`, session, {
      pipeline_id: pipeline.id,
      commit_sha: "0123456789abcdef0123456789abcdef01234567",
    });
    const job = await call("POST", `/v1/runners/${runner.id}/claim`, runner.token);
    if (job.build_id !== b.id) throw new Error("claimed another build");
    await call("POST", `/v1/runners/${runner.id}/jobs/${b.id}/status`, runner.token, { status: "running" });
    return b.id as string;
  };

  // The 50 MiB build, finished.
  const bigId = await startBuild();
  const upStart = performance.now();
  for (let off = 0; off < log.length; off += CHUNK)
    await call("POST", `/v1/runners/${runner.id}/jobs/${bigId}/logs?offset=${off}`, runner.token, undefined, log.subarray(off, off + CHUNK));
  const uploadMs = performance.now() - upStart;
  await call("POST", `/v1/runners/${runner.id}/jobs/${bigId}/status`, runner.token, { status: "succeeded", exit_code: 0 });
  let lineCount = 0;
  for (let at = log.indexOf(10); at >= 0; at = log.indexOf(10, at + 1)) lineCount++;
  if (log.at(-1) !== 10) lineCount++; // the unfinished last line is shown too

  const browser = await launchBrowser();
  try {
    const ctx = await newContext(browser, { viewport: { width: 1280, height: 900 } });
    await ctx.addInitScript(INIT_SCRIPT);
    const page = await ctx.newPage();
    await page.goto(`${base}/login`);
    await page.getByRole("button", { name: "Sign in on this machine" }).click();
    await page.waitForURL((u) => u.pathname !== "/login");

    console.log(
      `bench:logs — ${LOG_MIB} MiB log (${lineCount} lines) uploaded in ${f(uploadMs)} ms; Chromium ${browser.version()}; ${cpus().length} CPUs, load ${loadavg()[0]!.toFixed(2)}`,
    );
    console.log("");
    console.log("| measure (5 runs, median) | ms | longest task ms | limit: raw fetch of the same bytes in the page, ms | × limit |");
    console.log("|---|---|---|---|---|");
    const firstScreen: number[] = [];
    const firstTask: number[] = [];
    const jump: number[] = [];
    const jumpTask: number[] = [];
    const raw: number[] = [];
    for (let run = 0; run < 5; run++) {
      await page.goto(`${base}/builds/${bigId}`);
      await until(page, `performance.getEntriesByName("hangar-log-first-screen").length > 0`, 60_000);
      // The mark is set when the first lines are in the DOM; they are on screen at the next frame.
      const shown = (await page.evaluate(`new Promise((r) => requestAnimationFrame(() => r(performance.now())))`)) as number;
      const lastLine = (await page.evaluate(`[...document.querySelectorAll("#log .ln-no")].at(-1)?.textContent`)) as string;
      if (Number(lastLine) !== lineCount) throw new Error(`the first screen shows line ${lastLine}, not the last (${lineCount})`);
      // Two more seconds of the page settling (the live stream opens, the end arrives): still "while the log loads".
      await new Promise((r) => setTimeout(r, 2000));
      firstScreen.push(shown);
      firstTask.push(await longestTask(page, 0, (await page.evaluate("performance.now()")) as number));
      // Jump to line 1: every earlier 1 MiB window is fetched and added.
      const jumpFrom = (await page.evaluate(`(location.hash = "#L1", performance.now())`)) as number;
      await until(page, `!!document.getElementById("L1")?.querySelector(".ln-text:not(.muted)")`, 120_000);
      const jumpTo = (await page.evaluate("performance.now()")) as number;
      jump.push(jumpTo - jumpFrom);
      jumpTask.push(await longestTask(page, jumpFrom, jumpTo));
      const text = (await page.evaluate(`document.getElementById("L1").querySelector(".ln-text").textContent`)) as string;
      if (!text.startsWith("> Task :app:compileReleaseKotlin step 0")) throw new Error(`line 1 reads ${JSON.stringify(text)}`);
      // The limit: the same browser fetching the whole log raw, same origin, same session.
      const rawMs = (await page.evaluate(
        `(async () => { const s = performance.now(); const r = await fetch("/builds/${bigId}/log"); const b = await r.arrayBuffer(); if (b.byteLength !== ${log.length}) throw new Error("raw " + b.byteLength); return performance.now() - s; })()`,
      )) as number;
      raw.push(rawMs);
    }
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const rawMed = med(raw);
    console.log(
      `| navigation → last screen of the log rendered | ${f(med(firstScreen))} | ${f(med(firstTask))} | ${f(rawMed)} | ${(med(firstScreen) / rawMed).toFixed(3)} |`,
    );
    console.log(
      `| jump to #L1 (all ${LOG_MIB} windows of 1 MiB loaded) | ${f(med(jump))} | ${f(med(jumpTask))} | ${f(rawMed)} | ${(med(jump) / rawMed).toFixed(2)} |`,
    );
    console.log("");
    console.log(
      `runs: first screen ${firstScreen.map(f).join(", ")}; longest task ${firstTask.map(f).join(", ")}; jump ${jump.map(f).join(", ")}; jump task ${jumpTask.map(f).join(", ")}; raw ${raw.map(f).join(", ")}`,
    );

    // Live delivery on a running build, against the bare push server.
    const liveId = await startBuild();
    let offset = 0;
    await page.goto(`${base}/builds/${liveId}`);
    await until(page, `document.getElementById("log-state")?.textContent === "live"`, 20_000);
    // The runner's request, sent by the page (same origin, the runner's token): its answer and the line's
    // arrival are then on one clock.
    const hangar = await liveLatency(page, LIVE_LINES, (i) => {
      const line = `live ${i} \u001b[32mok\u001b[0m compiled module ${i}\n`;
      const at = offset;
      offset += Buffer.byteLength(line);
      return `fetch(${JSON.stringify(`/v1/runners/${runner.id}/jobs/${liveId}/logs?offset=${at}`)}, { method: "POST", headers: { authorization: ${JSON.stringify(`Bearer ${runner.token}`)}, "content-type": "text/plain; charset=utf-8" }, body: ${JSON.stringify(line)} }).then(async (r) => { if (r.status !== 200) throw new Error("logs " + r.status + " " + await r.text()); })`;
    });
    await call("POST", `/v1/runners/${runner.id}/jobs/${liveId}/status`, runner.token, { status: "succeeded", exit_code: 0 });

    const bare = await bareSse();
    const floorPage = await ctx.newPage();
    await floorPage.goto(bare.url);
    await until(floorPage, `document.body.dataset.open === "1"`, 20_000);
    const floor = await liveLatency(
      floorPage,
      LIVE_LINES,
      (i) =>
        `fetch("/line", { method: "POST", body: ${JSON.stringify(`live ${i} ok compiled module ${i}
`)} }).then((r) => r.arrayBuffer())`,
    );
    await bare.close();
    console.log("");
    console.log(`| live line: POST …/logs answered → line in the DOM (${LIVE_LINES} lines) | p50 ms | p99 ms | max ms |`);
    console.log("|---|---|---|---|");
    console.log(`| Hangar (/builds/{id}/events) | ${f(pct(hangar, 50))} | ${f(pct(hangar, 99))} | ${f(hangar.at(-1)!)} |`);
    console.log(`| limit: bare node:http pushing to an EventSource | ${f(pct(floor, 50))} | ${f(pct(floor, 99))} | ${f(floor.at(-1)!)} |`);
    console.log(
      `| × limit | ${(pct(hangar, 50) / Math.max(pct(floor, 50), 0.1)).toFixed(1)} | ${(pct(hangar, 99) / Math.max(pct(floor, 99), 0.1)).toFixed(1)} | |`,
    );
  } finally {
    await browser.close();
    await new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
    close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
