// The build page's live stream (docs/api.md §10): one Server-Sent Events loop per open page that sends the build's
// state (status, steps) whenever it changes and the stored log from the page's byte offset, until the build is final
// and its log read to the end. The page's script is src/web/log-viewer.ts; the pages stay free of the loop.
import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import type { AppDeps, AppEnv } from "../deps.ts";
import { isFinalStatus } from "../domain/builds/build-machine.ts";
import { getBuild, type BuildRow, type StepResult } from "../domain/builds/builds.ts";
import { utf8Boundary } from "../domain/logs/log-view.ts";
import { readLog } from "../domain/logs/logs.ts";
import { duration, neutralise } from "./text.ts";

/** Live-log streams one session may hold open at once (429 too_many_streams beyond). */
export const MAX_STREAMS_PER_SESSION = 20;

const TONES: Record<string, string> = {
  succeeded: "ok",
  running: "info",
  assigned: "info",
  queued: "wait",
  pending: "wait",
  failed: "bad",
  timed_out: "bad",
  canceled: "off",
  expired: "off",
  skipped: "off",
};

export function stepDuration(s: StepResult, now: number): string {
  if (s.started_at === undefined) return "";
  return s.finished_at !== undefined ? duration(s.finished_at - s.started_at) : `${duration(now - s.started_at)} so far`;
}

/** Live state of a build for the page's script: status with its badge tone, steps with durations. */
export function buildUpdate(b: BuildRow, now: number) {
  const steps = ((b.stepResults as StepResult[] | null) ?? []).map((s) => ({
    // The script sets it as text; bidi controls are made visible here, as <Name> does on the server.
    name: neutralise(s.name),
    status: s.status,
    tone: TONES[s.status] ?? "neutral",
    duration: stepDuration(s, now),
  }));
  return { status: b.status, tone: TONES[b.status] ?? "neutral", final: isFinalStatus(b.status), steps };
}

/** The byte offset a live-log stream starts at: Last-Event-ID on a reconnect, else ?offset=. */
function streamStart(c: Context): number {
  const raw = c.req.header("last-event-id") ?? c.req.query("offset") ?? "0";
  const n = Number(raw);
  return Number.isSafeInteger(n) && n >= 0 ? n : 0;
}

const STREAM_POLL_MS = 150;
const STREAM_KEEPALIVE_MS = 15_000;

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done);
  });
}

/**
 * GET /builds/{id}/events (a reader's cookie session, checked before): the stream, at most MAX_STREAMS_PER_SESSION
 * open at once per session in this process (docs/decisions.md). One handler per app: it owns the counts.
 */
export function liveBuildEvents(deps: AppDeps) {
  // Live-log streams open per browser session in this process: each holds a connection and a polling loop.
  const openStreams = new Map<string, number>();
  return async (c: Context<AppEnv, "/builds/:build_id/events">) => {
    const buildId = c.req.param("build_id");
    await getBuild(deps, buildId);
    // At most MAX_STREAMS_PER_SESSION open at once per session in this process (docs/decisions.md).
    const sessionId = c.get("userSessionId");
    const open = openStreams.get(sessionId) ?? 0;
    if (open >= MAX_STREAMS_PER_SESSION) {
      return c.json(
        { code: "too_many_streams", message: `at most ${MAX_STREAMS_PER_SESSION} live logs may be open at once per session; close some tabs` },
        429,
      );
    }
    openStreams.set(sessionId, open + 1);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      const left = (openStreams.get(sessionId) ?? 1) - 1;
      if (left <= 0) openStreams.delete(sessionId);
      else openStreams.set(sessionId, left);
    };
    let offset = streamStart(c);
    const signal = c.req.raw.signal;
    // Wall time, not deps.clock: how long one stream stays open is a real duration.
    const closeAt = Date.now() + deps.config.logStreamMaxS * 1000;
    return streamSSE(c, async (stream) => {
      stream.onAbort(release);
      const stop = new AbortController();
      stream.onAbort(() => stop.abort());
      signal.addEventListener("abort", () => stop.abort());
      const decoder = new TextDecoder();
      let lastBuild = "";
      let lastLogBytes = -1;
      let lastWrite = Date.now();
      // A reconnecting browser waits half a second, not its default three.
      await stream.writeSSE({ event: "hello", data: "{}", retry: 500 });
      const wake = deps.logSignal?.subscribe(buildId);
      stream.onAbort(() => wake?.close());
      try {
        while (!stop.signal.aborted && Date.now() < closeAt) {
          const seen = wake?.seq() ?? 0;
          const build = await getBuild(deps, buildId);
          const final = isFinalStatus(build.status);
          const state = JSON.stringify(buildUpdate(build, deps.clock.now()));
          if (state !== lastBuild) {
            lastBuild = state;
            await stream.writeSSE({ event: "build", data: state });
            lastWrite = Date.now();
          }
          let more = false;
          if (build.logBytes !== lastLogBytes || final) {
            const log = await readLog(deps, buildId, offset);
            // A character split across chunks waits for its last byte: no event ever ends inside one.
            const cut = utf8Boundary(log.bytes, log.complete);
            if (cut > 0) {
              const from = offset;
              offset += cut;
              await stream.writeSSE({
                event: "log",
                id: String(offset),
                data: JSON.stringify({ from, text: decoder.decode(log.bytes.subarray(0, cut)) }),
              });
              lastWrite = Date.now();
            }
            if (log.complete && cut === log.bytes.length) {
              await stream.writeSSE({ event: "end", id: String(offset), data: "{}" });
              return;
            }
            // Something came: look again at once (a long log arrives page by page). Nothing: wait for the count.
            more = cut > 0;
            if (!more) lastLogBytes = build.logBytes;
          }
          if (Date.now() - lastWrite > STREAM_KEEPALIVE_MS) {
            await stream.write(": keep-alive\n\n");
            lastWrite = Date.now();
          }
          // A runner's chunk or report to this process wakes the stream at once; one sent to another daemon on
          // the same database is seen at the next poll.
          if (!more) await (wake ? wake.wait(seen, STREAM_POLL_MS, stop.signal) : sleep(STREAM_POLL_MS, stop.signal));
        }
      } finally {
        wake?.close();
        release();
      }
    });
  };
}
