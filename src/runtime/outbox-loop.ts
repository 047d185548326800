import type { AppDeps } from "../deps.ts";
import { describeError } from "../errors.ts";
import { runOutboxOnce } from "../domain/events/outbox.ts";
import { runPublishesOnce } from "../domain/publishing/publisher.ts";

export interface OutboxLoop {
  stop(): Promise<void>;
}

/**
 * The daemon's outbox sender: a pass every `outboxPollMs` while idle, back to back while there is work. Each
 * daemon leases under its own id, so several daemons on one database share the work without sending one
 * attempt twice at once (docs/api.md §12). Stopping waits for the pass in flight (its sends time out in 10 s).
 */
export function startOutboxLoop(deps: AppDeps): OutboxLoop {
  const owner = `daemon-${crypto.randomUUID()}`;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let current: Promise<void> = Promise.resolve();
  // Publishes run beside the outbox pass, not in it: an upload lasts minutes and must not hold notifications back.
  let publishing: Promise<void> | null = null;
  const startPublishing = () => {
    if (publishing || stopped) return;
    publishing = runPublishesOnce(deps, owner)
      .then(() => undefined)
      .catch((err) => deps.log({ time: new Date().toISOString(), level: "error", msg: "publish pass failed", error: describeError(err) }))
      .finally(() => {
        publishing = null;
      });
  };
  const tick = () => {
    current = (async () => {
      let sent = 0;
      startPublishing();
      try {
        sent = await runOutboxOnce(deps, owner);
      } catch (err) {
        deps.log({ time: new Date().toISOString(), level: "error", msg: "outbox pass failed", error: describeError(err) });
      }
      if (!stopped) {
        timer = setTimeout(tick, sent > 0 ? 0 : deps.config.outboxPollMs);
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
