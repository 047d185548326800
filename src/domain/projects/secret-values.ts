// A project's secret variables, opened: apart from their management (project-secrets.ts) so that projects.ts, which
// masks them in logs, needs nothing else of it.
import { asc, eq } from "drizzle-orm";
import { projectSecrets } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";

/** Every secret variable of a project, opened: for the runner's secrets call and for log masking. */
export async function openSecrets(deps: Pick<AppDeps, "db" | "secrets">, projectId: string): Promise<Record<string, string>> {
  const rows = await deps.db
    .select({ name: projectSecrets.name, valueSealed: projectSecrets.valueSealed })
    .from(projectSecrets)
    .where(eq(projectSecrets.projectId, projectId))
    .orderBy(asc(projectSecrets.name));
  const out: Record<string, string> = {};
  for (const row of rows) {
    try {
      out[row.name] = await deps.secrets.open(row.valueSealed);
    } catch {
      throw new ApiError("decryption_error", "a stored secret variable cannot be decrypted");
    }
  }
  return out;
}
