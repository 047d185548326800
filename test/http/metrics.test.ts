import { describe, expect, it } from "vitest";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { buildWorld, claim, createPipeline, queueBuild, registerRunner, reportStatus } from "../helpers/builds.ts";
import { setInstance } from "../helpers/factories.ts";
import { artifactWorld, pathOf, uploadArtifact } from "../helpers/artifact-world.ts";
import { startReceiver } from "../helpers/receiver.ts";
import { countPendingDeliveries, expandBuildEvents, runOutboxOnce } from "../../src/domain/events/outbox.ts";
import { parsePrometheus, type Family } from "../helpers/prometheus.ts";

async function scrape(t: TestApp, options: { token?: string; peer?: string } = {}) {
  const r = await t.call("GET", "/metrics", options);
  return { ...r, families: r.status === 200 ? parsePrometheus(r.text) : new Map<string, Family>() };
}

function family(families: Map<string, Family>, name: string): Family {
  const f = families.get(name);
  if (!f) throw new Error(`no metric family ${name}`);
  return f;
}

function sample(f: Family, labels: Record<string, string>): number | undefined {
  return f.samples.find((m) => Object.entries(labels).every(([k, v]) => m.labels[k] === v))?.value;
}

describe("GET /metrics", () => {
  it("reports requests by route pattern, builds, queue depth, runners and pickup after a small workload", async () => {
    const t = await makeTestApp();
    const { ownerToken, project, pipeline, runner } = await buildWorld(t, { platforms: ["android"] });
    const iosPipeline = await createPipeline(t, ownerToken, project.id, { platform: "ios" }, "ios");
    await registerRunner(t, ownerToken, { platforms: ["ios"] });
    const first = await queueBuild(t, ownerToken, project.id, pipeline.id);
    await queueBuild(t, ownerToken, project.id, pipeline.id);
    await queueBuild(t, ownerToken, project.id, iosPipeline.id);
    t.clock.advance(3);
    const job = await claim(t, runner);
    expect(job.build_id).toBe(first.id);
    expect((await reportStatus(t, runner, job.build_id, { status: "running" })).status).toBe(200);
    expect((await reportStatus(t, runner, job.build_id, { status: "succeeded", exit_code: 0 })).status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await t.call("GET", `/v1/builds/${first.id}`, { token: ownerToken })).status).toBe(200);
    expect((await t.call("GET", "/v1/builds/no-such-build", { token: ownerToken })).status).toBe(404);

    const before = await scrape(t);
    expect(before.status).toBe(200);
    expect(before.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const requests = family(before.families, "hangar_http_requests_total");
    expect(requests.type).toBe("counter");
    expect(sample(requests, { method: "GET", route: "/v1/builds/:build_id", status: "200" })).toBe(3);
    expect(sample(requests, { method: "GET", route: "/v1/builds/:build_id", status: "404" })).toBe(1);
    // The route label is the pattern, never an id or token.
    expect(before.text).not.toContain(first.id);
    expect(before.text).not.toContain(runner.token);

    const builds = family(before.families, "hangar_builds");
    expect(sample(builds, { status: "queued" })).toBe(2);
    expect(sample(builds, { status: "succeeded" })).toBe(1);
    expect(sample(builds, { status: "failed" })).toBe(0);
    const depth = family(before.families, "hangar_queue_depth");
    expect(sample(depth, { platform: "any" })).toBe(1);
    expect(sample(depth, { platform: "ios" })).toBe(1);
    // No notification or commit-status target is configured: no message waits in the outbox.
    expect(family(before.families, "hangar_outbox_pending").type).toBe("gauge");
    expect(sample(family(before.families, "hangar_outbox_pending"), {})).toBe(0);
    const runners = family(before.families, "hangar_runners");
    expect(runners.samples.reduce((n, m) => n + m.value, 0)).toBe(2);

    const pickup = family(before.families, "hangar_build_pickup_seconds");
    expect(pickup.type).toBe("histogram");
    expect(pickup.histograms).toHaveLength(1);
    expect(pickup.histograms[0]!.count).toBe(1);
    expect(pickup.histograms[0]!.sum).toBe(3);
    expect(pickup.histograms[0]!.buckets.find((b) => b.le === 2)?.count).toBe(0);
    expect(pickup.histograms[0]!.buckets.find((b) => b.le === 5)?.count).toBe(1);

    // The 404 of an unknown build id is answered by the same route pattern: four in all.
    const duration = family(before.families, "hangar_http_request_duration_seconds");
    const buildGets = duration.histograms.find((h) => h.labels.route === "/v1/builds/:build_id");
    expect(buildGets?.count).toBe(4);
    expect(buildGets!.sum).toBeGreaterThan(0);
    // In-process app: the host passed no process metrics.
    expect(before.families.has("process_resident_memory_bytes")).toBe(false);
    for (let i = 0; i < 2; i++) await t.call("GET", `/v1/builds/${first.id}`, { token: ownerToken });
    const after = await scrape(t);
    expect(sample(family(after.families, "hangar_http_requests_total"), { route: "/v1/builds/:build_id", status: "200" })).toBe(5);
    expect(sample(family(after.families, "hangar_http_requests_total"), { route: "/metrics", status: "200" })).toBe(1);
  });

  it("counts artifact bytes by direction as they pass, and the messages waiting in the outbox", async () => {
    const t = await makeTestApp();
    const receiver = await startReceiver();
    const w = await artifactWorld(t);
    const bytes = new Uint8Array(70_000).map((_, i) => (i * 31) % 251);
    const artifact = await uploadArtifact(t, w, "app.bin", bytes);
    const start = await scrape(t);
    const artifactBytes = family(start.families, "hangar_artifact_bytes_total");
    expect(artifactBytes.type).toBe("counter");
    expect(sample(artifactBytes, { direction: "upload" })).toBe(bytes.length);
    expect(sample(artifactBytes, { direction: "download" }) ?? 0).toBe(0);

    // A whole download, then a range of it: only the bytes sent are counted.
    const link = async () => pathOf((await t.call("POST", `/v1/artifacts/${artifact.id}/download-link`, { token: w.ownerToken })).body.url);
    const whole = await t.call("GET", await link());
    expect(whole.status).toBe(200);
    const part = await t.call("GET", await link(), { headers: { range: "bytes=0-999" } });
    expect(part.status).toBe(206);
    const afterDownloads = family((await scrape(t)).families, "hangar_artifact_bytes_total");
    expect(sample(afterDownloads, { direction: "download" })).toBe(bytes.length + 1000);
    expect(sample(afterDownloads, { direction: "upload" })).toBe(bytes.length);

    // A notification on failure: the build's failure puts one message in the outbox; delivered, the gauge is 0.
    const created = await t.call("POST", `/v1/projects/${w.projectId}/notifications`, {
      token: w.ownerToken,
      body: { kind: "webhook", url: `${receiver.url}/hook`, on: ["failed"] },
    });
    expect(created.status, created.text).toBe(200);
    const failed = await t.call("POST", `/v1/runners/${w.runner.id}/jobs/${w.buildId}/status`, {
      token: w.runner.token,
      body: { status: "failed", exit_code: 2 },
    });
    expect(failed.status, failed.text).toBe(200);
    await expandBuildEvents(t.deps);
    expect(await countPendingDeliveries(t.deps)).toBe(1);
    expect(sample(family((await scrape(t)).families, "hangar_outbox_pending"), {})).toBe(1);
    await runOutboxOnce(t.deps, "metrics-test");
    expect(receiver.requests).toHaveLength(1);
    expect(sample(family((await scrape(t)).families, "hangar_outbox_pending"), {})).toBe(0);
  });

  it("answers 404 not_found to a non-loopback client and in remote mode when no token is set", async () => {
    const t = await makeTestApp();
    const lan = await t.call("GET", "/metrics", { peer: "192.168.1.20" });
    expect(lan.status).toBe(404);
    expect(lan.body.code).toBe("not_found");
    const proxied = await t.call("GET", "/metrics", { headers: { "x-forwarded-for": "203.0.113.9" } });
    expect(proxied.status).toBe(404);
    expect((await t.call("GET", "/metrics")).status).toBe(200);
    await setInstance(t, { runtimeMode: "remote" });
    const remote = await t.call("GET", "/metrics");
    expect(remote.status).toBe(404);
    expect(remote.body.code).toBe("not_found");
  });

  it("needs the Bearer token from anyone once HANGAR_METRICS_TOKEN is set", async () => {
    const secret = "metrics-token-0123456789abcdef";
    const t = await makeTestApp({ config: { HANGAR_METRICS_TOKEN: secret } });
    const missing = await t.call("GET", "/metrics");
    expect(missing.status).toBe(401);
    expect(missing.body.code).toBe("missing_auth");
    const wrong = await t.call("GET", "/metrics", { token: "metrics-token-0123456789abcdeX" });
    expect(wrong.status).toBe(401);
    expect(wrong.body.code).toBe("invalid_token");
    const fromLan = await t.call("GET", "/metrics", { token: secret, peer: "198.51.100.7" });
    expect(fromLan.status).toBe(200);
    expect(parsePrometheus(fromLan.text).has("hangar_builds")).toBe(true);
  });

  it("refuses a metrics token shorter than 16 characters at start", async () => {
    await expect(makeTestApp({ config: { HANGAR_METRICS_TOKEN: "short" } })).rejects.toThrow(/HANGAR_METRICS_TOKEN/);
  });
});
