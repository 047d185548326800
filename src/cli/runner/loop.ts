// The runner's main loop: long-poll claims one job at a time, heartbeats on their own timer, and a SIGTERM that
// drains (finish the current job, then exit 0) rather than abandoning a build halfway.
import { DaemonError, sleep, UnreachableError, type RunnerClient } from "./client.ts";
import type { DiskCare } from "./disk.ts";
import { Job, type JobContext, type JobOutcome } from "./job.ts";
import type { Logger } from "./log.ts";

export interface LoopOptions {
  client: RunnerClient;
  workRoot: string;
  log: Logger;
  /** Run one job (waiting up to `onceWaitS` for it) and exit with its outcome. */
  once: boolean;
  onceWaitS?: number;
  context?: JobContext;
  /** Free disk measured for each heartbeat; below its floor no job is claimed. */
  disk?: DiskCare;
}

const DEFAULT_HEARTBEAT_S = 10;
const CLAIM_WAIT_S = 30;
const LOW_DISK_RECHECK_MS = 5_000;

/** Runs until drained (exit code 0), or, with `once`, until one job ends (0 when it succeeded, 1 otherwise). */
export async function runLoop(options: LoopOptions): Promise<number> {
  const { client, log } = options;
  const shutdown = new AbortController();
  let draining = false;
  let current: Job | null = null;
  let heartbeatTimer: NodeJS.Timeout | null = null;
  let fatal: DaemonError | null = null;
  let stopped = false;

  const onSignal = (signal: NodeJS.Signals) => {
    if (draining) {
      // A second signal: stop the running step now instead of waiting for it.
      log.warn(`${signal} again: stopping the current job`);
      current?.stop("shutdown");
      return;
    }
    draining = true;
    log.info(`${signal}: draining — ${current ? `finishing build ${current.id}, then exiting` : "exiting"}`);
    shutdown.abort();
    void client.setStatus("draining", { attempts: 3 }).catch((err) => log.warn(`could not mark the runner draining: ${(err as Error).message}`));
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);

  const heartbeat = async () => {
    heartbeatTimer = null;
    let next = DEFAULT_HEARTBEAT_S;
    try {
      const disk = (await options.disk?.check()) ?? null;
      const beat = await client.heartbeat(disk);
      if (beat.nextInS && beat.nextInS > 0) next = Math.min(beat.nextInS, 60);
      if (current && beat.cancelJobIds.includes(current.id)) current.stop("canceled");
    } catch (err) {
      if (err instanceof DaemonError && (err.status === 401 || err.status === 403)) fatal = err;
      next = Math.min(next, 3); // the daemon is away: be back quickly so leases are renewed as soon as it returns
    }
    if (!stopped) heartbeatTimer = setTimeout(() => void heartbeat(), next * 1000);
  };

  try {
    let me;
    try {
      me = await client.setStatus("online", { signal: shutdown.signal });
    } catch (err) {
      if (err instanceof DaemonError) throw err;
      if (draining) return 0; // SIGTERM before the daemon was ever reached
      throw err;
    }
    log.info(`runner ${client.runnerId} online at ${client.baseUrl}`);
    await reportIsolation(client, me.capabilities, options.context?.isolation ?? "none", log, shutdown.signal);
    void heartbeat();

    const onceDeadline = Date.now() + (options.onceWaitS ?? CLAIM_WAIT_S) * 1000;
    while (!draining) {
      if (fatal) throw fatal;
      let claimed;
      try {
        const wait = options.once ? Math.ceil((onceDeadline - Date.now()) / 1000) : CLAIM_WAIT_S;
        if (options.once && wait <= 0) {
          log.info("no job arrived in time");
          return 1;
        }
        if ((await options.disk?.check())?.low_disk) {
          // Still online and heartbeating (with low_disk), just not taking work (docs/api.md §16).
          await sleep(LOW_DISK_RECHECK_MS, shutdown.signal);
          continue;
        }
        claimed = await client.claim(wait, { signal: shutdown.signal, deadline: options.once ? onceDeadline : undefined });
      } catch (err) {
        if (err instanceof UnreachableError && (draining || options.once)) {
          if (options.once && !draining) {
            log.info("no job: the daemon was not reachable in time");
            return 1;
          }
          break;
        }
        throw err;
      }
      if (!claimed) continue;
      log.info(`claimed build ${claimed.build_id} (#${claimed.build_number}, commit ${claimed.commit_sha})`);
      current = new Job(client, claimed, options.workRoot, log, options.context);
      let outcome: JobOutcome = "failed";
      try {
        outcome = await current.run();
      } catch (err) {
        // A bug or a local failure in one job must not take the runner down; the lease returns the job.
        log.error(`build ${claimed.build_id}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      } finally {
        current = null;
      }
      if (options.once) return outcome === "succeeded" ? 0 : 1;
    }
    log.info("drained; exiting");
    return 0;
  } finally {
    stopped = true;
    if (heartbeatTimer) clearTimeout(heartbeatTimer);
    process.off("SIGTERM", onSignal);
    process.off("SIGINT", onSignal);
  }
}

/**
 * Tells the daemon whether steps run as a separate user (`capabilities.isolation`), so the Runners page can warn
 * about a protected runner whose builds can read its token. The other capabilities are sent back as they are:
 * a runner token may only narrow them.
 */
async function reportIsolation(
  client: RunnerClient,
  current: Record<string, unknown> | undefined,
  isolation: "user" | "none",
  log: Logger,
  signal: AbortSignal,
): Promise<void> {
  if (!current || current.isolation === isolation) return;
  try {
    await client.setCapabilities({ ...current, isolation }, { signal, attempts: 3 });
  } catch (err) {
    log.warn(`could not report isolation "${isolation}" to the daemon: ${(err as Error).message}`);
  }
}
