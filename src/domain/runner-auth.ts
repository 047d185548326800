import { eq, sql } from "drizzle-orm";
import { runners } from "../db/schema/index.ts";
import type { Db } from "../db/types.ts";
import type { AppDeps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { sha256Hex } from "./crypto.ts";

export type RunnerRow = typeof runners.$inferSelect;

function prepareRunnerLookup(db: Db) {
  return db.select().from(runners).where(eq(runners.tokenHash, sql.placeholder("tokenHash"))).prepare();
}

// Every runner call (claims above all) runs this lookup: built once per database handle, as the session lookup.
const runnerLookups = new WeakMap<Db, ReturnType<typeof prepareRunnerLookup>>();

/**
 * Token hash → runner id, remembered for a minute per database handle. A runner's token never changes and
 * runners are never deleted, so a remembered answer cannot go stale in a way that matters; everything else the
 * runner's calls need (status, capabilities) is read fresh by the statements themselves. Only ids that matched
 * are remembered, so an unknown token always reaches the database.
 */
const RUNNER_ID_CACHE_MS = 60_000;
const RUNNER_ID_CACHE_MAX = 10_000;
const runnerIdCaches = new WeakMap<Db, Map<string, { runnerId: string; until: number }>>();

/** The id of the runner owning a token; the hot path of every runner call (claims above all). */
export async function authenticateRunnerId(deps: Pick<AppDeps, "db">, token: string): Promise<string> {
  const tokenHash = await sha256Hex(token);
  let cache = runnerIdCaches.get(deps.db);
  if (!cache) {
    cache = new Map();
    runnerIdCaches.set(deps.db, cache);
  }
  const now = performance.now();
  const hit = cache.get(tokenHash);
  if (hit && hit.until > now) return hit.runnerId;
  const runner = await lookupRunner(deps, tokenHash);
  if (cache.size >= RUNNER_ID_CACHE_MAX) cache.clear();
  cache.set(tokenHash, { runnerId: runner.id, until: now + RUNNER_ID_CACHE_MS });
  return runner.id;
}

/** The runner owning a token hash. Lookup is by SHA-256, so the comparison never touches the plaintext. */
async function lookupRunner(deps: Pick<AppDeps, "db">, tokenHash: string): Promise<RunnerRow> {
  let lookup = runnerLookups.get(deps.db);
  if (!lookup) {
    lookup = prepareRunnerLookup(deps.db);
    runnerLookups.set(deps.db, lookup);
  }
  const runner = await lookup.get({ tokenHash });
  if (!runner) throw new ApiError(401, "invalid_runner_token", "the runner token is not valid");
  return runner;
}
