// Clone of the build's commit into a fresh directory. Checkout credentials reach git only through environment
// variables of the git processes (GIT_CONFIG_COUNT/KEY/VALUE: an `http.<origin>/.extraHeader`), never through
// the command line (visible in `ps`), the remote URL (stored in .git/config, which steps can read) or a log.
import { execFile } from "node:child_process";
import { CLONE_DEPTH } from "./release-notes.ts";
import { existsSync, rmSync } from "node:fs";
import { appendFile, mkdir, readdir, rename, rm } from "node:fs/promises";
import { randomBytes } from "node:crypto";
import { promisify } from "node:util";
import { SPARE_REPO_PREFIX } from "./workroot.ts";
import { join } from "node:path";
import type { OutboundAllowList } from "../../domain/common/outbound.ts";
import { checkCloneTarget } from "./clone-guard.ts";
import { runProcess, type ProcessResult } from "./steps.ts";

export interface CheckoutAuth {
  username: string | null;
  password: string;
}

export interface CheckoutOptions {
  repoUrl: string;
  commitSha: string;
  dir: string;
  /** The credentials, or a promise of them: `git init` runs while they are being fetched. */
  auth: CheckoutAuth | null | Promise<CheckoutAuth | null>;
  /** The daemon's outbound allow-list: every host git connects to is checked against it first. */
  allow: OutboundAllowList;
  baseEnv: NodeJS.ProcessEnv;
  onOutput: (chunk: Buffer) => void;
  signal: AbortSignal;
  /** The work root, whose spare repository (prepareSpareRepository) a new checkout takes instead of `git init`. */
  spareFrom?: string;
  /**
   * A persistent workspace (docs/caches.md): when `dir` already holds a checkout it is fetched into instead of
   * cloned, the checkout forced, and untracked files removed (`git clean -ffdx`) except these workspace paths.
   */
  reuse?: { keep: string[] };
  /** Called once the fetch's process has started (the job starts its first step's process then). */
  onFetching?: () => void;
  /** Called once the build's commit is fetched, while it is checked out (the job lists the commits then). */
  onFetched?: () => void;
}

/** The URL as it may be shown: any user:password part removed. */
export function displayUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = "";
    u.password = "";
    return u.toString();
  } catch {
    return url.replace(/\/\/[^/@]*@/, "//");
  }
}

/** The `Authorization` header value git sends; exported so the job can mask it in logs too. */
export function basicHeaderValue(auth: CheckoutAuth): string {
  return `Basic ${Buffer.from(`${auth.username || "x-access-token"}:${auth.password}`).toString("base64")}`;
}

/** Variables that would route git through a proxy (whose address the guard never sees) or turn on tracing. */
const DROPPED_VARS = [
  "GIT_TRACE",
  "GIT_TRACE_CURL",
  "GIT_CURL_VERBOSE",
  "GIT_TRACE_PACKET",
  "http_proxy",
  "https_proxy",
  "all_proxy",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "ALL_PROXY",
  "GIT_PROXY_COMMAND",
  "GIT_SSH_COMMAND",
  "GIT_SSH",
];

/**
 * Environment for the git processes: no prompts, no credential helpers (a keychain would keep the token), no
 * system or global config (an `insteadOf` there would move the clone after the guard checked it), only the
 * transports `protocols` names, and curl pinned to the checked addresses (`pins`, `host:port:addresses`).
 */
export function gitEnv(
  base: NodeJS.ProcessEnv,
  repoUrl: string,
  auth: CheckoutAuth | null,
  protocols = "http:https:ssh:git:file",
  pins: readonly string[] = [],
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...base,
    GIT_TERMINAL_PROMPT: "0",
    GIT_ASKPASS: "",
    SSH_ASKPASS: "",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_ALLOW_PROTOCOL: protocols,
  };
  for (const name of DROPPED_VARS) delete env[name];
  const config: Array<[string, string]> = [
    ["credential.helper", ""],
    ["http.proxy", ""],
    // A reused workspace's hooks and fsmonitor were writable by the last build's steps: never run them.
    ["core.hooksPath", "/dev/null"],
    ["core.fsmonitor", "false"],
  ];
  for (const pin of pins) config.push(["http.curloptResolve", pin]);
  if (auth) {
    let scope = "";
    try {
      const u = new URL(repoUrl);
      if (u.protocol === "http:" || u.protocol === "https:") scope = `${u.protocol}//${u.host}/.`;
    } catch {
      // not a URL (scp-like ssh syntax): http.extraHeader does not apply anyway
    }
    config.push([`http.${scope}extraHeader`, `Authorization: ${basicHeaderValue(auth)}`]);
  }
  // git matches the scoped key once, against the given URL, then sends the header wherever a redirect moved
  // the repository: redirects are not followed at all.
  config.push(["http.followRedirects", "false"]);
  env.GIT_CONFIG_COUNT = String(config.length);
  config.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  return env;
}

const REFUSED: ProcessResult = { exitCode: 1, signal: null, stopped: false };
const DONE: ProcessResult = { exitCode: 0, signal: null, stopped: false };

/**
 * What `git remote add origin URL` writes to a fresh .git/config, written without a git process. The value is
 * written as git's config writer does: `"` and `\\` escaped, the whole quoted when it holds `;` or `#` or starts or
 * ends with a space. False (nothing written) for a URL with a control character: git adds that one itself.
 */
async function addOrigin(dir: string, url: string): Promise<boolean> {
  if (/[\u0000-\u001f\u007f]/.test(url)) return false;
  const escaped = url.replace(/[\\"]/g, (c) => `\\${c}`);
  const value = /[;#]|^ | $/.test(url) ? `"${escaped}"` : escaped;
  await appendFile(join(dir, ".git", "config"), `[remote "origin"]\n\turl = ${value}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n`);
  return true;
}

/**
 * A repository made by `git init` between jobs, one per work root: the next new checkout moves its `.git` into place
 * (a rename) instead of running git init on its way to the first step (docs/benchmarks.md, the runner's overhead).
 * A restart's clean-up of the work root removes one a crash left.
 */
const spares = new Map<string, Promise<string | null>>();

/** Makes the work root's next spare repository unless it has one; never throws. */
export function prepareSpareRepository(workRoot: string, baseEnv: NodeJS.ProcessEnv): void {
  if (spares.has(workRoot)) return;
  const dir = join(workRoot, `${SPARE_REPO_PREFIX}${randomBytes(6).toString("hex")}`);
  const made = (async () => {
    try {
      await mkdir(dir, { mode: 0o700 });
      await initRepository(dir, gitEnv(baseEnv, "", null, "file"));
      return dir;
    } catch {
      await rm(dir, { recursive: true, force: true }).catch(() => undefined);
      return null;
    }
  })();
  spares.set(workRoot, made);
}

/** Moves the spare repository's `.git` into `dir`; false when there is none or it cannot be (then git init runs). */
async function takeSpare(workRoot: string, dir: string): Promise<boolean> {
  const spare = await spares.get(workRoot);
  spares.delete(workRoot);
  if (!spare) return false;
  try {
    await rename(join(spare, ".git"), join(dir, ".git"));
    return true;
  } catch {
    return false;
  } finally {
    // Synchronous: the spare is an empty directory once its .git is taken, and this is on the way to the fetch.
    try {
      rmSync(spare, { recursive: true, force: true });
    } catch {
      // left for the next start's clean-up of the work root
    }
  }
}

const initRepository = promisify((dir: string, env: NodeJS.ProcessEnv, done: (err: Error | null) => void) =>
  execFile("git", ["init", "-q", "."], { cwd: dir, env }, (err) => done(err)),
);

/** Adds `name=value` to the GIT_CONFIG_* variables of `env`. */
function addConfig(env: NodeJS.ProcessEnv, name: string, value: string): void {
  const count = Number(env.GIT_CONFIG_COUNT ?? 0);
  env[`GIT_CONFIG_KEY_${count}`] = name;
  env[`GIT_CONFIG_VALUE_${count}`] = value;
  env.GIT_CONFIG_COUNT = String(count + 1);
}

/**
 * Runs the clone; answers the first failing git command's exit code, or 0. `git init` touches only `dir`, so it
 * runs while the credentials are fetched and the repository's host is checked (each git process is tens of
 * milliseconds on a busy machine: docs/benchmarks.md); its line is shown only once the clone is allowed.
 */
export async function checkoutCommit(options: CheckoutOptions): Promise<ProcessResult> {
  const { dir, commitSha } = options;
  let reusing = options.reuse !== undefined && existsSync(join(dir, ".git", "HEAD"));
  if (reusing && (await hasSymlink(join(dir, ".git")))) {
    // A link in .git could make git write outside the workspace (as root with --run-as): start over instead.
    options.onOutput(Buffer.from("hangar: the persistent workspace's .git holds a symbolic link; cloning it anew\n"));
    await emptyDir(dir);
    reusing = false;
  }
  if (reusing) {
    // The last build's steps could write .git/config (an `insteadOf`, a filter driver): it is made anew, with the
    // objects, refs and shallow list kept; hooks and a lock a killed git left are removed.
    options.onOutput(Buffer.from("hangar: reusing the persistent workspace\n"));
    await rm(join(dir, ".git", "config"), { force: true });
    await rm(join(dir, ".git", "hooks"), { recursive: true, force: true });
    await rm(join(dir, ".git", "index.lock"), { force: true });
  }
  const run = (args: string[], env: NodeJS.ProcessEnv, cwd: string, onOutput: (chunk: Buffer) => void) =>
    runProcess("git", args, { cwd, env, onOutput, signal: options.signal });
  const initOutput: Buffer[] = [];
  // No credentials and no transport for a command that connects nowhere.
  const initEnv = gitEnv(options.baseEnv, options.repoUrl, null, "file");
  // With --run-as the workspace is the build user's and git (the runner's user) would call it dubious.
  if (reusing) addConfig(initEnv, "safe.directory", dir);
  const [target, auth, init] = await Promise.all([
    checkCloneTarget(options.repoUrl, options.allow),
    options.auth,
    (async () =>
      !reusing && options.spareFrom && (await takeSpare(options.spareFrom, dir))
        ? DONE
        : run(["init", "-q", "."], initEnv, dir, (b) => initOutput.push(b)))(),
  ]);
  if (!target.ok) {
    options.onOutput(Buffer.from(`hangar: the clone of ${displayUrl(options.repoUrl)} is refused: ${target.message}\n`));
    return REFUSED;
  }
  const checked = target;
  const env = gitEnv(options.baseEnv, options.repoUrl, auth, target.protocols, target.pins);
  if (reusing) addConfig(env, "safe.directory", dir);
  else {
    // A fresh checkout is thrown away after the job: the `git maintenance run --auto` a fetch ends with is a
    // process (~5 ms) spent on nothing (docs/benchmarks.md, the runner's overhead). A persistent workspace keeps it.
    addConfig(env, "maintenance.auto", "false");
    addConfig(env, "gc.auto", "0");
  }
  const git = (args: string[], show = true, cwd = dir, withEnv = env): Promise<ProcessResult> => {
    if (show) options.onOutput(Buffer.from(`$ git ${args.map((a) => (a === options.repoUrl ? displayUrl(a) : a)).join(" ")}\n`));
    return run(args, withEnv, cwd, options.onOutput);
  };
  options.onOutput(Buffer.from("$ git init -q .\n"));
  for (const chunk of initOutput) options.onOutput(chunk);
  if (init.exitCode !== 0 || init.stopped) return init;
  const keep = (options.reuse?.keep ?? []).map((p) => p.replace(/^(\.\/)+/, "").replace(/\/+$/, "")).filter(Boolean);
  const sequence: Array<() => Promise<ProcessResult>> = [
    async () => {
      options.onOutput(Buffer.from(`$ git remote add origin ${displayUrl(options.repoUrl)}\n`));
      return (await addOrigin(dir, options.repoUrl)) ? DONE : git(["remote", "add", "origin", options.repoUrl], false);
    },
    async () => {
      // A full SHA can be fetched alone (shallow); an abbreviated one, or a server refusing fetch-by-SHA, needs
      // the branches.
      if (/^[0-9a-f]{40}$/i.test(commitSha)) {
        // 50 commits deep: release notes list the commits since the previous release (release-notes.ts).
        const fetching = git(["fetch", "-q", `--depth=${CLONE_DEPTH}`, "--no-tags", "origin", commitSha]);
        options.onFetching?.();
        const shallow = await fetching;
        if (shallow.exitCode === 0 || shallow.stopped) return shallow;
        options.onOutput(Buffer.from("hangar: fetching the single commit failed; fetching all branches\n"));
      }
      const fetching = git(["fetch", "-q", "--tags", "origin", "+refs/heads/*:refs/remotes/origin/*"]);
      options.onFetching?.();
      return fetching;
    },
    () => {
      const checkout = git(reusing ? ["checkout", "-q", "-f", "--detach", commitSha] : ["checkout", "-q", "--detach", commitSha]);
      options.onFetched?.();
      return checkout;
    },
    // Ignored files too (build outputs), but the cache entries' paths, anchored at the workspace's root.
    ...(reusing ? [() => git(["clean", "-ffdxq", ...keep.flatMap((p) => ["-e", `/${p}`])])] : []),
    () => updateSubmodules(dir, 0),
  ];
  /**
   * Submodules one level at a time, each level's URLs checked by the guard first (and pinned): a `.gitmodules`
   * is the repository's to write, so it could point anywhere. Relative URLs stay on the checked origin.
   */
  async function updateSubmodules(at: string, depth: number): Promise<ProcessResult> {
    if (!existsSync(join(at, ".gitmodules"))) return { exitCode: 0, signal: null, stopped: false };
    if (depth >= 8) {
      options.onOutput(Buffer.from("hangar: submodules nested deeper than 8 levels are not checked out\n"));
      return REFUSED;
    }
    const entries = await gitConfigList(at, ".gitmodules");
    const pins = [...checked.pins];
    const protocols = new Set(checked.protocols.split(":"));
    for (const [key, url] of entries) {
      if (!/^submodule\..*\.url$/.test(key) || url.startsWith("./") || url.startsWith("../")) continue;
      const found = await checkCloneTarget(url, options.allow);
      // A path on the runner's machine is only for a repository that is itself local.
      const sub = found.ok && found.protocols === "file" && checked.protocols !== "file" ? { ok: false as const, message: "a local path" } : found;
      if (!sub.ok) {
        options.onOutput(Buffer.from(`hangar: the submodule ${displayUrl(url)} is refused: ${sub.message}\n`));
        return REFUSED;
      }
      pins.push(...sub.pins);
      for (const p of sub.protocols.split(":")) protocols.add(p);
    }
    const subEnv = gitEnv(options.baseEnv, options.repoUrl, auth, [...protocols].join(":"), pins);
    const updated = await git(["submodule", "update", "-q", "--init", ...(reusing ? ["--force"] : [])], true, at, subEnv);
    if (updated.exitCode !== 0 || updated.stopped) return updated;
    for (const [key, path] of entries) {
      if (!/^submodule\..*\.path$/.test(key) || path.startsWith("/") || path.split("/").includes("..")) continue;
      const nested = await updateSubmodules(join(at, path), depth + 1);
      if (nested.exitCode !== 0 || nested.stopped) return nested;
    }
    return { exitCode: 0, signal: null, stopped: false };
  }
  for (const run of sequence) {
    const result = await run();
    if (result.exitCode !== 0 || result.stopped) return result;
  }
  return { exitCode: 0, signal: null, stopped: false };
}

/** Whether a directory tree holds a symbolic link anywhere (never following one). */
async function hasSymlink(dir: string): Promise<boolean> {
  for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    if (entry.isSymbolicLink()) return true;
    if (entry.isDirectory() && (await hasSymlink(join(dir, entry.name)))) return true;
  }
  return false;
}

/** Removes everything inside `dir`, keeping the directory. */
async function emptyDir(dir: string): Promise<void> {
  for (const name of await readdir(dir).catch(() => [] as string[])) await rm(join(dir, name), { recursive: true, force: true });
}

/** `git config -f FILE --list` as [key, value] pairs (empty when the file holds none or is unreadable). */
function gitConfigList(cwd: string, file: string): Promise<Array<[string, string]>> {
  return new Promise((resolve) => {
    execFile(
      "git",
      ["config", "-f", file, "--null", "--list"],
      { cwd, maxBuffer: 1024 * 1024, env: { PATH: process.env.PATH, GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" } },
      (err, stdout) => {
        if (err) return resolve([]);
        const pairs: Array<[string, string]> = [];
        for (const item of stdout.split("\0")) {
          if (!item) continue;
          const nl = item.indexOf("\n");
          pairs.push(nl < 0 ? [item, ""] : [item.slice(0, nl), item.slice(nl + 1)]);
        }
        resolve(pairs);
      },
    );
  });
}
