import type { AppDeps } from "../deps.ts";
import { describeError } from "../errors.ts";
import { runScheduledRetention } from "../domain/retention/pass.ts";

export interface RetentionLoop {
  stop(): Promise<void>;
}

/**
 * The daemon's retention check, every HANGAR_SWEEP_INTERVAL_MS from start: a pass runs when the last one started
 * over a day ago (so at start when overdue), and an unfinished pass whose daemon died is resumed once its lease
 * lapses. The pass claims itself in the database, so daemons sharing one run it once (docs/decisions.md, Retention).
 * Stopping waits for the batch in flight; the rest of an interrupted pass is resumed by the next start.
 */
export function startRetentionLoop(deps: AppDeps): RetentionLoop {
  const owner = `daemon-${crypto.randomUUID()}`;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let current: Promise<void> = Promise.resolve();
  const tick = () => {
    current = (async () => {
      try {
        // Stopping ends a pass between two batches: its lease lapses and the next start resumes it.
        await runScheduledRetention(deps, owner, () => stopped);
      } catch (err) {
        deps.log({ time: new Date().toISOString(), level: "error", msg: "retention pass failed", error: describeError(err) });
      }
      if (!stopped) {
        timer = setTimeout(tick, deps.config.sweepIntervalMs);
        timer.unref();
      }
    })();
  };
  timer = setTimeout(tick, 0);
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await current;
    },
  };
}
