import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { toCallResult, type CallOptions, type CallResult } from "./app.ts";
import { completeLocalSetup } from "./factories.ts";
import type { TestApp } from "./app.ts";

/**
 * Factories that go through the public API (docs/decisions.md): projects, pipelines, runners and queued builds.
 * They take anything with `call(method, path, options)`: a TestApp, or `daemonCaller(url)` for a real daemon.
 * Each throws with the status and body when the API refuses, so a broken precondition fails loudly.
 */
export interface Caller {
  call(method: string, path: string, options?: CallOptions): Promise<CallResult>;
}

/** A Caller over real HTTP (the spawned daemon of test/helpers/daemon.ts). */
export function daemonCaller(baseUrl: string): Caller {
  return {
    async call(method, path, o = {}) {
      const headers: Record<string, string> = { ...o.headers };
      if (o.token !== undefined) headers.authorization = `Bearer ${o.token}`;
      let body: RequestInit["body"] = o.rawBody;
      if (o.body !== undefined) {
        body = JSON.stringify(o.body);
        headers["content-type"] ??= "application/json";
      }
      return toCallResult(await fetch(baseUrl + path, { method, headers, body }));
    },
  };
}

async function expectOk(what: string, res: Promise<CallResult>, status = 200): Promise<CallResult> {
  const r = await res;
  if (r.status !== status) throw new Error(`${what}: ${r.status} ${r.text}`);
  return r;
}

export const DEFAULT_SHA = "0123456789abcdef0123456789abcdef01234567";

export interface PipelineConfigInput {
  platform?: "ios" | "android" | "macos" | "any";
  steps?: Array<{ name: string; run: string }>;
  artifacts?: Array<string | { path: string; when?: "on_success" | "always" }>;
  env?: Record<string, string>;
  timeout_s?: number;
  triggers?: Array<{ event: string; branches?: string[]; tags?: string[] }>;
  reports?: { junit: string[] };
  cache?: Array<{ key: string; paths: string[]; restore_keys?: string[] }>;
  workspace?: "persistent" | "fresh";
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API JSON shapes are asserted by the tests
type Json = any;

export async function createProject(
  c: Caller,
  token: string,
  overrides: { name?: string; repo_url?: string; default_branch?: string; config_path?: string | null } = {},
): Promise<Json> {
  // Pipelines stored in Hangar unless a test asks for a pipeline file (test/http/pipeline-files.test.ts does).
  const body = {
    name: overrides.name ?? `app-${crypto.randomUUID().slice(0, 8)}`,
    repo_url: overrides.repo_url ?? "https://git.example.com/app.git",
    config_path: null,
    ...overrides,
  };
  return (await expectOk("create project", c.call("POST", "/v1/projects", { token, body }))).body;
}

export async function createPipeline(c: Caller, token: string, projectId: string, config: PipelineConfigInput = {}, name = "build"): Promise<Json> {
  const body = {
    name,
    config: { platform: config.platform ?? "any", steps: config.steps ?? [{ name: "hello", run: "echo hello" }], ...config },
  };
  return (await expectOk("create pipeline", c.call("POST", `/v1/projects/${projectId}/pipelines`, { token, body }))).body;
}

/** Registers a runner; the answer carries `id` and the one-time `token`. */
export async function registerRunner(c: Caller, token: string, options: { name?: string; platforms?: string[] } = {}): Promise<Json> {
  const body = {
    name: options.name ?? `runner-${crypto.randomUUID().slice(0, 6)}`,
    capabilities: { platforms: options.platforms ?? ["ios", "android", "macos"] },
  };
  return (await expectOk("register runner", c.call("POST", "/v1/runners/register", { token, body }))).body;
}

/** Queues a build. A commit SHA is given by default so no git call happens; pass `commit_sha: undefined` to resolve. */
export async function queueBuild(
  c: Caller,
  token: string,
  projectId: string,
  pipelineId: string,
  options: { branch?: string; commit_sha?: string | undefined; trigger_ref?: string } = {},
): Promise<Json> {
  const body: Record<string, unknown> = { pipeline_id: pipelineId, commit_sha: DEFAULT_SHA, ...options };
  return (await expectOk("queue build", c.call("POST", `/v1/projects/${projectId}/builds`, { token, body }))).body;
}

/** One claim; `null` on 204. */
export async function claim(c: Caller, runner: { id: string; token: string }, waitS = 0): Promise<Json | null> {
  const r = await c.call("POST", `/v1/runners/${runner.id}/claim${waitS ? `?wait=${waitS}` : ""}`, { token: runner.token });
  if (r.status === 204) return null;
  if (r.status !== 200) throw new Error(`claim: ${r.status} ${r.text}`);
  return r.body;
}

export async function reportStatus(
  c: Caller,
  runner: { id: string; token: string },
  jobId: string,
  body: { status: string; exit_code?: number; step_results?: unknown[] },
): Promise<CallResult> {
  return c.call("POST", `/v1/runners/${runner.id}/jobs/${jobId}/status`, { token: runner.token, body });
}

export async function appendLog(c: Caller, runner: { id: string; token: string }, jobId: string, offset: number, text: string): Promise<CallResult> {
  return c.call("POST", `/v1/runners/${runner.id}/jobs/${jobId}/logs?offset=${offset}`, {
    token: runner.token,
    rawBody: text,
    headers: { "content-type": "text/plain; charset=utf-8" },
  });
}

/**
 * A ready instance with an owner, one project, one pipeline and one runner: the usual start of a build test.
 * `t` must be a fresh TestApp (it runs local setup).
 */
export async function buildWorld(
  t: TestApp,
  options: { repo_url?: string; platform?: PipelineConfigInput["platform"]; config?: PipelineConfigInput; platforms?: string[] } = {},
): Promise<{ ownerToken: string; project: Json; pipeline: Json; runner: Json }> {
  const { ownerToken } = await completeLocalSetup(t);
  const project = await createProject(t, ownerToken, options.repo_url ? { repo_url: options.repo_url } : {});
  const pipeline = await createPipeline(t, ownerToken, project.id, { platform: options.platform ?? "any", ...options.config });
  const runner = await registerRunner(t, ownerToken, { platforms: options.platforms });
  return { ownerToken, project, pipeline, runner };
}

/** A real git repository in a temp dir with a `main` branch (one commit); removed by `remove()`. */
export interface GitRepo {
  path: string;
  url: string;
  /** SHA of the tip of each branch created through this helper. */
  shas: Record<string, string>;
  commit(branch: string, files?: Record<string, string>): string;
  remove(): void;
}

export function makeGitRepo(files: Record<string, string> = { "README.md": "hello\n" }): GitRepo {
  const path = mkdtempSync(join(tmpdir(), "hangar-git-"));
  const git = (...args: string[]) =>
    execFileSync("git", args, {
      cwd: path,
      encoding: "utf8",
      env: { ...process.env, GIT_AUTHOR_NAME: "t", GIT_AUTHOR_EMAIL: "t@example.com", GIT_COMMITTER_NAME: "t", GIT_COMMITTER_EMAIL: "t@example.com" },
    }).trim();
  git("init", "-q", "-b", "main");
  const shas: Record<string, string> = {};
  const commit = (branch: string, more: Record<string, string> = {}) => {
    const exists = git("branch", "--list", branch) !== "";
    git("checkout", "-q", ...(exists ? [branch] : ["-b", branch]));
    for (const [name, content] of Object.entries(more)) writeFileSync(join(path, name), content);
    git("add", "-A");
    git("commit", "-q", "--allow-empty", "-m", `commit on ${branch}`);
    shas[branch] = git("rev-parse", "HEAD");
    return shas[branch];
  };
  for (const [name, content] of Object.entries(files)) writeFileSync(join(path, name), content);
  git("add", "-A");
  git("commit", "-q", "--allow-empty", "-m", "initial");
  shas.main = git("rev-parse", "HEAD");
  return { path, url: `file://${path}`, shas, commit, remove: () => rmSync(path, { recursive: true, force: true }) };
}
