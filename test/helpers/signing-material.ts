// Real signing material for tests, made by the tools teams use: openssl for certificates, PKCS#12 files (modern
// AES/PBKDF2 and legacy RC2/3DES) and CMS-signed provisioning profiles; keytool for Android keystores.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cmsSign, makePlist } from "./app-fixtures.ts";

export const P12_PASSWORD = "p12-secret-password";

export interface SigningIdentity {
  certPem: string;
  keyPem: string;
  /** The certificate's DER, as a profile's DeveloperCertificates lists it. */
  certDer: Uint8Array;
  /** OpenSSL 3's default: AES-256-CBC, PBKDF2 with SHA-256, SHA-256 MAC. */
  p12: Uint8Array;
  /** `-legacy`: RC2-40 and 3DES with a SHA-1 MAC, as Keychain Access and older tools write. */
  p12Legacy: Uint8Array;
  /** The certificate without its private key. */
  p12NoKey: Uint8Array;
  serial: string;
  team: string;
}

function workDir(): string {
  return mkdtempSync(join(tmpdir(), "hangar-signing-"));
}

/** An Apple-style distribution identity valid for `days` from now (openssl's clock, i.e. real time). */
export function makeSigningIdentity(options: { days?: number; team?: string; name?: string } = {}): SigningIdentity {
  const dir = workDir();
  const team = options.team ?? "ABCDE12345";
  const name = options.name ?? "Example Team";
  const key = join(dir, "key.pem");
  const cert = join(dir, "cert.pem");
  const subject = `/UID=${team}/CN=Apple Distribution: ${name} (${team})/OU=${team}/O=${name}/C=US`;
  execFileSync(
    "openssl",
    ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", String(options.days ?? 365), "-subj", subject],
    { stdio: "ignore" },
  );
  const p12 = (file: string, extra: string[]) => {
    execFileSync("openssl", ["pkcs12", "-export", ...extra, "-in", cert, "-passout", `pass:${P12_PASSWORD}`, "-out", join(dir, file)], {
      stdio: "ignore",
    });
    return new Uint8Array(readFileSync(join(dir, file)));
  };
  const der = execFileSync("openssl", ["x509", "-in", cert, "-outform", "DER"]);
  const serial = execFileSync("openssl", ["x509", "-in", cert, "-noout", "-serial"])
    .toString()
    .trim()
    .replace(/^serial=/, "");
  return {
    certPem: readFileSync(cert, "utf8"),
    keyPem: readFileSync(key, "utf8"),
    certDer: new Uint8Array(der),
    p12: p12("modern.p12", ["-inkey", key]),
    p12Legacy: p12("legacy.p12", ["-legacy", "-inkey", key]),
    p12NoKey: p12("nokey.p12", ["-nokeys"]),
    serial: serial.replace(/^(00)+(?=.)/, "").toUpperCase(),
    team,
  };
}

export interface SigningProfileSpec {
  /** Certificates the profile admits. */
  certificates: Uint8Array[];
  uuid: string;
  bundleId: string;
  name?: string;
  team?: string;
  /** Unix seconds. */
  expiresAt: number;
  kind?: "app_store" | "ad_hoc";
}

/** A provisioning profile as the developer portal makes it: a plist in CMS SignedData (`openssl cms -sign`). */
export function makeSigningProfile(spec: SigningProfileSpec): Uint8Array {
  const team = spec.team ?? "ABCDE12345";
  const plist: Record<string, unknown> = {
    AppIDName: spec.name ?? spec.bundleId,
    ApplicationIdentifierPrefix: [team],
    CreationDate: { $date: "2026-01-01T00:00:00Z" },
    DeveloperCertificates: spec.certificates.map((c) => ({ $data: Buffer.from(c).toString("base64") })),
    Entitlements: { "application-identifier": `${team}.${spec.bundleId}`, "com.apple.developer.team-identifier": team, "get-task-allow": false },
    ExpirationDate: { $date: new Date(spec.expiresAt * 1000).toISOString() },
    Name: spec.name ?? `${spec.bundleId} AppStore`,
    TeamIdentifier: [team],
    TeamName: "Example Team",
    UUID: spec.uuid,
    Version: 1,
  };
  if (spec.kind === "ad_hoc") plist.ProvisionedDevices = ["00008110-0000000000000001", "00008110-0000000000000002"];
  return cmsSign(makePlist(plist as Parameters<typeof makePlist>[0]));
}

export interface AndroidKeystore {
  bytes: Uint8Array;
  storePassword: string;
  keyPassword: string;
  alias: string;
}

/** An upload keystore made by keytool: `JKS` (distinct key password) or `PKCS12` (one password for both). */
export function makeKeystore(type: "JKS" | "PKCS12", options: { alias?: string; days?: number } = {}): AndroidKeystore {
  const dir = workDir();
  const file = join(dir, type === "JKS" ? "upload.jks" : "upload.p12");
  const alias = options.alias ?? "upload";
  const storePassword = "store-secret-1";
  const keyPassword = type === "JKS" ? "key-secret-22" : storePassword;
  execFileSync(
    "keytool",
    [
      "-genkeypair",
      "-keystore",
      file,
      "-storetype",
      type,
      "-storepass",
      storePassword,
      "-keypass",
      keyPassword,
      "-alias",
      alias,
      "-keyalg",
      "RSA",
      "-keysize",
      "2048",
      "-dname",
      "CN=Example Upload, O=Example",
      "-validity",
      String(options.days ?? 10_000),
    ],
    { stdio: "ignore" },
  );
  return { bytes: new Uint8Array(readFileSync(file)), storePassword, keyPassword, alias };
}

export function b64(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("base64");
}

/** Writes `bytes` to a fresh file (for browser uploads) and returns its path. */
export function writeTempFile(name: string, bytes: Uint8Array): string {
  const path = join(workDir(), name);
  writeFileSync(path, bytes);
  return path;
}

let sampleIdentity: SigningIdentity | null = null;
let sampleProfile: Uint8Array | null = null;
const p12ByPassword = new Map<string, string>();
const keystoreByKey = new Map<string, AndroidKeystore>();

/**
 * A valid iOS upload body (a real PKCS#12 under `password` and a profile listing its certificate), made once per
 * test process and password: for tests about something else than signing that still need material that opens.
 */
export function iosSigningBody(password = P12_PASSWORD): {
  certificate_p12_base64: string;
  certificate_password: string;
  provisioning_profiles_base64: string[];
} {
  sampleIdentity ??= makeSigningIdentity();
  sampleProfile ??= makeSigningProfile({
    certificates: [sampleIdentity.certDer],
    uuid: "5B1D1A3C-0000-4000-8000-00000000C0DE",
    bundleId: "com.example.demo",
    expiresAt: Math.floor(Date.now() / 1000) + 300 * 86_400,
  });
  let p12 = p12ByPassword.get(password);
  if (!p12) {
    const dir = workDir();
    writeFileSync(join(dir, "cert.pem"), sampleIdentity.certPem);
    writeFileSync(join(dir, "key.pem"), sampleIdentity.keyPem);
    execFileSync(
      "openssl",
      [
        "pkcs12",
        "-export",
        "-inkey",
        join(dir, "key.pem"),
        "-in",
        join(dir, "cert.pem"),
        "-passout",
        `pass:${password}`,
        "-out",
        join(dir, "id.p12"),
      ],
      { stdio: "ignore" },
    );
    p12 = b64(new Uint8Array(readFileSync(join(dir, "id.p12"))));
    p12ByPassword.set(password, p12);
  }
  return { certificate_p12_base64: p12, certificate_password: password, provisioning_profiles_base64: [b64(sampleProfile)] };
}

/** A valid Android upload body: a real JKS keystore (passwords of at least 6 characters, as keytool requires). */
export function androidSigningBody(options: { storePassword?: string; keyPassword?: string; alias?: string } = {}) {
  const storePassword = options.storePassword ?? "store-secret-1";
  const keyPassword = options.keyPassword ?? "key-secret-22";
  const alias = options.alias ?? "upload";
  const key = JSON.stringify([storePassword, keyPassword, alias]);
  let store = keystoreByKey.get(key);
  if (!store) {
    const dir = workDir();
    const file = join(dir, "upload.jks");
    execFileSync(
      "keytool",
      [
        "-genkeypair",
        "-keystore",
        file,
        "-storetype",
        "JKS",
        "-storepass",
        storePassword,
        "-keypass",
        keyPassword,
        "-alias",
        alias,
        "-keyalg",
        "RSA",
        "-keysize",
        "2048",
        "-dname",
        "CN=Example Upload, O=Example",
        "-validity",
        "10000",
      ],
      { stdio: "ignore" },
    );
    store = { bytes: new Uint8Array(readFileSync(file)), storePassword, keyPassword, alias };
    keystoreByKey.set(key, store);
  }
  return { keystore_base64: b64(store.bytes), keystore_password: storePassword, key_alias: alias, key_password: keyPassword };
}
