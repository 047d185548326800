import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { http, makeDataDir, runCli, startDaemon, type Daemon } from "../helpers/daemon.ts";
import { startOidcProvider, TEST_CLIENT_ID, TEST_CLIENT_SECRET, TEST_REDIRECT_URI, type TestOidcProvider } from "../helpers/oidc-provider.ts";

const dataDir = makeDataDir();
const env = { HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0" };
const daemons: Daemon[] = [];
let idp: TestOidcProvider;

beforeAll(async () => {
  idp = await startOidcProvider();
});
afterAll(async () => {
  for (const d of daemons) await d.stop("SIGKILL");
  await idp?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const startPath = `/v1/auth/oidc/start?redirect_uri=${encodeURIComponent(TEST_REDIRECT_URI)}`;

/** One sign-in as a browser and the web UI do it, timed in its three parts. */
async function timedSignIn(base: string, accountId: string) {
  const t0 = performance.now();
  const start = await http(base, "GET", startPath);
  const t1 = performance.now();
  const { code, state } = await idp.authorize(start.body.authorization_url, accountId);
  const t2 = performance.now();
  const callback = await http(base, "POST", "/v1/auth/oidc/callback", { body: { code, state } });
  const t3 = performance.now();
  return { callback, startMs: t1 - t0, providerMs: t2 - t1, callbackMs: t3 - t2, totalMs: t3 - t0 };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

describe("OIDC against the real daemon", () => {
  it("completes setup through the provider, and finishes a sign-in started before a restart", async () => {
    const first = await startDaemon(env);
    daemons.push(first);
    const made = await runCli(["setup-token"], env);
    expect(made.code).toBe(0);
    const verified = await http(first.url, "POST", "/v1/setup/bootstrap-token/verify", { body: { token: made.stdout.trim() } });
    expect(verified.status).toBe(200);
    const setup = verified.body.session_token as string;

    const configured = await http(first.url, "POST", "/v1/setup/oidc/configure", {
      token: setup,
      body: { issuer_url: idp.issuer, client_id: TEST_CLIENT_ID, client_secret: TEST_CLIENT_SECRET },
    });
    expect(configured.status).toBe(200);
    expect(configured.body).toMatchObject({ state: "idp_configured", discovered_issuer: idp.issuer });
    const ownerStart = await http(first.url, "POST", "/v1/setup/owner/start-oidc", { token: setup, body: { redirect_uri: TEST_REDIRECT_URI } });
    expect(ownerStart.status).toBe(200);
    const ownerCode = await idp.authorize(ownerStart.body.authorization_url, "owner-sub");
    expect(ownerCode.state).toBe(ownerStart.body.state);
    const owner = await http(first.url, "POST", "/v1/setup/owner/verify-oidc", { token: setup, body: ownerCode });
    expect(owner.status).toBe(200);
    expect(owner.body).toMatchObject({ state: "owner_created", owner_email: "owner@example.com", oidc_subject: "owner-sub" });
    expect((await http(first.url, "POST", "/v1/setup/complete", { token: setup })).body.state).toBe("ready");

    // The owner signs in through the provider; ten times, to measure the round trip.
    const runs = [];
    for (let i = 0; i < 10; i++) runs.push(await timedSignIn(first.url, "owner-sub"));
    for (const run of runs) expect(run.callback.status).toBe(200);
    const ownerToken = runs[0]!.callback.body.session_token as string;
    expect(runs[0]!.callback.body.user).toMatchObject({ email: "owner@example.com", role: "owner", oidc_subject: "owner-sub" });
    const figures = {
      total_ms: median(runs.map((r) => r.totalMs)),
      start_ms: median(runs.map((r) => r.startMs)),
      provider_pages_ms: median(runs.map((r) => r.providerMs)),
      callback_ms: median(runs.map((r) => r.callbackMs)),
      max_total_ms: Math.max(...runs.map((r) => r.totalMs)),
    };
    console.log(
      `OIDC sign-in round trip against the local provider, median of ${runs.length}: ${JSON.stringify(figures, (_k, v: unknown) => (typeof v === "number" ? Math.round(v * 10) / 10 : v))}`,
    );

    const invited = await http(first.url, "POST", "/v1/users/invite", { token: ownerToken, body: { email: "dev@example.com", role: "developer" } });
    expect(invited.status).toBe(200);
    expect(invited.body.status).toBe("invited");

    // The invited user starts signing in, and the daemon restarts while they are at the provider.
    const pending = await http(first.url, "GET", startPath);
    expect(pending.status).toBe(200);
    expect(await first.stop("SIGTERM")).toBe(0);
    const second = await startDaemon(env);
    daemons.push(second);
    expect(second.url).not.toBe(first.url);

    const { code, state } = await idp.authorize(pending.body.authorization_url, "dev-sub");
    expect(state).toBe(pending.body.state);
    const signedIn = await http(second.url, "POST", "/v1/auth/oidc/callback", { body: { code, state } });
    expect(signedIn.status).toBe(200);
    expect(signedIn.body.user).toMatchObject({
      user_id: invited.body.id,
      email: "dev@example.com",
      role: "developer",
      oidc_subject: "dev-sub",
      display_name: "Dev Eloper",
    });
    const me = await http(second.url, "GET", "/v1/users/me", { token: signedIn.body.session_token });
    expect(me.body).toMatchObject({ email: "dev@example.com", status: "active", avatar_url: "https://img.example.test/dev.png" });
    const replay = await http(second.url, "POST", "/v1/auth/oidc/callback", { body: { code, state } });
    expect([replay.status, replay.body.code]).toEqual([400, "invalid_state"]);
    // The owner's session from before the restart still works too.
    expect((await http(second.url, "GET", "/v1/users/me", { token: ownerToken })).status).toBe(200);
  }, 90_000);
});
