// Signing material for iOS and Android jobs: fetched from the daemon when the project has some, written to files
// readable only by the runner's user in the job's private `secrets/` directory, and handed to steps as paths and
// passwords in environment variables. The job removes the directory when it ends, whatever the outcome.
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { DaemonError, type RetryPolicy, type RunnerClient } from "./client.ts";

export interface SigningMaterial {
  env: Record<string, string>;
  /** Passwords to mask in the build log. */
  secrets: string[];
  /** The daemon withheld it (403 secrets_withheld: the branch is not protected, or a fork's pull request). */
  withheld?: boolean;
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
async function fetchSigning(client: RunnerClient, jobId: string, kind: "android-signing" | "ios-signing", retry: RetryPolicy): Promise<Fields | null> {
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
): Promise<SigningMaterial> {
  const material: SigningMaterial = { env: {}, secrets: [] };
  if (platform !== "android" && platform !== "ios") return material;
  await mkdir(secretsDir, { recursive: true, mode: 0o700 });
  try {
    return await fetchAndWrite(client, jobId, platform, secretsDir, retry, material);
  } catch (err) {
    if (!(err instanceof WithheldError)) throw err;
    return { env: {}, secrets: [], withheld: true };
  }
}

async function fetchAndWrite(
  client: RunnerClient,
  jobId: string,
  platform: "android" | "ios",
  secretsDir: string,
  retry: RetryPolicy,
  material: SigningMaterial,
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
  const profile = str(doc, "provisioning_profile_base64", "provisioning_profile");
  if (profile) {
    const path = join(secretsDir, "ios-profile.mobileprovision");
    await writeSecretFile(path, profile);
    material.env.HANGAR_IOS_PROVISIONING_PROFILE_PATH = path;
  }
  const password = str(doc, "certificate_password");
  if (password !== null) {
    material.env.HANGAR_IOS_CERTIFICATE_PASSWORD = password;
    material.secrets.push(password);
  }
  return material;
}

export async function removeSigning(secretsDir: string): Promise<void> {
  await rm(secretsDir, { recursive: true, force: true });
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
