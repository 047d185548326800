// `hangar runner` and `hangar runner register` (docs/api.md §9).
import { statSync } from "node:fs";
import { userInfo } from "node:os";
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { CacheStore } from "./cache-store.ts";
import { DiskCare, GIB } from "./disk.ts";
import { parseOptions, readSecretOption, SecretOptionError } from "../options.ts";
import { DaemonError, RunnerClient, UnreachableError } from "./client.ts";
import { createLogger } from "./log.ts";
import { runLoop } from "./loop.ts";
import { resolveRunAsUser, type RunAsUser } from "./run-as.ts";
import { detectCgroupSupport, endUserProcesses, removeStaleCgroups, removeUserTempFiles } from "./isolation.ts";
import { cleanWorkRoot, defaultWorkRoot, JOB_DIR_PREFIX, prepareWorkRoot, WorkRootError } from "./workroot.ts";
import { cleanSigningAtStart, hostSigningSystem } from "./signing.ts";

const HELP = `Usage: hangar runner [--url URL] [--id RUNNER_ID] [--token TOKEN | --token-file FILE] [--workdir DIR] [--once]
       hangar runner register --url URL [--session TOKEN | --session-file FILE] [--name NAME] [--platform P]...

The reference build runner. It claims jobs from the daemon one at a time, clones the build's commit into a fresh
directory under the work directory, runs each step with \`sh -c\` in its own process group, streams the log,
reports step results, uploads the files matching the pipeline's \`artifacts\` patterns, and honours cancellation.

Options:
  --url URL          the daemon's base URL                     (or HANGAR_URL)
  --id RUNNER_ID     the runner's id from \`register\`            (or HANGAR_RUNNER_ID)
  --token TOKEN      the runner's token from \`register\`         (or HANGAR_RUNNER_TOKEN; prefer the variable:
                     a command line is visible to other users of the machine)
  --token-file FILE  read the runner's token from FILE instead
  --workdir DIR      the work root, made private (0700); stale job directories in it are removed at start
                     (default: ~/.hangar-runner/<id>)
  --run-as USER      run steps as this OS user, a build user of its own (the runner must be root, the token
                     in --token-file; every process of USER is ended after each job; docs/runner-isolation.md).
                     Without it any build can read this runner's token.
  --once             run one job (waiting up to 30 s for it); exit 0 when it succeeded, 1 otherwise
  --cache-dir DIR    where \`cache\` entries are kept, per project (default: <workdir>/caches; docs/caches.md)
  --cache-max-gb N   the cache store's cap in GiB, least recently used entries evicted first (default 20)
  --min-free-gb N    below this many GiB free under the work root, evict cache entries, then stop claiming
                     jobs until space is back (default 10)

register: registers a new runner with a user session of an owner or admin and prints two lines,
  HANGAR_RUNNER_ID=<id> and HANGAR_RUNNER_TOKEN=<token>, ready for an env file.
  --session TOKEN    a user session token                      (or HANGAR_SESSION_TOKEN)
  --session-file F   read the session token from file F instead
  --name NAME        a display name
  --platform P       a platform this machine builds: ios, android, macos (repeatable or comma-separated;
                     default: ios, macos and android on macOS, android elsewhere)
  --run-as USER      the runner will be started with --run-as (reported as capabilities.isolation "user")

SIGTERM or SIGINT drains: the current job finishes, then the runner exits 0. A second signal stops the job.
Signing material of iOS and Android builds reaches steps as HANGAR_ANDROID_KEYSTORE_PATH,
HANGAR_ANDROID_KEYSTORE_PASSWORD, HANGAR_ANDROID_KEY_ALIAS, HANGAR_ANDROID_KEY_PASSWORD,
HANGAR_IOS_CERTIFICATE_PATH, HANGAR_IOS_CERTIFICATE_PASSWORD, HANGAR_IOS_PROVISIONING_PROFILE_PATH (the first
profile), HANGAR_IOS_PROFILES (JSON: bundle id pattern -> {uuid, name, path}) and, on macOS, HANGAR_KEYCHAIN_PATH
(a keychain made for the job; see docs/signing.md).
`;

/** A GiB amount option (fractions allowed; GB = 2^30 bytes): its value, the default when absent, null when invalid. */
function gigabytes(value: string | undefined, fallback: number): number | null {
  if (value === undefined) return fallback;
  const n = Number(value);
  return value.trim() !== "" && Number.isFinite(n) && n >= 0 ? n : null;
}

/** Usage errors exit 2, failures 1. */
function fail(message: string, code = 2): number {
  process.stderr.write(`hangar runner: ${message}\n`);
  return code;
}

function defaultPlatforms(): string[] {
  return process.platform === "darwin" ? ["ios", "macos", "android"] : ["android"];
}

/** `program` is how the user started it: `hangar runner`, or `node hangar-runner.mjs` for the standalone file. */
export async function runnerMain(args: string[], program = "hangar runner"): Promise<number> {
  if (args.includes("--help") || args.includes("-h")) {
    process.stdout.write(HELP.replaceAll("hangar runner", program));
    return 0;
  }
  if (args[0] === "register") return registerCommand(args.slice(1));
  const values = parseOptions(args, {
    url: { type: "string" },
    id: { type: "string" },
    token: { type: "string" },
    "token-file": { type: "string" },
    workdir: { type: "string" },
    "run-as": { type: "string" },
    once: { type: "boolean", default: false },
    "cache-dir": { type: "string" },
    "cache-max-gb": { type: "string" },
    "min-free-gb": { type: "string" },
  });
  if (typeof values === "string") return fail(`${values}\n\n${HELP}`);
  const cacheMaxGb = gigabytes(values["cache-max-gb"], 20);
  if (cacheMaxGb === null) return fail("--cache-max-gb must be a number of GiB, 0 or more (fractions allowed)");
  const minFreeGb = gigabytes(values["min-free-gb"], 10);
  if (minFreeGb === null) return fail("--min-free-gb must be a number of GiB, 0 or more (fractions allowed)");
  const tokenFile = values["token-file"];
  if (tokenFile !== undefined) {
    // A token file others can read is no secret (docs/api.md §9: a file of mode 0600).
    const mode = statSync(tokenFile, { throwIfNoEntry: false })?.mode;
    if (mode !== undefined && (mode & 0o077) !== 0) return fail(`--token-file ${tokenFile} is readable by others: chmod 600 ${tokenFile}`);
  }
  const url = values.url ?? process.env.HANGAR_URL;
  const id = values.id ?? process.env.HANGAR_RUNNER_ID;
  let token: string | undefined;
  try {
    token = readSecretOption({
      value: values.token,
      file: values["token-file"],
      env: process.env.HANGAR_RUNNER_TOKEN,
      names: { value: "--token", file: "--token-file", env: "HANGAR_RUNNER_TOKEN" },
    });
  } catch (err) {
    if (err instanceof SecretOptionError) return fail(err.message);
    throw err;
  }
  if (!url) return fail("the daemon's URL is missing: --url or HANGAR_URL");
  if (!id) return fail("the runner id is missing: --id or HANGAR_RUNNER_ID (see `hangar runner register`)");
  if (!token) return fail("the runner token is missing: --token, --token-file or HANGAR_RUNNER_TOKEN (see `hangar runner register`)");
  if (!/^https?:\/\//.test(url)) return fail("--url must be an http:// or https:// URL");
  // Read once; from here on no child (git, steps) can inherit it, even by accident.
  delete process.env.HANGAR_RUNNER_TOKEN;
  delete process.env.HANGAR_SESSION_TOKEN;

  const log = createLogger();
  let runAs: RunAsUser | undefined;
  if (values["run-as"] !== undefined) {
    if (process.getuid?.() !== 0) return fail("--run-as needs the runner to run as root");
    try {
      runAs = resolveRunAsUser(values["run-as"]);
    } catch (err) {
      return fail((err as Error).message);
    }
    // Its every process is ended after each job: never the runner's own user (nor root, refused above).
    if (runAs.uid === process.getuid?.() || runAs.name === userInfo().username) return fail("--run-as: the user must not be the runner's own user");
    // A command line is readable by every user of the machine, the build user included (/proc/<pid>/cmdline).
    if (values.token !== undefined)
      return fail("--run-as: give the token with --token-file (a file of mode 0600), not --token: the build user can read the runner's command line");
  } else {
    log.warn(
      `steps run as ${userInfo().username}, the runner's own user: any build on this runner can read its token (its token file, its environment) ` +
        "and act as this runner. For a runner that receives signing keys or secrets, start it as root with --run-as BUILD_USER --token-file FILE " +
        "(docs/runner-isolation.md).",
    );
  }
  const cgroups = await detectCgroupSupport();
  if (cgroups.ok) {
    log.info(`each job runs in a cgroup of its own under ${cgroups.base}, killed as a whole when the job ends`);
    const stale = await removeStaleCgroups(cgroups.base);
    if (stale > 0) log.warn(`ended ${stale} process(es) left in the cgroups of an earlier run's jobs`);
  } else {
    log.info(
      `no cgroup per job (${cgroups.reason}): a job's processes are ended by ${runAs ? `ending every process of ${runAs.name}` : "the job cookie sweep"}`,
    );
  }
  if (runAs) {
    // A crash may have left the build user's processes and temporary files behind.
    const left = await endUserProcesses(runAs.uid, runAs.gid).catch((err: Error) => (log.error(err.message), 0));
    if (left > 0) log.warn(`ended ${left} process(es) of ${runAs.name} left from before`);
    await removeUserTempFiles(runAs.uid).catch(() => 0);
  }
  const client = new RunnerClient(url, token, id, log);
  const workRoot = resolve(values.workdir ?? defaultWorkRoot(id));
  const sweepUids = new Set([process.getuid?.() ?? 0, ...(runAs ? [runAs.uid] : [])]);
  try {
    await prepareWorkRoot(workRoot, { runAs: runAs !== undefined });
    await cleanSigningAtStart(workRoot, JOB_DIR_PREFIX, hostSigningSystem(runAs ? { uid: runAs.uid, gid: runAs.gid, home: runAs.home } : {}), log);
    await cleanWorkRoot(workRoot, log, sweepUids);
  } catch (err) {
    // Someone else's or a symbolic link: never work there. Anything else (not creatable yet) fails each job at
    // once instead, as before, so the builds do not sit queued for a runner that cannot start.
    if (err instanceof WorkRootError) return fail(`work root ${workRoot}: ${err.message}`, 1);
    log.warn(`work root ${workRoot}: ${(err as Error).message}`);
  }
  let code: number;
  try {
    // How long --once waits for a job: 30 s (docs/api.md §9); tests shorten it.
    const onceWaitS = Number(process.env.HANGAR_RUNNER_ONCE_WAIT_S) || undefined;
    const cacheStore = new CacheStore(resolve(values["cache-dir"] ?? join(workRoot, "caches")), cacheMaxGb * GIB);
    await mkdir(cacheStore.dir, { recursive: true, mode: 0o700 }).catch((err: Error) =>
      log.warn(`cache directory ${cacheStore.dir}: ${err.message}`),
    );
    const disk = new DiskCare(workRoot, minFreeGb * GIB, cacheStore, log);
    const context = { maskedValues: [token], sweepUids, runAs, isolation: runAs ? ("user" as const) : ("none" as const), cgroups, cacheStore };
    code = await runLoop({ client, workRoot, log, once: values.once ?? false, onceWaitS, context, disk });
  } catch (err) {
    if (err instanceof DaemonError) {
      log.error(`the daemon refused the runner: ${err.status} ${err.code} — ${err.message}`);
    } else if (err instanceof UnreachableError) {
      log.error(err.message);
    } else {
      log.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    }
    code = 1;
  }
  // Keep-alive sockets must not hold the process open once the work is done.
  setTimeout(() => process.exit(code), 100).unref();
  return code;
}

async function registerCommand(args: string[]): Promise<number> {
  const values = parseOptions(args, {
    url: { type: "string" },
    session: { type: "string" },
    "session-file": { type: "string" },
    name: { type: "string" },
    platform: { type: "string", multiple: true },
    "run-as": { type: "string" },
  });
  if (typeof values === "string") return fail(`${values}\n\n${HELP}`);
  const url = (values.url ?? process.env.HANGAR_URL)?.replace(/\/+$/, "");
  let session: string | undefined;
  try {
    session = readSecretOption({
      value: values.session,
      file: values["session-file"],
      env: process.env.HANGAR_SESSION_TOKEN,
      names: { value: "--session", file: "--session-file", env: "HANGAR_SESSION_TOKEN" },
    });
  } catch (err) {
    if (err instanceof SecretOptionError) return fail(err.message);
    throw err;
  }
  if (!url) return fail("the daemon's URL is missing: --url or HANGAR_URL");
  if (!session) return fail("a user session token is missing: --session, --session-file or HANGAR_SESSION_TOKEN");
  const platforms =
    values.platform
      ?.flatMap((p) => p.split(","))
      .map((p) => p.trim())
      .filter(Boolean) ?? defaultPlatforms();
  // Whether steps will run as a build user of their own; the runner reports it again each time it starts.
  const body: Record<string, unknown> = { capabilities: { platforms, isolation: values["run-as"] ? "user" : "none" } };
  if (values.name) body.name = values.name;
  let res: Response;
  try {
    res = await fetch(`${url}/v1/runners/register`, {
      method: "POST",
      headers: { authorization: `Bearer ${session}`, "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (err) {
    return fail(`could not reach ${url}: ${(err as Error).message}`, 1);
  }
  const text = await res.text();
  let parsed: { id?: string; token?: string; code?: string; message?: string } = {};
  try {
    parsed = JSON.parse(text) as typeof parsed;
  } catch {
    // not JSON: reported below
  }
  if (!res.ok || !parsed.id || !parsed.token) {
    return fail(`registration failed: ${res.status} ${parsed.code ?? ""} ${parsed.message ?? ""}`.trim(), 1);
  }
  process.stdout.write(`HANGAR_RUNNER_ID=${parsed.id}\nHANGAR_RUNNER_TOKEN=${parsed.token}\n`);
  process.stderr.write(`hangar runner: registered runner ${parsed.id} for ${platforms.join(", ")}\n`);
  return 0;
}
