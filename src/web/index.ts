import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../deps.ts";
import { assetRoutes } from "./assets.ts";
import { renderErrorPage } from "./errors.tsx";
import { installPages } from "./pages/install.tsx";
import { testerPages } from "./pages/tester.tsx";
import { channelPages } from "./pages/channels.tsx";
import { loginPages } from "./pages/login.tsx";
import { auditPages } from "./pages/audit.tsx";
import { runnersPages } from "./pages/runners.tsx";
import { settingsPages } from "./pages/settings.tsx";
import { setupPages } from "./pages/setup.tsx";
import { usersPages } from "./pages/users.tsx";
import { buildPages } from "./pages/builds.tsx";
import { projectPages } from "./pages/projects.tsx";
import { testPages } from "./pages/tests.tsx";
import { templatePages } from "./pages/templates.tsx";

/**
 * The web UI (docs/api.md §10): server-rendered pages that call the domain directly, mounted by createApp beside
 * the JSON API. Each page group is one file under pages/ exporting `xxxPages(deps)`; add it to the list.
 */
export function webRoutes(deps: AppDeps) {
  const app = new Hono<AppEnv>();
  app.route("/", assetRoutes());
  // One page group per line: keep both sides on a conflict.
  const groups = [
    loginPages,
    setupPages,
    installPages,
    testerPages,
    channelPages,
    usersPages,
    runnersPages,
    settingsPages,
    auditPages,
    buildPages,
    projectPages,
    testPages,
    templatePages,
  ];
  for (const pages of groups) {
    app.route("/", pages(deps));
  }
  // Errors of a page render as a page (a JSON body would be no use to a browser).
  app.onError((err, c) => renderErrorPage(deps, c, err));
  return app;
}
