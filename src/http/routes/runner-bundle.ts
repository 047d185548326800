import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";

export const RUNNER_BUNDLE_PATH = "/runner/hangar-runner.mjs";

/**
 * GET /runner/hangar-runner.mjs (docs/api.md §9): the standalone runner, one JavaScript file for Node 20+. Public:
 * it holds no secret (a runner still needs a token from an owner or admin), and a new machine fetches it with
 * plain curl before it has any credential. `no-cache` with a strong ETag: every download revalidates, so a
 * proxy or browser never hands out the runner of an older daemon, and an unchanged one costs a 304.
 */
export function runnerBundleRoutes(deps: AppDeps) {
  return new Hono<AppEnv>().get(RUNNER_BUNDLE_PATH, async (c) => {
    if (!deps.runnerBundle) {
      throw new ApiError(
        "runner_bundle_missing",
        "this deployment does not serve the standalone runner: download it from a Node installation of Hangar, or run `npx hangar runner` from a clone",
      );
    }
    const bundle = await deps.runnerBundle();
    if (!bundle) {
      throw new ApiError(
        "runner_bundle_missing",
        "the standalone runner is not built on this server: run `npm install` (or `npm run build`) in the Hangar installation, then download it again",
      );
    }
    const headers = {
      "content-type": "text/javascript; charset=utf-8",
      "content-disposition": 'attachment; filename="hangar-runner.mjs"',
      "cache-control": "no-cache",
      etag: bundle.etag,
      "last-modified": new Date(bundle.modifiedAt * 1000).toUTCString(),
      "x-content-type-options": "nosniff",
    };
    const match = c.req.header("if-none-match");
    if (match?.split(",").some((t) => t.trim().replace(/^W\//, "") === bundle.etag || t.trim() === "*")) {
      return c.body(null, 304, headers);
    }
    return c.body(bundle.bytes, 200, headers);
  });
}
