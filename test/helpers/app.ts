import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Context } from "hono";
import { afterAll } from "vitest";
import { createApp } from "../../src/app.ts";
import { loadConfig, type HangarConfig } from "../../src/config.ts";
import { openDb, type OpenDbOptions, type OpenedDb } from "../../src/db/client.ts";
import { migrateDb } from "../../src/db/migrate.ts";
import type { AppDeps } from "../../src/deps.ts";
import { createSecretBox, randomBytes } from "../../src/domain/common/crypto.ts";
import { openNodeArtifactStore } from "../../src/storage/node-stores.ts";
import { JobSignal } from "../../src/domain/builds/job-signal.ts";
import { createNodeGitClient } from "../../src/runtime/git.ts";
import { createNodeOutbound } from "../../src/runtime/outbound.ts";
import { createNodeMailSender } from "../../src/runtime/mail.ts";
import { checkWritableDir } from "../../src/runtime/writable-dir.ts";
import { nodeRunnerBundle } from "../../src/runtime/runner-bundle.ts";
import { nodeDiskSpace } from "../../src/runtime/disk-space.ts";
import { ManualClock } from "./clock.ts";

/** HANGAR_OUTBOUND_ALLOW for tests: the loopback services they start (OIDC, s3rver, git over HTTP). */
export const TEST_OUTBOUND_ALLOW = "127.0.0.1/32,::1/128";

/** What a test passes as Hono's env: the TCP peer address the app should see. */
export interface TestEnv {
  peerAddress?: string;
  /** Whether the client's end of the socket is the daemon's own OS user's (local sign-in); default true. */
  peerIsLocalUser?: boolean;
}

export interface TestApp {
  app: ReturnType<typeof createApp>;
  deps: AppDeps;
  clock: ManualClock;
  dataDir: string;
  dbPath: string;
  opened: OpenedDb;
  logs: Record<string, unknown>[];
  /** JSON request through app.request(); `peer` defaults to 127.0.0.1. */
  call(method: string, path: string, options?: CallOptions): Promise<CallResult>;
  close(): void;
}

export interface CallOptions {
  body?: unknown;
  /** Bearer token for the Authorization header. */
  token?: string;
  headers?: Record<string, string>;
  peer?: string;
  /** The client's socket belongs to another OS user than the daemon's (local sign-in refuses it). */
  peerIsOtherUser?: boolean;
  rawBody?: RequestInit["body"];
}

export interface CallResult {
  status: number;
  headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- test assertions read arbitrary JSON shapes
  body: any;
  text: string;
}

/**
 * A fully wired app on a real temporary libSQL file, migrated by the production migrator, with a
 * ManualClock and a throwaway key. Closed automatically after the test file.
 */
export async function makeTestApp(options: { config?: Record<string, string>; deps?: Partial<AppDeps>; db?: OpenDbOptions } = {}): Promise<TestApp> {
  const dataDir = mkdtempSync(join(tmpdir(), "hangar-test-"));
  const dbPath = join(dataDir, "hangar.db");
  // The real outbound guard, with loopback allowed: the tests' OIDC providers, S3 servers and git servers listen
  // on 127.0.0.1 (a test that checks refusals passes its own HANGAR_OUTBOUND_ALLOW).
  const config: HangarConfig = loadConfig({
    HANGAR_DATA_DIR: dataDir,
    HANGAR_LOG_REQUESTS: "0",
    HANGAR_OUTBOUND_ALLOW: TEST_OUTBOUND_ALLOW,
    // Runner affinity holds a new build for its warm runner for a few seconds of the clock, and a ManualClock does not
    // move by itself: off unless a test asks for it (test/http/affinity.test.ts).
    HANGAR_AFFINITY_WAIT_MS: "0",
    ...options.config,
  });
  const outbound = createNodeOutbound(config.outboundAllow);
  const opened = await openDb(`file:${dbPath}`, undefined, options.db);
  await migrateDb(opened.db);
  const clock = new ManualClock();
  const logs: Record<string, unknown>[] = [];
  const deps: AppDeps = {
    db: opened.db,
    clock,
    config,
    secrets: await createSecretBox(randomBytes(32)),
    getPeerAddress: (c: Context) => (c.env as TestEnv | undefined)?.peerAddress,
    isLocalUserSocket: async (c: Context) => (c.env as TestEnv | undefined)?.peerIsLocalUser !== false,
    log: (record) => logs.push(record),
    checkWritableDir,
    fetch: outbound.fetch,
    checkDestination: async (url) => ({ listed: (await outbound.resolve(url)).listed }),
    git: createNodeGitClient({ allow: config.outboundAllow }),
    sendMail: createNodeMailSender(outbound.resolve),
    jobSignal: new JobSignal(),
    openArtifactStore: (target) => openNodeArtifactStore(target, outbound.streamingFetch, deps.clock),
    // This checkout's dist/hangar-runner.mjs, as the daemon serves it (built by `npm install`).
    runnerBundle: nodeRunnerBundle(),
    diskSpace: nodeDiskSpace,
    ...options.deps,
  };
  const app = createApp(deps);
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    opened.close();
    void outbound.close();
    rmSync(dataDir, { recursive: true, force: true });
  };
  afterAll(close);

  const call = callerOf(app);

  return { app, deps, clock, dataDir, dbPath, opened, logs, call, close };
}

/** `TestApp.call` for an app: a JSON request through app.request(), `peer` defaulting to 127.0.0.1. */
function callerOf(app: ReturnType<typeof createApp>): TestApp["call"] {
  return async (method, path, o = {}) => {
    const headers: Record<string, string> = { ...o.headers };
    if (o.token !== undefined) headers.authorization = `Bearer ${o.token}`;
    let body: RequestInit["body"] = o.rawBody;
    if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers["content-type"] ??= "application/json";
    }
    const res = await app.request(path, { method, headers, body }, {
      peerAddress: o.peer ?? "127.0.0.1",
      peerIsLocalUser: o.peerIsOtherUser !== true,
    } satisfies TestEnv);
    return toCallResult(res);
  };
}

/**
 * A second daemon on `t`'s database file (docs/decisions.md, scale-out): its own connection, app and job signal,
 * sharing only the database (and the data directory, clock and key, as daemons of one deployment do). Closed with
 * `t` at the end of the file.
 */
export async function secondDaemon(t: TestApp): Promise<TestApp> {
  const opened = await openDb(`file:${t.dbPath}`);
  const deps: AppDeps = { ...t.deps, db: opened.db, jobSignal: new JobSignal(), metrics: undefined, logSignal: undefined };
  const app = createApp(deps);
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    opened.close();
  };
  afterAll(close);
  return { ...t, app, deps, opened, call: callerOf(app), close };
}

/** Reads a response whole: status, headers, text and, when it parses, the JSON body (else null). */
export async function toCallResult(res: Response): Promise<CallResult> {
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
}
