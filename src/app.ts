import { MemoRouter } from "./http/router.ts";
import { Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import type { AppDeps, AppEnv } from "./deps.ts";
import { ApiError, describeError, errorBody, toErrorResponse } from "./errors.ts";
import { corsFromSettings } from "./http/middleware/cors.ts";
import { jsonBodyCap, requestContext } from "./http/middleware/context.ts";
import { loopbackDetection } from "./http/middleware/loopback.ts";
import { MetricsRegistry } from "./domain/common/metrics.ts";
import { LogSignal } from "./domain/logs/log-signal.ts";
import { metricsRoutes } from "./http/routes/metrics.ts";
import { buildOpenApiDocument } from "./http/openapi.ts";
import { apiDoc } from "./http/route-docs.ts";
import { HANGAR_VERSION } from "./version.ts";
import { authPathsRequireReady } from "./http/middleware/ready.ts";
import { artifactStorageRoutes } from "./http/routes/artifact-storage.ts";
import { artifactsRoutes } from "./http/routes/artifacts.ts";
import { authRoutes } from "./http/routes/auth.ts";
import { buildsRoutes } from "./http/routes/builds.ts";
import { installRoutes } from "./http/routes/install.ts";
import { oidcRoutes } from "./http/routes/oidc.ts";
import { projectsRoutes } from "./http/routes/projects.ts";
import { projectSecretsRoutes } from "./http/routes/project-secrets.ts";
import { publishingRoutes } from "./http/routes/publishing.ts";
import { publicRoutes } from "./http/routes/public.ts";
import { pipelineFilesRoutes } from "./http/routes/pipeline-files.ts";
import { runnersRoutes } from "./http/routes/runners.ts";
import { cachesRoutes } from "./http/routes/caches.ts";
import { runnerBundleRoutes } from "./http/routes/runner-bundle.ts";
import { settingsRoutes } from "./http/routes/settings.ts";
import { setupRoutes } from "./http/routes/setup.ts";
import { trustedProxyRoutes } from "./http/routes/trusted-proxy.ts";
import { userRoutes } from "./http/routes/users.ts";
import { webRoutes } from "./web/index.ts";
import { apiPages } from "./web/pages/api.tsx";
import { htmlSecurityHeaders, sameOriginPosts } from "./web/security.ts";
import { webhooksRoutes } from "./http/routes/webhooks.ts";
import { notificationsRoutes } from "./http/routes/notifications.ts";
import { testsRoutes } from "./http/routes/tests.ts";
import { retentionRoutes } from "./http/routes/retention.ts";
import { channelsRoutes } from "./http/routes/channels.ts";
import { smtpSettingsRoutes } from "./http/routes/smtp-settings.ts";
import { devicesRoutes } from "./http/routes/devices.ts";

/**
 * Builds Hangar's handler set: every route, written against Fetch `Request`/`Response`.
 * Does no I/O itself; the host (Node daemon, an embedding server, Workers, tests) supplies every dependency.
 */
export function createApp(deps: AppDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>({ router: new MemoRouter() });
  // Domain code (claims, artifacts) records into the same registry the scrape reads.
  const metrics = (deps.metrics ??= new MetricsRegistry());
  deps.logSignal ??= new LogSignal();

  // Request id, response headers, the request log line and the request metrics, in one middleware.
  app.use("*", requestContext(deps.log, deps.config.logRequests, metrics));
  app.use("*", loopbackDetection(deps.getPeerAddress));
  app.use("*", corsFromSettings(deps));
  app.use("*", jsonBodyCap(deps.config.maxJsonBytes));
  app.use("/v1/auth/*", authPathsRequireReady(deps));
  // The web UI (src/web/): security headers on every HTML answer, same-origin check on every form post.
  app.use("*", htmlSecurityHeaders());
  app.use("*", sameOriginPosts(deps));

  for (const routes of [
    publicRoutes,
    setupRoutes,
    oidcRoutes,
    trustedProxyRoutes,
    authRoutes,
    userRoutes,
    settingsRoutes,
    artifactStorageRoutes,
    projectsRoutes,
    projectSecretsRoutes,
    publishingRoutes,
    runnersRoutes,
    cachesRoutes,
    runnerBundleRoutes,
    buildsRoutes,
    testsRoutes,
    artifactsRoutes,
    installRoutes,
    webhooksRoutes,
    notificationsRoutes,
    pipelineFilesRoutes,
    retentionRoutes,
    channelsRoutes,
    smtpSettingsRoutes,
    devicesRoutes,
    webRoutes,
  ]) {
    app.route("/", routes(deps));
  }
  app.route("/", metricsRoutes(deps, metrics));
  // Built on first request from the finished route table, so it lists every route, itself included.
  let openApiDocument: unknown;
  const openApi = () => (openApiDocument ??= buildOpenApiDocument(app, { version: HANGAR_VERSION }));
  app.route("/", apiPages(deps, openApi));
  app.get(
    "/v1/openapi.json",
    apiDoc({
      summary: "This document: OpenAPI 3.1 of every /v1/ route (public)",
      responses: { 200: { contentType: "application/json", description: "The OpenAPI document" } },
    }),
    (c) => c.json(openApi()),
  );

  app.notFound((c) => c.json({ code: "not_found", message: "no such route" }, 404));
  app.onError((err, c) => {
    if (err instanceof ApiError) return c.json(errorBody(err), err.status);
    // Hono's own validator raises these for a body that is not valid JSON.
    if (err instanceof HTTPException && err.status === 400) {
      return c.json({ code: "invalid_input", message: "the body is not valid JSON" }, 400);
    }
    if (err instanceof HTTPException && err.status === 413) {
      return c.json({ code: "payload_too_large", message: "request body too large" }, 413);
    }
    // Node's error for a client that closed the connection mid-body: the client's fault, not ours.
    if (isClientAbort(err)) return c.json({ code: "invalid_input", message: "the request body was cut off" }, 400);
    deps.log({
      time: new Date().toISOString(),
      level: "error",
      request_id: c.get("requestId"),
      msg: "unhandled error",
      error: describeError(err),
    });
    return toErrorResponse(c, err);
  });
  return app;
}

/** The error reading a request body throws when the client goes away before sending all of it (Node). */
function isClientAbort(err: unknown): boolean {
  return err instanceof Error && err.message === "aborted" && (err as { code?: unknown }).code === "ECONNRESET";
}
