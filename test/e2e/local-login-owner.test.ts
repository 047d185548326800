// Local sign-in only from the daemon's own OS user (docs/decisions.md "Local login: the socket's owner"): the real
// daemon, a loopback connection made by a process of a throwaway OS user (refused) and by the daemon's user
// (accepted), over IPv4 and IPv6 loopback, for POST /v1/auth/local/login, the UI's "Sign in on this machine" and the
// `hangar login` link; HANGAR_LOCAL_LOGIN_USERS lets a named user in.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeDataDir, runCli } from "../helpers/daemon.ts";
import { removeDir, startReadyDaemon, type ReadyDaemon } from "./runner-harness.ts";

const OTHER_USER = "hangar-login-test";

/** Why this machine cannot run these tests, or null: they need Linux, root and useradd (never skipped silently). */
function cannotRun(): string | null {
  if (process.platform !== "linux") return `these tests need Linux (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return "these tests need root (to run a client as another OS user): run the suite as root";
  if (spawnSync("useradd", ["--help"]).error) return "these tests need useradd to create the other user: apt-get install -y passwd";
  return null;
}

let createdUser = false;
let otherUid = -1;
const daemons: ReadyDaemon[] = [];

beforeAll(() => {
  if (cannotRun()) return;
  if (spawnSync("id", ["-u", OTHER_USER]).status !== 0) {
    const made = spawnSync("useradd", ["--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/bin/sh", OTHER_USER], {
      encoding: "utf8",
    });
    // 9: created meanwhile by a parallel run; anything else is a real failure.
    if (made.status !== 0 && made.status !== 9) throw new Error(`useradd ${OTHER_USER}: ${made.stderr}`);
    createdUser = made.status === 0;
  }
  otherUid = Number(execFileSync("id", ["-u", OTHER_USER], { encoding: "utf8" }).trim());
});

afterAll(async () => {
  for (const d of daemons) {
    await d.daemon.stop();
    removeDir(d.dataDir);
  }
  if (createdUser) spawnSync("userdel", [OTHER_USER]);
});

async function readyDaemon(env: Record<string, string> = {}): Promise<ReadyDaemon> {
  const d = await startReadyDaemon(env);
  daemons.push(d);
  return d;
}

/** One HTTP request from a fresh Node process running as `uid` (the daemon's user when undefined). */
async function requestAs(
  uid: number | undefined,
  url: string,
  init: { method: string; body?: string; headers?: Record<string, string> },
): Promise<{ status: number; body: string; location: string | null }> {
  const script = `
    const http = require("node:http");
    const { url, method, body, headers } = JSON.parse(process.argv[1]);
    const req = http.request(url, { method, headers }, (res) => {
      let text = "";
      res.on("data", (d) => (text += d));
      res.on("end", () => process.stdout.write(JSON.stringify({ status: res.statusCode, body: text, location: res.headers.location ?? null })));
    });
    req.on("error", (e) => { process.stderr.write(String(e)); process.exit(2); });
    req.end(body);`;
  const child = spawn(process.execPath, ["-e", script, JSON.stringify({ url, ...init })], {
    stdio: ["ignore", "pipe", "pipe"],
    ...(uid === undefined ? {} : { uid, gid: uid }),
    // Another user cannot enter this checkout: run from /.
    cwd: "/",
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  if (code !== 0) throw new Error(`client as uid ${uid ?? "self"} failed (${code}): ${err}`);
  return JSON.parse(out) as { status: number; body: string; location: string | null };
}

const loginJson = { method: "POST", body: "{}", headers: { "content-type": "application/json" } };

describe("local sign-in and the socket's OS user (real daemon)", { timeout: 180_000 }, () => {
  it("can run here (Linux, root, useradd)", () => {
    expect(cannotRun()).toBeNull();
  });

  it("refuses POST /v1/auth/local/login from another OS user's loopback socket and accepts the daemon's user", async () => {
    const d = await readyDaemon();
    const refused = await requestAs(otherUid, `${d.daemon.url}/v1/auth/local/login`, loginJson);
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.body).code).toBe("local_login_loopback_required");
    const accepted = await requestAs(undefined, `${d.daemon.url}/v1/auth/local/login`, loginJson);
    expect(accepted.status).toBe(200);
    expect(JSON.parse(accepted.body).session_token).toMatch(/^hgu_/);
  });

  it("applies to the UI's Sign in on this machine and the hangar login link, which stays usable after a refusal", async () => {
    const d = await readyDaemon();
    const origin = d.daemon.url;
    const form = { method: "POST", body: "email=", headers: { "content-type": "application/x-www-form-urlencoded", origin } };
    const uiRefused = await requestAs(otherUid, `${origin}/login/local`, form);
    expect(uiRefused.status).toBe(403);
    expect(uiRefused.body).toContain("from the account that runs it");
    // The page does not offer the button to another user's browser.
    const pageForOther = await requestAs(otherUid, `${origin}/login`, { method: "GET" });
    expect(pageForOther.status).toBe(200);
    expect(pageForOther.body).not.toContain("Sign in on this machine");
    const pageForOwn = await requestAs(undefined, `${origin}/login`, { method: "GET" });
    expect(pageForOwn.body).toContain("Sign in on this machine");
    const uiAccepted = await requestAs(undefined, `${origin}/login/local`, form);
    expect(uiAccepted.status).toBe(303);

    const printed = await runCli(["login"], d.env);
    expect(printed.code).toBe(0);
    const link = /http:\/\/\S+\/login\/local\/\S+/.exec(printed.stdout)?.[0];
    expect(link).toBeDefined();
    const linkRefused = await requestAs(otherUid, link!, { method: "GET" });
    expect(linkRefused.status).toBe(403);
    const linkAccepted = await requestAs(undefined, link!, { method: "GET" });
    expect(linkAccepted.status).toBe(303);
    expect(linkAccepted.location).toBe("/builds");
  });

  it("accepts a user named in HANGAR_LOCAL_LOGIN_USERS, over IPv6 loopback too", async () => {
    const d = await readyDaemon({ HANGAR_LOCAL_LOGIN_USERS: `nobody, ${OTHER_USER}` });
    const accepted = await requestAs(otherUid, `${d.daemon.url}/v1/auth/local/login`, loginJson);
    expect(accepted.status).toBe(200);

    const v6 = await readyDaemon({ HANGAR_HOST: "::1" });
    expect(v6.daemon.url).toMatch(/^http:\/\/\[::1\]:/);
    const refused = await requestAs(otherUid, `${v6.daemon.url}/v1/auth/local/login`, loginJson);
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.body).code).toBe("local_login_loopback_required");
    expect((await requestAs(undefined, `${v6.daemon.url}/v1/auth/local/login`, loginJson)).status).toBe(200);
  });

  it("refuses to start with a HANGAR_LOCAL_LOGIN_USERS name that is no user of the machine", async () => {
    const dataDir = makeDataDir();
    const made = await runCli(["serve"], {
      HANGAR_DATA_DIR: dataDir,
      HANGAR_LOCAL_LOGIN_USERS: "no-such-user-here",
      HANGAR_HOST: "127.0.0.1",
      HANGAR_PORT: "0",
    });
    removeDir(dataDir);
    expect(made.code).toBe(1);
    expect(made.stderr).toContain("no-such-user-here");
  });
});
