import { Hono, type Context } from "hono";
import { z } from "zod";
import { BUILD_STATUSES } from "../../db/schema/constants.ts";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { createDownloadLink, listBuildArtifacts } from "../../domain/artifacts/artifacts.ts";
import { listPublishes } from "../../domain/publishing/publisher.ts";
import { cancelBuild, getBuild, listBuilds, queueInfo, rerunBuild } from "../../domain/builds/builds.ts";
import { readLogBefore, readLogTail } from "../../domain/logs/log-view.ts";
import { readLog } from "../../domain/logs/logs.ts";
import { setBuildPinned } from "../../domain/retention/pins.ts";
import { nameDirectory } from "../../domain/projects/projects.ts";
import { listRunners } from "../../domain/runners/runners.ts";
import { ROLES } from "../../http/middleware/auth.ts";
import { signingHealth } from "../../domain/signing/health.ts";
import { ApiError } from "../../errors.ts";
import { setFlash } from "../flash.ts";
import { pageContext, renderPage, requireBrowserUser } from "../session.tsx";
import { liveBuildEvents } from "../live-log.ts";
import { searchLogs } from "../../domain/logs/log-search.ts";
import { listBuildTests } from "../../domain/tests/test-reports.ts";
import { FAILURES_SHOWN } from "./tests.tsx";
import { type SearchState, BuildsPage, BuildPage } from "../views/builds.tsx";

// Built on first use (z.lazy), not at every daemon start (docs/benchmarks.md).
const listQuery = z.lazy(() =>
  z.object({
    project_id: z.string().max(100).optional(),
    pipeline_id: z.string().max(100).optional(),
    branch: z.string().max(255).optional(),
    status: z.enum(BUILD_STATUSES).optional().catch(undefined),
    cursor: z.string().max(100).optional(),
    /** Log search (docs/log-search.md): the other filters narrow it. */
    q: z.string().max(500).optional(),
  }),
);

function logBody(c: Context, bytes: Uint8Array, headers: Record<string, string>) {
  return c.body(new Uint8Array(bytes).buffer as ArrayBuffer, 200, {
    "Content-Type": "text/plain; charset=utf-8",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    ...headers,
  });
}

const logQuery = z.lazy(() =>
  z.object({
    tail: z.coerce
      .number()
      .int()
      .min(1)
      .max(16 * 1024 * 1024)
      .optional(),
    before: z.coerce.number().int().min(0).optional(),
    limit: z.coerce
      .number()
      .int()
      .min(1)
      .max(16 * 1024 * 1024)
      .default(1024 * 1024),
    offset: z.coerce.number().int().min(0).optional(),
  }),
);

/**
 * `/builds`, `/builds/{id}` and what the build page reads with its cookie session: the log (`/builds/{id}/log`,
 * raw or by window) and the live stream (`/builds/{id}/events`, Server-Sent Events). These live outside /v1/ on
 * purpose: /v1/ takes Bearer tokens only, and EventSource cannot send one.
 */
export function buildPages(deps: AppDeps) {
  const readers = requireBrowserUser(deps, { roles: ROLES.everyone });
  const builders = requireBrowserUser(deps, { roles: ROLES.builders });
  const canAct = (c: Context<AppEnv>) => (ROLES.builders as readonly string[]).includes(c.get("user").role);

  return new Hono<AppEnv>()
    .get("/builds", readers, async (c) => {
      const parsed = listQuery.safeParse(c.req.query());
      const query = parsed.success ? parsed.data : {};
      const clean = Object.fromEntries(Object.entries(query).filter(([, v]) => v !== undefined && v !== "")) as z.infer<typeof listQuery>;
      let page;
      try {
        page = await listBuilds(deps, { ...clean, limit: 50 });
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        page = await listBuilds(deps, { ...clean, cursor: undefined, limit: 50 });
      }
      let nextHref: string | null = null;
      if (page.nextCursor) {
        const params = new URLSearchParams(Object.entries(clean).filter(([k]) => k !== "cursor") as [string, string][]);
        params.set("cursor", page.nextCursor);
        nextHref = `/builds?${params}`;
      }
      let search: SearchState | null = null;
      const q = clean.q?.trim();
      if (q) {
        search = { q, matches: null, error: null };
        try {
          search.matches = (
            await searchLogs(deps, { q, project_id: clean.project_id, pipeline_id: clean.pipeline_id, branch: clean.branch, limit: 50 })
          ).matches;
        } catch (err) {
          if (!(err instanceof ApiError)) throw err;
          search.error = err.message;
        }
      }
      const [names, health] = await Promise.all([nameDirectory(deps), signingHealth(deps)]);
      return renderPage(
        c,
        <BuildsPage
          ctx={pageContext(c, deps)}
          names={names}
          builds={page.builds}
          nextHref={nextHref}
          query={clean}
          search={search}
          signing={health.items}
        />,
      );
    })
    .get("/builds/:build_id", readers, async (c) => {
      const build = await getBuild(deps, c.req.param("build_id"));
      const [names, artifacts, queue, runners, publishList] = await Promise.all([
        nameDirectory(deps),
        listBuildArtifacts(deps, build.id),
        build.status === "queued" ? queueInfo(deps, build) : Promise.resolve(null),
        build.runnerId ? listRunners(deps) : Promise.resolve([]),
        listPublishes(deps, build.id),
      ]);
      const runnerName = runners.find((r) => r.id === build.runnerId)?.name ?? null;
      const tests = build.testsSummary ? await listBuildTests(deps, build.id, { limit: 1 }) : null;
      const failures = tests
        ? [
            ...(await listBuildTests(deps, build.id, { status: "failed", limit: FAILURES_SHOWN })).tests,
            ...(await listBuildTests(deps, build.id, { status: "errored", limit: FAILURES_SHOWN })).tests,
          ].slice(0, FAILURES_SHOWN)
        : [];
      return renderPage(
        c,
        <BuildPage
          ctx={pageContext(c, deps)}
          build={build}
          names={names}
          artifacts={artifacts}
          queue={queue}
          runnerName={runnerName}
          canAct={canAct(c)}
          tests={tests}
          failures={failures}
          publishes={publishList}
        />,
      );
    })
    .post("/builds/:build_id/cancel", builders, async (c) => {
      const build = await cancelBuild(deps, c.get("user"), c.req.param("build_id"));
      setFlash(
        c,
        build.status === "canceled" ? "ok" : "info",
        build.status === "canceled" ? "The build was canceled." : `The build had already ${build.status.replace(/_/g, " ")}.`,
      );
      return c.redirect(`/builds/${build.id}`, 303);
    })
    .post("/builds/:build_id/pin", builders, async (c) => {
      const build = await setBuildPinned(deps, c.get("user"), c.req.param("build_id"), true);
      setFlash(c, "ok", "Pinned: retention never deletes this build's artifacts or log.");
      return c.redirect(`/builds/${build.id}`, 303);
    })
    .post("/builds/:build_id/unpin", builders, async (c) => {
      const build = await setBuildPinned(deps, c.get("user"), c.req.param("build_id"), false);
      setFlash(c, "ok", "Unpinned: the retention policy applies to this build again.");
      return c.redirect(`/builds/${build.id}`, 303);
    })
    .post("/builds/:build_id/rerun", builders, async (c) => {
      try {
        const build = await rerunBuild(deps, c.get("user"), c.req.param("build_id"));
        setFlash(c, "ok", `Build #${build.buildNumber} queued: a rerun of the same commit.`);
        return c.redirect(`/builds/${build.id}`, 303);
      } catch (err) {
        if (!(err instanceof ApiError) || err.status !== 404) throw err;
        await getBuild(deps, c.req.param("build_id"));
        setFlash(c, "error", "This build's pipeline was deleted: it cannot be rerun.");
        return c.redirect(`/builds/${c.req.param("build_id")}`, 303);
      }
    })
    .post("/builds/:build_id/artifacts/:artifact_id/download", readers, async (c) => {
      const buildId = c.req.param("build_id");
      const artifacts = await listBuildArtifacts(deps, buildId);
      if (!artifacts.some((a) => a.id === c.req.param("artifact_id"))) throw new ApiError("not_found", "no such artifact in this build");
      const link = await createDownloadLink(deps, { artifactId: c.req.param("artifact_id"), requestOrigin: new URL(c.req.url).origin });
      return c.redirect(link.url, 303);
    })
    .get("/builds/:build_id/log", readers, async (c) => {
      const buildId = c.req.param("build_id");
      const parsed = logQuery.safeParse(c.req.query());
      if (!parsed.success) throw new ApiError("invalid_input", "the log query is not valid");
      const q = parsed.data;
      if (q.tail !== undefined || q.before !== undefined) {
        const w = q.tail !== undefined ? await readLogTail(deps, buildId, q.tail) : await readLogBefore(deps, buildId, q.before!, q.limit);
        return logBody(c, w.bytes, {
          "X-Log-Start-Offset": String(w.start),
          "X-Log-Next-Offset": String(w.next),
          "X-Log-Lines-Before": String(w.linesBefore),
          "X-Log-Mid-Line": w.midLine ? "true" : "false",
          "X-Log-Complete": w.complete ? "true" : "false",
        });
      }
      if (q.offset !== undefined) {
        const log = await readLog(deps, buildId, q.offset);
        return logBody(c, log.bytes, { "X-Log-Next-Offset": String(log.nextOffset), "X-Log-Complete": log.complete ? "true" : "false" });
      }
      // The whole log as text, page by page (a raw view and a download).
      await getBuild(deps, buildId);
      return new Response(
        new ReadableStream<Uint8Array>({
          async start(controller) {
            let offset = 0;
            for (;;) {
              const page = await readLog(deps, buildId, offset);
              if (page.bytes.length > 0) controller.enqueue(page.bytes);
              offset = page.nextOffset;
              if (page.bytes.length === 0 || page.complete) break;
            }
            controller.close();
          },
        }),
        { headers: { "Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff" } },
      );
    })
    .get("/builds/:build_id/events", readers, liveBuildEvents(deps));
}
