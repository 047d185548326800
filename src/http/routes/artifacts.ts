import { z } from "zod";
import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import {
  abortArtifact,
  artifactIcon,
  completeArtifact,
  createArtifact,
  createDownloadLink,
  getArtifact,
  listBuildArtifacts,
  openDownload,
  receiveLocalUpload,
  type ByteResponse,
} from "../../domain/artifacts/artifacts.ts";
import { createInstallLink } from "../../domain/artifacts/install.ts";
import type { MetricsRegistry } from "../../domain/common/metrics.ts";
import { ROLES, requireJobCaller, requireUser } from "../middleware/auth.ts";
import { jsonBody } from "../validate.ts";
import { createArtifactSchema } from "./artifacts.schemas.ts";
import { apiDoc } from "../route-docs.ts";
import * as json from "../responses.ts";

/** Where the caller reached us: links to the daemon itself are built on it (local mode). */
const requestOrigin = (url: string): string => new URL(url).origin;

/**
 * A byte answer as a Response; the body streams as the client reads. With `metrics`, the bytes actually sent are
 * counted as they go (a client that stops reading halfway counts only what it took).
 */
export function byteResponse(r: ByteResponse, metrics?: MetricsRegistry): Response {
  let body = r.body;
  if (body && metrics) {
    body = body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          metrics.artifactBytes.inc({ direction: "download" }, chunk.byteLength);
          controller.enqueue(chunk);
        },
      }),
    );
  }
  return new Response(body, { status: r.status, headers: r.headers });
}

/** An icon: private to the caller, never sniffed as anything but an image. */
export function pngResponse(png: Uint8Array): Response {
  return new Response(png, {
    headers: { "content-type": "image/png", "content-length": String(png.length), "cache-control": "no-store", "x-content-type-options": "nosniff" },
  });
}

export function artifactsRoutes(deps: AppDeps) {
  const jobArtifacts = "/v1/runners/:runner_id/jobs/:job_id/artifacts";
  return (
    new Hono<AppEnv>()
      .post(
        jobArtifacts,
        apiDoc({
          summary: "Declare an artifact of the job and get its upload URL",
          responses: { 200: json.ArtifactCreatedJson },
          errors: { 409: ["job_not_active"], 413: ["upload_too_large"] },
          example: { body: { filename: "app-release.apk", size_bytes: 1048576, content_type: "application/vnd.android.package-archive" } },
        }),
        requireJobCaller(deps),
        jsonBody(createArtifactSchema),
        async (c) =>
          c.json(
            await createArtifact(deps, {
              ...c.req.valid("json"),
              runnerId: c.get("runnerId"),
              jobId: c.req.param("job_id"),
              requestOrigin: requestOrigin(c.req.url),
            }),
          ),
      )
      .post(
        `${jobArtifacts}/:artifact_id/complete`,
        apiDoc({
          summary: "Mark an uploaded artifact available (reads the app's metadata and icon)",
          responses: { 200: json.ArtifactAnswerJson },
          errors: { 409: ["upload_incomplete", "invalid_state"] },
        }),
        requireJobCaller(deps),
        async (c) =>
          c.json({
            artifact: await completeArtifact(deps, {
              runnerId: c.get("runnerId"),
              jobId: c.req.param("job_id"),
              artifactId: c.req.param("artifact_id"),
            }),
          }),
      )
      .post(
        `${jobArtifacts}/:artifact_id/abort`,
        apiDoc({ summary: "Give up an artifact upload", responses: { 200: json.ArtifactAnswerJson }, errors: { 409: ["invalid_state"] } }),
        requireJobCaller(deps),
        async (c) =>
          c.json({
            artifact: await abortArtifact(deps, {
              runnerId: c.get("runnerId"),
              jobId: c.req.param("job_id"),
              artifactId: c.req.param("artifact_id"),
            }),
          }),
      )
      // The body streams straight to disk: this path is exempt from the JSON body cap (middleware/context.ts).
      .put(
        "/v1/artifacts/local-upload/:token",
        apiDoc({
          summary: "Upload an artifact's bytes (the URL of a local-storage upload; the token is the credential)",
          responses: { 200: json.UploadReceivedJson },
          errors: { 400: ["size_mismatch", "checksum_mismatch"], 410: ["link_expired"], 413: ["upload_too_large", "payload_too_large"] },
          example: { contentType: "application/octet-stream", rawBody: "<the artifact's bytes>" },
        }),
        async (c) => {
          const received = await receiveLocalUpload(deps, {
            token: c.req.param("token"),
            body: c.req.raw.body,
            contentLength: c.req.header("content-length"),
          });
          deps.metrics?.artifactBytes.inc({ direction: "upload" }, received.received_bytes);
          return c.json(received);
        },
      )
      .get(
        "/v1/builds/:build_id/artifacts",
        apiDoc({ summary: "List a build's artifacts", responses: { 200: z.array(json.ArtifactJson) } }),
        requireUser(deps, { roles: ROLES.everyone }),
        async (c) => c.json(await listBuildArtifacts(deps, c.req.param("build_id"))),
      )
      .get(
        "/v1/artifacts/:artifact_id",
        apiDoc({ summary: "Read an artifact (with the app's name, version and signing)", responses: { 200: json.ArtifactJson } }),
        requireUser(deps, { roles: ROLES.everyone }),
        async (c) => c.json(await getArtifact(deps, c.req.param("artifact_id"))),
      )
      .get(
        "/v1/artifacts/:artifact_id/icon",
        apiDoc({ summary: "The app's icon", responses: { 200: { contentType: "image/png", description: "The icon as a standard PNG" } } }),
        requireUser(deps, { roles: ROLES.everyone }),
        async (c) => pngResponse(await artifactIcon(deps, c.req.param("artifact_id"))),
      )
      .post(
        "/v1/artifacts/:artifact_id/download-link",
        apiDoc({ summary: "A download URL for the artifact (15 minutes)", responses: { 200: json.DownloadLinkJson } }),
        requireUser(deps, { roles: ROLES.everyone }),
        async (c) => c.json(await createDownloadLink(deps, { artifactId: c.req.param("artifact_id"), requestOrigin: requestOrigin(c.req.url) })),
      )
      .post(
        "/v1/artifacts/:artifact_id/install-link",
        apiDoc({
          summary: "An install link and page for a phone (.ipa or .apk)",
          responses: { 200: json.InstallLinkJson },
          errors: {
            412: ["install_base_url_missing", "install_https_required"],
            422: ["install_not_possible", "install_metadata_missing", "unsupported_artifact"],
          },
        }),
        requireUser(deps, { roles: ROLES.everyone }),
        async (c) => c.json(await createInstallLink(deps, { artifactId: c.req.param("artifact_id") })),
      )
      .get(
        "/v1/artifacts/download/:token",
        apiDoc({
          summary: "Download an artifact (the URL of a download link; the token is the credential; Range supported)",
          description: "An unsatisfiable Range answers 416 with no body; its Content-Range names the size.",
          responses: {
            200: { contentType: "application/octet-stream", description: "The artifact's bytes, with its own Content-Type" },
            206: { contentType: "application/octet-stream", description: "The requested range" },
          },
          errors: { 410: ["link_expired"] },
        }),
        async (c) => byteResponse(await openDownload(deps, { token: c.req.param("token"), range: c.req.header("range") }), deps.metrics),
      )
  );
}
