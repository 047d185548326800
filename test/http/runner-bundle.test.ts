// GET /runner/hangar-runner.mjs (docs/api.md §9): served from the host's file with revalidation headers, public,
// and a clear 503 runner_bundle_missing while the file is not built or on a host that has none.
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { defaultRunnerBundlePath, hangarPackageRoot, nodeRunnerBundle } from "../../src/runtime/runner-bundle.ts";
import { makeTestApp } from "../helpers/app.ts";
import { PROJECT_ROOT } from "../helpers/daemon.ts";

const scratch = mkdtempSync(join(tmpdir(), "hangar-runner-bundle-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("GET /runner/hangar-runner.mjs", () => {
  it("answers 503 runner_bundle_missing until the file is built, then serves it to anyone with ETag revalidation", async () => {
    const path = join(scratch, "hangar-runner.mjs");
    const t = await makeTestApp({ deps: { runnerBundle: nodeRunnerBundle(path) } });

    const missing = await t.call("GET", "/runner/hangar-runner.mjs");
    expect(missing.status).toBe(503);
    expect(missing.body.code).toBe("runner_bundle_missing");
    expect(missing.body.message).toContain("npm install");
    expect(missing.headers.get("content-type")).toContain("application/json");

    writeFileSync(path, "#!/usr/bin/env node\nconsole.log('first');\n");
    // No credential at all: a new machine downloads it before it has any.
    const first = await t.call("GET", "/runner/hangar-runner.mjs", { peer: "203.0.113.9" });
    expect(first.status).toBe(200);
    expect(first.text).toBe("#!/usr/bin/env node\nconsole.log('first');\n");
    expect(first.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(first.headers.get("cache-control")).toBe("no-cache");
    expect(first.headers.get("x-content-type-options")).toBe("nosniff");
    expect(first.headers.get("content-disposition")).toBe('attachment; filename="hangar-runner.mjs"');
    expect(first.headers.get("last-modified")).toMatch(/GMT$/);
    const etag = first.headers.get("etag")!;
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{32}"$/);

    const unchanged = await t.call("GET", "/runner/hangar-runner.mjs", { headers: { "if-none-match": `"other", ${etag}` } });
    expect(unchanged.status).toBe(304);
    expect(unchanged.text).toBe("");
    expect(unchanged.headers.get("etag")).toBe(etag);

    // A rebuild (written beside and renamed into place, as scripts/build.mjs does) is served at once.
    writeFileSync(`${path}.tmp`, "console.log('second build');\n");
    renameSync(`${path}.tmp`, path);
    const rebuilt = await t.call("GET", "/runner/hangar-runner.mjs", { headers: { "if-none-match": etag } });
    expect(rebuilt.status).toBe(200);
    expect(rebuilt.text).toBe("console.log('second build');\n");
    expect(rebuilt.headers.get("etag")).not.toBe(etag);

    rmSync(path);
    const removed = await t.call("GET", "/runner/hangar-runner.mjs");
    expect(removed.status).toBe(503);
    expect(removed.body.code).toBe("runner_bundle_missing");
  });

  it("answers 503 runner_bundle_missing on a host that serves none (the Workers entry passes no runnerBundle)", async () => {
    const t = await makeTestApp({ deps: { runnerBundle: undefined } });
    const res = await t.call("GET", "/runner/hangar-runner.mjs");
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ code: "runner_bundle_missing", message: expect.stringContaining("does not serve the standalone runner") });
  });

  it("looks for dist/hangar-runner.mjs of this installation, from the sources and from the CLI bundle's chunks", () => {
    expect(defaultRunnerBundlePath()).toBe(join(PROJECT_ROOT, "dist", "hangar-runner.mjs"));
    expect(hangarPackageRoot(join(PROJECT_ROOT, "dist", "chunks", "node-abc123.mjs"))).toBe(PROJECT_ROOT.replace(/\/$/, ""));
    expect(hangarPackageRoot(join(PROJECT_ROOT, "dist", "hangar.cjs"))).toBe(PROJECT_ROOT.replace(/\/$/, ""));
    expect(hangarPackageRoot(join(scratch, "a", "b.mjs"))).toBeUndefined();
  });
});
