// A build trying to take the runner over, end to end (docs/runner-isolation.md): with --run-as a step searching
// every place it can read finds neither the runner token nor a job token (what it finds is printed base64, so
// log masking cannot hide a leak), a `setsid env -i` escape is gone when the job ends, a second job cannot read
// the first's files; and a clone to a destination the outbound guard refuses sends nothing at all.
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPipeline, createProject, makeGitRepo, queueBuild, registerRunner, type GitRepo } from "../helpers/builds.ts";
import { androidSigningBody } from "../helpers/signing-material.ts";
import {
  getBuild,
  getLog,
  removeDir,
  startReadyDaemon,
  startRunner,
  stopRunner,
  waitFor,
  waitForFinal,
  type ReadyDaemon,
  type RunnerProcess,
} from "./runner-harness.ts";

// A user of this file only: every process of it is ended after each job, so no other test may share it.
const STEP_USER = "hangar-takeover-test";
const CANARY_RUNNER = `hgr_canary${"R".repeat(33)}`;
const CANARY_JOB = `hgj_canary${"J".repeat(33)}`;

function cannotRun(): string | null {
  if (process.platform !== "linux") return `these tests need Linux (this is ${process.platform}); macOS is covered by docs/runner-isolation.md only`;
  if (process.getuid?.() !== 0) return "these tests need root (the runner must be root to run steps as another user): run the suite as root";
  if (spawnSync("useradd", ["--help"]).error) return "these tests need useradd to create the step user: apt-get install -y passwd";
  return null;
}

let d: ReadyDaemon;
let repo: GitRepo;
let scratch: string;
let createdUser = false;
let stepUid = -1;
let runner: { id: string; token: string };
let tokenFile: string;
let r: RunnerProcess | undefined;

beforeAll(async () => {
  // One loopback address allowed (not the one the refused clone goes to): the runner must use the daemon's list.
  d = await startReadyDaemon({ HANGAR_OUTBOUND_ALLOW: "127.0.0.2/32" });
  // Token-shaped strings the search must find in the checkout: proof that it looks where it says it does.
  repo = makeGitRepo({ "README.md": "takeover\n", "canary.txt": `${CANARY_RUNNER}\n${CANARY_JOB}\n` });
  scratch = mkdtempSync(join(tmpdir(), "hangar-takeover-"));
  chmodSync(scratch, 0o711);
  if (cannotRun()) return;
  if (spawnSync("id", ["-u", STEP_USER]).status !== 0) {
    const made = spawnSync("useradd", ["--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/bin/sh", STEP_USER], {
      encoding: "utf8",
    });
    if (made.status !== 0 && made.status !== 9) throw new Error(`useradd ${STEP_USER}: ${made.stderr}`);
    createdUser = made.status === 0;
  }
  stepUid = Number(execFileSync("id", ["-u", STEP_USER], { encoding: "utf8" }).trim());
  runner = await registerRunner(d.api, d.ownerToken, { platforms: ["android"] });
  tokenFile = join(scratch, "runner.token");
  writeFileSync(tokenFile, `${runner.token}\n`, { mode: 0o600 });
  // The protected start of docs/runner-isolation.md: root, --run-as, the token in a 0600 file (and, here, in the
  // environment too: the runner's /proc/<pid>/environ then holds it, and must stay out of the step's reach).
  r = startRunner(d.daemon.url, { id: runner.id, token: runner.token }, ["--token-file", tokenFile, "--run-as", STEP_USER], join(scratch, "work"));
}, 60_000);

afterAll(async () => {
  await stopRunner(r);
  await d?.daemon.stop();
  repo?.remove();
  if (scratch) removeDir(scratch);
  if (createdUser) spawnSync("userdel", [STEP_USER]);
});

function alive(pid: number): boolean {
  try {
    return !/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/** `capabilities.isolation` of a runner, as the daemon lists it. */
async function isolationOf(runnerId: string): Promise<unknown> {
  const listed = await d.api.call("GET", "/v1/runners", { token: d.ownerToken });
  return (listed.body as Array<{ id: string; capabilities?: { isolation?: unknown } }>).find((x) => x.id === runnerId)?.capabilities?.isolation;
}

/** Every `FOUND <where> <base64>` line of a log, decoded. */
function foundTokens(log: string): Array<{ where: string; token: string }> {
  return [...log.matchAll(/^FOUND (\S+) ([A-Za-z0-9+/=]+)$/gm)].map((m) => ({ where: m[1]!, token: Buffer.from(m[2]!, "base64").toString("utf8") }));
}

/**
 * The search, as the step user: every process's environment, command line and open regular files, home
 * directories, the shared temporary directories (the test run's own, with the runner's work root and token file,
 * are inside), /etc, the runner's files named outright and the checkout. Each token-shaped string found is
 * printed base64-encoded, one per line.
 */
function searchScript(places: string[]): string {
  return [
    `pat='hg[rj]_[A-Za-z0-9_-]{20,}'`,
    `report() { while IFS= read -r t; do printf 'FOUND %s %s\\n' "$1" "$(printf %s "$t" | base64 | tr -d '\\n')"; done; }`,
    `for p in /proc/[0-9]*; do`,
    `  for f in environ cmdline; do [ -r "$p/$f" ] && tr '\\0' '\\n' < "$p/$f" 2>/dev/null | grep -aoE "$pat" | report "$p/$f"; done`,
    `  for fd in "$p"/fd/*; do [ -f "$fd" ] && [ -r "$fd" ] && timeout 5 grep -aoE "$pat" "$fd" 2>/dev/null | report "$fd"; done`,
    `done`,
    `for dir in /root /home /tmp /var/tmp /dev/shm /etc "$HOME" "$TMPDIR" ${places.map((p) => `'${p}'`).join(" ")} "$PWD" "$PWD/.."; do`,
    `  timeout 120 grep -rhaoE "$pat" "$dir" 2>/dev/null | report "$dir"`,
    `done`,
    `echo SEARCH-DONE`,
  ].join("\n");
}

describe("a build against its runner (Linux, as root, --run-as)", () => {
  it("can run here (Linux, root, useradd)", () => {
    expect(cannotRun(), "see the message").toBeNull();
  });

  it("finds neither token anywhere it can read, and its setsid env -i escape is gone when the job ends", async () => {
    if (cannotRun()) throw new Error(cannotRun()!);
    const workRoot = join(scratch, "work");
    const project = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const pipeline = await createPipeline(d.api, d.ownerToken, project.id, {
      platform: "android",
      steps: [
        { name: "search", run: searchScript([tokenFile, workRoot, scratch, join(workRoot, "active-job")]) },
        {
          name: "escape",
          run: `setsid env -i /bin/sh -c 'echo $$ > "$0/escaped.pid"; exec sleep 300' "$TMPDIR" </dev/null >/dev/null 2>&1 & sleep 0.5; echo "ESCAPED=$(cat "$TMPDIR/escaped.pid")"`,
        },
      ],
    });
    const build = await queueBuild(d.api, d.ownerToken, project.id, pipeline.id, { commit_sha: repo.shas.main });
    const final = await waitForFinal(d, build.id, 240_000);
    const log = await getLog(d, build.id);
    expect(final.status, `${log}\n${r!.stderr()}`).toBe("succeeded");
    expect(log).toContain("SEARCH-DONE");

    const found = foundTokens(log);
    // The canaries in the checkout are found: the search reads what it claims to read.
    expect(
      found.some((f) => f.token === CANARY_RUNNER),
      log,
    ).toBe(true);
    expect(found.some((f) => f.token === CANARY_JOB)).toBe(true);
    expect(found.filter((f) => f.token === runner.token)).toEqual([]);
    // A job token found anywhere is tried on the daemon while it still works (within the grace after the job).
    for (const { where, token } of found.filter((f) => f.token.startsWith("hgj_") && f.token !== CANARY_JOB)) {
      const tried = await d.api.call("GET", `/v1/runners/${runner.id}/jobs/${build.id}`, { token });
      expect(tried.status, `a working job token found in ${where}`).not.toBe(200);
    }
    for (const { where, token } of found.filter((f) => f.token.startsWith("hgr_") && f.token !== CANARY_RUNNER)) {
      const tried = await d.api.call("POST", `/v1/runners/${runner.id}/heartbeat`, { token, body: {} });
      expect(tried.status, `a working runner token found in ${where}`).not.toBe(200);
    }

    // The escape (its own session, an empty environment: no cookie) ended with the job.
    const escaped = Number(/^ESCAPED=(\d+)$/m.exec(log)?.[1]);
    expect(escaped).toBeGreaterThan(1);
    await waitFor("the escaped process to be gone", () => !alive(escaped) || undefined, 15_000);
    expect(log).toMatch(/hangar: ended \d+ process\(es\) the job left running/);

    // The runner says how it confines jobs, and the daemon knows it is isolated.
    expect(r!.stderr()).toMatch(/each job runs in a cgroup of its own|no cgroup per job/);
    expect(await isolationOf(runner.id), r!.stderr()).toBe("user");
  }, 300_000);

  it("a second job cannot read what the first left: its checkout, temporary files, /tmp files or signing files", async () => {
    if (cannotRun()) throw new Error(cannotRun()!);
    const project = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    // Real material: the daemon refuses a keystore that does not open, and a project holding none queues open builds
    // that are handed no signing file at all.
    const signing = await d.api.call("PUT", `/v1/projects/${project.id}/signing/android`, { token: d.ownerToken, body: androidSigningBody() });
    expect(signing.status).toBe(200);
    const marker = `j1-${crypto.randomUUID()}`;
    const first = await createPipeline(
      d.api,
      d.ownerToken,
      project.id,
      {
        platform: "android",
        steps: [
          {
            name: "leave files",
            run: [
              `echo ${marker} > left-in-checkout; echo ${marker} > "$TMPDIR/left-in-tmpdir"; echo ${marker} > /tmp/${marker}; echo ${marker} > /dev/shm/${marker}`,
              `echo "KEYSTORE=$HANGAR_ANDROID_KEYSTORE_PATH $(stat -c '%u %a' "$HANGAR_ANDROID_KEYSTORE_PATH") $(stat -c '%u %a' "$(dirname "$HANGAR_ANDROID_KEYSTORE_PATH")")"`,
              `echo "PATHS=$PWD/left-in-checkout $TMPDIR/left-in-tmpdir /tmp/${marker} /dev/shm/${marker} $HANGAR_ANDROID_KEYSTORE_PATH"`,
            ].join("; "),
          },
        ],
      },
      "first",
    );
    const b1 = await queueBuild(d.api, d.ownerToken, project.id, first.id, { commit_sha: repo.shas.main });
    expect((await waitForFinal(d, b1.id, 120_000)).status).toBe("succeeded");
    const log1 = await getLog(d, b1.id);
    const keystore = /^KEYSTORE=(\S+) (\d+) (\d+) (\d+) (\d+)$/m.exec(log1);
    expect(keystore, log1).not.toBeNull();
    // The signing file is the job user's, 0600, in a 0700 directory of that user.
    expect(keystore!.slice(2)).toEqual([String(stepUid), "600", String(stepUid), "700"]);
    const paths = /^PATHS=(.*)$/m.exec(log1)![1]!.split(" ");
    expect(paths).toHaveLength(5);

    const second = await createPipeline(
      d.api,
      d.ownerToken,
      project.id,
      {
        platform: "android",
        steps: [{ name: "read", run: paths.map((p) => `if cat '${p}' 2>/dev/null; then echo "READ ${p}"; else echo "NOREAD ${p}"; fi`).join("; ") }],
      },
      "second",
    );
    const b2 = await queueBuild(d.api, d.ownerToken, project.id, second.id, { commit_sha: repo.shas.main });
    expect((await waitForFinal(d, b2.id, 120_000)).status).toBe("succeeded");
    const log2 = await getLog(d, b2.id);
    expect(log2.split("\n").filter((line) => line.startsWith("READ "))).toEqual([]);
    for (const p of paths) expect(log2).toContain(`NOREAD ${p}`);
    expect(log2).not.toMatch(new RegExp(`^${marker}$`, "m"));
  }, 300_000);
});

describe("the clone under the outbound guard", () => {
  const listeners: Server[] = [];
  const sockets: Socket[] = [];

  /** A TCP listener that only counts connections. */
  async function listen(host: string): Promise<{ port: number; connections: () => number }> {
    let connections = 0;
    const server = createServer((socket) => {
      connections++;
      sockets.push(socket);
      socket.on("error", () => undefined);
      socket.end();
    });
    listeners.push(server);
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    return { port: (server.address() as { port: number }).port, connections: () => connections };
  }

  afterAll(async () => {
    for (const s of sockets) s.destroy();
    for (const l of listeners) await new Promise((resolve) => l.close(resolve));
  });

  it("refuses a loopback repository before connecting (no credential sent, the listening socket sees nothing); without --run-as the runner says any build can read its token", async () => {
    const refused = await listen("127.0.0.1");
    // The daemon's allow-list (127.0.0.2/32) reaches the runner: a clone there does connect.
    const allowed = await listen("127.0.0.2");
    const plain = await registerRunner(d.api, d.ownerToken, { platforms: ["ios"] });
    const builds: Array<{ id: string; allowed: boolean }> = [];
    const urls = [
      ...["127.0.0.1", "localhost", "[::ffff:127.0.0.1]", "2130706433"].map((host) => ({
        url: `http://${host}:${refused.port}/app.git`,
        allowed: false,
      })),
      { url: `http://127.0.0.2:${allowed.port}/app.git`, allowed: true },
    ];
    for (const { url, allowed: ok } of urls) {
      const project = await createProject(d.api, d.ownerToken, { repo_url: url });
      const creds = await d.api.call("PUT", `/v1/projects/${project.id}/source-credentials`, {
        token: d.ownerToken,
        body: { username: "bot", token: "ghp_never_sent_1234" },
      });
      expect(creds.status).toBe(200);
      const pipeline = await createPipeline(d.api, d.ownerToken, project.id, { platform: "ios", steps: [{ name: "never", run: "echo STEP-RAN" }] });
      builds.push({ id: (await queueBuild(d.api, d.ownerToken, project.id, pipeline.id, { commit_sha: repo.shas.main })).id, allowed: ok });
    }
    const p = startRunner(d.daemon.url, plain, [], join(scratch, "work-plain"));
    try {
      for (const { id, allowed: ok } of builds) {
        const final = await waitForFinal(d, id, 120_000).catch(async (err: Error) => {
          throw new Error(`${err.message}\n${JSON.stringify(await getBuild(d, id))}\n${p.stderr()}\n${await getLog(d, id)}`);
        });
        const log = await getLog(d, id);
        expect(final.status, log).toBe("failed");
        expect(log).not.toContain("STEP-RAN");
        if (ok) {
          expect(log).toContain("$ git fetch");
          expect(log).not.toContain("is refused");
        } else {
          expect(log).toMatch(/hangar: the clone of .* is refused: .*loopback/);
          expect(log).not.toContain("$ git");
        }
      }
      expect(refused.connections()).toBe(0);
      expect(allowed.connections()).toBeGreaterThan(0);
      expect(p.stderr()).toContain("any build on this runner can read its token");
      expect(p.stderr()).toContain("--run-as BUILD_USER --token-file FILE");
      expect(await isolationOf(plain.id), p.stderr()).toBe("none");
    } finally {
      await stopRunner(p);
    }
  }, 300_000);

  it("sends a job's calls with the job's own token: the build still finishes after the runner token is rotated away mid-job", async () => {
    const project = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const pipeline = await createPipeline(d.api, d.ownerToken, project.id, {
      platform: "macos",
      steps: [{ name: "wait", run: "echo before-rotate; sleep 3; echo after-rotate" }],
    });
    const own = await registerRunner(d.api, d.ownerToken, { platforms: ["macos"] });
    const build = await queueBuild(d.api, d.ownerToken, project.id, pipeline.id, { commit_sha: repo.shas.main });
    const p = startRunner(d.daemon.url, own, ["--once"], join(scratch, "work-rotate"), { HANGAR_RUNNER_ONCE_WAIT_S: "30" });
    try {
      await waitFor("the step to start", async () => (await getLog(d, build.id)).includes("before-rotate"), 60_000);
      // From here the runner token fails at once (401 invalid_runner_token): only the job token still works.
      const rotated = await d.api.call("POST", `/v1/runners/${own.id}/rotate-token`, { token: d.ownerToken });
      expect(rotated.status).toBe(200);
      expect((await d.api.call("POST", `/v1/runners/${own.id}/heartbeat`, { token: own.token, body: {} })).status).toBe(401);
      const final = await waitForFinal(d, build.id, 60_000);
      const log = await getLog(d, build.id);
      expect(final.status, `${log}\n${p.stderr()}`).toBe("succeeded");
      expect(log).toContain("after-rotate");
      expect(log).toContain("hangar: build succeeded");
    } finally {
      await stopRunner(p);
    }
  }, 180_000);
});
