// The per-job keychain and provisioning profiles of an iOS job on macOS (docs/signing.md). Every `security`
// command goes through one CommandRunner, so the exact command lines are testable where there is no Mac, and a
// manifest beside the job's signing files lists what was installed, so that a crash is undone at the next start.
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chown, mkdir, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { isAbsolute, join, relative, resolve } from "node:path";

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** The seam: runs one program with its arguments (never through a shell). */
export interface CommandRunner {
  run(argv: string[]): Promise<CommandResult>;
}

/** Runs commands for real, as the given user (the --run-as build user owns its keychain search list). */
export function systemCommandRunner(identity: { uid?: number; gid?: number; env?: NodeJS.ProcessEnv } = {}): CommandRunner {
  return {
    run: (argv) =>
      new Promise((done) => {
        execFile(argv[0]!, argv.slice(1), { uid: identity.uid, gid: identity.gid, env: identity.env, timeout: 60_000 }, (err, stdout, stderr) => {
          const code = err ? (typeof (err as { code?: unknown }).code === "number" ? (err as { code: number }).code : 1) : 0;
          done({ code, stdout: String(stdout), stderr: String(stderr) });
        });
      }),
  };
}

export class KeychainError extends Error {}

const SECURITY = "/usr/bin/security";
/** Where Xcode and `xcodebuild` look for installed profiles, under the building user's home. */
export function profilesDirectory(home: string): string {
  return join(home, "Library", "MobileDevice", "Provisioning Profiles");
}
const MANIFEST = "installed.json";
const UUID = /^[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}$/;

/** What a job installed outside its own directory: undone at its end, or at the next start after a crash. */
export interface InstalledSigning {
  keychain: string | null;
  /** Profile files this job created (a profile already installed by someone else is left alone). */
  profiles: string[];
}

async function must(commands: CommandRunner, argv: string[], what: string): Promise<CommandResult> {
  const result = await commands.run(argv);
  if (result.code !== 0) throw new KeychainError(`${what} failed (security exited ${result.code}): ${result.stderr.trim().slice(0, 300)}`);
  return result;
}

/** The user's keychain search list, as `security list-keychains -d user` prints it (one quoted path a line). */
export function parseKeychainList(stdout: string): string[] {
  return [...stdout.matchAll(/"([^"]+)"/g)].map((m) => m[1]!);
}

/**
 * The commands that make a job's keychain usable by codesign, in order (Apple's `security(1)`):
 * create it with a random password, keep it unlocked for the job (no lock on sleep, 6 h timeout), unlock it,
 * import the identity with codesign allowed to use the key, let Apple's tools use the key without a prompt
 * (the partition list), then put it first in the user's search list, ahead of the list as it was.
 */
export function keychainSetUpCommands(options: {
  keychain: string;
  password: string;
  p12Path: string;
  p12Password: string;
  searchList: string[];
}): string[][] {
  const { keychain, password, p12Path, p12Password, searchList } = options;
  return [
    [SECURITY, "create-keychain", "-p", password, keychain],
    [SECURITY, "set-keychain-settings", "-t", "21600", keychain],
    [SECURITY, "unlock-keychain", "-p", password, keychain],
    [SECURITY, "import", p12Path, "-k", keychain, "-f", "pkcs12", "-P", p12Password, "-T", "/usr/bin/codesign", "-T", "/usr/bin/security"],
    [SECURITY, "set-key-partition-list", "-S", "apple-tool:,apple:,codesign:", "-s", "-k", password, keychain],
    [SECURITY, "list-keychains", "-d", "user", "-s", keychain, ...searchList.filter((k) => k !== keychain)],
  ];
}

/** The commands that undo a keychain: out of the search list (whatever else changed meanwhile stays), then deleted. */
export function keychainRemovalCommands(keychain: string, searchList: string[]): string[][] {
  return [
    [SECURITY, "list-keychains", "-d", "user", "-s", ...searchList.filter((k) => k !== keychain)],
    [SECURITY, "delete-keychain", keychain],
  ];
}

async function readSearchList(commands: CommandRunner): Promise<string[]> {
  return parseKeychainList((await must(commands, [SECURITY, "list-keychains", "-d", "user"], "reading the keychain search list")).stdout);
}

async function writeManifest(signingDir: string, installed: InstalledSigning): Promise<void> {
  await writeFile(join(signingDir, MANIFEST), JSON.stringify(installed), { mode: 0o600 });
}

export interface ProfileToInstall {
  uuid: string;
  bytes: Uint8Array;
}

/**
 * Installs each profile as `<UUID>.mobileprovision` in the user's profiles directory and returns the paths, by
 * UUID. The manifest is written before each file, so a crash between the two leaves nothing unlisted.
 */
export async function installProfiles(
  signingDir: string,
  home: string,
  profiles: ProfileToInstall[],
  installed: InstalledSigning,
  owner?: { uid: number; gid: number },
): Promise<Map<string, string>> {
  const dir = profilesDirectory(home);
  const made = await mkdir(dir, { recursive: true, mode: 0o700 });
  // With --run-as the runner (root) writes into the build user's home: the directories it made there (the
  // first one mkdir made, down to the profiles directory) and the profiles are that user's.
  if (owner && made) {
    for (let d = resolve(dir); ; d = resolve(d, "..")) {
      await chown(d, owner.uid, owner.gid);
      if (d === resolve(made) || d === resolve(home) || d === "/") break;
    }
  }
  const paths = new Map<string, string>();
  for (const profile of profiles) {
    if (!UUID.test(profile.uuid)) continue;
    const path = join(dir, `${profile.uuid}.mobileprovision`);
    paths.set(profile.uuid, path);
    // The same UUID is the same profile: one installed by Xcode or a person stays theirs, untouched.
    if (
      await stat(path).then(
        () => true,
        () => false,
      )
    )
      continue;
    installed.profiles.push(path);
    await writeManifest(signingDir, installed);
    await writeFile(path, profile.bytes, { mode: 0o600 });
    if (owner) await chown(path, owner.uid, owner.gid);
  }
  return paths;
}

/**
 * Creates the job's keychain in its signing directory with a random password and imports the identity.
 * Returns the keychain's path.
 */
export async function createJobKeychain(
  commands: CommandRunner,
  signingDir: string,
  p12Path: string,
  p12Password: string,
  installed: InstalledSigning,
): Promise<string> {
  const keychain = join(signingDir, "hangar-job.keychain-db");
  const password = randomBytes(24).toString("base64url");
  const searchList = await readSearchList(commands);
  installed.keychain = keychain;
  await writeManifest(signingDir, installed);
  for (const argv of keychainSetUpCommands({ keychain, password, p12Path, p12Password, searchList })) await must(commands, argv, argv[1]!);
  return keychain;
}

/** True when `path` is inside `dir` (both absolute). */
function inside(dir: string, path: string): boolean {
  const rel = relative(resolve(dir), resolve(path));
  return rel !== "" && !rel.startsWith("..") && !isAbsolute(rel);
}

/**
 * Undoes what a job's manifest lists. The manifest lies in a directory the build could have written to, so
 * nothing is trusted: only a keychain inside that same directory and `<UUID>.mobileprovision` files of the
 * profiles directory are touched.
 */
export async function undoInstalledSigning(
  commands: CommandRunner,
  signingDir: string,
  home: string,
): Promise<{ keychain: boolean; profiles: number }> {
  const text = await readFile(join(signingDir, MANIFEST), "utf8").catch(() => null);
  if (text === null) return { keychain: false, profiles: 0 };
  let manifest: Partial<InstalledSigning> = {};
  try {
    manifest = JSON.parse(text) as Partial<InstalledSigning>;
  } catch {
    // Unreadable: nothing it names can be trusted anyway.
  }
  let removedKeychain = false;
  const keychain = typeof manifest.keychain === "string" ? manifest.keychain : null;
  if (keychain && inside(signingDir, keychain)) {
    const searchList = await readSearchList(commands).catch(() => null);
    if (searchList) {
      for (const argv of keychainRemovalCommands(keychain, searchList)) await commands.run(argv);
      removedKeychain = true;
    }
  }
  let profiles = 0;
  const dir = profilesDirectory(home);
  for (const path of Array.isArray(manifest.profiles) ? manifest.profiles : []) {
    if (typeof path !== "string" || resolve(join(path, "..")) !== resolve(dir)) continue;
    const name = path.slice(path.lastIndexOf("/") + 1);
    if (!/^[0-9A-F-]{36}\.mobileprovision$/.test(name)) continue;
    await rm(path, { force: true });
    profiles++;
  }
  await rm(join(signingDir, MANIFEST), { force: true });
  return { keychain: removedKeychain, profiles };
}

/**
 * At start: undoes the keychains and profiles of jobs that a crash left, found through the manifests in the
 * signing directories (`<job dir>/secrets/`) of the work root. Runs before the work root's job directories go.
 */
export async function cleanSigningLeftovers(commands: CommandRunner, workRoot: string, jobDirPrefix: string, home: string): Promise<number> {
  let undone = 0;
  const entries = await readdir(workRoot).catch(() => [] as string[]);
  for (const name of entries) {
    if (!name.startsWith(jobDirPrefix)) continue;
    const result = await undoInstalledSigning(commands, join(workRoot, name, "secrets"), home);
    if (result.keychain || result.profiles > 0) undone++;
  }
  return undone;
}
