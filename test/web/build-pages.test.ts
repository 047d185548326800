// The projects and builds pages through app.request(): what each role sees, the log windows and the live stream.
import { beforeAll, describe, expect, it } from "vitest";
import { makeTestApp, type TestApp } from "../helpers/app.ts";
import { appendLog, buildWorld, claim, queueBuild, reportStatus } from "../helpers/builds.ts";
import { userWithRole } from "../helpers/factories.ts";
import { page } from "../helpers/web.ts";

let t: TestApp;
let w: Awaited<ReturnType<typeof buildWorld>>;
let viewer: string;
let buildId: string;
const HOSTILE = "\u001b[31mred\u001b[0m <script>alert(1)</script> \u202Egpj.exe";

beforeAll(async () => {
  t = await makeTestApp({ config: { HANGAR_LOG_STREAM_MAX_S: "2" } });
  w = await buildWorld(t);
  viewer = (await userWithRole(t, "qa_viewer")).token;
  const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id, { branch: "feature/b" });
  buildId = b.id;
  await claim(t, w.runner);
  await reportStatus(t, w.runner, buildId, { status: "running" });
  await appendLog(t, w.runner, buildId, 0, `line one\n${HOSTILE}\nprogress 10%\rprogress 99%\nlast`);
});

describe("build and project pages", () => {
  it("a builder sees cancel and rerun; a qa_viewer sees neither, nor the trigger form; every outside string is escaped", async () => {
    const owner = await page(t, "GET", `/builds/${buildId}`, { session: w.ownerToken });
    expect(owner.status).toBe(200);
    expect(owner.text).toContain("Cancel build");
    expect(owner.text).toContain("Rerun");
    expect(owner.text).toContain("feature/b");
    const qa = await page(t, "GET", `/builds/${buildId}`, { session: viewer });
    expect(qa.status).toBe(200);
    expect(qa.text).not.toContain("Cancel build");
    expect(qa.text).not.toContain(">Rerun<");
    const project = await page(t, "GET", `/projects/${w.project.id}`, { session: viewer });
    expect(project.status).toBe(200);
    expect(project.text).not.toContain("Trigger build");
    const ownerProject = await page(t, "GET", `/projects/${w.project.id}`, { session: w.ownerToken });
    expect(ownerProject.text).toContain("Trigger build");
    for (const path of ["/builds", "/projects", `/builds?project_id=${w.project.id}&status=running`]) {
      expect((await page(t, "GET", path, { session: viewer })).status).toBe(200);
    }
  });

  it("each installable artifact has an Install link button, for a qa_viewer too; other files only a download", async () => {
    const upload = async (filename: string) => {
      const bytes = new TextEncoder().encode(`bytes of ${filename}`);
      const created = await t.call("POST", `/v1/runners/${w.runner.id}/jobs/${buildId}/artifacts`, {
        token: w.runner.token,
        body: { filename, size_bytes: bytes.length, content_type: "application/octet-stream" },
      });
      expect(created.status, created.text).toBe(200);
      const put = await t.app.request(new URL(created.body.upload.url).pathname, { method: "PUT", body: bytes }, { peerAddress: "127.0.0.1" });
      expect(put.status).toBe(200);
      const done = await t.call("POST", `/v1/runners/${w.runner.id}/jobs/${buildId}/artifacts/${created.body.artifact.id}/complete`, {
        token: w.runner.token,
      });
      expect(done.status, done.text).toBe(200);
      return created.body.artifact.id as string;
    };
    const apk = await upload("demo.apk");
    const report = await upload("report.txt");
    const qa = await page(t, "GET", `/builds/${buildId}`, { session: viewer });
    expect(qa.text).toContain(`action="/artifacts/${apk}/install-link"`);
    expect(qa.text).not.toContain(`action="/artifacts/${report}/install-link"`);
    expect(qa.text).toContain(`action="/builds/${buildId}/artifacts/${report}/download"`);
  });

  it("a qa_viewer's cancel or rerun POST is refused (403)", async () => {
    for (const action of ["cancel", "rerun"]) {
      const res = await page(t, "POST", `/builds/${buildId}/${action}`, { session: viewer });
      expect(res.status).toBe(403);
    }
  });

  it("serves the log tail aligned to a line start with the lines before it", async () => {
    const tail = await page(t, "GET", `/builds/${buildId}/log?tail=20`, { session: viewer });
    expect(tail.status).toBe(200);
    const start = Number(tail.headers.get("x-log-start-offset"));
    const before = Number(tail.headers.get("x-log-lines-before"));
    const full = await page(t, "GET", `/builds/${buildId}/log`, { session: viewer });
    expect(full.text.startsWith("line one\n")).toBe(true);
    const bytes = Buffer.from(full.text); // offsets count bytes, not characters
    expect(bytes.subarray(0, start).toString().split("\n").length - 1).toBe(before);
    expect(bytes.subarray(start).toString()).toBe(tail.text);
    // Chunks stored before their newline count existed (migration 0007) are counted by a scan: same answer.
    await t.opened.client.execute("UPDATE build_log_chunks SET newlines = NULL");
    const old = await page(t, "GET", `/builds/${buildId}/log?tail=20`, { session: viewer });
    expect(old.headers.get("x-log-lines-before")).toBe(String(before));
    expect(old.headers.get("x-log-start-offset")).toBe(String(start));
  });

  it("streams the log as Server-Sent Events whose ids are byte offsets, resuming from Last-Event-ID", async () => {
    const res = await t.app.request(
      `/builds/${buildId}/events`,
      { headers: { cookie: `__Host-hangar_session=${viewer}`, "last-event-id": "9" } },
      { peerAddress: "127.0.0.1" },
    );
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const reader = res.body!.getReader();
    let text = "";
    while (!text.includes("event: log")) text += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    const data = /event: log\ndata: (.*)\nid: (\d+)/.exec(text) ?? /event: log\nid: (\d+)\ndata: (.*)/.exec(text);
    expect(data).not.toBeNull();
    expect(text).toContain('"from":9');
    expect(text).not.toContain("line one");
  });

  it("a runner's chunk reaches an open stream; the stream's wake-up entry goes when the stream closes", async () => {
    const before = Buffer.byteLength((await t.call("GET", `/v1/builds/${buildId}/logs`, { token: w.ownerToken })).text);
    const res = await t.app.request(
      `/builds/${buildId}/events`,
      { headers: { cookie: `__Host-hangar_session=${viewer}`, "last-event-id": String(before) } },
      { peerAddress: "127.0.0.1" },
    );
    const reader = res.body!.getReader();
    let text = "";
    while (!text.includes("event: build")) text += new TextDecoder().decode((await reader.read()).value);
    expect(t.deps.logSignal?.builds).toBe(1);
    expect((await appendLog(t, w.runner, buildId, before, "woken line\n")).status).toBe(200);
    while (!text.includes("woken line")) text += new TextDecoder().decode((await reader.read()).value);
    expect(text).toContain(`"from":${before}`);
    await reader.cancel();
    await expect.poll(() => t.deps.logSignal?.builds).toBe(0);
  });
});

describe("live-log streams per session", () => {
  it("holds at most 20 open per session (429 too_many_streams); another session is not affected; a closed one frees its place", async () => {
    const open = (session: string) =>
      t.app.request(`/builds/${buildId}/events`, { headers: { cookie: `__Host-hangar_session=${session}` } }, { peerAddress: "127.0.0.1" });
    const readers: ReadableStreamDefaultReader<Uint8Array>[] = [];
    for (let i = 0; i < 20; i++) {
      const res = await open(viewer);
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      await reader.read();
      readers.push(reader);
    }
    const over = await open(viewer);
    expect(over.status).toBe(429);
    expect(((await over.json()) as { code: string }).code).toBe("too_many_streams");
    const other = await open(w.ownerToken);
    expect(other.status).toBe(200);
    await other.body!.cancel();
    await readers.pop()!.cancel();
    await expect
      .poll(async () => {
        const res = await open(viewer);
        await res.body?.cancel();
        return res.status;
      })
      .toBe(200);
    for (const reader of readers) await reader.cancel();
  });
});
