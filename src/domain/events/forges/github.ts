import {
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

const PR_ACTIONS = new Set(["opened", "synchronize", "reopened"]);

/** GitHub's API base and `owner/name` from a payload's repository (GitHub Enterprise too: its `url` is the API's). */
function repoInfo(payload: unknown): RepoInfo | null {
  const repo = obj(at(payload, "repository"));
  const fullName = str(repo.full_name);
  if (!fullName) return null;
  const statuses = str(repo.statuses_url);
  // statuses_url is "{api}/repos/{owner}/{repo}/statuses/{sha}": the API base is what precedes /repos/.
  const marker = `/repos/${fullName}/statuses/`;
  if (statuses && statuses.includes(marker) && originOf(statuses)) return { apiBase: statuses.slice(0, statuses.indexOf(marker)), repo: fullName };
  return { apiBase: "https://api.github.com", repo: fullName };
}

/** Pure: a GitHub delivery's event name and JSON payload → what to build. */
export function parseGithub(event: string, payload: unknown): ParsedDelivery {
  const repo = repoInfo(payload);
  const actor = str(at(payload, "sender", "login"));
  if (event === "ping") return { kind: "ping" };
  if (event === "push") {
    const ref = str(at(payload, "ref")) ?? "";
    const after = str(at(payload, "after")) ?? "";
    const deleted = at(payload, "deleted") === true || ZERO_SHA.test(after);
    const head = obj(at(payload, "head_commit"));
    // For an annotated tag `after` is the tag object; head_commit is the commit it points to.
    const commitSha = deleted ? null : (sha(head.id) ?? sha(after));
    const request = pushRequest(ref, commitSha, str(head.message));
    if (!request) return { kind: "ignored", reason: `ref ${ref} is neither a branch nor a tag`, repo };
    return { kind: "requests", actor, requests: [request], repo };
  }
  if (event === "pull_request") {
    const action = str(at(payload, "action")) ?? "";
    if (action === "closed") return { kind: "ignored", reason: "pull request closed", repo };
    if (!PR_ACTIONS.has(action)) return { kind: "ignored", reason: `pull_request action ${action} builds nothing`, repo };
    const pr = obj(at(payload, "pull_request"));
    const number = num(pr.number) ?? num(at(payload, "number"));
    const headRepo = str(at(pr, "head", "repo", "full_name"));
    const baseRepo = str(at(pr, "base", "repo", "full_name"));
    return {
      kind: "requests",
      actor,
      repo,
      requests: [
        {
          event: "pull_request",
          ref: `refs/pull/${number ?? 0}/head`,
          branch: str(at(pr, "head", "ref")) ?? "",
          baseBranch: str(at(pr, "base", "ref")) ?? "",
          commitSha: sha(at(pr, "head", "sha")),
          message: null,
          // A head repository that was deleted (null) is treated as foreign too.
          fork: headRepo === null || headRepo !== baseRepo,
        },
      ],
    };
  }
  return { kind: "ignored", reason: `event ${event} builds nothing`, repo };
}

export const githubAdapter: ForgeAdapter = {
  provider: "github",
  event: (h) => h.get("x-github-event"),
  deliveryId: (h) => h.get("x-github-delivery"),
  verify: (secret, body, h) => verifyHexHmac(secret, body, h.get("x-hub-signature-256"), "sha256="),
  parse: parseGithub,
};
