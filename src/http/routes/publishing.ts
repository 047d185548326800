import { z } from "zod";
import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import {
  appStoreConnectKeySchema,
  getStores,
  googlePlayKeySchema,
  putAppStoreConnectKey,
  putGooglePlayKey,
} from "../../domain/publishing/store-credentials.ts";
import { listPublishes, publishByHand } from "../../domain/publishing/publisher.ts";
import { PUBLISH_STATES, PUBLISH_TARGETS } from "../../db/schema/publishing.ts";
import { getBuild } from "../../domain/builds/builds.ts";
import { requireUser, ROLES } from "../middleware/auth.ts";
import { jsonBody } from "../validate.ts";
import { apiDoc } from "../route-docs.ts";

const StoresJson = z.object({
  app_store_connect: z.object({ issuer_id: z.string(), key_id: z.string(), has_private_key: z.literal(true) }).nullable(),
  google_play: z.object({ client_email: z.string(), project_id: z.string(), has_service_account: z.literal(true) }).nullable(),
});

const PublishJson = z.object({
  id: z.string(),
  build_id: z.string(),
  to: z.enum(PUBLISH_TARGETS),
  state: z.enum(PUBLISH_STATES),
  detail: z.string().nullable(),
  attempts: z.number().int(),
  updated_at: z.number().int(),
});

/**
 * Store keys and publishes (docs/publishing.md). Builders set the keys, as they set signing material; the keys are
 * answered only as what they are, never as their secret parts.
 */
export function publishingRoutes(deps: AppDeps) {
  const readers = requireUser(deps, { roles: ROLES.everyone });
  const builders = requireUser(deps, { roles: ROLES.builders });
  return new Hono<AppEnv>()
    .get(
      "/v1/builds/:build_id/publishes",
      apiDoc({ summary: "A build's publishes to the stores", responses: { 200: z.array(PublishJson) } }),
      readers,
      async (c) => {
        const build = await getBuild(deps, c.req.param("build_id"));
        return c.json(await listPublishes(deps, build.id));
      },
    )
    .post(
      "/v1/builds/:build_id/publish",
      apiDoc({
        summary: "Publish a succeeded protected build to a store by hand",
        responses: { 200: PublishJson },
        example: { body: { to: "testflight" } },
      }),
      builders,
      jsonBody(z.strictObject({ to: z.enum(PUBLISH_TARGETS) })),
      async (c) => c.json(await publishByHand(deps, c.req.param("build_id"), c.req.valid("json").to)),
    )
    .get(
      "/v1/projects/:project_id/stores",
      apiDoc({ summary: "The project's store keys (never their secret parts)", responses: { 200: StoresJson } }),
      builders,
      async (c) => c.json(await getStores(deps, c.req.param("project_id"))),
    )
    .put(
      "/v1/projects/:project_id/stores/app-store-connect",
      apiDoc({
        summary: "Set the App Store Connect API key used to publish to TestFlight (checked, then sealed)",
        responses: { 200: StoresJson },
        example: {
          body: {
            issuer_id: "57246542-96fe-1a63-e053-0824d011072a",
            key_id: "2X9R4HXF34",
            private_key_p8: "-----BEGIN PRIVATE KEY-----\n…\n-----END PRIVATE KEY-----",
          },
        },
      }),
      builders,
      jsonBody(appStoreConnectKeySchema),
      async (c) => c.json(await putAppStoreConnectKey(deps, c.get("user"), c.req.param("project_id"), c.req.valid("json"))),
    )
    .put(
      "/v1/projects/:project_id/stores/google-play",
      apiDoc({
        summary: "Set the Google Play service account key used to publish (checked, then sealed)",
        responses: { 200: StoresJson },
        example: { body: { service_account_json: '{"type": "service_account", …}' } },
      }),
      builders,
      jsonBody(googlePlayKeySchema),
      async (c) => c.json(await putGooglePlayKey(deps, c.get("user"), c.req.param("project_id"), c.req.valid("json"))),
    );
}
