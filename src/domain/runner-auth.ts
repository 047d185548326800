import { eq } from "drizzle-orm";
import { runners } from "../db/schema/index.ts";
import type { AppDeps } from "../deps.ts";
import { ApiError } from "../errors.ts";
import { sha256Hex } from "./crypto.ts";

export type RunnerRow = typeof runners.$inferSelect;

/** The runner owning a token. Lookup is by SHA-256, so the comparison never touches the plaintext. */
export async function authenticateRunner(deps: Pick<AppDeps, "db">, token: string): Promise<RunnerRow> {
  const runner = await deps.db.select().from(runners).where(eq(runners.tokenHash, await sha256Hex(token))).get();
  if (!runner) throw new ApiError(401, "invalid_runner_token", "the runner token is not valid");
  return runner;
}
