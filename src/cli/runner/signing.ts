// Signing material for iOS and Android jobs: fetched from the daemon when the project has some, written to files
// readable only by the runner's user in the job's private `secrets/` directory, and handed to steps as paths and
// passwords in environment variables. The job removes the directory when it ends, whatever the outcome.
// iOS jobs also get every provisioning profile (HANGAR_IOS_PROFILES) and, on macOS, a keychain of their own
// (keychain.ts; docs/signing.md).
import { mkdir, writeFile } from "node:fs/promises";
import { rmSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { DaemonError, type RetryPolicy, type RunnerClient } from "./client.ts";
import {
  cleanSigningLeftovers,
  createJobKeychain,
  installProfiles,
  systemCommandRunner,
  undoInstalledSigning,
  type CommandRunner,
  type InstalledSigning,
} from "./keychain.ts";
import type { Logger } from "./log.ts";

export interface SigningMaterial {
  env: Record<string, string>;
  /** Passwords to mask in the build log. */
  secrets: string[];
  /** The daemon withheld it (403 secrets_withheld: the branch is not protected, or a fork's pull request). */
  withheld?: boolean;
  /** Lines for the build log: what was installed, or why no keychain was made. */
  notes: string[];
}

/** Where and how the iOS material is installed; tests pass a recording CommandRunner and another system. */
export interface SigningSystem {
  /** `darwin` makes a keychain and installs profiles for Xcode; any other system writes files only. */
  platform: NodeJS.Platform;
  commands: CommandRunner;
  /** The home of the user that runs the steps (its profiles directory and keychain search list). */
  home: string;
  /** The --run-as user: installed profiles become theirs. */
  owner?: { uid: number; gid: number };
}

export function hostSigningSystem(identity: { uid?: number; gid?: number; home?: string } = {}): SigningSystem {
  const home = identity.home ?? homedir();
  const owner = identity.uid !== undefined && identity.gid !== undefined ? { uid: identity.uid, gid: identity.gid } : undefined;
  return {
    platform: process.platform,
    commands: systemCommandRunner({ uid: identity.uid, gid: identity.gid, env: { ...process.env, HOME: home } }),
    home,
    owner,
  };
}

/** Thrown for 403 secrets_withheld: the build goes on without the material. */
export class WithheldError extends Error {}

type Fields = Record<string, unknown>;

/** The first of `names` holding a string (a password may legitimately be empty). */
function str(fields: Fields, ...names: string[]): string | null {
  for (const name of names) {
    const value = fields[name];
    if (typeof value === "string") return value;
  }
  return null;
}

/** GET a signing document; null when the project has none (404 no_credentials). */
async function fetchSigning(
  client: RunnerClient,
  jobId: string,
  kind: "android-signing" | "ios-signing",
  retry: RetryPolicy,
): Promise<Fields | null> {
  const answer = await client.call("GET", client.jobPath(jobId, `/${kind}`), { retry });
  if (answer.status === 404) {
    const code = (answer.body as { code?: string } | null)?.code;
    if (code === "no_credentials") return null;
  }
  if (answer.status === 403 && (answer.body as { code?: string } | null)?.code === "secrets_withheld") throw new WithheldError(kind);
  if (answer.status !== 200) {
    const b = answer.body as { code?: string; message?: string } | null;
    throw new DaemonError(answer.status, b?.code ?? `http_${answer.status}`, b?.message ?? `${kind}: HTTP ${answer.status}`);
  }
  return (answer.body ?? {}) as Fields;
}

async function writeSecretFile(path: string, base64: string): Promise<void> {
  await writeFile(path, Buffer.from(base64, "base64"), { mode: 0o600 });
}

/** Fetches and writes the signing material a platform needs; empty when the platform signs nothing. */
export async function prepareSigning(
  client: RunnerClient,
  jobId: string,
  platform: string,
  secretsDir: string,
  retry: RetryPolicy,
  system: SigningSystem = hostSigningSystem(),
): Promise<SigningMaterial> {
  const material: SigningMaterial = { env: {}, secrets: [], notes: [] };
  if (platform !== "android" && platform !== "ios") return material;
  await mkdir(secretsDir, { recursive: true, mode: 0o700 });
  try {
    return await fetchAndWrite(client, jobId, platform, secretsDir, retry, material, system);
  } catch (err) {
    if (!(err instanceof WithheldError)) throw err;
    return { env: {}, secrets: [], notes: [], withheld: true };
  }
}

async function fetchAndWrite(
  client: RunnerClient,
  jobId: string,
  platform: "android" | "ios",
  secretsDir: string,
  retry: RetryPolicy,
  material: SigningMaterial,
  system: SigningSystem,
): Promise<SigningMaterial> {
  if (platform === "android") {
    const doc = await fetchSigning(client, jobId, "android-signing", retry);
    if (!doc) return material;
    const keystore = str(doc, "keystore_base64", "keystore");
    if (keystore) {
      const path = join(secretsDir, "android.keystore");
      await writeSecretFile(path, keystore);
      material.env.HANGAR_ANDROID_KEYSTORE_PATH = path;
    }
    const keystorePassword = str(doc, "keystore_password");
    const alias = str(doc, "key_alias");
    const keyPassword = str(doc, "key_password");
    if (keystorePassword !== null) material.env.HANGAR_ANDROID_KEYSTORE_PASSWORD = keystorePassword;
    if (alias !== null) material.env.HANGAR_ANDROID_KEY_ALIAS = alias;
    if (keyPassword !== null) material.env.HANGAR_ANDROID_KEY_PASSWORD = keyPassword;
    material.secrets.push(...[keystorePassword, keyPassword].filter((s): s is string => !!s));
    return material;
  }

  const doc = await fetchSigning(client, jobId, "ios-signing", retry);
  if (!doc) return material;
  const certificate = str(doc, "certificate_p12_base64", "certificate_base64", "certificate_p12");
  if (certificate) {
    const path = join(secretsDir, "ios-certificate.p12");
    await writeSecretFile(path, certificate);
    material.env.HANGAR_IOS_CERTIFICATE_PATH = path;
  }
  const password = str(doc, "certificate_password");
  if (password !== null) {
    material.env.HANGAR_IOS_CERTIFICATE_PASSWORD = password;
    material.secrets.push(password);
  }
  const profiles = iosProfiles(doc);
  if (profiles.length > 0) {
    // The first profile keeps its old variable, for pipelines written before there were several.
    const first = join(secretsDir, "ios-profile.mobileprovision");
    await writeSecretFile(first, profiles[0]!.base64);
    material.env.HANGAR_IOS_PROVISIONING_PROFILE_PATH = first;
  }
  const installed: InstalledSigning = { keychain: null, profiles: [] };
  const bytesOf = (p: IosProfile) => new Uint8Array(Buffer.from(p.base64, "base64"));
  let paths = new Map<string, string>();
  if (system.platform === "darwin") {
    paths = await installProfiles(
      secretsDir,
      system.home,
      profiles.map((p) => ({ uuid: p.uuid, bytes: bytesOf(p) })),
      installed,
      system.owner,
    );
    if (material.env.HANGAR_IOS_CERTIFICATE_PATH && password !== null) {
      const keychain = await createJobKeychain(system.commands, secretsDir, material.env.HANGAR_IOS_CERTIFICATE_PATH, password, installed);
      material.env.HANGAR_KEYCHAIN_PATH = keychain;
      material.notes.push(`hangar: keychain ${keychain} made for this job, with the signing certificate; removed when the job ends`);
    }
    material.notes.push(
      `hangar: ${installed.profiles.length} provisioning profile(s) installed in ${system.home}/Library/MobileDevice/Provisioning Profiles`,
    );
  } else {
    const dir = join(secretsDir, "profiles");
    await mkdir(dir, { recursive: true, mode: 0o700 });
    for (const p of profiles) {
      if (!p.uuid) continue;
      const path = join(dir, `${p.uuid}.mobileprovision`);
      await writeSecretFile(path, p.base64);
      paths.set(p.uuid, path);
    }
    material.notes.push(`hangar: no keychain made (keychains are a macOS thing; this runner is on ${system.platform}): profiles written to ${dir}`);
  }
  const map: Record<string, { uuid: string; name: string; path: string }> = {};
  for (const p of profiles) {
    const path = paths.get(p.uuid);
    if (path) map[p.pattern] = { uuid: p.uuid, name: p.name, path };
  }
  if (profiles.length > 0) material.env.HANGAR_IOS_PROFILES = JSON.stringify(map);
  return material;
}

interface IosProfile {
  uuid: string;
  name: string;
  pattern: string;
  base64: string;
}

/**
 * The profiles of the ios-signing answer. Only what can safely become a file name and a JSON key is used: a
 * canonical UUID, a bundle id pattern of bundle id characters; a daemon before several profiles sends one, with
 * neither, and it is then handed over under the old variable alone.
 */
function iosProfiles(doc: Fields): IosProfile[] {
  const list = Array.isArray(doc.provisioning_profiles) ? doc.provisioning_profiles : [];
  const out: IosProfile[] = [];
  for (const item of list as Fields[]) {
    const uuid = typeof item?.uuid === "string" ? item.uuid.toUpperCase() : "";
    const pattern = typeof item?.bundle_id_pattern === "string" ? item.bundle_id_pattern : "";
    const base64 = typeof item?.profile_base64 === "string" ? item.profile_base64 : "";
    if (!/^[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}$/.test(uuid) || !/^[A-Za-z0-9.*-]{1,255}$/.test(pattern) || !base64) continue;
    out.push({ uuid, pattern, base64, name: typeof item.name === "string" ? item.name : uuid });
  }
  if (out.length === 0) {
    const single = str(doc, "provisioning_profile_base64", "provisioning_profile");
    if (single) out.push({ uuid: "", pattern: "", base64: single, name: "" });
  }
  return out;
}

/**
 * At start, before the work root's job directories are removed: undoes the keychains and installed profiles
 * of jobs a crash interrupted (their manifests are in those directories). Elsewhere than macOS the files alone
 * were written, and they go with the job directories.
 */
export async function cleanSigningAtStart(workRoot: string, jobDirPrefix: string, system: SigningSystem, log: Logger): Promise<void> {
  if (system.platform !== "darwin") return;
  const undone = await cleanSigningLeftovers(system.commands, workRoot, jobDirPrefix, system.home).catch((err: unknown) => {
    log.warn(`signing material left by an earlier run could not all be removed: ${(err as Error).message}`);
    return 0;
  });
  if (undone > 0) log.warn(`removed the keychain and profiles of ${undone} job(s) interrupted by an earlier run`);
}

/** Removes the job's signing files and undoes what it installed outside them (keychain, profiles). */
export async function removeSigning(secretsDir: string, system: SigningSystem = hostSigningSystem()): Promise<void> {
  if (system.platform === "darwin") await undoInstalledSigning(system.commands, secretsDir, system.home).catch(() => undefined);
  // Synchronous: a few small files, microseconds, where the promise call waited for the thread pool on every
  // job's way to its final report (docs/benchmarks.md, the runner's overhead).
  rmSync(secretsDir, { recursive: true, force: true });
}

/** The project's secret variables for the job: `{}` when it has none; `null` when withheld (403 secrets_withheld). */
export async function fetchSecretVariables(client: RunnerClient, jobId: string, retry: RetryPolicy): Promise<Record<string, string> | null> {
  const answer = await client.call("GET", client.jobPath(jobId, "/secrets"), { retry });
  const body = answer.body as Record<string, unknown> | null;
  if (answer.status === 403 && body?.code === "secrets_withheld") return null;
  if (answer.status !== 200 || !body || typeof body !== "object") {
    const b = body as { code?: string; message?: string } | null;
    throw new DaemonError(answer.status, b?.code ?? `http_${answer.status}`, b?.message ?? `secrets: HTTP ${answer.status}`);
  }
  const out: Record<string, string> = {};
  // Only names a shell accepts, and string values: anything else from the daemon is ignored, not trusted.
  for (const [name, value] of Object.entries(body)) if (/^[A-Z_][A-Z0-9_]*$/.test(name) && typeof value === "string") out[name] = value;
  return out;
}
