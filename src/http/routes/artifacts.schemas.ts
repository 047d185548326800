import { z } from "zod";
import { createArtifactBodySchema } from "../../protocol/runner.ts";

/** POST /v1/runners/{runner_id}/jobs/{job_id}/artifacts (docs/api.md §7): the wire protocol's body (src/protocol/runner.ts). */
export const createArtifactSchema = z.object(createArtifactBodySchema.shape);
