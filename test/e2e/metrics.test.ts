// GET /metrics of the real daemon process (docs/api.md §13): the process and Node.js series only the Node shell
// provides, the token rule over a real socket, and request counters labelled by route pattern.
import { rmSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { makeDataDir, startDaemon, type Daemon } from "../helpers/daemon.ts";
import { parsePrometheus, type Family } from "../helpers/prometheus.ts";

const TOKEN = "metrics-e2e-token-0123456789abcdef";
let daemon: Daemon | undefined;
const dataDir = makeDataDir();
afterAll(async () => {
  await daemon?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

function value(families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number {
  const f = families.get(name);
  if (!f) throw new Error(`no metric family ${name}`);
  const s = f.samples.find((m) => Object.entries(labels).every(([k, v]) => m.labels[k] === v));
  if (!s) throw new Error(`no sample of ${name} with ${JSON.stringify(labels)}`);
  return s.value;
}

describe("GET /metrics of the daemon", () => {
  it("exports the process and Node.js metrics beside Hangar's, behind the metrics token", { timeout: 60_000 }, async () => {
    const startedAt = Date.now() / 1000;
    daemon = await startDaemon({ HANGAR_DATA_DIR: dataDir, HANGAR_METRICS_TOKEN: TOKEN });
    const scrape = (token?: string) => fetch(`${daemon!.url}/metrics`, { headers: token ? { authorization: `Bearer ${token}` } : {} });

    const missing = await scrape();
    expect(missing.status).toBe(401);
    expect(((await missing.json()) as { code: string }).code).toBe("missing_auth");
    const wrong = await scrape("metrics-e2e-token-0123456789abcdeX");
    expect(wrong.status).toBe(401);
    expect(((await wrong.json()) as { code: string }).code).toBe("invalid_token");

    for (let i = 0; i < 3; i++) expect((await fetch(`${daemon.url}/v1/public/setup-status`)).status).toBe(200);
    expect((await fetch(`${daemon.url}/v1/builds/some-build-id`)).status).toBe(401);

    const res = await scrape(TOKEN);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    const families = parsePrometheus(text);

    expect(families.get("process_cpu_seconds_total")?.type).toBe("counter");
    expect(value(families, "process_cpu_seconds_total")).toBeGreaterThan(0);
    expect(value(families, "process_resident_memory_bytes")).toBeGreaterThan(10 * 1024 * 1024);
    const start = value(families, "process_start_time_seconds");
    expect(start).toBeGreaterThan(startedAt - 5);
    expect(start).toBeLessThanOrEqual(Date.now() / 1000);
    expect(value(families, "nodejs_heap_size_used_bytes")).toBeGreaterThan(0);
    expect(value(families, "nodejs_heap_size_total_bytes")).toBeGreaterThanOrEqual(value(families, "nodejs_heap_size_used_bytes"));
    expect(value(families, "nodejs_external_memory_bytes")).toBeGreaterThan(0);

    expect(value(families, "hangar_http_requests_total", { method: "GET", route: "/v1/public/setup-status", status: "200" })).toBe(3);
    expect(value(families, "hangar_http_requests_total", { method: "GET", route: "/v1/builds/:build_id", status: "401" })).toBe(1);
    expect(text).not.toContain("some-build-id");
    expect(value(families, "hangar_builds", { status: "queued" })).toBe(0);
    expect(value(families, "hangar_outbox_pending")).toBe(0);
  });
});
