/**
 * In-process wake-up for long-polling claims: a trigger (or a requeue) calls `notify()` and every waiting
 * claim retries at once. Other daemons on the same database never see this signal; their waiters fall back
 * to polling the database (CONTRACT §8), so the signal is an optimisation, never the source of truth.
 * Plain listeners and timers only, so it runs on Workers too.
 */
export class JobSignal {
  private waiters = new Set<() => void>();

  /** Wakes every current waiter. */
  notify(): void {
    const current = [...this.waiters];
    this.waiters.clear();
    for (const wake of current) wake();
  }

  /** Resolves on the next notify, after `ms`, or when `abort` fires, whichever comes first. */
  wait(ms: number, abort?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (abort?.aborted) return resolve();
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        abort?.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.add(done);
      abort?.addEventListener("abort", done, { once: true });
    });
  }

  /** How many claims are waiting right now (tests and the bench read it). */
  get waiting(): number {
    return this.waiters.size;
  }
}
