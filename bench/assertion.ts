// `npm run bench:assertion`: trusted-proxy sign-in (POST /v1/auth/trusted-proxy/login) through a signed assertion
// (docs/api.md §21; the key set cached after the first sign-in) beside the plain identity header, in the same run:
// two instances on the daemon's Node dependencies, each set up to `ready` behind a loopback proxy, then ROUNDS
// sequential sign-ins each, alternating blocks so machine load hits both alike. Goal: assertion ÷ plain ≥ 0.5.
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { createApp } from "../src/app.ts";
import { loadConfig } from "../src/config.ts";
import { issueBootstrapToken } from "../src/domain/setup/setup.ts";
import { createNodeDeps } from "../src/runtime/node-deps.ts";
import { startJwksIssuer } from "../test/helpers/jwks-issuer.ts";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2000);
const BLOCK = 100;
const HEADER = "cf-access-jwt-assertion";
const AUDIENCE = "bench-audience";
const OWNER = "owner@example.com";

const issuer = await startJwksIssuer();
const cleanups: (() => Promise<void> | void)[] = [() => issuer.close()];

async function instance(assertion: boolean) {
  const dataDir = mkdtempSync(join(tmpdir(), "hangar-bench-assertion-"));
  const runtime = await createNodeDeps(
    loadConfig({ HANGAR_DATA_DIR: dataDir, HANGAR_LOG_REQUESTS: "0", HANGAR_OUTBOUND_ALLOW: "127.0.0.1/32" }),
    // Every request comes from the proxy on this machine.
    { log: () => {}, getPeerAddress: () => "127.0.0.1" },
  );
  cleanups.push(async () => {
    await runtime.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  const app = createApp(runtime.deps);
  const call = async (path: string, init: { token?: string; body?: unknown; headers?: Record<string, string> } = {}) => {
    const headers: Record<string, string> = { "content-type": "application/json", "x-forwarded-for": "198.51.100.7", ...init.headers };
    if (init.token) headers.authorization = `Bearer ${init.token}`;
    const res = await app.request(path, { method: "POST", headers, body: init.body === undefined ? undefined : JSON.stringify(init.body) });
    if (res.status !== 200) throw new Error(`${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as Record<string, unknown>;
  };
  const { token } = await issueBootstrapToken(runtime.deps);
  const setup = (await call("/v1/setup/bootstrap-token/verify", { body: { token } })).session_token as string;
  await call("/v1/setup/preferences", { token: setup, body: { runtime_mode: "remote", remote_auth_mode: "trusted_proxy" } });
  const config = assertion ? { assertion: { header: HEADER, jwks_url: issuer.jwksUrl, issuer: issuer.issuer, audience: AUDIENCE } } : {};
  await call("/v1/setup/trusted-proxy/configure", { token: setup, body: config });
  const now = Math.floor(Date.now() / 1000);
  const identity: Record<string, string> = assertion
    ? { [HEADER]: await issuer.sign(OWNER, { nowS: now, audience: AUDIENCE, expiresInS: 3600 }) }
    : { "x-hangar-user-email": OWNER };
  await call("/v1/setup/owner/claim-trusted-proxy", { token: setup, headers: identity });
  await call("/v1/setup/complete", { token: setup });
  return () => call("/v1/auth/trusted-proxy/login", { headers: identity });
}

try {
  const signInWithAssertion = await instance(true);
  const signInWithHeader = await instance(false);
  // Warm-up (the first assertion sign-in fetches the key set).
  for (let i = 0; i < 50; i++) {
    await signInWithAssertion();
    await signInWithHeader();
  }
  const fetchesBefore = issuer.fetches();
  const spent = { assertion: 0, plain: 0 };
  for (let done = 0; done < ROUNDS; done += BLOCK) {
    for (const [name, run] of [
      ["assertion", signInWithAssertion],
      ["plain", signInWithHeader],
    ] as const) {
      const t0 = performance.now();
      for (let i = 0; i < BLOCK; i++) await run();
      spent[name] += performance.now() - t0;
    }
  }
  const perSecond = (ms: number) => (ROUNDS * 1000) / ms;
  const a = perSecond(spent.assertion);
  const p = perSecond(spent.plain);
  console.log(
    `bench:assertion — ${ROUNDS} sign-ins each; ${cpus().length} cores, load ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" / ")}`,
  );
  console.log(`signed assertion (key set cached): ${a.toFixed(0)} sign-ins/s, ${(spent.assertion / ROUNDS).toFixed(2)} ms each`);
  console.log(`plain identity header:             ${p.toFixed(0)} sign-ins/s, ${(spent.plain / ROUNDS).toFixed(2)} ms each`);
  console.log(`assertion ÷ plain = ${(a / p).toFixed(2)} (goal ≥ 0.5); key set fetches during the run: ${issuer.fetches() - fetchesBefore}`);
} finally {
  for (const cleanup of cleanups.reverse()) await cleanup();
}
