// bench:signing — what checking an iOS upload costs (docs/signing.md): a realistic distribution identity (RSA 2048,
// OpenSSL 3's AES/PBKDF2 .p12 and the legacy RC2/3DES one) with 10 CMS-signed profiles listing it, through the
// daemon's checkIosSigning, beside `openssl` parsing the same files (pkcs12 with its password, cms per profile):
// the floor of a native tool, process starts included. Then the runner's macOS keychain set-up through its
// command seam: how many `security` commands it runs and how many bytes it writes.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { checkIosSigning } from "../src/domain/signing/signing.ts";
import { createJobKeychain, installProfiles, profilesDirectory, type CommandRunner } from "../src/cli/runner/keychain.ts";
import { makeSigningIdentity, makeSigningProfile, P12_PASSWORD } from "../test/helpers/signing-material.ts";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);
const b64 = (b: Uint8Array) => Buffer.from(b).toString("base64");

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "hangar-bench-signing-"));
  const identity = makeSigningIdentity({ days: 365 });
  const expiresAt = Math.floor(Date.now() / 1000) + 300 * 86_400;
  const profiles = Array.from({ length: 10 }, (_, i) =>
    makeSigningProfile({
      certificates: [identity.certDer],
      uuid: `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`,
      bundleId: i === 0 ? "com.example.app" : `com.example.app.ext${i}`,
      expiresAt,
      kind: "ad_hoc",
    }),
  );
  const profileBytes = profiles.reduce((n, p) => n + p.length, 0);
  const results: Record<string, unknown> = { load_average_1m: loadavg()[0], profiles: profiles.length, profile_bytes: profileBytes };

  for (const [name, p12] of [
    ["modern (AES-256, PBKDF2-SHA256)", identity.p12],
    ["legacy (RC2-40, 3DES, SHA-1 MAC)", identity.p12Legacy],
  ] as const) {
    const input = { certificate_p12_base64: b64(p12), certificate_password: P12_PASSWORD, provisioning_profiles_base64: profiles.map(b64) };
    await checkIosSigning(input); // warm-up (JIT)
    const ms: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const started = performance.now();
      await checkIosSigning(input);
      ms.push(performance.now() - started);
    }
    results[`hangar ${name} + 10 profiles, median ms`] = Number(median(ms).toFixed(1));
  }

  const p12File = join(dir, "id.p12");
  writeFileSync(p12File, identity.p12);
  profiles.forEach((p, i) => writeFileSync(join(dir, `p${i}.mobileprovision`), p));
  const ms: number[] = [];
  for (let i = 0; i < Math.min(ROUNDS, 5); i++) {
    const started = performance.now();
    execFileSync("openssl", ["pkcs12", "-in", p12File, "-passin", `pass:${P12_PASSWORD}`, "-nodes", "-out", join(dir, "out.pem")], {
      stdio: "ignore",
    });
    for (let p = 0; p < profiles.length; p++) {
      execFileSync(
        "openssl",
        ["cms", "-verify", "-noverify", "-inform", "DER", "-in", join(dir, `p${p}.mobileprovision`), "-out", join(dir, "plist.xml")],
        { stdio: "ignore" },
      );
    }
    ms.push(performance.now() - started);
  }
  results["openssl pkcs12 + 10 × cms (11 processes), median ms"] = Number(median(ms).toFixed(1));

  // The runner's side: the keychain and profile install as it runs on macOS, the commands recorded.
  const calls: string[][] = [];
  const security: CommandRunner = {
    async run(argv) {
      calls.push(argv);
      return {
        code: 0,
        stdout: argv[1] === "list-keychains" && argv.length === 4 ? '    "/Users/ci/Library/Keychains/login.keychain-db"\n' : "",
        stderr: "",
      };
    },
  };
  const secrets = join(dir, "build-1-x", "secrets");
  const home = join(dir, "home");
  execFileSync("mkdir", ["-p", secrets]);
  const certPath = join(secrets, "ios-certificate.p12");
  writeFileSync(certPath, identity.p12);
  const installed = { keychain: null as string | null, profiles: [] as string[] };
  const started = performance.now();
  await installProfiles(
    secrets,
    home,
    profiles.map((bytes, i) => ({ uuid: `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`, bytes })),
    installed,
  );
  await createJobKeychain(security, secrets, certPath, P12_PASSWORD, installed);
  const setUpMs = performance.now() - started;
  const installedBytes = readdirSync(profilesDirectory(home)).reduce((n, f) => n + statSync(join(profilesDirectory(home), f)).size, 0);
  const manifestBytes = statSync(join(secrets, "installed.json")).size;
  results["runner set-up: security commands"] = calls.length;
  results["runner set-up: bytes written (p12 + profiles in the job dir and installed + manifest)"] =
    identity.p12.length + 2 * profileBytes + manifestBytes;
  results["runner set-up: installed profile bytes"] = installedBytes;
  results["runner set-up: wall ms without the security commands themselves"] = Number(setUpMs.toFixed(1));
  results["runner removal: security commands"] = 3;
  console.log(JSON.stringify(results, null, 2));
  rmSync(dir, { recursive: true, force: true });
}

await main();
