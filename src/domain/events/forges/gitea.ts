import type { ForgeProvider } from "../../../db/schema/constants.ts";
import {
  arr,
  at,
  num,
  obj,
  originOf,
  pushRequest,
  sha,
  str,
  verifyHexHmac,
  ZERO_SHA,
  type ForgeAdapter,
  type ParsedDelivery,
  type RepoInfo,
} from "./types.ts";

// Gitea says "synchronized" where GitHub says "synchronize"; both are accepted.
const PR_ACTIONS = new Set(["opened", "synchronized", "synchronize", "reopened"]);

function repoInfo(payload: unknown): RepoInfo | null {
  const repo = obj(at(payload, "repository"));
  const fullName = str(repo.full_name);
  const origin = originOf(str(repo.html_url));
  return fullName && origin ? { apiBase: `${origin}/api/v1`, repo: fullName } : null;
}

/** Pure: a Gitea or Forgejo delivery (same payloads) → what to build. */
export function parseGitea(event: string, payload: unknown): ParsedDelivery {
  const repo = repoInfo(payload);
  const actor = str(at(payload, "sender", "login")) ?? str(at(payload, "sender", "username")) ?? str(at(payload, "pusher", "login"));
  if (event === "push") {
    const ref = str(at(payload, "ref")) ?? "";
    const after = str(at(payload, "after")) ?? "";
    const head = obj(at(payload, "head_commit"));
    const commitSha = ZERO_SHA.test(after) || after === "" ? null : (sha(head.id) ?? sha(after));
    const listed = arr(at(payload, "commits")).find((c) => sha(obj(c).id) === commitSha);
    const message = str(head.message) ?? (listed ? str(obj(listed).message) : null);
    const request = pushRequest(ref, commitSha, message);
    if (!request) return { kind: "ignored", reason: `ref ${ref} is neither a branch nor a tag`, repo };
    return { kind: "requests", actor, requests: [request], repo };
  }
  if (event === "pull_request") {
    const action = str(at(payload, "action")) ?? "";
    if (action === "closed") return { kind: "ignored", reason: "pull request closed", repo };
    if (!PR_ACTIONS.has(action)) return { kind: "ignored", reason: `pull_request action ${action} builds nothing`, repo };
    const pr = obj(at(payload, "pull_request"));
    const number = num(pr.number) ?? num(at(payload, "number")) ?? 0;
    const headRepo = num(at(pr, "head", "repo", "id")) ?? num(at(pr, "head", "repo_id"));
    const baseRepo = num(at(pr, "base", "repo", "id")) ?? num(at(pr, "base", "repo_id"));
    return {
      kind: "requests",
      actor,
      repo,
      requests: [
        {
          event: "pull_request",
          ref: `refs/pull/${number}/head`,
          branch: str(at(pr, "head", "ref")) ?? "",
          baseBranch: str(at(pr, "base", "ref")) ?? "",
          commitSha: sha(at(pr, "head", "sha")),
          message: null,
          fork: headRepo === null || headRepo !== baseRepo,
        },
      ],
    };
  }
  return { kind: "ignored", reason: `event ${event} builds nothing`, repo };
}

function giteaLike(provider: Extract<ForgeProvider, "gitea" | "forgejo">, prefix: "gitea" | "forgejo"): ForgeAdapter {
  return {
    provider,
    event: (h) => h.get(`x-${prefix}-event`),
    deliveryId: (h) => h.get(`x-${prefix}-delivery`),
    verify: (secret, body, h) => verifyHexHmac(secret, body, h.get(`x-${prefix}-signature`)),
    parse: parseGitea,
  };
}

export const giteaAdapter = giteaLike("gitea", "gitea");
export const forgejoAdapter = giteaLike("forgejo", "forgejo");
