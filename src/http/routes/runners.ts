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
import { requireJobCaller, requireRunner, requireRunnerOrUser, requireUser, ROLES } from "../middleware/auth.ts";
import { jsonBody, queryParams } from "../validate.ts";
import type { UserRow } from "../../domain/auth/users.ts";
import { apiDoc } from "../route-docs.ts";
import * as json from "../responses.ts";

const logQuerySchema = z.object({ offset: z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER) });
const JOB = "/v1/runners/:runner_id/jobs/:job_id";

/** Runner registration (users) and every runner-to-daemon call (runner token, docs/api.md §6). */
export function runnersRoutes(deps: AppDeps) {
  const managers = requireUser(deps, { roles: ROLES.managers });
  const runner = requireRunner(deps);
  const jobCaller = requireJobCaller(deps);
  return new Hono<AppEnv>()
    .post(
      "/v1/runners/register",
      apiDoc({
        summary: "Register a runner; its token is in this answer only",
        responses: { 200: json.RegisteredRunnerJson },
        example: { body: { name: "mac-mini-1", capabilities: { platforms: ["ios", "android"] } } },
      }),
      managers,
      jsonBody(registerRunnerSchema),
      async (c) => {
        const { runner: row, token } = await registerRunner(deps, c.get("user"), c.req.valid("json"));
        // The token appears in this answer only; the database keeps its SHA-256.
        return c.json({ ...toRunnerJson(row), token });
      },
    )
    .get("/v1/runners", apiDoc({ summary: "List runners", responses: { 200: z.array(json.RunnerJson) } }), managers, async (c) =>
      c.json((await listRunners(deps)).map(toRunnerJson)),
    )
    .patch(
      "/v1/runners/:runner_id",
      apiDoc({
        summary: "Rename a runner, change its capabilities, or drain it (a user, or the runner itself)",
        responses: { 200: json.RunnerJson },
        example: { body: { status: "draining" } },
      }),
      requireRunnerOrUser(deps, { roles: ROLES.managers }),
      jsonBody(patchRunnerSchema),
      async (c) => {
        // Set only when a session (not a runner token) authenticated the call; the context type cannot say so.
        const user = c.get("user") as UserRow | undefined;
        const editor = user ? { kind: "user" as const, user } : { kind: "runner" as const };
        return c.json(toRunnerJson(await updateRunner(deps, c.req.param("runner_id"), c.req.valid("json"), editor)));
      },
    )
    .delete(
      "/v1/runners/:runner_id",
      apiDoc({ summary: "Remove a runner (its token stops working)", responses: { 204: { noBody: "Removed" } } }),
      managers,
      async (c) => {
        await removeRunner(deps, c.get("user"), c.req.param("runner_id"));
        return c.body(null, 204);
      },
    )
    .post(
      "/v1/runners/:runner_id/rotate-token",
      apiDoc({ summary: "Replace a runner's token; the new one is in this answer only", responses: { 200: json.RunnerTokenJson } }),
      managers,
      async (c) => c.json({ token: await rotateRunnerToken(deps, c.get("user"), c.req.param("runner_id")) }),
    )
    .post(
      "/v1/runners/:runner_id/heartbeat",
      apiDoc({
        summary: "Runner heartbeat: answers the jobs to cancel and when to beat next",
        responses: { 200: json.HeartbeatJson },
        example: { body: { status: "online", free_disk_bytes: 128849018880, low_disk: false } },
      }),
      runner,
      jsonBody(heartbeatSchema),
      async (c) => c.json(await heartbeat(deps, c.get("runnerId"), c.req.valid("json"))),
    )
    .post(
      "/v1/runners/:runner_id/claim",
      apiDoc({
        summary: "Claim the oldest queued build this runner can run, waiting up to `wait` seconds",
        responses: { 200: json.ClaimedJobJson, 204: { noBody: "Nothing to build" } },
        example: { query: { wait: "0" } },
      }),
      runner,
      queryParams(claimQuerySchema),
      async (c) => {
        const wait = c.req.valid("query").wait;
        // The abort signal only matters while waiting (and building it costs a full Request on Node).
        const job = await claimJob(deps, c.get("runnerId"), wait, wait > 0 ? c.req.raw.signal : undefined);
        // 204 carries no body at all (docs/spec.md).
        return job ? c.json(job) : c.body(null, 204);
      },
    )
    .get(
      JOB,
      apiDoc({ summary: "Read a job of this runner (status, cancel request, lease)", responses: { 200: json.JobJson } }),
      jobCaller,
      async (c) => c.json(toJobJson(await getRunnerJob(deps, c.get("runnerId"), c.req.param("job_id")))),
    )
    .post(
      `${JOB}/status`,
      apiDoc({
        summary: "Report a job's status (running, then a final one); renews the lease",
        responses: { 200: json.JobJson },
        errors: { 409: ["invalid_transition", "build_canceled", "job_not_active"] },
        example: { body: { status: "running", step_results: [{ name: "build", status: "running", started_at: 1764000000 }] } },
      }),
      jobCaller,
      jsonBody(jobStatusSchema),
      async (c) => {
        const job = await reportJobStatus(deps, c.get("runnerId"), c.req.param("job_id"), c.req.valid("json"));
        // Live build pages served by this process show the new status and steps now, not at their next poll.
        deps.logSignal?.notify(job.id);
        return c.json(toJobJson(job));
      },
    )
    .post(
      `${JOB}/logs`,
      apiDoc({
        summary: "Append log bytes at a byte offset (text/plain body); a repeated chunk is accepted once",
        responses: { 200: json.LogAppendedJson },
        errors: { 409: ["log_offset_mismatch", "job_not_active"] },
        example: { query: { offset: "0" }, contentType: "text/plain", rawBody: "> Task :app:assembleRelease\n" },
      }),
      jobCaller,
      queryParams(logQuerySchema),
      async (c) => {
        const type = c.req.header("content-type") ?? "";
        if (!/^text\/plain\b/i.test(type) && !/^application\/octet-stream\b/i.test(type)) {
          throw new ApiError("invalid_input", "log chunks are sent as text/plain");
        }
        const chunk = new Uint8Array(await c.req.arrayBuffer());
        const appended = await appendLog(deps, c.get("runnerId"), c.req.param("job_id"), c.req.valid("query").offset, chunk);
        deps.logSignal?.notify(c.req.param("job_id"));
        return c.json(appended);
      },
    )
    .get(
      `${JOB}/checkout-auth`,
      apiDoc({
        summary: "Credentials to clone the repository, for the job's lease",
        responses: { 200: json.CheckoutAuthJson },
        errors: { 404: ["no_credentials"], 409: ["job_not_active"] },
      }),
      jobCaller,
      async (c) => c.json(await checkoutAuth(deps, c.get("runnerId"), c.req.param("job_id"))),
    )
    .get(
      `${JOB}/android-signing`,
      apiDoc({
        summary: "The Android keystore (protected branches, not fork builds)",
        responses: { 200: json.AndroidSigningJson },
        errors: { 403: ["secrets_withheld"], 404: ["no_credentials"], 409: ["job_not_active"] },
      }),
      jobCaller,
      async (c) => c.json(await androidSigning(deps, c.get("runnerId"), c.req.param("job_id"))),
    )
    .get(
      `${JOB}/ios-signing`,
      apiDoc({
        summary: "The iOS certificate and profile (protected branches, not fork builds)",
        responses: { 200: json.IosSigningJson },
        errors: { 403: ["secrets_withheld"], 404: ["no_credentials"], 409: ["job_not_active"] },
      }),
      jobCaller,
      async (c) => c.json(await iosSigning(deps, c.get("runnerId"), c.req.param("job_id"))),
    )
    .get(
      `${JOB}/secrets`,
      apiDoc({
        summary: "The project's secret variables (protected branches, not fork builds)",
        responses: { 200: json.JobSecretsJson },
        errors: { 403: ["secrets_withheld"], 409: ["job_not_active"] },
      }),
      jobCaller,
      async (c) => c.json(await jobSecrets(deps, c.get("runnerId"), c.req.param("job_id"))),
    );
}
