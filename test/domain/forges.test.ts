import examples from "@octokit/webhooks-examples";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parseBitbucket } from "../../src/domain/events/forges/bitbucket.ts";
import { parseGitea } from "../../src/domain/events/forges/gitea.ts";
import { parseGithub } from "../../src/domain/events/forges/github.ts";
import { parseGitlab } from "../../src/domain/events/forges/gitlab.ts";
import { matchRefGlob } from "../../src/domain/common/ref-glob.ts";
import { effectiveTriggers, pipelineWantsBuild, skipReason } from "../../src/domain/events/triggers.ts";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the examples package types every event; tests read loosely
function github(name: string): any[] {
  const found = (examples as Array<{ name: string; examples: unknown[] }>).find((e) => e.name === name);
  if (!found) throw new Error(`no ${name} examples`);
  return found.examples;
}
function fixture(name: string): unknown {
  return JSON.parse(readFileSync(new URL(`../fixtures/webhooks/${name}.json`, import.meta.url), "utf8"));
}

describe("GitHub parse on @octokit/webhooks-examples", () => {
  it("ping is a ping", () => {
    for (const p of github("ping")) expect(parseGithub("ping", p)).toEqual({ kind: "ping" });
  });
  it("a branch push builds its after commit, named by the sender", () => {
    const push = github("push").find((p) => p.ref === "refs/heads/master" && !p.deleted);
    const parsed = parseGithub("push", push);
    expect(parsed).toMatchObject({
      kind: "requests",
      actor: "Codertocat",
      repo: { apiBase: "https://api.github.com", repo: "Codertocat/Hello-World" },
      requests: [{ event: "push", ref: "refs/heads/master", branch: "master", commitSha: push.after, fork: false }],
    });
  });
  it("a tag push builds the commit the tag points to (head_commit), never the tag object", () => {
    const tag = structuredClone(github("push").find((p) => p.ref === "refs/tags/simple-tag" && !p.deleted));
    // An annotated tag: `after` names the tag object; head_commit is the commit.
    tag.after = "a".repeat(40);
    const parsed = parseGithub("push", tag);
    expect(parsed).toMatchObject({ kind: "requests", requests: [{ event: "tag", branch: "simple-tag", commitSha: tag.head_commit.id }] });
  });
  it("a deleted ref has no commit to build", () => {
    const deleted = github("push").find((p) => p.deleted);
    const parsed = parseGithub("push", deleted);
    expect(parsed.kind).toBe("requests");
    if (parsed.kind === "requests") expect(skipReason(parsed.requests[0]!)).toBe("ref deleted");
  });
  it("pull_request opened/synchronize/reopened build the head commit on refs/pull/N/head; closed and others are ignored", () => {
    for (const p of github("pull_request")) {
      const parsed = parseGithub("pull_request", p);
      if (["opened", "synchronize", "reopened"].includes(p.action)) {
        expect(parsed).toMatchObject({
          kind: "requests",
          requests: [
            {
              event: "pull_request",
              ref: `refs/pull/${p.number}/head`,
              branch: p.pull_request.head.ref,
              baseBranch: p.pull_request.base.ref,
              commitSha: p.pull_request.head.sha,
              fork: false,
            },
          ],
        });
      } else {
        expect(parsed.kind).toBe("ignored");
      }
    }
  });
  it("a pull request whose head repository differs from the base is a fork", () => {
    const pr = structuredClone(github("pull_request").find((p) => p.action === "opened"));
    pr.pull_request.head.repo.full_name = "mallory/Hello-World";
    const parsed = parseGithub("pull_request", pr);
    expect(parsed.kind === "requests" && parsed.requests[0]!.fork).toBe(true);
    pr.pull_request.head.repo = null;
    const gone = parseGithub("pull_request", pr);
    expect(gone.kind === "requests" && gone.requests[0]!.fork).toBe(true);
  });
  it("other events are ignored with a reason", () => {
    expect(parseGithub("star", github("star")[0])).toMatchObject({ kind: "ignored", reason: "event star builds nothing" });
  });
});

describe("GitLab parse on the documented samples", () => {
  it("Push Hook builds checkout_sha and reads the head commit's message", () => {
    expect(parseGitlab("Push Hook", fixture("gitlab-push"))).toEqual({
      kind: "requests",
      actor: "jsmith",
      repo: { apiBase: "http://example.com/api/v4", repo: "15" },
      requests: [
        {
          event: "push",
          ref: "refs/heads/master",
          branch: "master",
          commitSha: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7",
          message: "fixed readme",
          fork: false,
        },
      ],
    });
  });
  it("Tag Push Hook of an annotated tag builds checkout_sha (the commit), not after (the tag object)", () => {
    const parsed = parseGitlab("Tag Push Hook", fixture("gitlab-tag-push"));
    expect(parsed).toMatchObject({
      kind: "requests",
      requests: [{ event: "tag", ref: "refs/tags/v1.0.0", branch: "v1.0.0", commitSha: "5937ac0a7beb003549fc5fd26fc247adbce4a52e" }],
    });
  });
  it("Merge Request Hook open builds refs/merge-requests/N/head; close and updates without commits are ignored", () => {
    const mr = fixture("gitlab-merge-request") as { object_attributes: Record<string, unknown> };
    expect(parseGitlab("Merge Request Hook", mr)).toMatchObject({
      kind: "requests",
      actor: "root",
      requests: [
        {
          event: "pull_request",
          ref: "refs/merge-requests/1/head",
          branch: "ms-viewport",
          baseBranch: "master",
          commitSha: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7",
          fork: false,
        },
      ],
    });
    expect(parseGitlab("Merge Request Hook", { ...mr, object_attributes: { ...mr.object_attributes, action: "close" } }).kind).toBe("ignored");
    expect(parseGitlab("Merge Request Hook", { ...mr, object_attributes: { ...mr.object_attributes, action: "update" } }).kind).toBe("ignored");
    const updated = parseGitlab("Merge Request Hook", {
      ...mr,
      object_attributes: { ...mr.object_attributes, action: "update", oldrev: "b6568db1bc1dcd7f8b4d5a946b0b91f9dacd7327" },
    });
    expect(updated.kind).toBe("requests");
    const fork = parseGitlab("Merge Request Hook", { ...mr, object_attributes: { ...mr.object_attributes, source_project_id: 99 } });
    expect(fork.kind === "requests" && fork.requests[0]!.fork).toBe(true);
  });
});

describe("Gitea/Forgejo parse on the documented samples", () => {
  it("push builds after with the commit's message and the sender's login", () => {
    expect(parseGitea("push", fixture("gitea-push"))).toEqual({
      kind: "requests",
      actor: "gitea",
      repo: { apiBase: "http://localhost:3000/api/v1", repo: "gitea/webhooks" },
      requests: [
        {
          event: "push",
          ref: "refs/heads/develop",
          branch: "develop",
          commitSha: "bffeb74224043ba2feb48d137756c8a9331c449a",
          message: "Webhooks Yay!",
          fork: false,
        },
      ],
    });
  });
  it("pull_request opened builds refs/pull/N/head; a head repository of another id is a fork", () => {
    const pr = fixture("gitea-pull-request") as { pull_request: { head: { repo: { id: number } } } };
    expect(parseGitea("pull_request", pr)).toMatchObject({
      kind: "requests",
      requests: [{ ref: "refs/pull/7/head", branch: "feature", baseBranch: "master", fork: false }],
    });
    const fork = structuredClone(pr);
    fork.pull_request.head.repo.id = 141;
    const parsed = parseGitea("pull_request", fork);
    expect(parsed.kind === "requests" && parsed.requests[0]!.fork).toBe(true);
  });
});

describe("Bitbucket parse on the documented samples", () => {
  it("repo:push builds new.target.hash, actor by nickname", () => {
    expect(parseBitbucket("repo:push", fixture("bitbucket-push"))).toEqual({
      kind: "requests",
      actor: "amills",
      repo: { apiBase: "https://api.bitbucket.org/2.0", repo: "ntrs/jenkins-jobs" },
      requests: [
        {
          event: "push",
          ref: "refs/heads/master",
          branch: "master",
          commitSha: "109d5aaf0c2daf86d429c22f6a8c34d8a6ab9114",
          message: "conflict free\n",
          fork: false,
        },
      ],
    });
  });
  it("a deleted branch (new: null) has no commit", () => {
    const push = fixture("bitbucket-push") as { push: { changes: Array<Record<string, unknown>> } };
    push.push.changes[0]!.new = null;
    const parsed = parseBitbucket("repo:push", push);
    expect(parsed.kind === "requests" && skipReason(parsed.requests[0]!)).toBe("ref deleted");
  });
  it("pullrequest:created builds the source commit; another source repository is a fork", () => {
    const pr = fixture("bitbucket-pullrequest-created") as { pullrequest: { source: { repository: { full_name: string } } } };
    expect(parseBitbucket("pullrequest:created", pr)).toMatchObject({
      kind: "requests",
      requests: [{ event: "pull_request", branch: "feature", baseBranch: "master", commitSha: "109d5aaf0c2d", fork: false }],
    });
    pr.pullrequest.source.repository.full_name = "mallory/jenkins-jobs";
    const parsed = parseBitbucket("pullrequest:created", pr);
    expect(parsed.kind === "requests" && parsed.requests[0]!.fork).toBe(true);
    expect(parseBitbucket("pullrequest:fulfilled", pr).kind).toBe("ignored");
  });
});

describe("ref globs", () => {
  it("* stays within a segment, ** crosses segments", () => {
    expect(matchRefGlob("release/*", "release/1.2")).toBe(true);
    expect(matchRefGlob("release/*", "release/1.2/hotfix")).toBe(false);
    expect(matchRefGlob("release/**", "release/1.2/hotfix")).toBe(true);
    expect(matchRefGlob("**", "a/b/c")).toBe(true);
    expect(matchRefGlob("main", "main")).toBe(true);
    expect(matchRefGlob("main", "main2")).toBe(false);
    expect(matchRefGlob("v?.*", "v1.0")).toBe(true);
    expect(matchRefGlob("*", "")).toBe(true);
    expect(matchRefGlob("feature/*-fix", "feature/a-b-fix")).toBe(true);
  });
  it("a hostile pattern against a long name finishes in linear time", () => {
    const pattern = "*a".repeat(100) + "b";
    const name = "a".repeat(10_000);
    const started = performance.now();
    expect(matchRefGlob(pattern, name)).toBe(false);
    expect(matchRefGlob("**a".repeat(100) + "b", name)).toBe(false);
    // A backtracking matcher takes astronomically long here; the NFA does 2 × 10^6 steps.
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});

describe("config.triggers", () => {
  const push = (branch: string) => ({
    event: "push" as const,
    ref: `refs/heads/${branch}`,
    branch,
    commitSha: "a".repeat(40),
    message: null,
    fork: false,
  });
  it("absent means pushes to the default branch; an empty list means none", () => {
    expect(effectiveTriggers({}, "main")).toEqual([{ event: "push", branches: ["main"] }]);
    expect(pipelineWantsBuild({}, "main", push("main"))).toBe(true);
    expect(pipelineWantsBuild({}, "main", push("dev"))).toBe(false);
    expect(pipelineWantsBuild({ triggers: [] }, "main", push("main"))).toBe(false);
  });
  it("a trigger without branches matches every branch; pull_request branches match the base branch", () => {
    expect(pipelineWantsBuild({ triggers: [{ event: "push" }] }, "main", push("x/y"))).toBe(true);
    const pr = {
      event: "pull_request" as const,
      ref: "refs/pull/1/head",
      branch: "feature",
      baseBranch: "main",
      commitSha: "a".repeat(40),
      message: null,
      fork: false,
    };
    expect(pipelineWantsBuild({ triggers: [{ event: "pull_request", branches: ["main"] }] }, "main", pr)).toBe(true);
    expect(pipelineWantsBuild({ triggers: [{ event: "pull_request", branches: ["feature"] }] }, "main", pr)).toBe(false);
    const tag = { event: "tag" as const, ref: "refs/tags/v1.2", branch: "v1.2", commitSha: "a".repeat(40), message: null, fork: false };
    expect(pipelineWantsBuild({ triggers: [{ event: "tag", tags: ["v*"] }] }, "main", tag)).toBe(true);
    expect(pipelineWantsBuild({ triggers: [{ event: "tag", tags: ["release-*"] }] }, "main", tag)).toBe(false);
  });
  it("[skip ci] and [ci skip] in the head commit message skip", () => {
    expect(skipReason({ ...push("main"), message: "docs [skip ci]" })).toMatch(/skip ci/);
    expect(skipReason({ ...push("main"), message: "[CI SKIP] docs" })).toMatch(/skip ci/);
    expect(skipReason(push("main"))).toBeNull();
  });
});
