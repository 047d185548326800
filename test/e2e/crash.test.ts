// SIGKILL under load: a burst of writes of every kind runs against the real daemon, the daemon is killed at a
// random moment with requests in flight, restarted on the same data directory, and EVERY write that got a 2xx
// before the kill must be there, whole: nothing half-applied (build numbers gap-free, no build without its
// project, logs a prefix of what was sent, an available artifact has all its bytes). Three kills in one test.
import { createHash, randomBytes } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import type { CallResult } from "../helpers/app.ts";
import { daemonCaller, DEFAULT_SHA, type Caller } from "../helpers/builds.ts";
import { startDaemon, type Daemon } from "../helpers/daemon.ts";
import { removeDir, startReadyDaemon, waitFor, type ReadyDaemon } from "./runner-harness.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON shapes are asserted by the tests
type Json = any;

const daemons: Daemon[] = [];
let dataDir: string | undefined;
afterAll(async () => {
  for (const d of daemons) await d.stop("SIGKILL");
  if (dataDir) removeDir(dataDir);
});

/** Progress of a build as the runner drives it; the stored one must lie between what was acked and what was sent. */
const LEVEL: Record<string, number> = { queued: 0, assigned: 1, running: 2, succeeded: 3 };

interface BuildRecord {
  id: string;
  projectId: string;
  number: number;
  acked: number;
  sent: number;
  runnerId?: string;
  chunks: string[];
  chunksAcked: number;
}

interface ArtifactRecord {
  id: string;
  buildId: string;
  sha256: string;
  size: number;
  completeAcked: boolean;
  completeSent: boolean;
}

/** Everything the burst wrote, split into what the daemon acknowledged and what was merely sent. */
class Ledger {
  invites = { acked: new Set<string>(), sent: new Set<string>() };
  projects = new Map<string, { acked: boolean }>();
  pipelines = new Map<string, string>();
  runners = new Map<string, string>();
  builds = new Map<string, BuildRecord>();
  artifacts = new Map<string, ArtifactRecord>();
  network = { ackedLast: -1, sentLast: -1 };
  rejected: string[] = [];
  /** Acknowledged requests so far: the kill waits for some progress, so a slow machine still tests something. */
  acks = 0;
}

interface Ctx {
  api: Caller;
  ownerToken: string;
  alive: boolean;
  ledger: Ledger;
  sharedProject: string;
  sharedPipeline: string;
  runner: { id: string; token: string };
  uploader: { id: string; token: string; buildId: string };
  round: number;
}

/** One request; null when the connection died (the daemon was killed): the write may or may not have landed. */
async function send(ctx: Ctx, method: string, path: string, options: Parameters<Caller["call"]>[2] = {}): Promise<CallResult | null> {
  if (!ctx.alive) return null;
  try {
    const res = await ctx.api.call(method, path, options);
    if (res.status < 300) ctx.ledger.acks++;
    if (res.status >= 300 && ctx.alive) ctx.ledger.rejected.push(`${method} ${path} ${res.status} ${res.text.slice(0, 120)}`);
    return res;
  } catch {
    return null;
  }
}

const ok = (r: CallResult | null): r is CallResult => r !== null && r.status >= 200 && r.status < 300;

async function inviteLoop(ctx: Ctx): Promise<void> {
  for (let i = 0; ctx.alive; i++) {
    const email = `r${ctx.round}-invite-${i}@example.com`;
    ctx.ledger.invites.sent.add(email);
    const r = await send(ctx, "POST", "/v1/users/invite", { token: ctx.ownerToken, body: { email, role: "developer" } });
    if (!ok(r)) return;
    ctx.ledger.invites.acked.add(email);
  }
}

/** Project → pipeline → build on it, over and over: a build must never exist without its project and pipeline. */
async function projectLoop(ctx: Ctx): Promise<void> {
  for (let i = 0; ctx.alive; i++) {
    const p = await send(ctx, "POST", "/v1/projects", {
      token: ctx.ownerToken,
      body: { name: `r${ctx.round}-p${i}`, repo_url: "https://git.example.com/a.git", config_path: null },
    });
    if (!ok(p)) return;
    ctx.ledger.projects.set(p.body.id, { acked: true });
    const pl = await send(ctx, "POST", `/v1/projects/${p.body.id}/pipelines`, {
      token: ctx.ownerToken,
      body: { name: "ci", config: { platform: "macos", steps: [{ name: "s", run: "true" }] } },
    });
    if (!ok(pl)) return;
    ctx.ledger.pipelines.set(pl.body.id, p.body.id);
    const b = await send(ctx, "POST", `/v1/projects/${p.body.id}/builds`, {
      token: ctx.ownerToken,
      body: { pipeline_id: pl.body.id, commit_sha: DEFAULT_SHA },
    });
    if (!ok(b)) return;
    ctx.ledger.builds.set(b.body.id, {
      id: b.body.id,
      projectId: p.body.id,
      number: b.body.build_number,
      acked: 0,
      sent: 0,
      chunks: [],
      chunksAcked: 0,
    });
  }
}

/** Concurrent triggers on one project: numbers must stay gap-free across the kills. */
async function triggerLoop(ctx: Ctx): Promise<void> {
  while (ctx.alive) {
    const b = await send(ctx, "POST", `/v1/projects/${ctx.sharedProject}/builds`, {
      token: ctx.ownerToken,
      body: { pipeline_id: ctx.sharedPipeline, commit_sha: DEFAULT_SHA },
    });
    if (!ok(b)) return;
    ctx.ledger.builds.set(b.body.id, {
      id: b.body.id,
      projectId: ctx.sharedProject,
      number: b.body.build_number,
      acked: 0,
      sent: 0,
      chunks: [],
      chunksAcked: 0,
    });
  }
}

async function registerLoop(ctx: Ctx): Promise<void> {
  for (let i = 0; ctx.alive; i++) {
    const r = await send(ctx, "POST", "/v1/runners/register", {
      token: ctx.ownerToken,
      body: { name: `r${ctx.round}-reg-${i}`, capabilities: { platforms: ["macos"] } },
    });
    if (!ok(r)) return;
    ctx.ledger.runners.set(r.body.id, r.body.token);
  }
}

async function networkLoop(ctx: Ctx): Promise<void> {
  for (let i = ctx.ledger.network.ackedLast + 1; ctx.alive; i++) {
    ctx.ledger.network.sentLast = i;
    const url = `https://ci-${i}.example.com`;
    const r = await send(ctx, "PUT", "/v1/settings/external-access/network", {
      token: ctx.ownerToken,
      body: { public_url: url, allowed_origins: [url] },
    });
    if (!ok(r)) return;
    ctx.ledger.network.ackedLast = i;
  }
}

/** The runner: claim, running, three log chunks, succeeded. */
async function runnerLoop(ctx: Ctx): Promise<void> {
  const { runner, ledger } = ctx;
  while (ctx.alive) {
    const c = await send(ctx, "POST", `/v1/runners/${runner.id}/claim`, { token: runner.token });
    if (!ok(c)) return;
    if (c.status === 204) {
      await new Promise((r) => setTimeout(r, 5));
      continue;
    }
    // A build whose trigger landed but whose answer was lost to the previous kill is news to the ledger.
    let rec = ledger.builds.get(c.body.build_id);
    if (!rec) {
      rec = { id: c.body.build_id, projectId: c.body.project_id, number: c.body.build_number, acked: 0, sent: 0, chunks: [], chunksAcked: 0 };
      ledger.builds.set(rec.id, rec);
    }
    rec.acked = rec.sent = LEVEL.assigned!;
    rec.runnerId = runner.id;
    const job = `/v1/runners/${runner.id}/jobs/${rec.id}`;
    rec.sent = LEVEL.running!;
    if (!ok(await send(ctx, "POST", `${job}/status`, { token: runner.token, body: { status: "running" } }))) return;
    rec.acked = LEVEL.running!;
    let offset = 0;
    for (let i = 0; i < 3; i++) {
      const chunk = `build-${rec.number}-chunk-${i}-${"z".repeat(200)}\n`;
      rec.chunks.push(chunk);
      const r = await send(ctx, "POST", `${job}/logs?offset=${offset}`, {
        token: runner.token,
        rawBody: chunk,
        headers: { "content-type": "text/plain" },
      });
      if (!ok(r)) return;
      rec.chunksAcked = i + 1;
      offset += Buffer.byteLength(chunk);
    }
    rec.sent = LEVEL.succeeded!;
    if (!ok(await send(ctx, "POST", `${job}/status`, { token: runner.token, body: { status: "succeeded" } }))) return;
    rec.acked = LEVEL.succeeded!;
  }
}

/** Local uploads on a build another runner holds: create, PUT the bytes, complete, again and again. */
async function artifactLoop(ctx: Ctx): Promise<void> {
  const { uploader, ledger } = ctx;
  const job = `/v1/runners/${uploader.id}/jobs/${uploader.buildId}`;
  for (let i = 0; ctx.alive; i++) {
    const bytes = randomBytes(64 * 1024 + Math.floor(Math.random() * 448 * 1024));
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    const created = await send(ctx, "POST", `${job}/artifacts`, {
      token: uploader.token,
      body: { filename: `app-${ctx.round}-${i}.apk`, size_bytes: bytes.length, content_type: "application/vnd.android.package-archive", sha256 },
    });
    if (!ok(created)) return;
    const art: ArtifactRecord = {
      id: created.body.artifact.id,
      buildId: uploader.buildId,
      sha256,
      size: bytes.length,
      completeAcked: false,
      completeSent: false,
    };
    ledger.artifacts.set(art.id, art);
    const upload = new URL(created.body.upload.url);
    if (!ok(await send(ctx, "PUT", upload.pathname, { rawBody: bytes, headers: { "content-type": "application/octet-stream" } }))) return;
    art.completeSent = true;
    if (!ok(await send(ctx, "POST", `${job}/artifacts/${art.id}/complete`, { token: uploader.token }))) return;
    art.completeAcked = true;
  }
}

async function getAll(api: Caller, token: string, path: string): Promise<Json[]> {
  const r = await api.call("GET", path, { token });
  if (r.status !== 200) throw new Error(`GET ${path}: ${r.status} ${r.text}`);
  return r.body;
}

/** Every build, paging with the cursor header. */
async function allBuilds(api: Caller, token: string): Promise<Json[]> {
  const out: Json[] = [];
  let path = "/v1/builds?limit=200";
  for (;;) {
    const r = await api.call("GET", path, { token });
    if (r.status !== 200) throw new Error(`GET builds: ${r.status}`);
    out.push(...r.body);
    const next = r.headers.get("x-next-cursor");
    if (!next) return out;
    path = `/v1/builds?limit=200&cursor=${encodeURIComponent(next)}`;
  }
}

async function verify(api: Caller, token: string, ledger: Ledger, round: number): Promise<void> {
  const why = `after kill ${round}`;
  const users = await getAll(api, token, "/v1/users");
  const emails = users.map((u) => u.email);
  for (const email of ledger.invites.acked) expect(emails, `${why}: acked invite ${email}`).toContain(email);
  for (const email of emails) if (email !== "owner@example.com") expect(ledger.invites.sent.has(email), `${why}: unknown user ${email}`).toBe(true);
  expect(new Set(emails).size).toBe(emails.length);

  const projects = new Set((await getAll(api, token, "/v1/projects")).map((p) => p.id));
  for (const [id, p] of ledger.projects) if (p.acked) expect(projects.has(id), `${why}: acked project ${id}`).toBe(true);
  for (const [pipelineId, projectId] of ledger.pipelines) {
    const pipelines = (await getAll(api, token, `/v1/projects/${projectId}/pipelines`)).map((p) => p.id);
    expect(pipelines, `${why}: acked pipeline ${pipelineId}`).toContain(pipelineId);
  }

  const builds = await allBuilds(api, token);
  const byId = new Map(builds.map((b) => [b.id, b]));
  // No build without its project; per project the numbers are exactly 1..n.
  const numbers = new Map<string, number[]>();
  for (const b of builds) {
    expect(projects.has(b.project_id), `${why}: build ${b.id} without its project`).toBe(true);
    numbers.set(b.project_id, [...(numbers.get(b.project_id) ?? []), b.build_number]);
  }
  for (const [projectId, list] of numbers) {
    expect(
      list.sort((x, y) => x - y),
      `${why}: build numbers of ${projectId}`,
    ).toEqual(Array.from({ length: list.length }, (_, i) => i + 1));
  }
  for (const rec of ledger.builds.values()) {
    const b = byId.get(rec.id);
    expect(b, `${why}: acked build ${rec.id}`).toBeDefined();
    expect(b.build_number).toBe(rec.number);
    expect(b.project_id).toBe(rec.projectId);
    const level = LEVEL[b.status];
    expect(level, `${why}: build ${rec.id} is ${b.status}`).toBeDefined();
    // A claim in flight at the kill may have assigned a build the ledger still has as queued.
    const sent = rec.sent === 0 ? LEVEL.assigned! : rec.sent;
    expect(level, `${why}: build ${rec.id} ${b.status}, acked ${rec.acked}, sent ${rec.sent}`).toBeGreaterThanOrEqual(rec.acked);
    expect(level).toBeLessThanOrEqual(sent);
    if (rec.chunks.length > 0) {
      const log = (await api.call("GET", `/v1/builds/${rec.id}/logs`, { token })).text;
      // The stored log is the first k chunks sent, each whole, with k at least the number acknowledged.
      const k = Array.from({ length: rec.chunks.length + 1 }, (_, i) => rec.chunks.slice(0, i).join("")).indexOf(log);
      expect(k, `${why}: log of ${rec.id} (${log.length} bytes) is not a whole-chunk prefix of what was sent`).toBeGreaterThanOrEqual(0);
      expect(k, `${why}: log chunks of ${rec.id}`).toBeGreaterThanOrEqual(rec.chunksAcked);
    }
  }

  const runners = new Map((await getAll(api, token, "/v1/runners")).map((r) => [r.id, r]));
  for (const [id, runnerToken] of ledger.runners) {
    expect(runners.has(id), `${why}: acked runner ${id}`).toBe(true);
    const hb = await api.call("POST", `/v1/runners/${id}/heartbeat`, { token: runnerToken, body: {} });
    expect(hb.status, `${why}: the token of runner ${id} still works`).toBe(200);
  }

  for (const art of ledger.artifacts.values()) {
    const listed = (await getAll(api, token, `/v1/builds/${art.buildId}/artifacts`)).map((a) => a.id);
    if (art.completeAcked) expect(listed, `${why}: acked artifact ${art.id}`).toContain(art.id);
    // Only complete makes an artifact available: an upload the kill interrupted never shows up by itself.
    if (!art.completeSent) expect(listed, `${why}: artifact ${art.id} available without a complete`).not.toContain(art.id);
    if (!listed.includes(art.id)) continue;
    // Available means whole: the bytes read back are the bytes sent.
    const link = await api.call("POST", `/v1/artifacts/${art.id}/download-link`, { token });
    expect(link.status).toBe(200);
    const res = await fetch(link.body.url);
    const body = Buffer.from(await res.arrayBuffer());
    expect(res.status).toBe(200);
    expect(body.length).toBe(art.size);
    expect(createHash("sha256").update(body).digest("hex")).toBe(art.sha256);
  }

  const network = (await api.call("GET", "/v1/settings/external-access/network", { token })).body.settings;
  if (ledger.network.ackedLast >= 0) {
    const n = Number(/ci-(\d+)\./.exec(network.public_url)?.[1]);
    expect(n, `${why}: network settings`).toBeGreaterThanOrEqual(ledger.network.ackedLast);
    expect(n).toBeLessThanOrEqual(ledger.network.sentLast);
  }
}

describe("SIGKILL with writes in flight", () => {
  it("keeps every acknowledged write across three kills at random moments, and nothing half-applied", async () => {
    const d: ReadyDaemon = await startReadyDaemon({ HANGAR_LOG_REQUESTS: "0" });
    daemons.push(d.daemon);
    dataDir = d.dataDir;
    const ledger = new Ledger();
    const setup = d.api;
    const shared = await setup.call("POST", "/v1/projects", {
      token: d.ownerToken,
      body: { name: "shared", repo_url: "https://git.example.com/s.git", config_path: null },
    });
    const sharedPipeline = await setup.call("POST", `/v1/projects/${shared.body.id}/pipelines`, {
      token: d.ownerToken,
      body: { name: "ci", config: { platform: "android", steps: [{ name: "s", run: "true" }] } },
    });
    const reg = await setup.call("POST", "/v1/runners/register", {
      token: d.ownerToken,
      body: { name: "worker", capabilities: { platforms: ["android"] } },
    });
    ledger.projects.set(shared.body.id, { acked: true });
    ledger.pipelines.set(sharedPipeline.body.id, shared.body.id);
    ledger.runners.set(reg.body.id, reg.body.token);

    // The uploader holds one running iOS build on the shared project, to attach artifacts to.
    const iosPipeline = await setup.call("POST", `/v1/projects/${shared.body.id}/pipelines`, {
      token: d.ownerToken,
      body: { name: "ios", config: { platform: "ios", steps: [{ name: "s", run: "true" }] } },
    });
    const upReg = await setup.call("POST", "/v1/runners/register", {
      token: d.ownerToken,
      body: { name: "uploader", capabilities: { platforms: ["ios"] } },
    });
    const upBuild = await setup.call("POST", `/v1/projects/${shared.body.id}/builds`, {
      token: d.ownerToken,
      body: { pipeline_id: iosPipeline.body.id, commit_sha: DEFAULT_SHA },
    });
    expect((await setup.call("POST", `/v1/runners/${upReg.body.id}/claim`, { token: upReg.body.token })).body.build_id).toBe(upBuild.body.id);
    const upRunning = await setup.call("POST", `/v1/runners/${upReg.body.id}/jobs/${upBuild.body.id}/status`, {
      token: upReg.body.token,
      body: { status: "running" },
    });
    expect(upRunning.status).toBe(200);
    ledger.pipelines.set(iosPipeline.body.id, shared.body.id);
    ledger.runners.set(upReg.body.id, upReg.body.token);
    ledger.builds.set(upBuild.body.id, {
      id: upBuild.body.id,
      projectId: shared.body.id,
      number: upBuild.body.build_number,
      acked: LEVEL.running!,
      sent: LEVEL.running!,
      chunks: [],
      chunksAcked: 0,
    });
    const uploader = { id: upReg.body.id as string, token: upReg.body.token as string, buildId: upBuild.body.id as string };

    let daemon = d.daemon;
    const seed = Date.now();
    // Each kill comes a random time after the round has made some progress (the first one: a finished build
    // and a completed upload, so every kind of write has been acknowledged at least once).
    const killAfter = [seed % 400, (seed >> 3) % 500, (seed >> 5) % 200];
    const succeeded = () => [...ledger.builds.values()].filter((b) => b.acked === LEVEL.succeeded).length;
    const completed = () => [...ledger.artifacts.values()].filter((a) => a.completeAcked).length;
    for (let round = 1; round <= killAfter.length; round++) {
      const start = { acks: ledger.acks, succeeded: succeeded(), completed: completed() };
      const api = daemonCaller(daemon.url);
      const ctx: Ctx = {
        api,
        ownerToken: d.ownerToken,
        alive: true,
        ledger,
        sharedProject: shared.body.id,
        sharedPipeline: sharedPipeline.body.id,
        runner: reg.body,
        uploader,
        round,
      };
      const loops = [inviteLoop, projectLoop, triggerLoop, triggerLoop, registerLoop, networkLoop, runnerLoop, artifactLoop].map((loop) => loop(ctx));
      await waitFor(`progress in round ${round}`, () =>
        round === 1
          ? succeeded() > start.succeeded && completed() > start.completed && ledger.acks - start.acks >= 50
          : ledger.acks - start.acks >= 30,
      );
      await new Promise((r) => setTimeout(r, killAfter[round - 1]));
      // The kill lands while every loop has a request in flight.
      expect(await daemon.stop("SIGKILL")).toBeNull();
      expect(daemon.proc.signalCode).toBe("SIGKILL");
      ctx.alive = false;
      await Promise.all(loops);
      expect(ledger.rejected, `refused writes before kill ${round} (seed ${seed}): ${JSON.stringify(ledger.rejected)}`).toEqual([]);

      daemon = await startDaemon(d.env);
      daemons.push(daemon);
      const after = daemonCaller(daemon.url);
      await verify(after, d.ownerToken, ledger, round);
    }
    // The burst really wrote: every kind has acknowledged writes to check.
    expect(ledger.invites.acked.size).toBeGreaterThan(0);
    expect([...ledger.builds.values()].filter((b) => b.acked === LEVEL.succeeded).length).toBeGreaterThan(0);
    expect([...ledger.artifacts.values()].some((a) => a.completeAcked)).toBe(true);
    expect(ledger.runners.size).toBeGreaterThan(1);
    expect(daemon.stderr()).not.toMatch(/unhandled/i);
  }, 60_000);
});
