import { Hono } from "hono";
import { z } from "zod";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { appendLog } from "../../domain/logs/logs.ts";
import {
  heartbeat,
  heartbeatSchema,
  listRunners,
  patchRunnerSchema,
  registerRunner,
  registerRunnerSchema,
  removeRunner,
  rotateRunnerToken,
  toRunnerJson,
  updateRunner,
} from "../../domain/runners/runners.ts";
import {
  androidSigning,
  checkoutAuth,
  claimJob,
  claimQuerySchema,
  getRunnerJob,
  iosSigning,
  jobSecrets,
  jobStatusSchema,
  reportJobStatus,
  toJobJson,
} from "../../domain/builds/scheduler.ts";
import { requireRunner, requireRunnerOrUser, requireUser, ROLES } from "../middleware/auth.ts";
import { jsonBody, queryParams } from "../validate.ts";
import type { UserRow } from "../../domain/auth/users.ts";

const logQuerySchema = z.object({ offset: z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER) });
const JOB = "/v1/runners/:runner_id/jobs/:job_id";

/** Runner registration (users) and every runner-to-daemon call (runner token, CONTRACT §6). */
export function runnersRoutes(deps: AppDeps) {
  const managers = requireUser(deps, { roles: ROLES.managers });
  const runner = requireRunner(deps);
  return new Hono<AppEnv>()
    .post("/v1/runners/register", managers, jsonBody(registerRunnerSchema), async (c) => {
      const { runner: row, token } = await registerRunner(deps, c.get("user"), c.req.valid("json"));
      // The token appears in this answer only; the database keeps its SHA-256.
      return c.json({ ...toRunnerJson(row), token });
    })
    .get("/v1/runners", managers, async (c) => c.json((await listRunners(deps)).map(toRunnerJson)))
    .patch("/v1/runners/:runner_id", requireRunnerOrUser(deps, { roles: ROLES.managers }), jsonBody(patchRunnerSchema), async (c) => {
      // Set only when a session (not a runner token) authenticated the call; the context type cannot say so.
      const user = c.get("user") as UserRow | undefined;
      const editor = user ? { kind: "user" as const, user } : { kind: "runner" as const };
      return c.json(toRunnerJson(await updateRunner(deps, c.req.param("runner_id"), c.req.valid("json"), editor)));
    })
    .delete("/v1/runners/:runner_id", managers, async (c) => {
      await removeRunner(deps, c.get("user"), c.req.param("runner_id"));
      return c.body(null, 204);
    })
    .post("/v1/runners/:runner_id/rotate-token", managers, async (c) =>
      c.json({ token: await rotateRunnerToken(deps, c.get("user"), c.req.param("runner_id")) }),
    )
    .post("/v1/runners/:runner_id/heartbeat", runner, jsonBody(heartbeatSchema), async (c) =>
      c.json(await heartbeat(deps, c.get("runnerId"), c.req.valid("json").status)),
    )
    .post("/v1/runners/:runner_id/claim", runner, queryParams(claimQuerySchema), async (c) => {
      const wait = c.req.valid("query").wait;
      // The abort signal only matters while waiting (and building it costs a full Request on Node).
      const job = await claimJob(deps, c.get("runnerId"), wait, wait > 0 ? c.req.raw.signal : undefined);
      // 204 carries no body at all (SPEC).
      return job ? c.json(job) : c.body(null, 204);
    })
    .get(JOB, runner, async (c) => c.json(toJobJson(await getRunnerJob(deps, c.get("runnerId"), c.req.param("job_id")))))
    .post(`${JOB}/status`, runner, jsonBody(jobStatusSchema), async (c) =>
      c.json(toJobJson(await reportJobStatus(deps, c.get("runnerId"), c.req.param("job_id"), c.req.valid("json")))),
    )
    .post(`${JOB}/logs`, runner, queryParams(logQuerySchema), async (c) => {
      const type = c.req.header("content-type") ?? "";
      if (!/^text\/plain\b/i.test(type) && !/^application\/octet-stream\b/i.test(type)) {
        throw new ApiError(400, "invalid_input", "log chunks are sent as text/plain");
      }
      const chunk = new Uint8Array(await c.req.arrayBuffer());
      return c.json(await appendLog(deps, c.get("runnerId"), c.req.param("job_id"), c.req.valid("query").offset, chunk));
    })
    .get(`${JOB}/checkout-auth`, runner, async (c) => c.json(await checkoutAuth(deps, c.get("runnerId"), c.req.param("job_id"))))
    .get(`${JOB}/android-signing`, runner, async (c) => c.json(await androidSigning(deps, c.get("runnerId"), c.req.param("job_id"))))
    .get(`${JOB}/ios-signing`, runner, async (c) => c.json(await iosSigning(deps, c.get("runnerId"), c.req.param("job_id"))))
    .get(`${JOB}/secrets`, runner, async (c) => c.json(await jobSecrets(deps, c.get("runnerId"), c.req.param("job_id"))));
}
