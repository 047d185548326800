import { eq, sql } from "drizzle-orm";
import { runners } from "../../db/schema/index.ts";
import type { Db } from "../../db/types.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { sha256Hex } from "../common/crypto.ts";

export type RunnerRow = typeof runners.$inferSelect;

function prepareRunnerLookup(db: Db) {
  return db.select().from(runners).where(eq(runners.tokenHash, sql.placeholder("tokenHash"))).prepare();
}

// Every runner call (claims above all) runs this lookup: built once per database handle, as the session lookup.
const runnerLookups = new WeakMap<Db, ReturnType<typeof prepareRunnerLookup>>();

/**
 * The id of the runner owning a token; the hot path of every runner call (claims above all). Nothing is
 * remembered between calls: a removed runner or a rotated token must fail at once on every daemon sharing the
 * database (CONTRACT §6, no positive cache window), and the lookup is one indexed read of a prepared statement.
 */
export async function authenticateRunnerId(deps: Pick<AppDeps, "db">, token: string): Promise<string> {
  return (await lookupRunner(deps, await sha256Hex(token))).id;
}

/** The runner owning a token, or null (for routes that also take a user session). */
export async function findRunnerByToken(deps: Pick<AppDeps, "db">, token: string): Promise<RunnerRow | null> {
  return lookupRunner(deps, await sha256Hex(token)).catch((err: unknown) => {
    if (err instanceof ApiError && err.code === "invalid_runner_token") return null;
    throw err;
  });
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
