// Job status reports (`POST .../jobs/{id}/status`). Reports are full snapshots (status + every step result), so a
// newer one replaces an older one still waiting: during a daemon outage only the latest is sent when it is back.
// Delivery is retried until the daemon answers; a 409 means the job is already final there (the user canceled it,
// its lease lapsed, or an earlier attempt of this very report got through) and ends reporting.
import type { StatusReport } from "../../protocol/runner.ts";
import type { RunnerClient } from "./client.ts";
import { backoffDelay, sleep } from "./client.ts";
import type { Logger } from "./log.ts";

/**
 * A `running` report that follows the last one delivered by less than this waits out the rest, and whatever
 * replaced it meanwhile is sent instead: steps that end within it, then the final report, make one report, not
 * three (docs/benchmarks.md, the runner's overhead). A final report never waits, and nothing waits before a first
 * report is delivered: a final report may only follow a `running` one.
 */
export const COALESCE_MS = 250;

export class StatusReporter {
  private pending: StatusReport | null = null;
  private pumping: Promise<void> | null = null;
  private closed = false;
  private readonly abort = new AbortController();
  private lastDeliveredAt = Number.NEGATIVE_INFINITY;
  /** Ends the coalescing wait early (a final report was queued). */
  private hurry: (() => void) | null = null;
  /** The error code that ended reporting (`build_canceled`, `invalid_transition`, `not_found`...), if any. */
  refusedWith: string | null = null;
  lastDelivered: StatusReport | null = null;

  constructor(
    private readonly client: RunnerClient,
    private readonly jobId: string,
    private readonly log: Logger,
    private readonly onRefused: (code: string) => void,
  ) {}

  /** Queues a snapshot; returns at once. */
  update(report: StatusReport): void {
    if (this.closed) return;
    this.pending = report;
    if (report.status !== "running") this.hurry?.();
    this.pumping ??= this.pump().finally(() => {
      this.pumping = null;
    });
  }

  /** Queues the final report and waits until it is delivered or the daemon says the job is final already. */
  async final(report: StatusReport): Promise<"delivered" | "refused" | "stopped"> {
    this.update(report);
    while (this.pumping) await this.pumping;
    if (this.lastDelivered?.status === report.status) return "delivered";
    return this.refusedWith ? "refused" : "stopped";
  }

  /** Gives up on anything undelivered (a forced shutdown). */
  stop(): void {
    this.closed = true;
    this.abort.abort();
    this.hurry?.();
  }

  /** How long the pending report is to wait (0: send it now). */
  private coalesceWait(): number {
    if (this.pending?.status !== "running") return 0;
    return Math.max(0, this.lastDeliveredAt + COALESCE_MS - performance.now());
  }

  /** Waits `wait` ms, or less when a final report is queued or reporting stops. */
  private async coalesce(wait: number): Promise<void> {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, wait);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.hurry = done;
    });
    this.hurry = null;
  }

  private async pump(): Promise<void> {
    let attempt = 0;
    while (this.pending && !this.closed) {
      // Checked before any await: the report first queued is taken at once, so a final report queued right
      // behind it (a job that fails at its start) cannot replace it.
      const wait = this.coalesceWait();
      if (wait > 0) {
        await this.coalesce(wait);
        if (!this.pending || this.closed) break;
      }
      const report = this.pending;
      let status: number;
      let code: string | undefined;
      try {
        const answer = await this.client.call("POST", this.client.jobPath(this.jobId, "/status"), { json: report, timeoutMs: 15_000 });
        status = answer.status;
        code = (answer.body as { code?: string } | null)?.code;
      } catch {
        status = 0; // unreachable: retry below
      }
      if (status === 0 || status >= 500 || status === 429 || status === 408) {
        if (attempt === 0 || attempt % 10 === 0)
          this.log.warn(`status report '${report.status}' not delivered yet (HTTP ${status || "unreachable"}); retrying`);
        await sleep(backoffDelay(attempt++), this.abort.signal);
        continue;
      }
      attempt = 0;
      if (this.pending === report) this.pending = null;
      if (status >= 200 && status < 300) {
        this.lastDelivered = report;
        this.lastDeliveredAt = performance.now();
        continue;
      }
      if (status === 400) {
        this.log.error(`the daemon rejected a status report (${code ?? status})`);
        // A final report must land: send it once more without the step details the daemon objected to.
        if (report.status !== "running" && report.step_results && !this.pending)
          this.pending = { status: report.status, exit_code: report.exit_code };
        continue;
      }
      // 409 (final, canceled), 404 (no longer this runner's job), 401/403 (token revoked): nothing more to say.
      this.closed = true;
      this.refusedWith = code ?? `http_${status}`;
      this.onRefused(this.refusedWith);
    }
  }
}
