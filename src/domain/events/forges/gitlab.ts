import { constantTimeEqual } from "../../common/crypto.ts";
import { arr, at, num, obj, originOf, pushRequest, sha, str, ZERO_SHA, type ForgeAdapter, type ParsedDelivery, type RepoInfo } from "./types.ts";

const MR_ACTIONS = new Set(["open", "reopen", "update"]);

function repoInfo(payload: unknown): RepoInfo | null {
  const project = obj(at(payload, "project"));
  const id = num(project.id) ?? num(at(payload, "project_id"));
  const origin = originOf(str(project.web_url));
  return id !== null && origin ? { apiBase: `${origin}/api/v4`, repo: String(id) } : null;
}

/** The message of the pushed head commit: the commit list holds up to 20, the head among them. */
function headMessage(payload: unknown, head: string | null): string | null {
  const commit = arr(at(payload, "commits")).find((c) => sha(obj(c).id) === head);
  return commit ? str(obj(commit).message) : null;
}

/** Pure: a GitLab delivery (`X-Gitlab-Event`) and its JSON payload → what to build. */
export function parseGitlab(event: string, payload: unknown): ParsedDelivery {
  const repo = repoInfo(payload);
  if (event === "Push Hook" || event === "Tag Push Hook") {
    const ref = str(at(payload, "ref")) ?? "";
    const after = str(at(payload, "after")) ?? "";
    // checkout_sha is the commit (for an annotated tag `after` is the tag object); null when the ref was deleted.
    const commitSha = ZERO_SHA.test(after) ? null : (sha(at(payload, "checkout_sha")) ?? sha(after));
    const request = pushRequest(ref, commitSha, headMessage(payload, commitSha));
    if (!request) return { kind: "ignored", reason: `ref ${ref} is neither a branch nor a tag`, repo };
    return { kind: "requests", actor: str(at(payload, "user_username")), requests: [request], repo };
  }
  if (event === "Merge Request Hook") {
    const attrs = obj(at(payload, "object_attributes"));
    const action = str(attrs.action) ?? "";
    if (action === "close" || action === "merge") return { kind: "ignored", reason: `merge request ${action}d`, repo };
    if (!MR_ACTIONS.has(action)) return { kind: "ignored", reason: `merge request action ${action} builds nothing`, repo };
    // An update without `oldrev` changed the title, labels or the like, not the commits.
    if (action === "update" && !str(attrs.oldrev)) return { kind: "ignored", reason: "merge request update without new commits", repo };
    const iid = num(attrs.iid) ?? 0;
    const lastCommit = obj(attrs.last_commit);
    const source = num(attrs.source_project_id);
    const target = num(attrs.target_project_id);
    return {
      kind: "requests",
      actor: str(at(payload, "user", "username")),
      repo,
      requests: [
        {
          event: "pull_request",
          ref: `refs/merge-requests/${iid}/head`,
          branch: str(attrs.source_branch) ?? "",
          baseBranch: str(attrs.target_branch) ?? "",
          commitSha: sha(lastCommit.id),
          message: str(lastCommit.message),
          fork: source === null || source !== target,
        },
      ],
    };
  }
  return { kind: "ignored", reason: `event ${event} builds nothing`, repo };
}

export const gitlabAdapter: ForgeAdapter = {
  provider: "gitlab",
  event: (h) => h.get("x-gitlab-event"),
  deliveryId: (h) => h.get("idempotency-key") ?? h.get("x-gitlab-event-uuid"),
  // GitLab sends the secret itself, not a signature.
  verify: async (secret, _body, h) => {
    const token = h.get("x-gitlab-token");
    return token !== null && constantTimeEqual(token, secret);
  },
  parse: parseGitlab,
};
