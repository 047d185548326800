import { z } from "zod";
import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { deliveryBase } from "../../domain/channels/channels.ts";
import { devicesExport, enrollmentProfile, listDevices, MAX_ENROLL_BODY_BYTES, registerDevice } from "../../domain/channels/devices.ts";
import { requireUser, ROLES } from "../middleware/auth.ts";
import { apiDoc } from "../route-docs.ts";
import { readBodyCapped } from "./webhooks.ts";

const DeviceJson = z.object({
  id: z.string(),
  udid: z.string(),
  product: z.string().nullable(),
  version: z.string().nullable(),
  tester: z.object({ id: z.string(), email: z.string(), name: z.string().nullable() }).nullable(),
  created_at: z.number().int(),
  updated_at: z.number().int(),
});

/**
 * Device registration (docs/api.md §18): the Profile Service enrolment a tester's device goes through (public: the
 * tester link is the key) and the project's device list and Apple upload file (builders).
 */
export function devicesRoutes(deps: AppDeps) {
  const builders = requireUser(deps, { roles: ROLES.builders });
  const origin = (url: string) => new URL(url).origin;
  return new Hono<AppEnv>()
    .get("/apps/:token/enroll", async (c) => {
      const base = await deliveryBase(deps, origin(c.req.url));
      const profile = await enrollmentProfile(deps, c.req.param("token"), base);
      return c.body(profile, 200, {
        "content-type": "application/x-apple-aspen-config",
        "content-disposition": 'attachment; filename="register-device.mobileconfig"',
        "cache-control": "no-store",
        "x-content-type-options": "nosniff",
      });
    })
    .post("/apps/:token/enroll/callback", async (c) => {
      const token = c.req.param("token");
      const body = await readBodyCapped(c.req.raw, MAX_ENROLL_BODY_BYTES);
      await registerDevice(deps, token, body);
      // Apple's Profile Service flow: the device opens the page a 301 names once its answer is taken.
      return c.redirect(`/apps/${token}/enroll/done`, 301);
    })
    .get(
      "/v1/projects/:project_id/devices",
      apiDoc({ summary: "The project's iOS devices registered by testers", responses: { 200: z.array(DeviceJson) } }),
      builders,
      async (c) => c.json(await listDevices(deps, c.req.param("project_id"))),
    )
    .get(
      "/v1/projects/:project_id/devices/export",
      apiDoc({
        summary: "Apple's device upload file for the developer portal (tab-separated)",
        responses: { 200: { contentType: "text/plain", description: "Device ID, Device Name, Device Platform; one device a line" } },
      }),
      builders,
      async (c) =>
        c.body(await devicesExport(deps, c.req.param("project_id")), 200, {
          "content-type": "text/plain; charset=utf-8",
          "content-disposition": 'attachment; filename="devices.txt"',
        }),
    );
}
