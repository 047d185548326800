import { JobSignal } from "../builds/job-signal.ts";

/** One live stream's hold on a build's wake-ups. */
export interface LogSubscription {
  /** How many notifies this build has had since the first subscription: read it before reading the database. */
  seq(): number;
  /** Resolves at once when a notify came after `seen`, else on the next notify, after `ms`, or on `abort`. */
  wait(seen: number, ms: number, abort?: AbortSignal): Promise<void>;
  close(): void;
}

/**
 * In-process wake-up for the build page's live streams: a runner's log chunk or status report calls
 * `notify(buildId)` and the streams following that build read the database at once instead of at their next
 * poll. Streams served by another daemon on the same database never see it and keep polling, so the database
 * stays the only source of truth (as with JobSignal for claims). The sequence number closes the gap between a
 * stream's read and its wait: a notify in between is not lost. Plain timers and listeners: it runs on Workers.
 */
export class LogSignal {
  private readonly byBuild = new Map<string, { streams: number; seq: number; signal: JobSignal }>();

  notify(buildId: string): void {
    const entry = this.byBuild.get(buildId);
    if (!entry) return;
    entry.seq++;
    entry.signal.notify();
  }

  subscribe(buildId: string): LogSubscription {
    let entry = this.byBuild.get(buildId);
    if (!entry) {
      entry = { streams: 0, seq: 0, signal: new JobSignal() };
      this.byBuild.set(buildId, entry);
    }
    entry.streams++;
    const held = entry;
    let open = true;
    return {
      seq: () => held.seq,
      wait: (seen, ms, abort) => (held.seq !== seen ? Promise.resolve() : held.signal.wait(ms, abort)),
      close: () => {
        if (!open) return;
        open = false;
        // The last stream of a build leaves no entry behind.
        if (--held.streams === 0 && this.byBuild.get(buildId) === held) this.byBuild.delete(buildId);
      },
    };
  }

  /** Builds with a live stream right now (tests read it). */
  get builds(): number {
    return this.byBuild.size;
  }
}
