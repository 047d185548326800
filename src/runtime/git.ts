import { execFile } from "node:child_process";
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  classifyRepoUrl,
  type GitClient,
  type GitCredentials,
  type LsRemoteResult,
  type ReadFileOptions,
  type ReadFileResult,
} from "../domain/projects/git.ts";
import { checkResolved, checkUrlWithoutDns, EMPTY_ALLOW_LIST, findDestinationNotAllowed, type OutboundAllowList } from "../domain/common/outbound.ts";
import { parseIpLiteral } from "../domain/common/addresses.ts";

const LS_REMOTE_TIMEOUT_MS = 15_000;

/**
 * Environment for one git call, built from nothing but PATH: the daemon's own HOME, ~/.gitconfig, system
 * config, credential helpers, SSH keys and proxy variables must never lend a user's repo_url their powers
 * (docs/api.md §12). HOME is a fresh empty directory, global and system config are /dev/null.
 *
 * Credentials travel as an `http.<origin>/.extraHeader` set through GIT_CONFIG_COUNT variables: never on the
 * command line (visible in `ps`), in the URL (echoed in errors) or in a log. Redirects are not followed: git
 * matches that key once, against the URL it was given, and then sends the header with every request, to
 * wherever a redirect moved the repository too. `pin` fixes the host's address for curl (`http.curloptResolve`),
 * so git connects to the address the guard checked, with no second DNS answer to rebind to.
 */
function gitEnv(home: string, url: string, protocols: string, credentials?: GitCredentials, pin?: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    XDG_CONFIG_HOME: home,
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_SYSTEM: "/dev/null",
    GIT_CONFIG_GLOBAL: "/dev/null",
    // Never wait for a password prompt; a missing credential is a failure, not a hang.
    GIT_TERMINAL_PROMPT: "0",
    GIT_ASKPASS: "",
    SSH_ASKPASS: "",
    // Only the transports this call needs: never ssh (the daemon user's keys), ext:: or fd:: (commands).
    GIT_ALLOW_PROTOCOL: protocols,
    LC_ALL: "C",
  };
  const config: Array<[string, string]> = [
    ["http.followRedirects", "false"],
    // An empty value resets the helper list: no credential store of anyone's is consulted.
    ["credential.helper", ""],
  ];
  if (pin) config.push(["http.curloptResolve", pin]);
  const origin = URL.canParse(url) ? new URL(url) : null;
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

function lookupAll(hostname: string): Promise<LookupAddress[]> {
  return new Promise((resolve, reject) => dnsLookup(hostname, { all: true, verbatim: true }, (err, list) => (err ? reject(err) : resolve(list))));
}

type Target = { ok: true; url: string; protocols: string; pin?: string } | { ok: false; result: LsRemoteResult };

/** What git may be pointed at for this URL: the guard's check of an http(s) host, and its pinned addresses. */
async function prepareTarget(url: string, allow: OutboundAllowList): Promise<Target> {
  const kind = classifyRepoUrl(url);
  // Whether a local repository may be read at all is the domain's decision (local mode or the env switch).
  if (kind === "local") return { ok: true, url, protocols: "file" };
  if (kind !== "http") {
    return {
      ok: false,
      result: {
        ok: false,
        reason: "not allowed",
        notAllowed:
          "the daemon resolves branches over http(s) only (ssh would use the daemon user's keys); use the repository's https URL or pass commit_sha",
      },
    };
  }
  // The WHATWG parser normalises every IPv4 spelling (2130706433, 0x7f.1, 127.1) to what curl would connect to.
  const parsed = new URL(url);
  try {
    const { literal } = checkUrlWithoutDns(parsed, allow);
    if (literal) {
      // localhost is pinned to 127.0.0.1, so no resolver (and no ::1 the allow list may not hold) decides.
      const pin = parseIpLiteral(parsed.hostname)
        ? undefined
        : `${parsed.hostname}:${parsed.port || (parsed.protocol === "https:" ? "443" : "80")}:127.0.0.1`;
      return { ok: true, url: parsed.href, protocols: "http:https", pin };
    }
    let addresses: LookupAddress[];
    try {
      addresses = await lookupAll(parsed.hostname);
    } catch {
      return { ok: false, result: { ok: false, reason: "the repository's host name does not resolve" } };
    }
    const { usable } = checkResolved(
      parsed.hostname,
      addresses.map((a) => a.address),
      allow,
    );
    const port = parsed.port || (parsed.protocol === "https:" ? "443" : "80");
    const pinned = usable.map((a) => (a.includes(":") ? `[${a}]` : a)).join(",");
    return { ok: true, url: parsed.href, protocols: "http:https", pin: `${parsed.hostname}:${port}:${pinned}` };
  } catch (err) {
    const refused = findDestinationNotAllowed(err);
    if (!refused) throw err;
    return { ok: false, result: { ok: false, reason: "not allowed", notAllowed: refused.message } };
  }
}

/** What git says on stderr when it never reached the repository (LC_ALL=C keeps these messages in English). */
const CANNOT_CONNECT =
  /Could not resolve host|Failed to connect|Couldn't connect|Connection refused|Connection timed out|timed out|Network is unreachable|No route to host/i;

type GitRun = { ok: true; stdout: Buffer } | { ok: false; timedOut: boolean; stderr: string };

function runGit(
  args: string[],
  options: { env: NodeJS.ProcessEnv; cwd: string; deadline: number; maxBuffer: number; input?: string },
): Promise<GitRun> {
  const timeout = Math.max(1, options.deadline - Date.now());
  return new Promise((resolve) => {
    const child = execFile(
      "git",
      args,
      { env: options.env, cwd: options.cwd, timeout, maxBuffer: options.maxBuffer, killSignal: "SIGKILL", encoding: "buffer" },
      (err, stdout, stderr) => {
        if (err) resolve({ ok: false, timedOut: (err as { killed?: boolean }).killed === true, stderr: stderr.toString("utf8") });
        else resolve({ ok: true, stdout });
      },
    );
    // A git that exits before reading its input must not crash the daemon with EPIPE.
    child.stdin?.on("error", () => {});
    child.stdin?.end(options.input ?? "");
  });
}

/**
 * One file at one commit, as little fetched as git allows, in one round trip: an empty bare repository whose
 * `origin` is a promisor remote (its few files written directly, no `git init`), and a fetch of that one commit at depth 1 with only the trees and blobs no deeper
 * than the file and no larger than the cap (`--filter=combine:tree:N+blob:limit=M`). For the default `.hangar.yml`
 * that is the root tree and the small files beside it. `cat-file` then reads the file locally; only a file the
 * filter left out (a larger one) is fetched lazily. A server that refuses the tree filter gets the older read:
 * `--filter=blob:none` and the one blob fetched lazily (a second round trip). A server that does not filter at all
 * sends the commit's blobs, still one commit deep. No working tree is ever written. The whole read shares one
 * deadline. Figures: docs/benchmarks.md (bench:config).
 */
async function readFileAt(url: string, commitSha: string, path: string, options: ReadFileOptions, allow: OutboundAllowList): Promise<ReadFileResult> {
  const deadline = Date.now() + options.timeoutMs;
  if (!/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(commitSha)) {
    return {
      ok: false,
      kind: "failed",
      reason: "the pipeline file is read at a full commit sha (40 hexadecimal characters); an abbreviated one cannot be fetched",
    };
  }
  const target = await prepareTarget(url, allow);
  if (!target.ok) {
    const r = target.result as { notAllowed?: string; reason?: string };
    return r.notAllowed
      ? { ok: false, kind: "not_allowed", reason: r.notAllowed }
      : { ok: false, kind: "unreachable", reason: r.reason ?? "the repository cannot be reached" };
  }
  const home = mkdtempSync(join(tmpdir(), "hangar-git-read-"));
  try {
    const env = gitEnv(home, target.url, target.protocols, options.credentials, target.pin);
    const repo = join(home, "repo.git");
    const small = { env, cwd: home, deadline, maxBuffer: 64 * 1024 };
    // The empty bare repository is written here rather than by `git init` (one process fewer per read); the remote
    // goes into its own config file rather than onto a command line.
    mkdirSync(join(repo, "objects"), { recursive: true });
    mkdirSync(join(repo, "refs", "heads"), { recursive: true });
    writeFileSync(join(repo, "HEAD"), "ref: refs/heads/main\n");
    writeFileSync(
      join(repo, "config"),
      `[core]\n\trepositoryformatversion = 1\n\tbare = true\n[extensions]\n\tpartialClone = origin\n[remote "origin"]\n\turl = ${JSON.stringify(target.url)}\n\tpromisor = true\n\tpartialclonefilter = blob:none\n`,
    );
    const inRepo = { ...small, cwd: repo, env: { ...env, GIT_DIR: repo } };
    const depth = path.split("/").length + 1;
    const fetchArgs = (filter: string) => [
      "fetch",
      "-q",
      "--depth=1",
      `--filter=${filter}`,
      "--no-tags",
      "--no-write-fetch-head",
      "origin",
      commitSha,
    ];
    let fetched = await runGit(fetchArgs(`combine:tree:${depth}+blob:limit=${options.maxBytes + 1}`), inRepo);
    if (!fetched.ok && !fetched.timedOut && !CANNOT_CONNECT.test(fetched.stderr)) fetched = await runGit(fetchArgs("blob:none"), inRepo);
    if (!fetched.ok) return failure(fetched, "git fetch of the commit failed");
    // `--batch-check` names the object at the path (a line that ends in "missing" when there is none); reading its
    // size is what fetches a left-out blob, so the cap is checked before any content is read.
    const checked = await runGit(["cat-file", "--batch-check=%(objectname) %(objecttype) %(objectsize)"], {
      ...inRepo,
      input: `${commitSha}:${path}\n`,
    });
    if (!checked.ok) return failure(checked, "git could not fetch the file");
    const match = /^([0-9a-f]+) (\w+) (\d+)$/.exec(checked.stdout.toString("utf8").trim());
    if (!match) {
      // "missing" is either no such path or a blob the lazy fetch could not get: the (local) tree tells which.
      const listed = await runGit(["ls-tree", "-z", commitSha, "--", path], inRepo);
      if (!listed.ok) return failure(listed, "git ls-tree failed");
      return listed.stdout.length === 0 ? { ok: true, content: null } : { ok: false, kind: "failed", reason: "git could not fetch the file" };
    }
    if (match[2] !== "blob") return { ok: true, content: null };
    if (Number(match[3]) > options.maxBytes) {
      return { ok: false, kind: "too_large", reason: `the file is larger than ${options.maxBytes} bytes` };
    }
    const content = await runGit(["cat-file", "blob", match[1]!], { ...inRepo, maxBuffer: options.maxBytes + 1 });
    if (!content.ok) return failure(content, "git could not read the file");
    return { ok: true, content: new Uint8Array(content.stdout) };
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

/** The message is ours, not git's stderr (which may echo the URL); git's words only decide the kind. */
function failure(run: Extract<GitRun, { ok: false }>, what: string): ReadFileResult {
  if (run.timedOut) return { ok: false, kind: "unreachable", reason: "git timed out" };
  if (CANNOT_CONNECT.test(run.stderr)) return { ok: false, kind: "unreachable", reason: "git could not connect to the repository" };
  return { ok: false, kind: "failed", reason: what };
}

/**
 * `git ls-remote` with a timeout, through the outbound guard; the output names the ref's commit or nothing when
 * the ref is missing. `allow` is HANGAR_OUTBOUND_ALLOW (empty: only public addresses).
 */
export function createNodeGitClient(options: { timeoutMs?: number; allow?: OutboundAllowList } = {}): GitClient {
  const allow = options.allow ?? EMPTY_ALLOW_LIST;
  return {
    readFile: (url, commitSha, path, readOptions) => readFileAt(url, commitSha, path, readOptions, allow),
    async lsRemote(url, ref, credentials) {
      const target = await prepareTarget(url, allow);
      if (!target.ok) return target.result;
      const home = mkdtempSync(join(tmpdir(), "hangar-git-home-"));
      try {
        return await new Promise<LsRemoteResult>((resolve) => {
          // `--` keeps a hostile URL from being read as an option.
          execFile(
            "git",
            ["ls-remote", "--", target.url, ref],
            {
              env: gitEnv(home, target.url, target.protocols, credentials, target.pin),
              cwd: home,
              timeout: options.timeoutMs ?? LS_REMOTE_TIMEOUT_MS,
              maxBuffer: 1024 * 1024,
              killSignal: "SIGKILL",
            },
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
      } finally {
        rmSync(home, { recursive: true, force: true });
      }
    },
  };
}
