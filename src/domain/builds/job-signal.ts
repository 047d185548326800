/**
 * Wake-ups for long-polling claims. Two sources:
 * - in-process: a trigger (or a requeue) on this daemon calls `notify()` and every waiting claim retries at once;
 * - other daemons (docs/api.md §8): given `readVersion` (the `queue_version` row, bumped by triggers whenever a build
 *   becomes queued), ONE loop per process reads that row every 50–100 ms while at least one claim waits, and
 *   notifies when it changed. Waiting claims never poll the database themselves except for a rare fallback.
 * The signal is an optimisation, never the source of truth: a woken claim still claims through the database.
 * Plain listeners and timers only, so it runs on Workers too.
 */
export interface JobSignalOptions {
  /** Reads the queue version from the database; without it only in-process notifications wake claims. */
  readVersion?: () => Promise<number>;
  /** The loop's pause between reads is `pollMs` plus a random part up to `pollJitterMs` (spreads the daemons). */
  pollMs?: number;
  pollJitterMs?: number;
  /** A failed read (the loop goes on; waiting claims still have their fallback). */
  onError?: (err: unknown) => void;
}

export class JobSignal {
  private waiters = new Set<() => void>();
  private generationCount = 0;
  private lastVersion: number | undefined;
  private polling = false;
  private reads = 0;
  private readonly pollMs: number;
  private readonly pollJitterMs: number;

  constructor(private readonly options: JobSignalOptions = {}) {
    this.pollMs = options.pollMs ?? 50;
    this.pollJitterMs = options.pollJitterMs ?? 50;
  }

  /** Whether another daemon's queued builds reach this process's waiters through the database loop. */
  get pollsDatabase(): boolean {
    return this.options.readVersion !== undefined;
  }

  /**
   * Counts notifications. A claim reads it before trying the database and passes it to `wait()`, so a
   * notification that came while its try ran is not lost.
   */
  get generation(): number {
    return this.generationCount;
  }

  /** Wakes every current waiter. */
  notify(): void {
    this.generationCount++;
    const current = [...this.waiters];
    this.waiters.clear();
    for (const wake of current) wake();
  }

  /**
   * Resolves on the next notify, after `ms`, or when `abort` fires, whichever comes first; at once when a
   * notification came since `since` (a `generation` read earlier).
   */
  wait(ms: number, abort?: AbortSignal, since?: number): Promise<void> {
    return new Promise((resolve) => {
      if (abort?.aborted || (since !== undefined && since !== this.generationCount)) return resolve();
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        abort?.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.add(done);
      abort?.addEventListener("abort", done, { once: true });
      this.startPolling();
    });
  }

  /** How many claims are waiting right now (tests and the bench read it). */
  get waiting(): number {
    return this.waiters.size;
  }

  /** How many times the loop has read the queue version (tests and the bench read it). */
  get versionReads(): number {
    return this.reads;
  }

  private startPolling(): void {
    if (this.polling || !this.options.readVersion) return;
    this.polling = true;
    void this.poll(this.options.readVersion);
  }

  private async poll(readVersion: () => Promise<number>): Promise<void> {
    try {
      while (this.waiters.size > 0) {
        try {
          const version = await readVersion();
          this.reads++;
          // The first read cannot tell what changed before it, so it wakes the waiters too: one spare claim each.
          if (version !== this.lastVersion) {
            this.lastVersion = version;
            this.notify();
          }
        } catch (err) {
          this.options.onError?.(err);
        }
        if (this.waiters.size === 0) break;
        await new Promise((r) => setTimeout(r, this.pollMs + Math.random() * this.pollJitterMs));
      }
    } finally {
      this.polling = false;
    }
    // A waiter that came between the loop's last check and the flag being cleared starts it again.
    if (this.waiters.size > 0) this.startPolling();
  }
}
