import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { cacheQuerySchema, cacheUploadSchema, createCacheUpload, findCacheEntry } from "../../domain/caches/shared-caches.ts";
import { requireJobCaller } from "../middleware/auth.ts";
import { jsonBody, queryParams } from "../validate.ts";
import { apiDoc } from "../route-docs.ts";
import * as json from "../responses.ts";

const CACHES = "/v1/runners/:runner_id/jobs/:job_id/caches";

/** Shared caches of a job (docs/api.md §16): presigned URLs into the instance's S3/R2 bucket, per project and trust. */
export function cachesRoutes(deps: AppDeps) {
  const jobCaller = requireJobCaller(deps);
  return new Hono<AppEnv>()
    .post(
      CACHES,
      apiDoc({
        summary: "Save a shared cache entry: a presigned PUT for its archive (visible once uploaded, at the next lookup)",
        responses: { 200: json.CacheUploadJson },
        errors: { 409: ["job_not_active", "invalid_state"] },
        example: { body: { key: "gradle-linux-3f2a", size_bytes: 104857600, sha256: "0".repeat(64) } },
      }),
      jobCaller,
      jsonBody(cacheUploadSchema),
      async (c) => c.json(await createCacheUpload(deps, { ...c.req.valid("json"), runnerId: c.get("runnerId"), jobId: c.req.param("job_id") })),
    )
    .get(
      CACHES,
      apiDoc({
        summary: "Find a shared cache entry: the exact key, else the newest starting with a restore key, in order",
        responses: { 200: json.CacheHitJson },
        errors: { 404: ["not_found"], 409: ["job_not_active", "invalid_state"] },
        example: { query: { key: "gradle-linux-3f2a", restore_key: "gradle-linux-" } },
      }),
      jobCaller,
      queryParams(cacheQuerySchema),
      async (c) => {
        const query = c.req.valid("query");
        return c.json(
          await findCacheEntry(deps, { runnerId: c.get("runnerId"), jobId: c.req.param("job_id"), key: query.key, restoreKeys: query.restore_key }),
        );
      },
    );
}
