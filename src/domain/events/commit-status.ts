import type { ForgeProvider } from "../../db/schema/constants.ts";
import type { GitCredentials } from "../projects/git.ts";

export interface OutboundRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
}

/** The default API of the hosted forges, when neither `api_url` nor a payload said otherwise. */
const DEFAULT_API: Partial<Record<ForgeProvider, string>> = {
  github: "https://api.github.com",
  gitlab: "https://gitlab.com/api/v4",
  bitbucket: "https://api.bitbucket.org/2.0",
};

/** `owner/name` from a repository URL (https, ssh or scp-like), for commit statuses of manual builds. */
export function repoPathFromUrl(repoUrl: string): string | null {
  const m = repoUrl.match(/^(?:[a-z+]+:\/\/[^/]+\/|[^@/]+@[^:]+:)(.+?)(?:\.git)?\/?$/i);
  return m?.[1] && m[1].includes("/") ? m[1] : null;
}

export function apiBaseFor(provider: ForgeProvider, apiUrl: string | null, learned: string | null): string | null {
  return apiUrl ?? learned ?? DEFAULT_API[provider] ?? null;
}

/**
 * docs/api.md §11's state mapping: queued and running are pending (GitLab tells them apart), succeeded success,
 * failed/timed_out/expired failure, canceled error. Bitbucket's API spells the same four states its own way.
 */
export function forgeState(provider: ForgeProvider, buildStatus: string): string {
  const generic =
    buildStatus === "queued" || buildStatus === "running"
      ? "pending"
      : buildStatus === "succeeded"
        ? "success"
        : buildStatus === "canceled"
          ? "error"
          : "failure";
  if (provider === "gitlab") {
    return { queued: "pending", running: "running", succeeded: "success", canceled: "canceled" }[buildStatus] ?? "failed";
  }
  if (provider === "bitbucket") {
    return { pending: "INPROGRESS", success: "SUCCESSFUL", error: "STOPPED", failure: "FAILED" }[generic]!;
  }
  return generic;
}

const DESCRIPTIONS: Record<string, string> = {
  queued: "queued",
  running: "running",
  succeeded: "succeeded",
  failed: "failed",
  canceled: "canceled",
  timed_out: "timed out",
  expired: "expired in the queue",
};

/** The request that reports one build state to the forge (docs/api.md §11), with the project's source token. */
export function commitStatusRequest(input: {
  provider: ForgeProvider;
  apiBase: string;
  repo: string;
  sha: string;
  buildStatus: string;
  buildNumber: number;
  pipelineName: string;
  targetUrl: string;
  credentials: GitCredentials;
  /** "N tests failed: …" (docs/test-reports.md), added to the description. */
  tests?: string | null;
}): OutboundRequest {
  const state = forgeState(input.provider, input.buildStatus);
  const context = `hangar/${input.pipelineName}`;
  // GitHub refuses descriptions over 140 characters; the others keep shorter ones well.
  const described = `Build #${input.buildNumber} ${DESCRIPTIONS[input.buildStatus] ?? input.buildStatus}${input.tests ? `: ${input.tests}` : ""}`;
  const description = described.length > 140 ? `${described.slice(0, 139)}…` : described;
  const base = input.apiBase.replace(/\/+$/, "");
  const repo = input.repo.split("/").map(encodeURIComponent).join("/");
  const json = { "content-type": "application/json", accept: "application/json", "user-agent": "hangar" };
  switch (input.provider) {
    case "github":
      return {
        url: `${base}/repos/${repo}/statuses/${input.sha}`,
        headers: { ...json, authorization: `Bearer ${input.credentials.password}`, "x-github-api-version": "2022-11-28" },
        body: JSON.stringify({ state, target_url: input.targetUrl, description, context }),
      };
    case "gitea":
    case "forgejo":
      return {
        url: `${base}/repos/${repo}/statuses/${input.sha}`,
        headers: { ...json, authorization: `token ${input.credentials.password}` },
        body: JSON.stringify({ state, target_url: input.targetUrl, description, context }),
      };
    case "gitlab":
      return {
        // The project is its numeric id, or its path URL-encoded as one segment.
        url: `${base}/projects/${encodeURIComponent(input.repo)}/statuses/${input.sha}`,
        headers: { ...json, "private-token": input.credentials.password },
        body: JSON.stringify({ state, target_url: input.targetUrl, description, name: context }),
      };
    case "bitbucket":
      return {
        url: `${base}/repositories/${repo}/commit/${input.sha}/statuses/build`,
        headers: { ...json, authorization: `Basic ${btoa(`${input.credentials.username}:${input.credentials.password}`)}` },
        body: JSON.stringify({ state, key: context.slice(0, 40), name: context, url: input.targetUrl, description }),
      };
  }
}
