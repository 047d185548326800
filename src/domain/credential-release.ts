import { ApiError } from "../errors.ts";
import type { BuildRow } from "./builds.ts";
import type { ProjectRow } from "./projects.ts";

/**
 * THE release check for signing material and secret variables (CONTRACT §5): every runner call that hands out
 * either goes through here, so the rules live in one place. A pull request from a fork runs code its author
 * controls, so nothing secret ever reaches it. (Branch protection joins this function; checkout-auth does not
 * call it: every build of the project may clone.)
 */
export function assertCredentialsReleasable(build: Pick<BuildRow, "fromFork">, _project: Pick<ProjectRow, "id">): void {
  if (build.fromFork) {
    throw new ApiError(403, "secrets_withheld", "this build is of a pull request from a fork: signing material and secrets are withheld");
  }
}
