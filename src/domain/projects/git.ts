import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { loadInstance } from "../setup/instance.ts";

/** HTTPS credentials for a repository: a username (often ignored by the host) and an access token. */
export interface GitCredentials {
  username: string;
  password: string;
}

/** What `git ls-remote` found: the commit of the ref, null when the ref does not exist, or a failure. */
export type LsRemoteResult = { ok: true; sha: string | null } | { ok: false; reason: string; notAllowed?: string };

/**
 * How the daemon would reach a repository: a path or file:// URL on this machine, an http(s) URL (through the
 * outbound guard), or anything else (ssh://, scp-like `git@host:path`, git://), which it does not contact.
 */
export function classifyRepoUrl(url: string): "local" | "http" | "other" {
  if (url.startsWith("/") || /^[A-Za-z]:[\\/]/.test(url) || /^file:/i.test(url)) return "local";
  if (/^https?:\/\//i.test(url)) return "http";
  return "other";
}

/**
 * Local repositories name files on the daemon's machine: any developer could make the daemon (and its runners)
 * read any repository there. Allowed in local mode (the machine's owner is the user), or with
 * HANGAR_ALLOW_LOCAL_REPOS=1 (docs/api.md §12); otherwise 422 source_not_allowed.
 */
export async function assertRepoAllowed(deps: Pick<AppDeps, "db" | "clock" | "config">, repoUrl: string): Promise<void> {
  if (classifyRepoUrl(repoUrl) !== "local" || deps.config.allowLocalRepos) return;
  const inst = await loadInstance(deps);
  if (inst.runtimeMode === "local") return;
  throw new ApiError(
    "source_not_allowed",
    "local paths and file:// repositories are refused in remote mode; set HANGAR_ALLOW_LOCAL_REPOS=1 to allow them",
  );
}

/**
 * The one git operation the core needs. Node runs the real `git` (src/runtime/git.ts); the core never spawns
 * processes itself, so a Workers host can supply an implementation over the smart-HTTP protocol.
 */
export interface GitClient {
  lsRemote(url: string, ref: string, credentials?: GitCredentials): Promise<LsRemoteResult>;
  /**
   * One file at one commit (the pipeline file, docs/pipelines.md): fetching only that commit, shallow and without
   * other blobs where the server allows, within `timeoutMs`; `content` null when the commit has no such file.
   * Absent where the host has no git (Workers): the file is then unreachable.
   */
  readFile?(url: string, commitSha: string, path: string, options: ReadFileOptions): Promise<ReadFileResult>;
}

export interface ReadFileOptions {
  credentials?: GitCredentials;
  timeoutMs: number;
  maxBytes: number;
}

/**
 * `unreachable`: git could not connect or timed out (a stored pipeline then builds with its stored config);
 * `failed`: any other git failure (refused credentials, unknown commit); `too_large`: over `maxBytes`;
 * `not_allowed`: the outbound guard refused the destination.
 */
export type ReadFileResult =
  | { ok: true; content: Uint8Array | null }
  | { ok: false; kind: "unreachable" | "failed" | "too_large" | "not_allowed"; reason: string };

/** Branch names git accepts as `refs/heads/<name>`, minus anything that could read as an option. */
const BRANCH_NAME = /^(?!-)(?!.*\.\.)(?!.*\/\/)(?!.*@\{)[A-Za-z0-9._/-]{1,200}(?<![./])$/;

export function isValidBranchName(name: string): boolean {
  return BRANCH_NAME.test(name) && !name.endsWith(".lock");
}

/** Resolves a branch to its current commit (docs/api.md §5): 422 branch_not_found or source_unreachable. */
export async function resolveBranch(deps: Pick<AppDeps, "git">, repoUrl: string, branch: string, credentials?: GitCredentials): Promise<string> {
  const result = await deps.git.lsRemote(repoUrl, `refs/heads/${branch}`, credentials);
  if (!result.ok && result.notAllowed) throw new ApiError("source_not_allowed", `the repository cannot be contacted: ${result.notAllowed}`);
  if (!result.ok) throw new ApiError("source_unreachable", "the repository could not be reached");
  if (!result.sha) throw new ApiError("branch_not_found", `branch '${branch}' does not exist in the repository`);
  return result.sha;
}
