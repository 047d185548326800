// `--run-as USER` (docs/api.md §9): a runner started as root runs every step as another OS user, so a step cannot read
// the runner's token file, its work root, other jobs' files or the daemon's data directory.
import { execFileSync } from "node:child_process";
import { lchown, readdir } from "node:fs/promises";
import { join } from "node:path";

export interface RunAsUser {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

/** Looks the user up with `id` (Linux and macOS alike) and its home directory with getent or dscl. */
export function resolveRunAsUser(name: string): RunAsUser {
  if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$/.test(name)) throw new Error(`--run-as: ${JSON.stringify(name)} is not a user name`);
  const id = (flag: string) => Number(execFileSync("id", [flag, name], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim());
  let uid: number;
  let gid: number;
  try {
    uid = id("-u");
    gid = id("-g");
  } catch {
    throw new Error(`--run-as: no such user ${name}`);
  }
  if (!Number.isInteger(uid) || uid === 0) throw new Error("--run-as: the user must not be root");
  return { name, uid, gid, home: homeOf(name) };
}

function homeOf(name: string): string {
  try {
    if (process.platform === "darwin") {
      const out = execFileSync("dscl", [".", "-read", `/Users/${name}`, "NFSHomeDirectory"], { encoding: "utf8" });
      return out.replace(/^NFSHomeDirectory:\s*/, "").trim();
    }
    const entry = execFileSync("getent", ["passwd", name], { encoding: "utf8" }).trim();
    return entry.split(":")[5] || "/";
  } catch {
    return "/";
  }
}

/** Hands a job directory to the step user: every entry, without following symbolic links. */
export async function chownTree(dir: string, uid: number, gid: number): Promise<void> {
  await lchown(dir, uid, gid);
  const entries = await readdir(dir, { withFileTypes: true });
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await chownTree(path, uid, gid);
    else await lchown(path, uid, gid);
  }
}
