import { execFile } from "node:child_process";
import type { GitClient, GitCredentials } from "../domain/git.ts";

const LS_REMOTE_TIMEOUT_MS = 15_000;

/**
 * Environment for one git call. Credentials travel as an `http.<origin>/.extraHeader` set through
 * GIT_CONFIG_COUNT variables: never on the command line (visible in `ps`), in the URL (echoed in errors) or in
 * a log. Redirects are not followed: git matches that key once, against the URL it was given, and then sends
 * the header with every request, to wherever a redirect moved the repository too.
 */
function gitEnv(url: string, credentials?: GitCredentials): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    // Never wait for a password prompt; a missing credential is a failure, not a hang.
    GIT_TERMINAL_PROMPT: "0",
    GIT_ASKPASS: "",
    SSH_ASKPASS: "",
    GIT_SSH_COMMAND: "ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new",
    // No ext:: or fd:: transports: a repo URL must never run a command on this machine.
    GIT_ALLOW_PROTOCOL: "file:git:http:https:ssh",
    GIT_CONFIG_NOSYSTEM: "1",
    LC_ALL: "C",
  };
  const config: Array<[string, string]> = [["http.followRedirects", "false"]];
  const origin = URL.canParse(url) ? new URL(url) : null;
  // Only http(s) URLs carry the header (ssh and scp-like URLs have their own authentication).
  if (credentials && origin && (origin.protocol === "http:" || origin.protocol === "https:")) {
    const basic = Buffer.from(`${credentials.username}:${credentials.password}`).toString("base64");
    config.push([`http.${origin.protocol}//${origin.host}/.extraHeader`, `Authorization: Basic ${basic}`]);
  }
  env.GIT_CONFIG_COUNT = String(config.length);
  config.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  return env;
}

/** `git ls-remote` with a timeout; the output names the ref's commit or nothing when the ref is missing. */
export function createNodeGitClient(options: { timeoutMs?: number } = {}): GitClient {
  return {
    lsRemote(url, ref, credentials) {
      return new Promise((resolve) => {
        // `--` keeps a hostile URL from being read as an option.
        execFile(
          "git",
          ["ls-remote", "--", url, ref],
          { env: gitEnv(url, credentials), timeout: options.timeoutMs ?? LS_REMOTE_TIMEOUT_MS, maxBuffer: 1024 * 1024, killSignal: "SIGKILL" },
          (err, stdout) => {
            if (err) {
              // The message is ours, not git's stderr, which may echo the URL.
              const timedOut = (err as { killed?: boolean }).killed === true;
              resolve({ ok: false, reason: timedOut ? "timed out" : "git ls-remote failed" });
              return;
            }
            const line = stdout.split("\n").find((l) => l.endsWith(`\t${ref}`));
            const sha = line?.split("\t")[0] ?? null;
            resolve({ ok: true, sha: sha && /^[0-9a-f]{40,64}$/.test(sha) ? sha : null });
          },
        );
      });
    },
  };
}
