import { ApiError } from "../../errors.ts";
import type { BuildRow } from "../builds/builds.ts";
import { branchIsProtected } from "./project-secrets.ts";
import type { ProjectRow } from "./projects.ts";

/**
 * THE release check for signing material and secret variables (CONTRACT §5): every runner call that hands out
 * either goes through here, so the rules live in one place. A pull request from a fork runs code its author
 * controls, so nothing secret ever reaches it; and only builds of the project's protected branches (globs,
 * default `**`) get them at all. checkout-auth does not call it: every build of the project may clone.
 */
export function assertCredentialsReleasable(build: Pick<BuildRow, "fromFork" | "branch">, project: ProjectRow): void {
  if (build.fromFork) {
    throw new ApiError(403, "secrets_withheld", "this build is of a pull request from a fork: signing material and secrets are withheld");
  }
  if (!branchIsProtected(project, build.branch)) {
    throw new ApiError(403, "secrets_withheld", `branch ${JSON.stringify(build.branch)} is not protected: signing material and secrets are withheld`);
  }
}
