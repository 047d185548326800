// Clone of the build's commit into a fresh directory. Checkout credentials reach git only through environment
// variables of the git processes (GIT_CONFIG_COUNT/KEY/VALUE: an `http.<origin>/.extraHeader`), never through
// the command line (visible in `ps`), the remote URL (stored in .git/config, which steps can read) or a log.
import { CLONE_DEPTH } from "./release-notes.ts";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { runProcess, type ProcessResult } from "./steps.ts";

export interface CheckoutAuth {
  username: string | null;
  password: string;
}

export interface CheckoutOptions {
  repoUrl: string;
  commitSha: string;
  dir: string;
  auth: CheckoutAuth | null;
  baseEnv: NodeJS.ProcessEnv;
  onOutput: (chunk: Buffer) => void;
  signal: AbortSignal;
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

/** Environment for the git processes: no prompts, no credential helpers (a keychain would keep the token). */
export function gitEnv(base: NodeJS.ProcessEnv, repoUrl: string, auth: CheckoutAuth | null): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...base, GIT_TERMINAL_PROMPT: "0", GIT_ASKPASS: "", SSH_ASKPASS: "" };
  // Tracing could print request headers; a build machine's shell profile must not turn it on for the clone.
  for (const name of ["GIT_TRACE", "GIT_TRACE_CURL", "GIT_CURL_VERBOSE", "GIT_TRACE_PACKET"]) delete env[name];
  const config: Array<[string, string]> = [["credential.helper", ""]];
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

/** Runs the clone; answers the first failing git command's exit code, or 0. */
export async function checkoutCommit(options: CheckoutOptions): Promise<ProcessResult> {
  const env = gitEnv(options.baseEnv, options.repoUrl, options.auth);
  const { dir, commitSha } = options;
  const git = (args: string[], show = true): Promise<ProcessResult> => {
    if (show) options.onOutput(Buffer.from(`$ git ${args.map((a) => (a === options.repoUrl ? displayUrl(a) : a)).join(" ")}\n`));
    return runProcess("git", args, { cwd: dir, env, onOutput: options.onOutput, signal: options.signal });
  };
  const sequence: Array<() => Promise<ProcessResult>> = [
    () => git(["init", "-q", "."]),
    () => git(["remote", "add", "origin", options.repoUrl]),
    async () => {
      // A full SHA can be fetched alone (shallow); an abbreviated one, or a server refusing fetch-by-SHA, needs
      // the branches.
      if (/^[0-9a-f]{40}$/i.test(commitSha)) {
        // 50 commits deep: release notes list the commits since the previous release (release-notes.ts).
        const shallow = await git(["fetch", "-q", `--depth=${CLONE_DEPTH}`, "--no-tags", "origin", commitSha]);
        if (shallow.exitCode === 0 || shallow.stopped) return shallow;
        options.onOutput(Buffer.from("hangar: fetching the single commit failed; fetching all branches\n"));
      }
      return git(["fetch", "-q", "--tags", "origin", "+refs/heads/*:refs/remotes/origin/*"]);
    },
    () => git(["checkout", "-q", "--detach", commitSha]),
    async () =>
      existsSync(join(dir, ".gitmodules"))
        ? git(["submodule", "update", "-q", "--init", "--recursive"])
        : { exitCode: 0, signal: null, stopped: false },
  ];
  for (const run of sequence) {
    const result = await run();
    if (result.exitCode !== 0 || result.stopped) return result;
  }
  return { exitCode: 0, signal: null, stopped: false };
}
