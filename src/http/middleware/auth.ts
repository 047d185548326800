import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { AUTH_DOCS, type AuthDoc } from "../route-docs.ts";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { loadInstance } from "../../domain/setup/instance.ts";
import { authenticateJobToken, authenticateRunnerId, findRunnerByToken, isJobToken } from "../../domain/runners/runner-auth.ts";
import { touchSetupSession, validateUserSession } from "../../domain/auth/sessions.ts";
import type { UserRole } from "../../db/schema/constants.ts";

/** The Bearer token of the request; a missing header is `missing_auth`, a malformed one an invalid credential. */
export function bearerToken(c: Context, invalidCode: "invalid_session" | "invalid_runner_token" = "invalid_session"): string {
  const header = c.req.header("authorization");
  if (header === undefined || header.trim() === "") throw new ApiError("missing_auth", "the Authorization header is missing");
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match?.[1]) throw new ApiError(invalidCode, "the Authorization header must be 'Bearer <token>'");
  return match[1];
}

/**
 * Setup endpoints: once the instance is ready every one of them answers 409 already_configured, forever,
 * before any credential is looked at (the setup sessions are gone by then).
 */
export function requireSetupSession(deps: AppDeps) {
  return documented(
    {
      schemes: ["setupSession"],
      unauthorizedCodes: ["missing_auth", "invalid_session", "session_expired"],
      extraErrors: { 409: ["already_configured"] },
    },
    createMiddleware<AppEnv>(async (c, next) => {
      await assertSetupOpen(deps);
      const session = await touchSetupSession(deps, bearerToken(c)).catch(async (err: unknown) => {
        // A completion racing this request deletes every setup session: answer for the state, not the token.
        await assertSetupOpen(deps);
        throw err;
      });
      c.set("setupSessionId", session.id);
      c.set("setupSessionExpiresAt", session.expiresAt);
      await next();
    }),
  );
}

async function assertSetupOpen(deps: AppDeps): Promise<void> {
  const inst = await loadInstance(deps);
  if (inst.state === "ready") throw new ApiError("already_configured", "setup is complete");
}

/**
 * Guard for every `/v1/setup/*` path, mounted ahead of all setup routes (those of later areas too): after
 * completion the whole area answers 409 already_configured, before any body or credential is read.
 */
export function requireSetupOpen(deps: AppDeps) {
  return createMiddleware<AppEnv>(async (_c, next) => {
    await assertSetupOpen(deps);
    await next();
  });
}

/** A signed-in user, optionally limited to some roles (403 with the area's code otherwise). */
export function requireUser(
  deps: AppDeps,
  options: { roles?: readonly UserRole[]; code?: "forbidden" | "insufficient_role" | "external_access_owner_required" } = {},
) {
  const doc: AuthDoc = { schemes: ["userSession"], unauthorizedCodes: ["missing_auth", "invalid_session"] };
  if (options.roles) Object.assign(doc, { roles: options.roles, forbiddenCodes: [options.code ?? "forbidden"] });
  return documented(
    doc,
    createMiddleware<AppEnv>(async (c, next) => {
      const { sessionId, user } = await validateUserSession(deps, bearerToken(c));
      c.set("user", user);
      c.set("userSessionId", sessionId);
      if (options.roles && !options.roles.includes(user.role)) {
        throw new ApiError(options.code ?? "forbidden", "your role does not allow this action");
      }
      await next();
    }),
  );
}

/** Role groups of docs/api.md §3's matrix. */
/** Whether a role may change projects and builds, and so see a pipeline's `env`. */
export function isBuilder(role: string): boolean {
  return role === "owner" || role === "admin" || role === "developer";
}

export const ROLES = {
  managers: ["owner", "admin"],
  builders: ["owner", "admin", "developer"],
  everyone: ["owner", "admin", "developer", "qa_viewer"],
  owner: ["owner"],
} as const satisfies Record<string, readonly UserRole[]>;

/** Runner endpoints: the token must belong to the runner named in the path (403 runner_mismatch otherwise). */
export function requireRunner(deps: AppDeps) {
  const doc: AuthDoc = { schemes: ["runnerToken"], unauthorizedCodes: ["missing_auth", "invalid_runner_token"], forbiddenCodes: ["runner_mismatch"] };
  return documented(
    doc,
    createMiddleware<AppEnv>(async (c, next) => {
      const token = bearerToken(c, "invalid_runner_token");
      const runnerId = await authenticateRunnerId(deps, token);
      const pathRunnerId = c.req.param("runner_id");
      if (pathRunnerId !== undefined && pathRunnerId !== runnerId) {
        throw new ApiError("runner_mismatch", "this token belongs to another runner");
      }
      c.set("runnerId", runnerId);
      await next();
    }),
  );
}

/**
 * The calls of one job (`/v1/runners/{rid}/jobs/{jid}/…`): the job's own token (its path only) or the runner's
 * token (docs/runner-isolation.md). Either way `runnerId` is the runner holding the job.
 */
export function requireJobCaller(deps: AppDeps) {
  const doc: AuthDoc = {
    schemes: ["jobToken", "runnerToken"],
    unauthorizedCodes: ["missing_auth", "invalid_runner_token", "invalid_job_token"],
    forbiddenCodes: ["runner_mismatch"],
  };
  return documented(
    doc,
    createMiddleware<AppEnv>(async (c, next) => {
      const token = bearerToken(c, "invalid_runner_token");
      const pathRunnerId = c.req.param("runner_id");
      let runnerId: string;
      if (isJobToken(token)) {
        runnerId = await authenticateJobToken(deps, token, { runnerId: pathRunnerId, jobId: c.req.param("job_id") });
      } else {
        runnerId = await authenticateRunnerId(deps, token);
        if (pathRunnerId !== undefined && pathRunnerId !== runnerId) {
          throw new ApiError("runner_mismatch", "this token belongs to another runner");
        }
      }
      c.set("runnerId", runnerId);
      await next();
    }),
  );
}

/**
 * A route both a runner (its own path only) and a user of some roles may call (PATCH /v1/runners/{id}): a
 * runner token sets `runnerId`, a session sets `user`. A token that is neither is an invalid session.
 */
export function requireRunnerOrUser(deps: AppDeps, options: { roles: readonly UserRole[] }) {
  const doc: AuthDoc = {
    schemes: ["userSession", "runnerToken"],
    roles: options.roles,
    unauthorizedCodes: ["missing_auth", "invalid_runner_token"],
    forbiddenCodes: ["forbidden", "runner_mismatch"],
  };
  return documented(
    doc,
    createMiddleware<AppEnv>(async (c, next) => {
      const token = bearerToken(c);
      const runner = await findRunnerByToken(deps, token);
      if (runner) {
        const pathRunnerId = c.req.param("runner_id");
        if (pathRunnerId !== undefined && pathRunnerId !== runner.id) {
          throw new ApiError("runner_mismatch", "this token belongs to another runner");
        }
        c.set("runnerId", runner.id);
        return next();
      }
      const { sessionId, user } = await validateUserSession(deps, token).catch((err: unknown) => {
        // Neither kind matched: on a runner route the runner's answer is the one its client understands.
        if (err instanceof ApiError && err.code === "invalid_session") {
          throw new ApiError("invalid_runner_token", "neither a valid runner token nor a valid session");
        }
        throw err;
      });
      c.set("user", user);
      c.set("userSessionId", sessionId);
      if (!options.roles.includes(user.role)) throw new ApiError("forbidden", "your role does not allow this action");
      await next();
    }),
  );
}

/** Registers what a credential middleware demands, for the OpenAPI document and the /api page. */
function documented<M extends object>(doc: AuthDoc, middleware: M): M {
  AUTH_DOCS.set(middleware, doc);
  return middleware;
}
