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

/** The runner owning a token. Lookup is by SHA-256, so the comparison never touches the plaintext. */
export async function authenticateRunner(deps: Pick<AppDeps, "db">, token: string): Promise<RunnerRow> {
  let lookup = runnerLookups.get(deps.db);
  if (!lookup) {
    lookup = prepareRunnerLookup(deps.db);
    runnerLookups.set(deps.db, lookup);
  }
  const runner = await lookup.get({ tokenHash: await sha256Hex(token) });
  if (!runner) throw new ApiError(401, "invalid_runner_token", "the runner token is not valid");
  return runner;
}
