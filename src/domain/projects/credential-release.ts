import { sql, type SQL } from "drizzle-orm";
import { ApiError } from "../../errors.ts";
import type { BuildRow } from "../builds/builds.ts";
import type { RunnerTrust } from "../../db/schema/constants.ts";
import { buildRef, refIsProtected } from "./project-secrets.ts";
import type { ProjectRow } from "./projects.ts";

/**
 * THE release check for signing material and secret variables (docs/runner-isolation.md): every runner call that
 * hands out either goes through here, so the rules live in one place. A pull request from a fork runs code its
 * author controls, so nothing secret ever reaches it; only builds queued as `protected` get them, and only on a
 * runner that is protected at this moment (one demoted while it holds the job gets nothing more); and the build's
 * ref must still match the project's protection, tags against the tag rules only. checkout-auth does not call it:
 * every build of the project may clone.
 */
export function assertCredentialsReleasable(
  build: Pick<BuildRow, "fromFork" | "branch" | "trust" | "triggerEvent" | "triggerRef">,
  project: ProjectRow,
  runnerTrust: RunnerTrust,
): void {
  if (build.fromFork || build.trust === "fork") {
    throw new ApiError("secrets_withheld", "this build is of a pull request from a fork: signing material and secrets are withheld");
  }
  const ref = buildRef(build);
  if (!refIsProtected(project, ref)) {
    throw new ApiError("secrets_withheld", `${ref.kind} ${JSON.stringify(ref.name)} is not protected: signing material and secrets are withheld`);
  }
  if (build.trust !== "protected") {
    throw new ApiError("secrets_withheld", "this build was queued as an open build: signing material and secrets are withheld");
  }
  if (runnerTrust !== "protected") {
    throw new ApiError("secrets_withheld", "this runner is open: signing material and secrets are withheld");
  }
}

/**
 * A new build's `trust` as an SQL expression over the `projects` row the build's INSERT … SELECT reads, so that
 * "the project holds signing material or a secret variable" is read in the statement that queues the build:
 * `fork` for a fork's pull request, `protected` when the project holds credentials and the ref matches its
 * protection (decided by the caller with the same globs), `open` otherwise (docs/runner-isolation.md).
 */
export function queuedTrustSql(
  project: ProjectRow,
  build: { branch: string; triggerEvent: string | null; triggerRef: string | null; fork: boolean },
): SQL {
  if (build.fork) return sql`'fork'`;
  if (!refIsProtected(project, buildRef(build))) return sql`'open'`;
  return sql`CASE WHEN projects.android_signing_sealed IS NOT NULL OR projects.ios_signing_sealed IS NOT NULL
    OR EXISTS (SELECT 1 FROM project_secrets WHERE project_secrets.project_id = projects.id) THEN 'protected' ELSE 'open' END`;
}
