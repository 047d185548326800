// `npm run bench:sweep` (Linux, as root): time from a job's end to every leftover process of the --run-as user
// gone, with 200 leftovers in sessions of their own, through the runner's own end-of-job code (the job's cgroup
// killed, then every process of the user ended: src/cli/runner/isolation.ts). The physical limit, measured in the
// same run: SIGKILL sent to the 200 pids directly by root, then waiting until none is left. Each figure is the
// median of ROUNDS rounds.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { detectCgroupSupport, endUserProcesses, JobCgroup, processesOfUser } from "../src/cli/runner/isolation.ts";

const USER = "hangar-bench-sweep";
const LEFTOVERS = Number(process.env.LEFTOVERS ?? 200);
const ROUNDS = Number(process.env.ROUNDS ?? 7);

if (process.platform !== "linux" || process.getuid?.() !== 0) {
  console.error("bench:sweep needs Linux and root (it creates a throwaway user and runs processes as it)");
  process.exit(2);
}

let created = false;
if (spawnSync("id", ["-u", USER]).status !== 0) {
  const made = spawnSync("useradd", ["--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/bin/sh", USER], { encoding: "utf8" });
  if (made.status !== 0) throw new Error(`useradd: ${made.stderr}`);
  created = true;
}
const uid = Number(execFileSync("id", ["-u", USER], { encoding: "utf8" }).trim());
const gid = Number(execFileSync("id", ["-g", USER], { encoding: "utf8" }).trim());

/** Starts LEFTOVERS `sleep`s as the user, each in a session of its own, optionally inside `cgroup`. */
async function startLeftovers(cgroup: JobCgroup | null): Promise<void> {
  const script = `IFS= read -r go; i=0; while [ $i -lt ${LEFTOVERS} ]; do setsid sleep 300 </dev/null >/dev/null 2>&1 & i=$((i+1)); done`;
  const child = spawn("/bin/sh", ["-c", script], { uid, gid, stdio: ["pipe", "ignore", "ignore"], cwd: "/" });
  if (cgroup) await cgroup.add(child.pid!);
  child.stdin.end("go\n");
  await new Promise((r) => child.once("exit", r));
  for (;;) {
    if ((await processesOfUser(uid)).length >= LEFTOVERS) return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function directKill(): Promise<number> {
  await startLeftovers(null);
  const pids = await processesOfUser(uid);
  const t0 = performance.now();
  for (const pid of pids) process.kill(pid, "SIGKILL");
  while ((await processesOfUser(uid)).length > 0) await new Promise((r) => setTimeout(r, 1));
  return performance.now() - t0;
}

async function runnerSweep(base: string | null): Promise<number> {
  const cgroup = base ? await JobCgroup.create(base, `bench-${process.pid}-${Date.now()}`) : null;
  await startLeftovers(cgroup);
  const t0 = performance.now();
  if (cgroup) await cgroup.kill();
  await endUserProcesses(uid, gid);
  const ms = performance.now() - t0;
  if ((await processesOfUser(uid)).length > 0) throw new Error("leftovers survived the sweep");
  return ms;
}

try {
  const support = await detectCgroupSupport();
  const limit: number[] = [];
  const userOnly: number[] = [];
  const withCgroup: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    limit.push(await directKill());
    userOnly.push(await runnerSweep(null));
    if (support.ok) withCgroup.push(await runnerSweep(support.base));
  }
  const lim = median(limit);
  const fmt = (ms: number) => `${ms.toFixed(1)} ms`;
  console.log(`leftovers: ${LEFTOVERS} processes of ${USER}, each in its own session; ${ROUNDS} rounds, medians`);
  console.log(`physical limit (root SIGKILLs the ${LEFTOVERS} pids, waits until /proc shows none): ${fmt(lim)}`);
  console.log(
    `runner, --run-as without a cgroup (every process of the user ended): ${fmt(median(userOnly))} (${(median(userOnly) / lim).toFixed(2)}x the limit)`,
  );
  if (support.ok)
    console.log(
      `runner, --run-as with the job's cgroup (cgroup.kill, then the user sweep): ${fmt(median(withCgroup))} (${(median(withCgroup) / lim).toFixed(2)}x the limit)`,
    );
  else console.log(`no cgroup mode here: ${support.reason}`);
} finally {
  await endUserProcesses(uid, gid).catch(() => 0);
  if (created) spawnSync("userdel", [USER]);
}
