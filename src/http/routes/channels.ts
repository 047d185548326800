import { z } from "zod";
import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import {
  addTester,
  channelReleases,
  createChannel,
  createChannelSchema,
  createTesterSchema,
  deleteChannel,
  getChannel,
  listChannels,
  listTesters,
  patchChannelSchema,
  publicBase,
  removeTester,
  toChannelJson,
  toReleaseJson,
  toTesterJson,
  updateChannel,
} from "../../domain/channels/channels.ts";
import { requireUser, ROLES } from "../middleware/auth.ts";
import { jsonBody } from "../validate.ts";
import { apiDoc } from "../route-docs.ts";

const ChannelJson = z.object({
  id: z.string(),
  project_id: z.string(),
  name: z.string(),
  pipeline_id: z.string(),
  branches: z.array(z.string()).nullable(),
  platforms: z.array(z.enum(["ios", "android"])).nullable(),
  page_url: z.string(),
  created_at: z.number().int(),
  updated_at: z.number().int(),
});
const ReleaseJson = z.object({
  build_id: z.string(),
  build_number: z.number().int(),
  branch: z.string(),
  commit_sha: z.string(),
  artifact_id: z.string(),
  platform: z.enum(["ios", "android"]),
  app: z.object({ name: z.string().nullable(), version: z.string().nullable(), build: z.string().nullable() }),
  release_notes: z.string().nullable(),
  installs: z.number().int(),
  created_at: z.number().int(),
});
const TesterJson = z.object({
  id: z.string(),
  channel_id: z.string(),
  email: z.string(),
  name: z.string().nullable(),
  installs: z.number().int(),
  mail_opt_out: z.boolean(),
  created_at: z.number().int(),
});
const TesterCreatedJson = TesterJson.extend({ page_url: z.string() });

/** Tester channels (docs/spec.md §18): builders manage them, every signed-in role reads them. */
export function channelsRoutes(deps: AppDeps) {
  const builders = requireUser(deps, { roles: ROLES.builders });
  const everyone = requireUser(deps, { roles: ROLES.everyone });
  const path = "/v1/projects/:project_id/channels";
  const one = `${path}/:channel_id`;
  const origin = (url: string) => new URL(url).origin;
  return new Hono<AppEnv>()
    .post(
      path,
      apiDoc({
        summary: "Create a tester channel: a pipeline's succeeded builds on matching branches",
        responses: { 200: ChannelJson },
        errors: { 409: ["already_exists"] },
        example: {
          body: { name: "beta", pipeline_id: "6f1c2a9e-0d4b-4c55-9a51-3f0e8b7d2c10", branches: ["main", "release/*"], platforms: ["ios", "android"] },
        },
      }),
      builders,
      jsonBody(createChannelSchema),
      async (c) => {
        const row = await createChannel(deps, c.get("user"), c.req.param("project_id"), c.req.valid("json"));
        return c.json(toChannelJson(row, await publicBase(deps, origin(c.req.url))));
      },
    )
    .get(path, apiDoc({ summary: "List a project's channels", responses: { 200: z.array(ChannelJson) } }), everyone, async (c) => {
      const base = await publicBase(deps, origin(c.req.url));
      return c.json((await listChannels(deps, c.req.param("project_id"))).map((ch) => toChannelJson(ch, base)));
    })
    .get(one, apiDoc({ summary: "Read a channel", responses: { 200: ChannelJson } }), everyone, async (c) => {
      const ch = await getChannel(deps, c.req.param("project_id"), c.req.param("channel_id"));
      return c.json(toChannelJson(ch, await publicBase(deps, origin(c.req.url))));
    })
    .patch(
      one,
      apiDoc({
        summary: "Change a channel's name, pipeline, branches or platforms",
        responses: { 200: ChannelJson },
        errors: { 409: ["already_exists"] },
        example: { body: { branches: ["main"] } },
      }),
      builders,
      jsonBody(patchChannelSchema),
      async (c) => {
        const row = await updateChannel(deps, c.get("user"), c.req.param("project_id"), c.req.param("channel_id"), c.req.valid("json"));
        return c.json(toChannelJson(row, await publicBase(deps, origin(c.req.url))));
      },
    )
    .delete(
      one,
      apiDoc({ summary: "Remove a channel and revoke its testers' links", responses: { 204: { noBody: "Removed" } } }),
      builders,
      async (c) => {
        await deleteChannel(deps, c.get("user"), c.req.param("project_id"), c.req.param("channel_id"));
        return c.body(null, 204);
      },
    )
    .get(
      `${one}/releases`,
      apiDoc({ summary: "The channel's releases, newest first", responses: { 200: z.array(ReleaseJson) } }),
      everyone,
      async (c) => {
        const ch = await getChannel(deps, c.req.param("project_id"), c.req.param("channel_id"));
        return c.json((await channelReleases(deps, ch)).map(toReleaseJson));
      },
    )
    .post(
      `${one}/testers`,
      apiDoc({
        summary: "Add a tester: answers their personal link once",
        responses: { 200: TesterCreatedJson },
        errors: { 409: ["already_exists"] },
        example: { body: { email: "tester@example.com", name: "Ada" } },
      }),
      builders,
      jsonBody(createTesterSchema),
      async (c) => {
        const added = await addTester(
          deps,
          c.get("user"),
          c.req.param("project_id"),
          c.req.param("channel_id"),
          c.req.valid("json"),
          origin(c.req.url),
        );
        return c.json({ ...toTesterJson(added.tester, 0), page_url: added.page_url });
      },
    )
    .get(
      `${one}/testers`,
      apiDoc({ summary: "List a channel's testers with their install counts", responses: { 200: z.array(TesterJson) } }),
      everyone,
      async (c) => c.json(await listTesters(deps, c.req.param("project_id"), c.req.param("channel_id"))),
    )
    .delete(
      `${one}/testers/:tester_id`,
      apiDoc({ summary: "Remove a tester: their link answers 404 from then on", responses: { 204: { noBody: "Removed" } } }),
      builders,
      async (c) => {
        await removeTester(deps, c.get("user"), c.req.param("project_id"), c.req.param("channel_id"), c.req.param("tester_id"));
        return c.body(null, 204);
      },
    );
}
