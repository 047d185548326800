// iOS signing on the runner (docs/signing.md): a real daemon and runner hand a job every profile as
// HANGAR_IOS_PROFILES and remove them after it; the macOS keychain commands, checked line by line through the
// runner's command seam (no Mac here), including the clean-up after a crash.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  cleanSigningLeftovers,
  createJobKeychain,
  installProfiles,
  profilesDirectory,
  undoInstalledSigning,
  type CommandRunner,
  type InstalledSigning,
} from "../../src/cli/runner/keychain.ts";
import { createPipeline, createProject, makeGitRepo, queueBuild, registerRunner, type GitRepo } from "../helpers/builds.ts";
import { b64, makeSigningIdentity, makeSigningProfile, P12_PASSWORD, type SigningIdentity } from "../helpers/signing-material.ts";
import { getLog, removeDir, startReadyDaemon, startRunner, stopRunner, type ReadyDaemon, type RunnerProcess } from "./runner-harness.ts";

const APP_UUID = "11111111-2222-4333-8444-555555555555";
const WIDGET_UUID = "66666666-7777-4888-9999-AAAAAAAAAAAA";
const LOGIN = "/Users/builder/Library/Keychains/login.keychain-db";

let identity: SigningIdentity;
let scratch: string;

beforeAll(() => {
  identity = makeSigningIdentity({ days: 300 });
  scratch = mkdtempSync(join(tmpdir(), "hangar-runner-signing-"));
});

afterAll(() => removeDir(scratch));

function profiles() {
  const expiresAt = Math.floor(Date.now() / 1000) + 200 * 86_400;
  return {
    app: makeSigningProfile({ certificates: [identity.certDer], uuid: APP_UUID, bundleId: "com.example.app", expiresAt, name: "App" }),
    widget: makeSigningProfile({
      certificates: [identity.certDer],
      uuid: WIDGET_UUID,
      bundleId: "com.example.app.widget",
      expiresAt,
      name: "Widget",
    }),
  };
}

describe("a protected iOS build on a real runner (Linux: files only)", () => {
  let d: ReadyDaemon;
  let repo: GitRepo;
  let runner: RunnerProcess | undefined;
  beforeAll(async () => {
    d = await startReadyDaemon();
    repo = makeGitRepo();
  }, 60_000);
  afterAll(async () => {
    await stopRunner(runner);
    await d?.daemon.stop("SIGKILL");
    removeDir(d.dataDir);
    repo?.remove();
  });

  it("sees HANGAR_IOS_PROFILES with both profiles as private files, the log says no keychain was made, and they are gone after", async () => {
    const { app, widget } = profiles();
    const project = await createProject(d.api, d.ownerToken, { repo_url: repo.url });
    const put = await d.api.call("PUT", `/v1/projects/${project.id}/signing/ios`, {
      token: d.ownerToken,
      body: { certificate_p12_base64: b64(identity.p12), certificate_password: P12_PASSWORD, provisioning_profiles_base64: [b64(app), b64(widget)] },
    });
    expect(put.status).toBe(200);
    const pipeline = await createPipeline(d.api, d.ownerToken, project.id, {
      platform: "ios",
      steps: [
        {
          name: "sign",
          run: [
            'echo "profiles=$HANGAR_IOS_PROFILES"',
            'echo "keychain=${HANGAR_KEYCHAIN_PATH:-none}"',
            // Each path of the map is a readable file holding the profile.
            `node -e 'const m=JSON.parse(process.env.HANGAR_IOS_PROFILES);for(const [k,v] of Object.entries(m)){const fs=require("fs");const st=fs.statSync(v.path);console.log("file", k, v.uuid, (st.mode&0o777).toString(8), fs.readFileSync(v.path).toString("base64").length)}'`,
          ].join("\n"),
        },
      ],
    });
    const registered = await registerRunner(d.api, d.ownerToken, { platforms: ["ios"] });
    const build = await queueBuild(d.api, d.ownerToken, project.id, pipeline.id, { commit_sha: repo.shas.main });
    runner = startRunner(d.daemon.url, registered, ["--once"], join(scratch, "work"));
    expect(await runner.exited).toBe(0);
    const log = await getLog(d, build.id);
    const line = /profiles=(\{.*\})/.exec(log)?.[1];
    expect(line).toBeTruthy();
    const map = JSON.parse(line!) as Record<string, { uuid: string; name: string; path: string }>;
    expect(Object.keys(map).sort()).toEqual(["com.example.app", "com.example.app.widget"]);
    expect(map["com.example.app"]).toMatchObject({ uuid: APP_UUID, name: "App" });
    expect(map["com.example.app.widget"]).toMatchObject({ uuid: WIDGET_UUID, name: "Widget" });
    expect(map["com.example.app"]!.path.endsWith(`/profiles/${APP_UUID}.mobileprovision`)).toBe(true);
    expect(log).toContain(`file com.example.app ${APP_UUID} 600 ${b64(app).length}`);
    expect(log).toContain(`file com.example.app.widget ${WIDGET_UUID} 600 ${b64(widget).length}`);
    expect(log).toContain("keychain=none");
    expect(log).toContain("hangar: no keychain made");
    expect(log).not.toContain(P12_PASSWORD);
    for (const entry of Object.values(map)) expect(existsSync(entry.path)).toBe(false);
  }, 90_000);
});

/** The seam's recording twin: answers `list-keychains -d user` with the search list it keeps, like `security`. */
function recordingSecurity(searchList: string[] = [LOGIN]): CommandRunner & { calls: string[][]; list: string[] } {
  const state = {
    calls: [] as string[][],
    list: [...searchList],
    async run(argv: string[]) {
      state.calls.push(argv);
      if (argv[1] === "list-keychains" && argv.length === 4) return { code: 0, stdout: state.list.map((k) => `    "${k}"\n`).join(""), stderr: "" };
      if (argv[1] === "list-keychains" && argv[4] === "-s") state.list = argv.slice(5);
      return { code: 0, stdout: "", stderr: "" };
    },
  };
  return state;
}

describe("the macOS keychain and profile install (command lines through the seam)", () => {
  it("runs Apple's security commands in order, installs profiles by UUID, and undoes both at the end", async () => {
    const jobDir = join(scratch, "mac", "build-7-abc");
    const secrets = join(jobDir, "secrets");
    const home = join(scratch, "mac", "home");
    mkdirSync(secrets, { recursive: true });
    const p12Path = join(secrets, "ios-certificate.p12");
    writeFileSync(p12Path, identity.p12);
    const security = recordingSecurity();
    const installed: InstalledSigning = { keychain: null, profiles: [] };
    const { app, widget } = profiles();
    const paths = await installProfiles(
      secrets,
      home,
      [
        { uuid: APP_UUID, bytes: app },
        { uuid: WIDGET_UUID, bytes: widget },
      ],
      installed,
    );
    const dir = profilesDirectory(home);
    expect(dir).toBe(join(home, "Library", "MobileDevice", "Provisioning Profiles"));
    expect(paths.get(APP_UUID)).toBe(join(dir, `${APP_UUID}.mobileprovision`));
    expect(readFileSync(join(dir, `${WIDGET_UUID}.mobileprovision`))).toEqual(Buffer.from(widget));

    const keychain = await createJobKeychain(security, secrets, p12Path, P12_PASSWORD, installed);
    expect(keychain).toBe(join(secrets, "hangar-job.keychain-db"));
    const password = security.calls[1]![3]!;
    expect(password).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(security.calls).toEqual([
      ["/usr/bin/security", "list-keychains", "-d", "user"],
      ["/usr/bin/security", "create-keychain", "-p", password, keychain],
      ["/usr/bin/security", "set-keychain-settings", "-t", "21600", keychain],
      ["/usr/bin/security", "unlock-keychain", "-p", password, keychain],
      [
        "/usr/bin/security",
        "import",
        p12Path,
        "-k",
        keychain,
        "-f",
        "pkcs12",
        "-P",
        P12_PASSWORD,
        "-T",
        "/usr/bin/codesign",
        "-T",
        "/usr/bin/security",
      ],
      ["/usr/bin/security", "set-key-partition-list", "-S", "apple-tool:,apple:,codesign:", "-s", "-k", password, keychain],
      ["/usr/bin/security", "list-keychains", "-d", "user", "-s", keychain, LOGIN],
    ]);
    expect(security.list).toEqual([keychain, LOGIN]);

    security.calls.length = 0;
    expect(await undoInstalledSigning(security, secrets, home)).toEqual({ keychain: true, profiles: 2 });
    expect(security.calls).toEqual([
      ["/usr/bin/security", "list-keychains", "-d", "user"],
      ["/usr/bin/security", "list-keychains", "-d", "user", "-s", LOGIN],
      ["/usr/bin/security", "delete-keychain", keychain],
    ]);
    expect(security.list).toEqual([LOGIN]);
    expect(readdirSync(dir)).toEqual([]);
  });

  it("after a crash, the next start removes the job's keychain from the search list, deletes it and its profiles; a profile someone else installed stays", async () => {
    const workRoot = join(scratch, "crash-root");
    const secrets = join(workRoot, "build-9-xyz", "secrets");
    const home = join(scratch, "crash-home");
    mkdirSync(secrets, { recursive: true });
    const dir = profilesDirectory(home);
    mkdirSync(dir, { recursive: true });
    // Installed by Xcode before the job: the same UUID, not the job's to remove.
    writeFileSync(join(dir, `${WIDGET_UUID}.mobileprovision`), "xcode's copy");
    const p12Path = join(secrets, "ios-certificate.p12");
    writeFileSync(p12Path, identity.p12);
    const security = recordingSecurity(["/Library/Keychains/System.keychain", LOGIN]);
    const installed: InstalledSigning = { keychain: null, profiles: [] };
    const { app, widget } = profiles();
    await installProfiles(
      secrets,
      home,
      [
        { uuid: APP_UUID, bytes: app },
        { uuid: WIDGET_UUID, bytes: widget },
      ],
      installed,
    );
    const keychain = await createJobKeychain(security, secrets, p12Path, P12_PASSWORD, installed);
    // The runner dies here (SIGKILL): nothing of its own clean-up runs. Another tool changed the list meanwhile.
    security.list = [keychain, "/Library/Keychains/System.keychain", LOGIN, "/Users/builder/other.keychain-db"];
    // A build could have tampered with the manifest: what it names outside the allowed places is never touched.
    const manifest = JSON.parse(readFileSync(join(secrets, "installed.json"), "utf8")) as InstalledSigning;
    const victim = join(scratch, "victim.txt");
    writeFileSync(victim, "keep me");
    writeFileSync(join(secrets, "installed.json"), JSON.stringify({ ...manifest, profiles: [...manifest.profiles, victim] }));

    security.calls.length = 0;
    expect(await cleanSigningLeftovers(security, workRoot, "build-", home)).toBe(1);
    expect(security.calls).toEqual([
      ["/usr/bin/security", "list-keychains", "-d", "user"],
      ["/usr/bin/security", "list-keychains", "-d", "user", "-s", "/Library/Keychains/System.keychain", LOGIN, "/Users/builder/other.keychain-db"],
      ["/usr/bin/security", "delete-keychain", keychain],
    ]);
    expect(readdirSync(dir)).toEqual([`${WIDGET_UUID}.mobileprovision`]);
    expect(readFileSync(join(dir, `${WIDGET_UUID}.mobileprovision`), "utf8")).toBe("xcode's copy");
    expect(readFileSync(victim, "utf8")).toBe("keep me");
    // Done once: a second start finds nothing left to undo.
    security.calls.length = 0;
    expect(await cleanSigningLeftovers(security, workRoot, "build-", home)).toBe(0);
    expect(security.calls).toEqual([]);
  });

  it("with --run-as, the profiles and the directories made for them in the build user's home are that user's", async () => {
    if (process.getuid?.() !== 0) throw new Error("this test runs as root, as the --run-as runner does");
    const secrets = join(scratch, "runas", "build-3-q", "secrets");
    const home = join(scratch, "runas", "home");
    mkdirSync(secrets, { recursive: true });
    mkdirSync(home, { recursive: true });
    const nobody = { uid: 65534, gid: 65534 };
    const { app } = profiles();
    await installProfiles(secrets, home, [{ uuid: APP_UUID, bytes: app }], { keychain: null, profiles: [] }, nobody);
    for (const path of [
      join(home, "Library"),
      join(home, "Library", "MobileDevice"),
      profilesDirectory(home),
      join(profilesDirectory(home), `${APP_UUID}.mobileprovision`),
    ]) {
      expect([path, statSync(path).uid, statSync(path).gid]).toEqual([path, 65534, 65534]);
    }
    // The home itself stays as it was.
    expect(statSync(home).uid).toBe(0);
  });
});
