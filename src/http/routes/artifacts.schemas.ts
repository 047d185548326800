import { z } from "zod";
import { ARTIFACT_KINDS } from "../../db/schema/constants.ts";
import { filenameProblem } from "../../domain/artifacts/artifacts.ts";

// Built on first use (z.lazy), not at every daemon start (docs/benchmarks.md).
const metadataText = () => z.string().trim().min(1).max(1024);

export const installMetadataSchema = z.lazy(() =>
  z.object({
    bundle_identifier: metadataText(),
    bundle_version: metadataText(),
    title: metadataText(),
  }),
);

/** POST /v1/runners/{runner_id}/jobs/{job_id}/artifacts (docs/api.md §7). */
export const createArtifactSchema = z.lazy(() =>
  z.object({
    filename: z.string().superRefine((name, ctx) => {
      const problem = filenameProblem(name);
      if (problem) ctx.addIssue({ code: "custom", message: `filename ${problem}` });
    }),
    size_bytes: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
    // type/subtype with optional parameters. It is echoed as a header, so quoted values are visible ASCII only
    // (no quote or backslash): a control character or a non-Latin-1 one would make every download a 500.
    content_type: z
      .string()
      .max(255)
      .regex(
        /^[\w.+-]+\/[\w.+-]+(?:\s*;\s*[\w.+-]+=(?:[\w.+-]+|"[\x20\x21\x23-\x5b\x5d-\x7e]*"))*$/,
        "must be a media type such as application/octet-stream",
      ),
    sha256: z
      .string()
      .regex(/^[0-9a-fA-F]{64}$/, "must be 64 hex characters")
      .optional(),
    install_metadata: installMetadataSchema.optional(),
    kind: z.enum(ARTIFACT_KINDS).optional(),
  }),
);
