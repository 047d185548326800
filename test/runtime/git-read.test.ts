// The daemon's read of one pipeline file at a commit (src/runtime/git.ts) against a real git server (git
// http-backend), with the filters a server may allow or refuse: the answer is the same either way.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseOutboundAllow } from "../../src/domain/common/outbound.ts";
import { createNodeGitClient } from "../../src/runtime/git.ts";
import { relayToGitHttpBackend } from "../helpers/git-http.ts";

const CAP = 4096;
let scratch: string;
let head: string;
const servers: Server[] = [];
const client = createNodeGitClient({ allow: parseOutboundAllow("127.0.0.1/32") });

function git(args: string[], cwd: string): string {
  return execFileSync("git", args, { cwd, encoding: "utf8", env: { PATH: process.env.PATH, HOME: cwd, GIT_CONFIG_NOSYSTEM: "1" } });
}

/** A bare copy of the work repository with its own upload-pack settings, served over smart HTTP. */
async function serve(name: string, config: Array<[string, string]>): Promise<string> {
  const bare = join(scratch, `${name}.git`);
  git(["clone", "-q", "--bare", join(scratch, "work"), bare], scratch);
  for (const [key, value] of config) git(["config", key, value], bare);
  const server = createServer((req, res) => relayToGitHttpBackend(req, res, bare));
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/repo`;
}

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), "hangar-git-read-"));
  const work = join(scratch, "work");
  mkdirSync(join(work, "ci"), { recursive: true });
  git(["init", "-q", "-b", "main"], work);
  writeFileSync(join(work, ".hangar.yml"), "pipelines: {}\n");
  writeFileSync(join(work, "ci", "hangar.yml"), "nested: true\n");
  writeFileSync(join(work, "big.yml"), "x".repeat(CAP + 1));
  writeFileSync(join(work, "README.md"), "hello\n");
  git(["add", "."], work);
  git(["-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-q", "-m", "one"], work);
  head = git(["rev-parse", "HEAD"], work).trim();
});

afterAll(() => {
  for (const s of servers) s.close();
  rmSync(scratch, { recursive: true, force: true });
});

const text = (r: Awaited<ReturnType<NonNullable<typeof client.readFile>>>) =>
  r.ok ? (r.content === null ? null : Buffer.from(r.content).toString("utf8")) : { kind: r.kind };

describe.each([
  [
    "a server that allows every filter",
    [
      ["uploadpack.allowFilter", "true"],
      ["uploadpack.allowAnySHA1InWant", "true"],
    ],
  ],
  [
    "a server that allows no tree filter deeper than 0",
    [
      ["uploadpack.allowFilter", "true"],
      ["uploadpackfilter.tree.maxDepth", "0"],
      ["uploadpack.allowAnySHA1InWant", "true"],
    ],
  ],
  ["a server that does not filter", [["uploadpack.allowAnySHA1InWant", "true"]]],
] as Array<[string, Array<[string, string]>]>)("reading a pipeline file from %s", (name, config) => {
  let url: string;
  beforeAll(async () => {
    url = await serve(name.replace(/\W+/g, "-"), config);
  });
  const read = (path: string) => client.readFile!(url, head, path, { timeoutMs: 20_000, maxBytes: CAP });

  it("reads a file at the root and one in a folder", async () => {
    expect(text(await read(".hangar.yml"))).toBe("pipelines: {}\n");
    expect(text(await read("ci/hangar.yml"))).toBe("nested: true\n");
  });

  it("answers no content for a missing file or a folder, and too_large over the cap", async () => {
    expect(text(await read("nope.yml"))).toBeNull();
    expect(text(await read("ci/none.yml"))).toBeNull();
    expect(text(await read("ci"))).toBeNull();
    expect(text(await read("big.yml"))).toEqual({ kind: "too_large" });
  });
});
