import { arr, at, obj, sha, str, verifyHexHmac, type ForgeAdapter, type ForgeRequest, type ParsedDelivery, type RepoInfo } from "./types.ts";

function repoInfo(payload: unknown): RepoInfo | null {
  const fullName = str(at(payload, "repository", "full_name"));
  return fullName ? { apiBase: "https://api.bitbucket.org/2.0", repo: fullName } : null;
}

/** Pure: a Bitbucket Cloud delivery (`X-Event-Key`) → what to build. */
export function parseBitbucket(event: string, payload: unknown): ParsedDelivery {
  const repo = repoInfo(payload);
  const actor = str(at(payload, "actor", "nickname"));
  if (event === "diagnostics:ping") return { kind: "ping" };
  if (event === "repo:push") {
    const requests: ForgeRequest[] = [];
    for (const change of arr(at(payload, "push", "changes"))) {
      const next = obj(obj(change).new);
      const old = obj(obj(change).old);
      const type = str(next.type) ?? str(old.type);
      const name = str(next.name) ?? str(old.name);
      if (!name) continue;
      // A deleted ref has `new: null`. For tags (annotated too) `new.target` is the commit.
      const commitSha = Object.keys(next).length === 0 ? null : sha(at(next, "target", "hash"));
      const message = str(at(next, "target", "message"));
      if (type === "branch") requests.push({ event: "push", ref: `refs/heads/${name}`, branch: name, commitSha, message, fork: false });
      else if (type === "tag" || type === "annotated_tag")
        requests.push({ event: "tag", ref: `refs/tags/${name}`, branch: name, commitSha, message, fork: false });
    }
    if (requests.length === 0) return { kind: "ignored", reason: "the push changed no branch or tag", repo };
    return { kind: "requests", actor, requests, repo };
  }
  if (event === "pullrequest:created" || event === "pullrequest:updated") {
    const pr = obj(at(payload, "pullrequest"));
    if (str(pr.state) && str(pr.state) !== "OPEN") return { kind: "ignored", reason: "pull request closed", repo };
    const sourceBranch = str(at(pr, "source", "branch", "name")) ?? "";
    const sourceRepo = str(at(pr, "source", "repository", "full_name"));
    const destRepo = str(at(pr, "destination", "repository", "full_name"));
    return {
      kind: "requests",
      actor,
      repo,
      requests: [
        {
          event: "pull_request",
          // Bitbucket Cloud has no pull-request ref: the source branch is what is fetched.
          ref: `refs/heads/${sourceBranch}`,
          branch: sourceBranch,
          baseBranch: str(at(pr, "destination", "branch", "name")) ?? "",
          commitSha: sha(at(pr, "source", "commit", "hash")),
          message: null,
          fork: sourceRepo === null || sourceRepo !== destRepo,
        },
      ],
    };
  }
  if (event.startsWith("pullrequest:")) return { kind: "ignored", reason: `${event} builds nothing`, repo };
  return { kind: "ignored", reason: `event ${event} builds nothing`, repo };
}

export const bitbucketAdapter: ForgeAdapter = {
  provider: "bitbucket",
  event: (h) => h.get("x-event-key"),
  deliveryId: (h) => h.get("x-request-uuid"),
  verify: (secret, body, h) => verifyHexHmac(secret, body, h.get("x-hub-signature"), "sha256="),
  parse: parseBitbucket,
};
