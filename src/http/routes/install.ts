import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { installArtifactRedirect, installDownload, installIcon, installManifest } from "../../domain/artifacts/install.ts";
import { byteResponse, pngResponse } from "./artifacts.ts";

/** Installer paths (docs/spec.md: no version prefix, token in the path). Nothing here may be cached. */
export function installRoutes(deps: AppDeps) {
  return (
    new Hono<AppEnv>()
      .get("/install/ios/:token/manifest.plist", async (c) => {
        const xml = await installManifest(deps, { token: c.req.param("token") });
        return c.body(xml, 200, { "content-type": "application/xml", "cache-control": "no-store" });
      })
      .get("/install/artifact/:token", async (c) => {
        const location = await installArtifactRedirect(deps, { token: c.req.param("token") });
        c.header("cache-control", "no-store");
        return c.redirect(location, 302);
      })
      // The install page's icon: public like the page, for as long as its session lives.
      .get("/install/icon/:token", async (c) => pngResponse(await installIcon(deps, { token: c.req.param("token") })))
      .get("/install/download/:token", async (c) => {
        const result = await installDownload(deps, { token: c.req.param("token"), range: c.req.header("range") });
        c.header("cache-control", "no-store");
        if ("redirect" in result) return c.redirect(result.redirect, 302);
        const res = byteResponse(result, deps.metrics);
        res.headers.set("cache-control", "no-store");
        return res;
      })
  );
}
