/**
 * The Cloudflare Workers entry (wrangler.example.toml). The same handler set as the Node daemon, over the
 * web-only libSQL client: the database is a libSQL server (sqld or Turso), the key comes from a secret, and
 * nothing is loopback because a Worker never sees a socket. Migrations are applied from a machine with
 * `HANGAR_DATABASE_URL=… npx hangar migrate`; a Worker cannot read the drizzle/ folder.
 */
import { drizzle } from "drizzle-orm/libsql/web";
import type { ExecutionContext, Hono } from "hono";
import { createApp } from "../app.ts";
import { loadConfig } from "../config.ts";
import { BusyRetryClient } from "../db/busy.ts";
import * as schema from "../db/schema/index.ts";
import { systemClock, type AppDeps, type AppEnv } from "../deps.ts";
import { base64UrlToBytes, createSecretBox } from "../domain/common/crypto.ts";
import type { GitClient } from "../domain/projects/git.ts";
import { JobSignal } from "../domain/builds/job-signal.ts";
import { createGuardedFetch } from "../domain/common/outbound.ts";
import { runMaintenance } from "../domain/setup/maintenance.ts";
import { runOutboxOnce } from "../domain/events/outbox.ts";
import { ApiError, describeError } from "../errors.ts";
import { createS3Store } from "../storage/s3.ts";
import type { ArtifactStore, StoreTarget } from "../storage/types.ts";
import { createPerCallClient } from "./worker-db.ts";

/** Bindings: the HANGAR_* vars of wrangler.toml plus the secrets HANGAR_MASTER_KEY and HANGAR_DATABASE_AUTH_TOKEN. */
export interface WorkerEnv {
  /** 32 random bytes, base64 or base64url (`openssl rand -base64 32`), set with `wrangler secret put`. */
  HANGAR_MASTER_KEY?: string;
  [binding: string]: unknown;
}

/** Workers cannot spawn git; branch resolution answers 422 source_unreachable there (pass commit_sha instead). */
const unavailableGit: GitClient = {
  lsRemote: async () => ({ ok: false, reason: "git is not available on Workers" }),
};

/** Artifacts on Workers live in S3 or R2 (through aws4fetch); there is no local disk to write to. */
function openWorkerArtifactStore(target: StoreTarget, fetchFn: typeof fetch): ArtifactStore {
  if (target.provider === "local") {
    throw new ApiError("internal_error", "local-disk artifact storage is not available on Workers; configure S3 or R2");
  }
  return createS3Store(target, { fetch: fetchFn, now: () => systemClock.now() });
}

function stringBindings(env: WorkerEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) if (typeof value === "string") out[key] = value;
  return out;
}

interface Built {
  app: Hono<AppEnv>;
  deps: AppDeps;
}

async function build(env: WorkerEnv): Promise<Built> {
  const config = loadConfig(stringBindings(env));
  if (!/^(libsql|https?):\/\//.test(config.databaseUrl)) {
    throw new Error("HANGAR_DATABASE_URL must be a libsql:// or https:// URL on Workers");
  }
  const key = base64UrlToBytes((env.HANGAR_MASTER_KEY ?? "").trim());
  if (key.length !== 32) throw new Error("HANGAR_MASTER_KEY must hold 32 bytes, base64-encoded");
  const deps: AppDeps = {
    // A fresh client per statement: nothing shared between concurrent requests (worker-db.ts says why); busy and
    // locked answers retried with backoff and write batches begun IMMEDIATE, as on the daemon (src/db/busy.ts).
    db: drizzle({ client: new BusyRetryClient(createPerCallClient({ url: config.databaseUrl, authToken: config.databaseAuthToken })), schema }),
    clock: systemClock,
    config,
    secrets: await createSecretBox(key),
    // No socket on Workers: nothing is loopback, so local login and local-mode writes are refused (docs/api.md §3).
    getPeerAddress: () => undefined,
    log: (record) => console.log(JSON.stringify(record)),
    // The guard without DNS (Workers has none to consult): literals, localhost, scheme, redirects, limits.
    fetch: createGuardedFetch(globalThis.fetch.bind(globalThis), config.outboundAllow),
    git: unavailableGit,
    jobSignal: new JobSignal(),
    openArtifactStore: (target) =>
      openWorkerArtifactStore(
        target,
        createGuardedFetch(globalThis.fetch.bind(globalThis), config.outboundAllow, { timeoutMs: null, maxResponseBytes: null }),
      ),
  };
  return { app: createApp(deps), deps };
}

/**
 * Deliveries per cron pass. Every database statement and every send is a subrequest on Workers, and one
 * invocation may make only so many (50 on the free plan): the maintenance jobs and 10 deliveries (a send and a
 * write each) stay under it. What is left waits for the next minute.
 */
const CRON_OUTBOX_LIMIT = 10;

async function cronPass(deps: AppDeps): Promise<void> {
  await runMaintenance(deps);
  try {
    // A lease owner of its own per pass: a pass cut short leaves leases that expire (OUTBOX_LEASE_MS) and are retried.
    await runOutboxOnce(deps, `worker-cron-${crypto.randomUUID()}`, { limit: CRON_OUTBOX_LIMIT });
  } catch (err) {
    deps.log({ time: new Date().toISOString(), level: "error", msg: "outbox pass failed", error: describeError(err) });
  }
}

// Built once per isolate, on the first request: the env is only known inside fetch (Unkey's worker.ts).
// Check-then-set, never a shared promise: a request awaiting a promise that another request's context settles is
// cancelled by workerd when that other request ends first, so concurrent first requests each build their own and
// the first one done is kept. A failed build is not kept: a fixed binding takes effect on the next request.
let built: Built | null = null;

async function ensureBuilt(env: WorkerEnv): Promise<Built> {
  if (built) return built;
  const mine = await build(env);
  built ??= mine;
  return built;
}

export default {
  async fetch(request: Request, env: WorkerEnv, ctx: ExecutionContext): Promise<Response> {
    let app: Hono<AppEnv>;
    try {
      app = (await ensureBuilt(env)).app;
    } catch (err) {
      console.error(JSON.stringify({ level: "error", msg: "worker start failed", error: String(err) }));
      return Response.json({ code: "internal_error", message: "the service is not configured" }, { status: 500 });
    }
    return app.fetch(request, env, ctx);
  },

  /**
   * Cron trigger (wrangler.example.toml): the periodic jobs the Node daemon runs on its sweep timer, then one pass
   * of the outbox (notifications, commit statuses), which the daemon sends from a loop a Worker does not have.
   */
  async scheduled(_event: unknown, env: WorkerEnv, ctx: ExecutionContext): Promise<void> {
    const { deps } = await ensureBuilt(env);
    ctx.waitUntil(cronPass(deps));
  },
};
