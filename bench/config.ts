// npm run bench:config: the time to read a pipeline file at trigger time from a large repository over smart HTTP
// (BENCH_COMMITS commits, default 50,000; BENCH_BLOB_MB MiB of incompressible blobs, default 1024; a head tree of
// BENCH_FILES files, default 5,000), beside `git ls-remote` of the same repository (what a trigger cost before:
// the limit is 3× that) and beside plain `git fetch` of the same commit, with and without the blob filter, measured
// in the same run. The read is the daemon's own (src/runtime/git.ts), through the outbound guard.
import { execFile, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseOutboundAllow } from "../src/domain/common/outbound.ts";
import { createNodeGitClient } from "../src/runtime/git.ts";
import { relayToGitHttpBackend } from "../test/helpers/git-http.ts";

const COMMITS = Number(process.env.BENCH_COMMITS ?? 50_000);
const BLOB_MB = Number(process.env.BENCH_BLOB_MB ?? 1024);
const FILES = Number(process.env.BENCH_FILES ?? 5_000);
const RUNS = Number(process.env.BENCH_RUNS ?? 7);

const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;

/** The repository, written by `git fast-import`: every commit changes one file of the tree with fresh random bytes. */
async function makeRepo(dir: string): Promise<string> {
  execFileSync("git", ["init", "-q", "--bare", "-b", "main", dir]);
  execFileSync("git", ["-C", dir, "config", "uploadpack.allowFilter", "true"]);
  execFileSync("git", ["-C", dir, "config", "uploadpack.allowAnySHA1InWant", "true"]);
  const importer = spawn("git", ["-C", dir, "fast-import", "--quiet"], { stdio: ["pipe", "inherit", "inherit"] });
  const done = new Promise<void>((resolve, reject) =>
    importer.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`fast-import ${code}`)))),
  );
  const perCommit = Math.max(1, Math.floor((BLOB_MB * 1024 * 1024) / COMMITS));
  const config = "pipelines:\n  build:\n    platform: android\n    steps: ['./gradlew assembleDebug', './gradlew test']\n";
  // Written in batches of about 8 MiB: one pipe write per commit made the import crawl.
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  const flush = () => {
    const ok = importer.stdin.write(Buffer.concat(pending));
    pending = [];
    pendingBytes = 0;
    return ok ? Promise.resolve() : new Promise<void>((r) => importer.stdin.once("drain", () => r()));
  };
  const write = (chunk: string | Buffer) => {
    const b = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
    pending.push(b);
    pendingBytes += b.length;
    return pendingBytes > 8 * 1024 * 1024 ? flush() : Promise.resolve();
  };
  for (let i = 1; i <= COMMITS; i++) {
    const message = `commit ${i}\n`;
    await write(
      `commit refs/heads/main\nmark :${i}\ncommitter Bench <bench@example.com> ${1_700_000_000 + i} +0000\ndata ${Buffer.byteLength(message)}\n${message}`,
    );
    if (i > 1) await write(`from :${i - 1}\n`);
    if (i === 1) await write(`M 100644 inline .hangar.yml\ndata ${Buffer.byteLength(config)}\n${config}\n`);
    const blob = randomBytes(perCommit);
    await write(`M 100644 inline src/f${i % FILES}.bin\ndata ${blob.length}\n`);
    await write(blob);
    await write("\n");
  }
  await flush();
  importer.stdin.end();
  await done;
  return execFileSync("git", ["-C", dir, "rev-parse", "main"], { encoding: "utf8" }).trim();
}

function timed(fn: () => Promise<unknown> | unknown): Promise<number> {
  const start = performance.now();
  return Promise.resolve(fn()).then(() => performance.now() - start);
}

/** Plain git, asynchronously: the git server answering it runs in this process. */
function git(args: string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) =>
    execFile("git", args, { cwd, env: { PATH: process.env.PATH, HOME: cwd, GIT_CONFIG_NOSYSTEM: "1" }, maxBuffer: 64 * 1024 * 1024 }, (err) =>
      err ? reject(err) : resolve(),
    ),
  );
}

async function main() {
  const scratch = mkdtempSync(join(tmpdir(), "hangar-bench-config-"));
  try {
    const repoDir = join(scratch, "big.git");
    const made = performance.now();
    const head = await makeRepo(repoDir);
    const size = execFileSync("du", ["-sm", repoDir], { encoding: "utf8" }).split("\t")[0];
    console.log(
      `repository: ${COMMITS} commits, ${FILES} files in the head tree, ${size} MiB on disk (made in ${((performance.now() - made) / 1000).toFixed(1)} s)`,
    );

    const server = createServer((req, res) => relayToGitHttpBackend(req, res, repoDir));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/repo`;
    const client = createNodeGitClient({ allow: parseOutboundAllow("127.0.0.1/32") });

    const results: Record<string, number[]> = { lsRemote: [], readFile: [], fetchFiltered: [], fetchFull: [] };
    for (let run = 0; run < RUNS; run++) {
      results.lsRemote!.push(await timed(() => git(["ls-remote", url, "refs/heads/main"], scratch)));
      results.readFile!.push(
        await timed(async () => {
          const read = await client.readFile!(url, head, ".hangar.yml", { timeoutMs: 120_000, maxBytes: 256 * 1024 });
          if (!read.ok || !read.content) throw new Error(`read failed: ${JSON.stringify(read)}`);
        }),
      );
      for (const [key, filter] of [
        ["fetchFiltered", ["--filter=blob:none"]],
        ["fetchFull", []],
      ] as const) {
        const dir = mkdtempSync(join(scratch, "fetch-"));
        await git(["init", "-q", "--bare"], dir);
        results[key]!.push(await timed(() => git(["fetch", "-q", "--depth=1", ...filter, url, head], dir)));
        rmSync(dir, { recursive: true, force: true });
      }
    }
    server.close();
    const ls = median(results.lsRemote!);
    for (const [key, values] of Object.entries(results)) {
      console.log(
        `${key.padEnd(14)} median ${median(values).toFixed(1)} ms  (${(median(values) / ls).toFixed(2)}× ls-remote)  runs: ${values.map((v) => v.toFixed(0)).join(", ")}`,
      );
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

await main();
