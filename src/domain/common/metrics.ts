import { sql } from "drizzle-orm";
import type { AppDeps } from "../../deps.ts";
import { BUILD_STATUSES, RUNNER_STATUSES } from "../../db/schema/constants.ts";

/**
 * Prometheus metrics (docs/api.md §13), written in the text exposition format by a small writer of our own: the
 * well-known client (prom-client) needs Node's `cluster`/`v8` modules and the core must bundle for Workers.
 * Counters and histograms live in this process (Prometheus scrapes each daemon); gauges are read from the
 * database at scrape time, so every daemon sharing a database reports the same build, queue and runner figures.
 */

type Labels = Record<string, string>;

/** Label values escaped as the text format requires: backslash, double quote and newline. */
function escapeLabel(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

function labelText(labels: Labels): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`);
  return parts.length ? `{${parts.join(",")}}` : "";
}

/**
 * The map key of one label set: names and values joined by separators no label contains. Rendering the
 * exposition text (escaping, braces) on every request cost about as much as the rest of the bookkeeping.
 */
function seriesKey(labels: Labels): string {
  let key = "";
  for (const name in labels) key += `${name}\u0000${labels[name]}\u0001`;
  return key;
}

function formatValue(n: number): string {
  if (n === Number.POSITIVE_INFINITY) return "+Inf";
  return Number.isInteger(n) ? String(n) : String(Number(n.toPrecision(12)));
}

export class Counter {
  private readonly values = new Map<string, { labels: Labels; value: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}

  inc(labels: Labels = {}, by = 1): void {
    const key = seriesKey(labels);
    const entry = this.values.get(key);
    if (entry) entry.value += by;
    else this.values.set(key, { labels, value: by });
  }

  render(): string {
    let out = `# HELP ${this.name} ${this.help}\n# TYPE ${this.name} counter\n`;
    for (const { labels, value } of this.values.values()) out += `${this.name}${labelText(labels)} ${formatValue(value)}\n`;
    return out;
  }
}

export class Histogram {
  private readonly series = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
    readonly buckets: readonly number[],
  ) {}

  observe(value: number, labels: Labels = {}): void {
    const key = seriesKey(labels);
    let s = this.series.get(key);
    if (!s) {
      s = { labels, counts: this.buckets.map(() => 0), sum: 0, count: 0 };
      this.series.set(key, s);
    }
    for (let i = 0; i < this.buckets.length; i++) if (value <= this.buckets[i]!) s.counts[i]! += 1;
    s.sum += value;
    s.count += 1;
  }

  render(): string {
    let out = `# HELP ${this.name} ${this.help}\n# TYPE ${this.name} histogram\n`;
    for (const s of this.series.values()) {
      this.buckets.forEach((le, i) => {
        out += `${this.name}_bucket${labelText({ ...s.labels, le: formatValue(le) })} ${s.counts[i]}\n`;
      });
      out += `${this.name}_bucket${labelText({ ...s.labels, le: "+Inf" })} ${s.count}\n`;
      out += `${this.name}_sum${labelText(s.labels)} ${formatValue(s.sum)}\n`;
      out += `${this.name}_count${labelText(s.labels)} ${s.count}\n`;
    }
    return out;
  }
}

function gauge(name: string, help: string, rows: Array<[Labels, number]>): string {
  let out = `# HELP ${name} ${help}\n# TYPE ${name} gauge\n`;
  for (const [labels, value] of rows) out += `${name}${labelText(labels)} ${formatValue(value)}\n`;
  return out;
}

/** This process's counters and histograms; one per app (createApp makes it when the host passes none). */
export class MetricsRegistry {
  readonly httpRequests = new Counter("hangar_http_requests_total", "HTTP requests answered, by method, route pattern and status.");
  readonly httpDuration = new Histogram(
    "hangar_http_request_duration_seconds",
    "Time from a request's arrival to its answer's headers, by method and route pattern.",
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  );
  /** Whole seconds: queue times are stored in epoch seconds (STYLE habit 6), so a pickup under 1 s counts as 0. */
  readonly buildPickup = new Histogram(
    "hangar_build_pickup_seconds",
    "Time from a build being queued to a runner claiming it, in whole seconds.",
    [0, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600],
  );
  readonly artifactBytes = new Counter(
    "hangar_artifact_bytes_total",
    "Artifact bytes: uploads completed (any storage) and bytes this daemon streamed to downloaders.",
  );

  constructor() {
    // Both directions are reported from the start, so a dashboard's rate() has a series before the first transfer.
    this.artifactBytes.inc({ direction: "upload" }, 0);
    this.artifactBytes.inc({ direction: "download" }, 0);
  }
}

/** The whole scrape: this process's series, the database gauges, and the host's process metrics. */
export async function renderMetrics(
  deps: Pick<AppDeps, "db" | "processMetrics" | "diskSpace" | "config">,
  registry: MetricsRegistry,
): Promise<string> {
  const buildRows = await deps.db.all<{ status: string; n: number }>(sql`SELECT status, count(*) AS n FROM builds GROUP BY status`);
  const queueRows = await deps.db.all<{ platform: string; n: number }>(
    sql`SELECT platform, count(*) AS n FROM builds WHERE status = 'queued' GROUP BY platform`,
  );
  const runnerRows = await deps.db.all<{ status: string; n: number }>(sql`SELECT status, count(*) AS n FROM runners GROUP BY status`);
  // Messages to targets still to send (the outbox loop turns build events into these within a second).
  const [outboxRow] = await deps.db.all<{ n: number }>(sql`SELECT count(*) AS n FROM outbox WHERE status = 'pending'`);
  const byStatus = (rows: Array<{ status: string; n: number }>, statuses: readonly string[]): Array<[Labels, number]> =>
    statuses.map((status) => [{ status }, Number(rows.find((r) => r.status === status)?.n ?? 0)]);
  const parts = [
    registry.httpRequests.render(),
    registry.httpDuration.render(),
    registry.buildPickup.render(),
    registry.artifactBytes.render(),
    gauge("hangar_builds", "Builds by status.", byStatus(buildRows, BUILD_STATUSES)),
    gauge(
      "hangar_queue_depth",
      "Queued builds by platform.",
      queueRows.map((r): [Labels, number] => [{ platform: r.platform }, Number(r.n)]),
    ),
    gauge("hangar_runners", "Registered runners by status.", byStatus(runnerRows, RUNNER_STATUSES)),
    gauge("hangar_outbox_pending", "Notifications and commit statuses waiting to be delivered.", [[{}, Number(outboxRow?.n ?? 0)]]),
  ];
  if (deps.diskSpace) {
    const space = await deps.diskSpace(deps.config.dataDir);
    parts.push(gauge("hangar_data_dir_free_bytes", "Free bytes on the file system of the data directory.", [[{}, space.freeBytes]]));
  }
  if (deps.processMetrics) parts.push(deps.processMetrics());
  return parts.join("");
}
