// One claimed job from start to final report: fresh work directory, checkout, signing material, steps, artifacts.
import { chmodSync, existsSync, mkdirSync, mkdtempSync } from "node:fs";
import { chmod, chown, mkdir, rm } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
// zod/mini: the same checks, tree-shaken to what is used here (the standalone runner inlines it; full zod is most
// of that file otherwise).
import * as z from "zod/mini";
import { checkoutCommit, basicHeaderValue, prepareSpareRepository, type CheckoutAuth } from "./checkout.ts";
import type { ClaimedJob, StatusReport, StepResult } from "../../protocol/runner.ts";
import { DaemonError, type RunnerClient } from "./client.ts";
import { matchFiles } from "./artifact-files.ts";
import type { Logger } from "./log.ts";
import { LogStream } from "./logs.ts";
import { StatusReporter } from "./reporter.ts";
import { fetchSecretVariables, hostSigningSystem, prepareSigning, removeSigning, type SigningMaterial, type SigningSystem } from "./signing.ts";
import { killLeftovers, runStep, type ProcessResult } from "./steps.ts";
import { COOKIE_VAR, newJobCookie, sweepJobProcesses } from "./sweep.ts";
import { clearActiveJob, JOB_DIR_PREFIX, markActiveJob } from "./workroot.ts";
import { chownTree, type RunAsUser } from "./run-as.ts";
import { parseAllow } from "./clone-guard.ts";
import { endUserProcesses, JobCgroup, removeUserTempFiles, type CgroupSupport } from "./isolation.ts";
import { uploadArtifacts } from "./upload.ts";
import { createRemoteCache } from "./cache-remote.ts";
import { hostKeyValues, JobCaches, secretPrints, type SecretPrints } from "./cache.ts";
import { scopeDir, type CacheStore } from "./cache-store.ts";
import { WORKSPACES_DIR, workspaceDir, WorkspaceLock } from "./workspace.ts";
import { readReleaseNotes, recentCommits, type ReportedCommit } from "./release-notes.ts";

const PipelineConfig = z.object({
  platform: z._default(z.string(), "any"),
  steps: z.array(z.object({ name: z.string(), run: z.string() })).check(z.minLength(1)),
  // An item is a glob (uploaded when the build succeeds) or {path, when}; `always` also uploads after a failed step.
  artifacts: z.optional(
    z.array(z.union([z.string(), z.object({ path: z.string(), when: z._default(z.enum(["on_success", "always"]), "on_success") })])),
  ),
  env: z.optional(z.record(z.string(), z.union([z.string(), z.number(), z.boolean()]))),
  timeout_s: z.optional(z.number().check(z.int(), z.positive())),
  // Test reports: uploaded as `junit` artifacts after the last step, whether it passed or failed.
  reports: z.optional(z.object({ junit: z.optional(z.array(z.string())) })),
  release_notes: z.optional(z.string()),
  // Caches and workspaces (docs/caches.md); the daemon checked the templates and paths already.
  cache: z.optional(
    z.array(z.object({ key: z.string(), paths: z.array(z.string()).check(z.minLength(1)), restore_keys: z.optional(z.array(z.string())) })),
  ),
  workspace: z._default(z.enum(["persistent", "fresh"]), "persistent"),
});
type PipelineConfig = z.infer<typeof PipelineConfig>;

/** The artifact globs to upload: all of them after success, only the `when: always` ones after a failed step. */
export function artifactGlobs(config: PipelineConfig, succeeded: boolean): string[] {
  return (config.artifacts ?? []).flatMap((item) =>
    typeof item === "string" ? (succeeded ? [item] : []) : succeeded || item.when === "always" ? [item.path] : [],
  );
}

/** The project's secret variables for a job; null when withheld (an unprotected branch, a fork's pull request). */
type SecretVariables = Record<string, string> | null;

/** The first step's process, started during the checkout; `start(true)` gives it its go, `start(false)` ends it unstarted. */
interface EarlyStep {
  running: Promise<ProcessResult>;
  start: (go: boolean) => void;
}

export type JobOutcome = "succeeded" | "failed" | "canceled" | "timed_out" | "lost";
/** Why a job stopped early: the user canceled it, it ran out of time, the daemon already finished it, or the runner is being killed. */
export type StopReason = "canceled" | "timed_out" | "final" | "shutdown";

const JOB_POLL_MS = 2000;
const FINAL_STATUSES = new Set(["succeeded", "failed", "canceled", "timed_out", "expired"]);

function nowS(): number {
  return Math.floor(Date.now() / 1000);
}

/** Environment of a step: the runner's own, minus Hangar's settings (the runner token!), plus the pipeline's and the build's. */
export function stepEnv(base: NodeJS.ProcessEnv, config: PipelineConfig, job: ClaimedJob, extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(base)) {
    if (name.startsWith("HANGAR_") || name.startsWith("GIT_CONFIG_")) continue;
    env[name] = value;
  }
  env.CI = "true";
  env.HANGAR = "true";
  for (const [name, value] of Object.entries(config.env ?? {})) env[name] = String(value);
  env.HANGAR_BUILD_ID = job.build_id;
  env.HANGAR_BUILD_NUMBER = String(job.build_number);
  env.HANGAR_COMMIT_SHA = job.commit_sha;
  env.HANGAR_BRANCH = job.branch;
  Object.assign(env, extra);
  return env;
}

/** The runner's environment without Hangar's settings (the runner token!), for a git command outside any job. */
function runnerEnvForGit(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("HANGAR_") && !name.startsWith("GIT_CONFIG_")));
}

/** What every job of this runner shares: values to mask, whose processes the sweep may end, the --run-as user. */
export interface JobContext {
  /** Never to appear in a streamed log: the runner's token (and anything else of the runner's). */
  maskedValues: string[];
  /** Owners of the processes the end-of-job sweep looks at: the runner's user and the --run-as user. */
  sweepUids: ReadonlySet<number>;
  runAs?: RunAsUser;
  /** Where iOS signing material is installed; the host's unless a test passes another. */
  signingSystem?: SigningSystem;
  /** `user` with --run-as (steps cannot read the runner's token), else `none`. */
  isolation?: "user" | "none";
  /** Whether each job gets a cgroup of its own (Linux, cgroup v2 writable), decided once at start. */
  cgroups?: CgroupSupport;
  /** The runner-local cache store (--cache-dir, --cache-max-gb); without it `cache` entries are skipped. */
  cacheStore?: CacheStore;
}

export class Job {
  private readonly stopper = new AbortController();
  stopReason: StopReason | null = null;
  /** Carried by every process of the job; the sweep at its end kills whatever still carries it. */
  private readonly cookie = newJobCookie();
  /** Keychain and profiles are the step user's: its home, its search list (docs/signing.md). */
  private readonly signingSystem: SigningSystem;

  /** Calls for this job carry the job's own token (the runner token only when the daemon gave none). */
  private readonly client: RunnerClient;
  /** The job's cache entries once their keys are filled in, and the bytes they must never hold. */
  private caches: JobCaches | null = null;
  private prints: SecretPrints = { sizes: new Set(), hashes: new Set() };
  /** The commits up to the build's, listed once it is checked out (for the `commits` of a succeeded report). */
  private commitsListed: Promise<ReportedCommit[]> | null = null;

  constructor(
    runnerClient: RunnerClient,
    readonly claimed: ClaimedJob,
    private readonly workRoot: string,
    private readonly log: Logger,
    private readonly context: JobContext = { maskedValues: [], sweepUids: new Set([process.getuid?.() ?? 0]) },
  ) {
    const runAs = context.runAs;
    this.signingSystem = context.signingSystem ?? hostSigningSystem(runAs ? { uid: runAs.uid, gid: runAs.gid, home: runAs.home } : {});
    this.client = runnerClient.forJob(claimed.job_token);
  }

  get id(): string {
    return this.claimed.build_id;
  }

  /** Stops the job: the running step's process group gets SIGTERM (SIGKILL 10 s later). */
  stop(reason: StopReason): void {
    if (this.stopReason) return;
    this.stopReason = reason;
    this.log.info(`build ${this.id}: stopping (${reason})`);
    this.stopper.abort();
  }

  async run(): Promise<JobOutcome> {
    const job = this.claimed;
    const client = this.client;
    let jobDir: string;
    try {
      // Synchronous calls: each takes microseconds on a local disk, where a promise call waits for the thread pool
      // and an event-loop turn, every build long (docs/benchmarks.md, the runner's overhead).
      mkdirSync(this.workRoot, { recursive: true, mode: 0o700 });
      markActiveJob(this.workRoot, this.cookie);
      jobDir = mkdtempSync(join(this.workRoot, `${JOB_DIR_PREFIX}${job.build_number}-`));
      // The job directory stays the runner's (its log spool is inside); with --run-as the step user may
      // traverse it to the parts that are handed over: the checkout, its temporary directory, signing files.
      if (this.context.runAs) chmodSync(jobDir, 0o711);
      mkdirSync(join(jobDir, "src"));
      mkdirSync(join(jobDir, "tmp"), { mode: 0o700 });
    } catch (err) {
      // No place to work: fail the build at once rather than let its lease lapse and retry it here.
      this.log.error(`build ${job.build_id}: cannot prepare a work directory under ${this.workRoot}: ${(err as Error).message}`);
      const reporter = new StatusReporter(client, job.build_id, this.log, () => undefined);
      reporter.update({ status: "running" });
      await reporter.final({ status: "failed", exit_code: 1 });
      return "failed";
    }
    const srcDir = join(jobDir, "src");
    const secretsDir = join(jobDir, "secrets");
    const logs = new LogStream(client, job.build_id, join(jobDir, "build.log"), this.log);
    for (const value of this.context.maskedValues) logs.addSecret(value);
    logs.addSecret(job.job_token);
    const say = (line: string) => logs.write(`${line}\n`);
    const reporter = new StatusReporter(client, job.build_id, this.log, (code) => this.stop(code === "build_canceled" ? "canceled" : "final"));
    // Daemon calls made for the job stop retrying once the job is stopped.
    const retry = { signal: this.stopper.signal };
    const parsed = PipelineConfig.safeParse(job.config_snapshot);
    const config: PipelineConfig = parsed.success ? parsed.data : { platform: "any", steps: [], workspace: "fresh" };
    const results: StepResult[] = config.steps.map((s) => ({ name: s.name, status: "pending" }));
    const snapshot = (): StepResult[] => results.map((r) => ({ ...r }));
    // The checkout credentials are asked for before the `running` report is sent: the daemon answers them first,
    // and the clone waits for them (docs/benchmarks.md, the runner's overhead).
    const checkoutAuth = parsed.success ? this.fetchCheckoutAuth() : null;
    checkoutAuth?.catch(() => undefined); // awaited by the checkout; a rejection meanwhile is not unhandled
    reporter.update({ status: "running", step_results: snapshot() });
    // Made while the checkout starts: only a step's start and the job's end wait for it.
    const cgroup = this.makeCgroup(say);
    const watcher = setInterval(() => void this.pollJob(), JOB_POLL_MS);
    const timeout = config.timeout_s ? setTimeout(() => this.stop("timed_out"), config.timeout_s * 1000) : null;
    let exitCode = 0;
    let workspaceLock: WorkspaceLock | null = null;
    let checkoutDir = srcDir;
    try {
      say(`hangar: build #${job.build_number}${job.pipeline_name ? ` of ${job.pipeline_name}` : ""}, commit ${job.commit_sha} on ${job.branch}`);
      if (!parsed.success) {
        say("hangar: the pipeline configuration of this build is not valid: it needs at least one step {name, run}");
        exitCode = 1;
      } else {
        if (config.workspace === "persistent") {
          const persistent = await this.takeWorkspace(say);
          if (persistent) [checkoutDir, workspaceLock] = persistent;
        }
        const persistent = workspaceLock !== null;
        exitCode = await this.runSteps({
          config,
          results,
          snapshot,
          jobDir,
          srcDir: checkoutDir,
          persistent,
          secretsDir,
          logs,
          say,
          reporter,
          retry,
          cgroup,
          checkoutAuth: checkoutAuth ?? this.fetchCheckoutAuth(),
        });
      }
    } catch (err) {
      if (!this.stopReason) {
        const msg = err instanceof DaemonError ? `the daemon answered ${err.status} ${err.code}: ${err.message}` : (err as Error).message;
        say(`hangar: ${msg}`);
        this.log.error(`build ${job.build_id}: ${msg}`);
      }
      exitCode ||= 1;
    } finally {
      clearInterval(watcher);
      if (timeout) clearTimeout(timeout);
      const ended = await this.endJobProcesses(await cgroup);
      if (ended > 0) say(`hangar: ended ${ended} process(es) the job left running`);
      await removeSigning(secretsDir, this.signingSystem);
    }
    // Saved once the job's processes are ended (nothing changes the files meanwhile), after a succeeded build only.
    if (this.caches && exitCode === 0 && !this.stopReason) await this.caches.save(this.prints);
    const caches = this.caches ? { caches: this.caches.reports() } : {};

    for (const r of results) if (r.status === "pending" || r.status === "running") r.status = "skipped";
    const outcome = this.outcome(exitCode);
    say(`hangar: build ${outcome === "lost" ? "stopped (the daemon finished it already)" : outcome}`);
    // Logs before the final report: a daemon may refuse log bytes for a finished build.
    const serverFinal = this.stopReason === "canceled" || this.stopReason === "final";
    // Tester channels' release notes: the pipeline's file, read while the log's last bytes travel, and the commits
    // up to this one, listed since the checkout (docs/decisions.md). Neither ever rejects.
    const notesRead = outcome === "succeeded" && !serverFinal ? readReleaseNotes(checkoutDir, config.release_notes) : null;
    const delivered = await logs.close(serverFinal ? 10_000 : Number.POSITIVE_INFINITY);
    if (!delivered) this.log.warn(`build ${job.build_id}: ${logs.deliveredBytes} log bytes delivered, the rest was refused`);
    if (!serverFinal) {
      const notes = (await notesRead) ?? null;
      const commits = outcome === "succeeded" ? ((await this.commitsListed) ?? []) : [];
      const final: StatusReport =
        outcome === "succeeded"
          ? {
              status: "succeeded",
              exit_code: 0,
              step_results: snapshot(),
              ...(notes !== null ? { release_notes: notes } : {}),
              ...(commits.length ? { commits } : {}),
              ...caches,
            }
          : { status: outcome === "timed_out" ? "timed_out" : "failed", exit_code: exitCode || 1, step_results: snapshot(), ...caches };
      const answer = await reporter.final(final);
      this.log.info(
        `build ${job.build_id}: ${final.status} (${answer === "delivered" ? "reported" : `not reported: ${reporter.refusedWith ?? "stopped"}`})`,
      );
    } else {
      reporter.stop();
      this.log.info(`build ${job.build_id}: ${outcome}`);
    }
    await rm(jobDir, { recursive: true, force: true });
    if (workspaceLock && this.context.runAs) {
      // Between jobs a persistent workspace is the runner's, 0700: another pipeline's job (the same build user)
      // cannot read what this one left there (docs/runner-isolation.md). The next job of this pipeline gets it back.
      await chown(checkoutDir, process.getuid?.() ?? 0, process.getgid?.() ?? 0).catch(() => undefined);
      await chmod(checkoutDir, 0o700).catch(() => undefined);
    }
    await workspaceLock?.release();
    await clearActiveJob(this.workRoot);
    // The next job's repository, made while this runner waits for work.
    prepareSpareRepository(this.workRoot, runnerEnvForGit());
    return outcome;
  }

  private outcome(exitCode: number): JobOutcome {
    switch (this.stopReason) {
      case "canceled":
        return "canceled";
      case "final":
        return "lost";
      case "timed_out":
        return "timed_out";
      case "shutdown":
        return "failed";
      default:
        return exitCode === 0 ? "succeeded" : "failed";
    }
  }

  /** The job's cgroup when the runner may make one; null (the sweeps alone) otherwise. */
  private async makeCgroup(say: (line: string) => void): Promise<JobCgroup | null> {
    const support = this.context.cgroups;
    if (!support?.ok) return null;
    try {
      return await JobCgroup.create(support.base, this.cookie);
    } catch (err) {
      say(`hangar: no cgroup for this job (${(err as Error).message}); its processes are ended by the sweep alone`);
      return null;
    }
  }

  /**
   * Ends whatever the job left running: the steps' process groups, the job's cgroup at once, the processes
   * carrying its cookie, and with --run-as every process of the build user (whatever its environment, session
   * or process group), then that user's files in the shared temporary directories. Answers how many were found.
   */
  private async endJobProcesses(cgroup: JobCgroup | null): Promise<number> {
    const failed = (what: string) => (err: unknown) => {
      this.log.error(`build ${this.id}: ${what} failed: ${(err as Error).message}`);
      return 0;
    };
    const inCgroup = cgroup ? await cgroup.kill().catch(failed("killing the job's cgroup")) : 0;
    await killLeftovers();
    // Processes that left the step's process group (setsid, double fork) still carry the cookie.
    const swept = await sweepJobProcesses(this.cookie, this.context.sweepUids).catch((err: unknown) => ({
      killed: failed("the process sweep")(err),
      rounds: 0,
    }));
    const runAs = this.context.runAs;
    let ofUser = 0;
    if (runAs) {
      ofUser = await endUserProcesses(runAs.uid, runAs.gid).catch(failed(`ending the processes of ${runAs.name}`));
      await removeUserTempFiles(runAs.uid).catch(failed(`removing the temporary files of ${runAs.name}`));
    }
    return Math.max(inCgroup, swept.killed, ofUser);
  }

  private async runSteps(ctx: {
    config: PipelineConfig;
    results: StepResult[];
    snapshot: () => StepResult[];
    jobDir: string;
    srcDir: string;
    /** `srcDir` is the pipeline's persistent workspace (fetched into, cleaned) rather than a fresh directory. */
    persistent: boolean;
    cgroup: Promise<JobCgroup | null>;
    secretsDir: string;
    logs: LogStream;
    say: (line: string) => void;
    reporter: StatusReporter;
    retry: { signal: AbortSignal };
    /** The checkout credentials' request, sent at the job's start. */
    checkoutAuth: Promise<CheckoutAuth | null>;
  }): Promise<number> {
    const { config, srcDir, logs, say, retry } = ctx;
    const job = this.claimed;
    const client = this.client;
    const signal = this.stopper.signal;

    // The credentials are fetched while `git init` runs; they are masked before any git command that uses them.
    const auth = ctx.checkoutAuth.then((found) => {
      if (found) {
        // Belt and braces: the daemon masks the token too, but it never even leaves this machine in a log.
        logs.addSecret(found.password);
        logs.addSecret(basicHeaderValue(found).slice("Basic ".length));
        say(`hangar: checkout credentials received`);
      }
      return found;
    });
    auth.catch(() => undefined); // checkoutCommit awaits it; should it throw first, the rejection is not unhandled
    // Signing material and secret variables are fetched while the clone runs (each is a round trip to the daemon,
    // docs/benchmarks.md); they are awaited before anything else happens, whatever the clone's outcome, so nothing
    // is still being written when the job's end removes them.
    const material = Promise.all([
      prepareSigning(client, job.build_id, config.platform, ctx.secretsDir, retry, this.signingSystem),
      fetchSecretVariables(client, job.build_id, retry),
    ]);
    material.catch(() => undefined); // awaited below; a rejection meanwhile is not unhandled
    const runAs = this.context.runAs;
    const userEnv: Record<string, string> = runAs ? { HOME: runAs.home, USER: runAs.name, LOGNAME: runAs.name } : {};
    const tmpDir = join(ctx.jobDir, "tmp");
    // A secret variable overrides the runner's own environment and the pipeline's plain `env` of the same name;
    // Hangar's variables (build id, signing paths, the cookie) are set last and win.
    const envFor = (signing: SigningMaterial, variables: SecretVariables): NodeJS.ProcessEnv =>
      stepEnv(process.env, { ...config, env: { ...config.env, ...variables } }, job, {
        ...signing.env,
        ...userEnv,
        TMPDIR: tmpDir,
        [COOKIE_VAR]: this.cookie,
      });
    const identity = runAs ? { uid: runAs.uid, gid: runAs.gid } : {};
    // A group that refuses a process (a host that changed under the runner) falls back to the sweeps, said so.
    const beforeStart = this.context.cgroups?.ok
      ? async (pid: number) => {
          const cgroup = await ctx.cgroup;
          await cgroup
            ?.add(pid)
            .catch((err: Error) =>
              say(`hangar: this step runs outside the job's cgroup (${err.message}); the end-of-job sweep still ends its processes`),
            );
        }
      : undefined;
    // The first step's process is started as soon as its environment is known, while the checkout still runs, and
    // waits for its go: its move into the job's cgroup (10–55 ms of the kernel's, docs/benchmarks.md, the runner's
    // overhead) is done by then. Not with cache entries (HANGAR_CACHE_HIT is known after the restore), nor in a
    // persistent workspace with --run-as (the build user may enter it only once it is handed over).
    const early: { step?: EarlyStep } = {};
    const first = config.steps[0];
    let fetching!: () => void;
    // After git's fetch has started: the spawn holds this thread a few milliseconds, which the fetch need not wait for.
    const fetchStarted = new Promise<void>((resolve) => {
      fetching = resolve;
    });
    if (first && !config.cache?.length && !(runAs && ctx.persistent)) {
      Promise.all([material, fetchStarted]).then(
        ([[signing, variables]]) => {
          if (signal.aborted) return;
          let start!: (go: boolean) => void;
          const startWhen = new Promise<boolean>((resolve) => {
            start = resolve;
          });
          const env = envFor(signing, variables);
          early.step = {
            running: runStep(first.run, { cwd: srcDir, env, onOutput: (b) => logs.write(b), signal, beforeStart, startWhen, ...identity }),
            start,
          };
        },
        () => undefined,
      );
    }
    try {
      return await this.checkoutAndRun(ctx, { material, auth, envFor, tmpDir, identity, beforeStart, early, fetching });
    } finally {
      // Unless it was given its go, the early process ends unstarted.
      early.step?.start(false);
    }
  }

  private async checkoutAndRun(
    ctx: Parameters<Job["runSteps"]>[0],
    prepared: {
      material: Promise<[SigningMaterial, SecretVariables]>;
      auth: Promise<CheckoutAuth | null>;
      envFor: (signing: SigningMaterial, variables: SecretVariables) => NodeJS.ProcessEnv;
      tmpDir: string;
      identity: { uid?: number; gid?: number };
      beforeStart: ((pid: number) => Promise<void>) | undefined;
      early: { step?: EarlyStep };
      fetching: () => void;
    },
  ): Promise<number> {
    const { config, results, snapshot, srcDir, logs, say, reporter, retry } = ctx;
    const { material, auth, envFor, tmpDir, identity, beforeStart, early, fetching } = prepared;
    const job = this.claimed;
    const signal = this.stopper.signal;
    const runAs = this.context.runAs;
    let clone: Awaited<ReturnType<typeof checkoutCommit>>;
    try {
      clone = await checkoutCommit({
        repoUrl: job.repo_url,
        commitSha: job.commit_sha,
        dir: srcDir,
        auth,
        allow: parseAllow(job.outbound_allow),
        baseEnv: stepEnv(process.env, { ...config, env: {} }, job, { [COOKIE_VAR]: this.cookie }),
        onOutput: (b) => logs.write(b),
        signal,
        spareFrom: this.workRoot,
        ...(ctx.persistent ? { reuse: { keep: JobCaches.workspacePaths(config.cache) } } : {}),
        // `git log` of the build's commit (by name: a step may move HEAD) while git checks it out: a process less
        // on the way to the first step and to the final report (docs/benchmarks.md, the runner's overhead).
        onFetching: fetching,
        onFetched: () => {
          this.commitsListed ??= recentCommits(srcDir, { PATH: process.env.PATH, GIT_CONFIG_NOSYSTEM: "1", HOME: ctx.jobDir }, job.commit_sha);
        },
      });
    } catch (err) {
      await material.catch(() => undefined);
      throw err;
    }
    if (clone.exitCode !== 0 || clone.stopped) {
      await material.catch(() => undefined);
      if (!clone.stopped) say(`hangar: checkout of ${job.commit_sha} failed (exit code ${clone.exitCode})`);
      return clone.exitCode || 1;
    }
    const [signing, variables] = await material;
    for (const secret of signing.secrets) logs.addSecret(secret);
    for (const note of signing.notes) say(note);
    if (signing.withheld) say("hangar: signing material withheld: this branch is not protected (or the build is a fork's pull request)");
    if (Object.keys(signing.env).length > 0) say(`hangar: signing material ready (${Object.keys(signing.env).sort().join(", ")})`);
    if (variables === null) say("hangar: secret variables withheld: this branch is not protected (or the build is a fork's pull request)");
    for (const value of Object.values(variables ?? {})) logs.addSecret(value);
    if (variables && Object.keys(variables).length > 0) say(`hangar: secret variables: ${Object.keys(variables).sort().join(", ")}`);
    const env = envFor(signing, variables);
    if (runAs) {
      // Signing files stay 0600 in a 0700 directory, now the build user's: readable by the job's user only. A
      // persistent workspace is handed over again too: git (the runner's user) wrote into it.
      for (const dir of [srcDir, tmpDir, ctx.secretsDir]) if (existsSync(dir)) await chownTree(dir, runAs.uid, runAs.gid);
    }
    if (config.cache?.length) {
      this.prints = await secretPrints(ctx.secretsDir, [...signing.secrets, ...Object.values(variables ?? {})]);
      await this.restoreCaches(config, srcDir, ctx.jobDir, say);
      env.HANGAR_CACHE_HIT = this.caches?.hitVariable() ?? config.cache.map(() => "miss").join(",");
    }
    for (const [i, step] of config.steps.entries()) {
      if (signal.aborted) break;
      const result = results[i]!;
      result.status = "running";
      result.started_at = nowS();
      reporter.update({ status: "running", step_results: snapshot() });
      say(`\n==> [${i + 1}/${config.steps.length}] ${step.name}\n$ ${step.run}`);
      const started = Date.now();
      const prestarted = i === 0 ? early.step : undefined;
      prestarted?.start(true);
      const running =
        prestarted?.running ?? runStep(step.run, { cwd: srcDir, env, onOutput: (b) => logs.write(b), signal, beforeStart, ...identity });
      const run = await running;
      result.finished_at = nowS();
      result.exit_code = run.exitCode;
      const ok = run.exitCode === 0 && !run.stopped;
      result.status = ok ? "succeeded" : "failed";
      const took = ((Date.now() - started) / 1000).toFixed(1);
      say(
        run.stopped ? `hangar: step stopped (${this.stopReason}) after ${took} s` : `hangar: step exited with code ${run.exitCode} after ${took} s`,
      );
      if (!ok) {
        reporter.update({ status: "running", step_results: snapshot() });
        // Test reports and `when: always` artifacts of a failed build; a canceled or timed-out build uploads nothing.
        if (!run.stopped && !signal.aborted) {
          const reports = await this.uploadReports(config, srcDir, say, retry);
          await this.uploadMatching(artifactGlobs(config, false), srcDir, say, retry, reports);
        }
        return run.exitCode || 1;
      }
    }
    reporter.update({ status: "running", step_results: snapshot() });
    if (signal.aborted) return 1;
    const reports = await this.uploadReports(config, srcDir, say, retry);
    return (await this.uploadMatching(artifactGlobs(config, true), srcDir, say, retry, reports)) ? 0 : 1;
  }

  /**
   * Uploads the test reports (`reports.junit` globs) as `junit` artifacts and answers their paths, which the
   * artifact upload then skips. A report that fails to upload is said in the log but does not fail the build:
   * the build's result is its steps'.
   */
  private async uploadReports(
    config: PipelineConfig,
    srcDir: string,
    say: (line: string) => void,
    retry: { signal: AbortSignal },
  ): Promise<Set<string>> {
    const globs = config.reports?.junit ?? [];
    if (globs.length === 0) return new Set();
    const { files, refused } = await matchFiles(srcDir, globs);
    for (const glob of refused) say(`hangar: report pattern ${JSON.stringify(glob)} not used: it reaches outside the checkout or is too large`);
    if (files.length === 0) {
      say(`hangar: no file matches the test report patterns ${globs.join(", ")}`);
      return new Set();
    }
    const uploads = await uploadArtifacts(this.client, this.claimed.build_id, srcDir, files, say, retry, "junit");
    if (uploads.failed.length > 0) say(`hangar: ${uploads.failed.length} test report(s) failed to upload`);
    return new Set(files);
  }

  /** Uploads the files matching `globs` (but those in `skip`); false when an upload failed. */
  private async uploadMatching(
    globs: string[],
    srcDir: string,
    say: (line: string) => void,
    retry: { signal: AbortSignal },
    skip: Set<string>,
  ): Promise<boolean> {
    if (globs.length === 0) return true;
    const matched = await matchFiles(srcDir, globs);
    const { refused } = matched;
    const files = matched.files.filter((f) => !skip.has(f));
    for (const glob of refused) say(`hangar: artifact pattern ${JSON.stringify(glob)} not used: it reaches outside the checkout or is too large`);
    if (files.length === 0) {
      if (matched.files.length === 0) say(`hangar: no file matches the artifact patterns ${globs.join(", ")}`);
      return true;
    }
    const uploads = await uploadArtifacts(this.client, this.claimed.build_id, srcDir, files, say, retry);
    if (uploads.failed.length > 0 && !this.stopper.signal.aborted) {
      say(`hangar: ${uploads.failed.length} artifact(s) failed to upload`);
      return false;
    }
    return true;
  }

  private get trustClass(): "protected" | "open" {
    return this.claimed.trust === "protected" ? "protected" : "open";
  }

  /**
   * The pipeline's persistent workspace, locked for this job; null (a fresh directory instead, said in the log)
   * when another job holds it or it cannot be made.
   */
  private async takeWorkspace(say: (line: string) => void): Promise<[string, WorkspaceLock] | null> {
    const job = this.claimed;
    const dir = workspaceDir(this.workRoot, job.project_id, job.pipeline_id, this.trustClass);
    const runAs = this.context.runAs;
    try {
      const parent = join(this.workRoot, WORKSPACES_DIR);
      await mkdir(parent, { recursive: true, mode: 0o700 });
      // With --run-as the build user traverses to its workspace, never lists the others.
      await chmod(parent, runAs ? 0o711 : 0o700);
      const lock = await WorkspaceLock.acquire(dir);
      if (!lock) {
        say("hangar: the persistent workspace is in use by another job; this build uses a fresh directory");
        return null;
      }
      await mkdir(dir, { recursive: true, mode: 0o700 });
      say(`hangar: workspace ${dir} (persistent)`);
      return [dir, lock];
    } catch (err) {
      say(`hangar: the persistent workspace could not be used (${(err as Error).message}); this build uses a fresh directory`);
      return null;
    }
  }

  /** Fills in the cache keys (the checkout is there: `hash` reads it) and restores each entry. */
  private async restoreCaches(config: PipelineConfig, workspace: string, jobDir: string, say: (line: string) => void): Promise<void> {
    const store = this.context.cacheStore;
    if (!store) {
      say("hangar: this runner has no cache store; the cache entries are skipped");
      return;
    }
    const job = this.claimed;
    const runAs = this.context.runAs;
    const caches = new JobCaches({
      entries: config.cache ?? [],
      store,
      // The instance's shared cache (S3/R2 through the daemon's presigned URLs, docs/api.md §16); on a daemon whose
      // artifacts are on local disk the first lookup answers 409 and the job goes on with the local store only.
      remote: createRemoteCache(this.client, job, { say }),
      scope: scopeDir(job.project_id, this.trustClass),
      workspace,
      home: runAs ? runAs.home : (process.env.HOME ?? homedir()),
      stageDir: jobDir,
      identity: runAs ? { uid: runAs.uid, gid: runAs.gid } : {},
      values: { branch: job.branch, platform: config.platform, pipeline: job.pipeline_name ?? job.pipeline_id, ...hostKeyValues() },
      say,
    });
    try {
      await caches.resolveKeys();
    } catch (err) {
      say(`hangar: the cache keys could not be filled in (${(err as Error).message}); no cache for this build`);
      return;
    }
    this.caches = caches;
    await caches.restore();
  }

  /** Checkout credentials, or null when the project has none (404 no_credentials). */
  private async fetchCheckoutAuth(): Promise<CheckoutAuth | null> {
    const answer = await this.client.call("GET", this.client.jobPath(this.id, "/checkout-auth"), { retry: { signal: this.stopper.signal } });
    const body = answer.body as { username?: unknown; password?: unknown; code?: string } | null;
    if (answer.status === 404 && body?.code === "no_credentials") return null;
    if (answer.status !== 200 || typeof body?.password !== "string") {
      throw new DaemonError(answer.status, body?.code ?? `http_${answer.status}`, "checkout credentials could not be fetched");
    }
    return { username: typeof body.username === "string" ? body.username : null, password: body.password };
  }

  /** Watches for a cancel (or the job ending on the daemon's side, e.g. a lapsed lease) between heartbeats. */
  private async pollJob(): Promise<void> {
    if (this.stopReason) return;
    try {
      const state = await this.client.getJob(this.id);
      if (state.cancel_requested || state.status === "canceled") this.stop("canceled");
      else if (FINAL_STATUSES.has(state.status)) this.stop("final");
    } catch (err) {
      if (err instanceof DaemonError && err.status === 404) this.stop("final");
      // Unreachable daemon: keep running; the reports retry until it is back.
    }
  }
}
