import { Hono } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { readNetworkSettings } from "../../domain/settings/network-settings.ts";
import {
  getRunner,
  listRunners,
  registerRunner,
  removeRunner,
  rotateRunnerToken,
  updateRunner,
  type RunnerCapabilities,
} from "../../domain/runners/runners.ts";
import { TAKES } from "../../domain/runners/trust-view.ts";
import { RUNNER_TRUSTS, type RunnerTrust } from "../../db/schema/constants.ts";
import { ROLES } from "../../http/middleware/auth.ts";
import { sentence } from "../errors.tsx";
import { setFlash } from "../flash.ts";
import { pageContext, renderPage, requireBrowserUser } from "../session.tsx";
import { PLATFORM_CHOICES, BUILD_TRUST_TEXT, RunnersPage } from "../views/runners.tsx";

/** The URL runners should use: the External Access public URL when set, else the one this page was opened on. */
async function daemonUrlFor(deps: AppDeps, requestUrl: string): Promise<string> {
  return (await readNetworkSettings(deps)).public_url ?? new URL(requestUrl).origin;
}

/** /runners (owner and admins): list, register with a shown-once token and copyable commands. */
export function runnersPages(deps: AppDeps) {
  const managers = requireBrowserUser(deps, { roles: ROLES.managers });
  return new Hono<AppEnv>()
    .get("/runners", managers, async (c) => renderPage(c, <RunnersPage ctx={pageContext(c, deps)} runners={await listRunners(deps)} />))
    .post("/runners/register", managers, async (c) => {
      const form = await c.req.parseBody({ all: true });
      const name = typeof form.name === "string" ? form.name.trim() : "";
      const raw = form.platforms;
      const chosen = (Array.isArray(raw) ? raw : raw === undefined ? [] : [raw]).filter((p): p is string => typeof p === "string");
      const platforms = PLATFORM_CHOICES.map((p) => p.value).filter((p) => chosen.includes(p));
      const trust: RunnerTrust = form.trust === "open" ? "open" : "protected";
      if (platforms.length === 0) {
        return renderPage(
          c,
          <RunnersPage
            ctx={pageContext(c, deps)}
            runners={await listRunners(deps)}
            platformsError="Choose at least one platform the runner builds for."
            name={name}
          />,
          400,
        );
      }
      if (name.length > 100) {
        return renderPage(
          c,
          <RunnersPage ctx={pageContext(c, deps)} runners={await listRunners(deps)} error="A name has at most 100 characters." name={name} />,
          400,
        );
      }
      try {
        const { runner, token } = await registerRunner(deps, c.get("user"), { ...(name ? { name } : {}), capabilities: { platforms }, trust });
        const registered = { runner, token, daemonUrl: await daemonUrlFor(deps, c.req.url) };
        // Rendered, not redirected: the token exists only in this answer (no-store, like every page).
        return renderPage(c, <RunnersPage ctx={pageContext(c, deps)} runners={await listRunners(deps)} registered={registered} />);
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        return renderPage(
          c,
          <RunnersPage ctx={pageContext(c, deps)} runners={await listRunners(deps)} error={sentence(err.message)} name={name} />,
          400,
        );
      }
    })
    .post("/runners/:runner_id/rotate-token", managers, async (c) => {
      const runnerId = c.req.param("runner_id");
      const token = await rotateRunnerToken(deps, c.get("user"), runnerId);
      const registered = { runner: await getRunner(deps, runnerId), token, daemonUrl: await daemonUrlFor(deps, c.req.url) };
      // The new token is shown once, with the commands that use it, as after a registration.
      return renderPage(c, <RunnersPage ctx={pageContext(c, deps)} runners={await listRunners(deps)} registered={registered} />);
    })
    .post("/runners/:runner_id/trust", managers, async (c) => {
      const runner = await getRunner(deps, c.req.param("runner_id"));
      const form = await c.req.parseBody();
      const trust = RUNNER_TRUSTS.find((t) => t === form.trust);
      if (!trust) {
        setFlash(c, "error", "Trust is protected or open.");
        return c.redirect("/runners", 303);
      }
      await updateRunner(deps, runner.id, { trust }, { kind: "user", user: c.get("user") });
      setFlash(
        c,
        "ok",
        `Runner ${runner.name ?? runner.id} is now ${trust}: it takes ${TAKES[trust].map((t) => BUILD_TRUST_TEXT[t]).join(" and ")}.`,
      );
      return c.redirect("/runners", 303);
    })
    .post("/runners/:runner_id/edit", managers, async (c) => {
      const runner = await getRunner(deps, c.req.param("runner_id"));
      const form = await c.req.parseBody({ all: true });
      const name = typeof form.name === "string" ? form.name.trim() : "";
      const trust = RUNNER_TRUSTS.find((t) => t === form.trust);
      const chosen = [form.platforms].flat().filter((p): p is string => typeof p === "string");
      const platforms = PLATFORM_CHOICES.map((p) => p.value).filter((p) => chosen.includes(p));
      const problem =
        name.length > 100
          ? "A name has at most 100 characters."
          : !trust
            ? "Trust is protected or open."
            : platforms.length === 0
              ? "Choose at least one platform the runner builds for."
              : null;
      if (problem || !trust) {
        setFlash(c, "error", problem ?? "Trust is protected or open.");
        return c.redirect("/runners", 303);
      }
      const caps = runner.capabilities as RunnerCapabilities;
      try {
        // An empty name field leaves the name as it is: the API has no way to clear it either.
        await updateRunner(
          deps,
          runner.id,
          { ...(name ? { name } : {}), trust, capabilities: { ...caps, platforms } },
          { kind: "user", user: c.get("user") },
        );
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        setFlash(c, "error", sentence(err.message));
        return c.redirect("/runners", 303);
      }
      setFlash(c, "ok", `Runner ${name || runner.name || runner.id} saved: it builds for ${platforms.join(", ")} and is ${trust}.`);
      return c.redirect("/runners", 303);
    })
    .post("/runners/:runner_id/max-jobs", managers, async (c) => {
      const runner = await getRunner(deps, c.req.param("runner_id"));
      const form = await c.req.parseBody();
      const raw = typeof form.max_jobs === "string" ? form.max_jobs.trim() : "";
      const max = raw === "" ? null : /^\d{1,4}$/.test(raw) ? Number(raw) : NaN;
      if (max !== null && (!Number.isInteger(max) || max < 1 || max > 1000)) {
        setFlash(c, "error", "Max jobs is a whole number from 1 to 1000, or empty for no cap.");
        return c.redirect("/runners", 303);
      }
      const caps = runner.capabilities as RunnerCapabilities;
      await updateRunner(
        deps,
        runner.id,
        { capabilities: { ...caps, platforms: caps.platforms ?? [], max_jobs: max } },
        { kind: "user", user: c.get("user") },
      );
      setFlash(
        c,
        "ok",
        max === null
          ? `Runner ${runner.name ?? runner.id} has no cap on its jobs.`
          : `Runner ${runner.name ?? runner.id} holds at most ${max} job${max === 1 ? "" : "s"} at once.`,
      );
      return c.redirect("/runners", 303);
    })
    .post("/runners/:runner_id/remove", managers, async (c) => {
      const runner = await getRunner(deps, c.req.param("runner_id"));
      await removeRunner(deps, c.get("user"), runner.id);
      setFlash(c, "ok", `Runner ${runner.name ?? runner.id} removed; its token no longer works.`);
      return c.redirect("/runners", 303);
    });
}
