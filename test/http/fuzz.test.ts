// Hostile input against EVERY route the app registers (enumerated from createApp(deps).routes, so a new route
// is fuzzed the day it lands): malformed and wrong-shaped JSON, wrong types and nasty strings in every field,
// wrong content types, traversal and junk in path parameters and query strings, with and without credentials.
// Whatever comes in, the answer is never an unhandled 500, and every error is `{code, message[, issues]}`
// with a code from ERROR_CODES (docs/api.md §2).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ERROR_CODES } from "../../src/errors.ts";
import { makeTestApp, type CallResult, type TestApp } from "../helpers/app.ts";
import { buildWorld, claim, DEFAULT_SHA, queueBuild, registerRunner, reportStatus } from "../helpers/builds.ts";
import { createUser, sessionFor, startSetup } from "../helpers/factories.ts";
import { androidSigningBody, iosSigningBody } from "../helpers/signing-material.ts";
import { makeAscKey, makeServiceAccount } from "../helpers/store-keys.ts";

type Json = unknown;
type Credential = "setup" | "user" | "runner" | "none";

interface Route {
  method: string;
  path: string;
  key: string;
}

const KB = 1024;
const HUGE = "x".repeat(100 * KB);
const CODES = new Set<string>(ERROR_CODES);

/** Values of the wrong type for any field. */
const WRONG_TYPES: Json[] = [null, true, 0, -1, 1.5, 1e308, -1e308, 9007199254740993, [], {}, [1, "a", null], { nested: { deeper: [null] } }, "text"];
/** Strings that break naive code: NUL, CRLF header injection, bidi and combining marks, a lone surrogate, traversal, 100 KB. */
const NASTY_STRINGS: string[] = [
  "",
  " ",
  "\u0000",
  "a\u0000b",
  "line\r\nX-Injected: 1",
  "\u202e\u0301ü漢字🚀",
  "\ud800",
  "../../../etc/passwd",
  "%00%0d%0a",
  "' OR '1'='1' --",
  "${jndi:ldap://127.0.0.1/x}",
  HUGE,
];

/**
 * A valid body per route, one field varied at a time so each wrong value reaches its own validator. The samples
 * are chosen so that what stays valid cannot end the world (no owner change, no runtime-mode change).
 */
function samples(w: World): Record<string, Record<string, Json>> {
  return {
    "POST /v1/setup/bootstrap-token/verify": { token: "0".repeat(64) },
    "POST /v1/setup/preferences": { runtime_mode: "remote", remote_auth_mode: "trusted_proxy" },
    "POST /v1/setup/local-owner/create": { email: "second-owner@example.com" },
    "POST /v1/setup/oidc/configure": { issuer_url: "https://127.0.0.1:1/", client_id: "hangar", client_secret: "s3cret" },
    "POST /v1/setup/owner/start-oidc": { redirect_uri: "http://127.0.0.1/callback" },
    "POST /v1/setup/owner/verify-oidc": { code: "code", state: "state" },
    "POST /v1/setup/trusted-proxy/configure": {
      setup_owner_email: "owner@example.com",
      user_email_header: "x-hangar-user-email",
      trusted_proxy_cidrs: ["10.0.0.0/8"],
      shared_secret: "a-long-enough-shared-secret-value",
      gateway_access_ticket: "ticket",
    },
    "POST /v1/auth/oidc/callback": { code: "code", state: "state" },
    "POST /v1/auth/local/login": { email: "owner@example.com" },
    // An internal key set address: refused before any fetch, so the fuzz never waits on the network.
    "PUT /v1/settings/trusted-proxy": {
      user_email_header: "x-hangar-user-email",
      trusted_proxy_cidrs: ["10.0.0.0/8"],
      shared_secret: "a-long-enough-shared-secret-value",
      assertion: { header: "Cf-Access-Jwt-Assertion", jwks_url: "https://127.0.0.1:1/certs", issuer: "https://team.example.com", audience: "aud" },
    },
    "PUT /v1/settings/external-access/oidc": { issuer_url: "https://127.0.0.1:1/", client_id: "hangar", client_secret: "s3cret" },
    "POST /v1/users/invite": { email: "invitee@example.com", role: "developer" },
    "POST /v1/users/transfer-owner": { email: "nobody@example.com" },
    "PATCH /v1/users/:user_id/role": { role: "qa_viewer" },
    "PUT /v1/settings/preferences": { key_storage_mode: "file", runtime_mode: "local" },
    "PUT /v1/settings/local-login": { mode: "loopback" },
    "PUT /v1/settings/external-access/network": {
      public_url: "https://ci.example.com",
      artifact_delivery_url: "https://dl.example.com",
      allowed_origins: ["https://ci.example.com"],
    },
    "PUT /v1/settings/artifact-storage": {
      provider: "local",
      local: { base_dir: w.storageDir },
      s3: {
        endpoint: "https://s3.example.com",
        region: "us-east-1",
        bucket: "hangar",
        prefix: "a/",
        access_key_id: "AK",
        secret_access_key: "SK",
        force_path_style: true,
      },
    },
    "POST /v1/projects": { name: "fuzzed", repo_url: "file:///nonexistent/hangar-fuzz.git", default_branch: "main" },
    "POST /v1/projects/:project_id/pipelines": {
      name: "fuzzed",
      config: { platform: "android", steps: [{ name: "s", run: "true" }], artifacts: ["*.apk"], env: { A: "b" }, timeout_s: 60 },
    },
    "PATCH /v1/projects/:project_id": { name: "fuzzed-renamed", repo_url: "file:///nonexistent/other.git", default_branch: "dev" },
    "PATCH /v1/projects/:project_id/pipelines/:pipeline_id": {
      name: "fuzzed-renamed",
      config: {
        platform: "ios",
        steps: [{ name: "s", run: "true" }],
        artifacts: ["*.ipa", { path: "reports/*.xml", when: "always" }],
        triggers: [
          { event: "push", branches: ["main"] },
          { event: "tag", tags: ["v*"] },
        ],
      },
    },
    "PUT /v1/projects/:project_id/source-credentials": { username: "git", token: "t0ken" },
    "PUT /v1/projects/:project_id/signing/android": androidSigningBody(),
    "PUT /v1/projects/:project_id/signing/ios": iosSigningBody(),
    "PUT /v1/projects/:project_id/secrets/:name": { value: "fuzz-secret-value" },
    "PUT /v1/projects/:project_id/protection": { branches: ["main", "release/**"] },
    "POST /v1/runners/register": { name: "fuzz-runner", capabilities: { platforms: ["ios"] }, trust: "protected" },
    "PATCH /v1/runners/:runner_id": { name: "renamed", capabilities: { platforms: ["android"] }, status: "online" },
    "POST /v1/runners/:runner_id/heartbeat": { status: "online" },
    "POST /v1/runners/:runner_id/jobs/:job_id/status": { status: "running", step_results: [{ name: "s", status: "running", started_at: 1 }] },
    "POST /v1/projects/:project_id/notifications": {
      kind: "webhook",
      url: "https://hooks.example.com/hangar",
      on: ["failed", "fixed"],
      branches: ["main"],
    },
    "POST /v1/projects/:project_id/webhooks": { provider: "github", api_url: "https://api.github.com", report_status: true },
    "POST /v1/projects/:project_id/builds": { pipeline_id: w.pipelineId, branch: "main", commit_sha: DEFAULT_SHA, trigger_ref: "refs/x" },
    "POST /v1/runners/:runner_id/jobs/:job_id/caches": { key: "gradle-linux-3f2a", size_bytes: 5, sha256: "a".repeat(64) },
    "POST /v1/runners/:runner_id/jobs/:job_id/artifacts": {
      filename: "fuzz.apk",
      size_bytes: 5,
      content_type: "application/vnd.android.package-archive",
      sha256: "a".repeat(64),
      install_metadata: { bundle_identifier: "com.example", bundle_version: "1", title: "App" },
    },
    // Never published for real: a publish without the store's key is refused, and the key routes come later.
    "POST /v1/builds/:build_id/publish": { to: "testflight" },
    "PUT /v1/projects/:project_id/stores/app-store-connect": {
      issuer_id: w.storeKeys.asc.issuerId,
      key_id: w.storeKeys.asc.keyId,
      private_key_p8: w.storeKeys.asc.privatePem,
    },
    "PUT /v1/projects/:project_id/stores/google-play": { service_account_json: w.storeKeys.googlePlay },
    "POST /v1/projects/:project_id/pipeline-config/validate": {
      content: "pipelines:\n  build:\n    platform: android\n    steps:\n      - ./gradlew assembleDebug\n",
    },
    // Retention never runs for real here: `dry_run` only ever stays true or turns invalid, so the world keeps
    // its artifact whatever policy the fuzz leaves behind.
    "PUT /v1/settings/retention": { artifacts: { keep_last: 100, max_age_days: 365 }, logs: { max_age_days: 365 } },
    "POST /v1/settings/retention/run": { dry_run: true },
    "PUT /v1/projects/:project_id/retention": { artifacts: { keep_last: 50, max_age_days: null }, logs: { max_age_days: 30 } },
    "POST /v1/projects/:project_id/channels": { name: "fuzz-channel", pipeline_id: w.pipelineId, branches: ["main"], platforms: ["ios", "android"] },
    "PATCH /v1/projects/:project_id/channels/:channel_id": {
      name: "fuzz-renamed",
      pipeline_id: w.pipelineId,
      branches: ["release/**"],
      platforms: ["android"],
    },
    "POST /v1/projects/:project_id/channels/:channel_id/testers": { email: "fuzz-tester@example.com", name: "Fuzz Tester" },
    // The discard port on loopback: a mail would be refused at once, never leave the machine.
    "PUT /v1/settings/smtp": { host: "127.0.0.1", port: 9, secure: false, username: "ci", password: "pw", from: "Hangar <ci@example.com>" },
  };
}

/** Routes whose success is not JSON (docs/spec.md/docs/api.md): log text, file bytes, the plist, redirects, 204 claims. */
const NON_JSON_SUCCESS = new Set([
  // Apple's device upload file (docs/api.md §18).
  "GET /v1/projects/:project_id/devices/export",
  "GET /v1/builds/:build_id/logs",
  "GET /v1/artifacts/download/:token",
  "GET /install/ios/:token/manifest.plist",
  "GET /install/artifact/:token",
  "GET /install/download/:token",
  "POST /v1/runners/:runner_id/claim",
  "GET /metrics",
  "GET /runner/hangar-runner.mjs",
  "GET /badge/:file",
]);

/** 500 codes the spec itself prescribes, and only on these routes. Any other 500 is a bug. */
const SPEC_500: Record<string, string[]> = {
  "GET /v1/auth/oidc/start": ["oidc_not_configured"],
  "POST /v1/setup/bootstrap-token/verify": ["no_bootstrap_token"],
};

/** Routes that take no body: JSON fuzz still goes to them (they must ignore or refuse it cleanly). */
const BODYLESS = new Set([
  "POST /v1/setup/complete",
  "POST /v1/setup/owner/claim-trusted-proxy",
  "POST /v1/auth/trusted-proxy/login",
  "POST /v1/auth/logout",
  "DELETE /v1/users/:user_id",
  "POST /v1/users/:user_id/enable",
  "POST /v1/runners/:runner_id/claim",
  "POST /v1/runners/:runner_id/rotate-token",
  "POST /v1/runners/:runner_id/jobs/:job_id/logs",
  "POST /v1/builds/:build_id/rerun",
  "POST /v1/builds/:build_id/cancel",
  "POST /v1/runners/:runner_id/jobs/:job_id/artifacts/:artifact_id/complete",
  "POST /v1/runners/:runner_id/jobs/:job_id/artifacts/:artifact_id/abort",
  "PUT /v1/artifacts/local-upload/:token",
  "POST /v1/artifacts/:artifact_id/download-link",
  "POST /v1/artifacts/:artifact_id/install-link",
  // Takes a forge's payload, verified before it is read: the fuzz must meet 401 invalid_signature.
  "POST /v1/hooks/:webhook_id",
  "POST /v1/projects/:project_id/notifications/:notification_id/test",
  "POST /v1/projects/:project_id/pipelines/:pipeline_id/badge",
  "POST /v1/builds/:build_id/pin",
]);

interface World {
  ready: TestApp;
  setup: TestApp;
  setupToken: string;
  ownerId: string;
  ownerToken: string;
  storageDir: string;
  pipelineId: string;
  params: Record<string, string>;
  /** Per-route parameter overrides, by route key. */
  routeParams: Record<string, Record<string, string>>;
  /** Real tokens for the token-in-path routes, by route key. */
  pathTokens: Record<string, string>;
  runner: { id: string; token: string };
  otherRunner: { id: string; token: string };
  /** Store keys made once (an RSA key generation is slow): the samples use them on every call. */
  storeKeys: { asc: ReturnType<typeof makeAscKey>; googlePlay: string };
}

const pathOf = (url: string): string => new URL(url).pathname;

async function makeWorld(): Promise<World> {
  const ready = await makeTestApp({ config: { HANGAR_MAX_UPLOAD_BYTES: String(64 * KB) } });
  const { ownerToken, project, pipeline, runner } = await buildWorld(ready);
  const otherRunner = await registerRunner(ready, ownerToken);
  const ownerId = (await ready.call("GET", "/v1/users/me", { token: ownerToken })).body.id as string;
  const victim = await createUser(ready, { email: "victim@example.com", role: "developer" });

  // A running build on the runner, with a log line and one available artifact.
  const build = await queueBuild(ready, ownerToken, project.id, pipeline.id);
  const job = await claim(ready, runner);
  if (job?.build_id !== build.id) throw new Error("the world's build was not claimed");
  const running = await reportStatus(ready, runner, build.id, { status: "running" });
  if (running.status !== 200) throw new Error(`running: ${running.text}`);
  const jobPath = `/v1/runners/${runner.id}/jobs/${build.id}/artifacts`;
  const created = await ready.call("POST", jobPath, {
    token: runner.token,
    body: { filename: "app.apk", size_bytes: 5, content_type: "application/vnd.android.package-archive" },
  });
  if (created.status !== 200) throw new Error(`artifact: ${created.text}`);
  const put = await ready.call("PUT", pathOf(created.body.upload.url), { rawBody: "hello", headers: { "content-type": "application/octet-stream" } });
  if (put.status !== 200) throw new Error(`upload: ${put.text}`);
  const artifactId = created.body.artifact.id as string;
  const done = await ready.call("POST", `${jobPath}/${artifactId}/complete`, { token: runner.token });
  if (done.status !== 200) throw new Error(`complete: ${done.text}`);
  // A second, pending artifact supplies a live upload token.
  const pending = await ready.call("POST", jobPath, {
    token: runner.token,
    body: { filename: "pending.apk", size_bytes: 5, content_type: "application/octet-stream" },
  });
  // An IPA with install metadata, so the manifest route has a live iOS install token.
  const ipa = await ready.call("POST", jobPath, {
    token: runner.token,
    body: {
      filename: "app.ipa",
      size_bytes: 5,
      content_type: "application/octet-stream",
      install_metadata: { bundle_identifier: "com.example.app", bundle_version: "1", title: "App" },
    },
  });
  await ready.call("PUT", pathOf(ipa.body.upload.url), { rawBody: "hello", headers: { "content-type": "application/octet-stream" } });
  const ipaDone = await ready.call("POST", `${jobPath}/${ipa.body.artifact.id}/complete`, { token: runner.token });
  if (ipaDone.status !== 200) throw new Error(`ipa complete: ${ipaDone.text}`);
  // A second build, queued, is the one the cancel route cancels: the running one keeps the runner routes busy.
  const toCancel = await queueBuild(ready, ownerToken, project.id, pipeline.id);
  const disposable = [await registerRunner(ready, ownerToken), await registerRunner(ready, ownerToken)];
  const download = await ready.call("POST", `/v1/artifacts/${artifactId}/download-link`, { token: ownerToken });
  // Install links need a delivery base: an HTTPS public URL (local mode keeps it; only remote needs preflight).
  const network = await ready.call("PUT", "/v1/settings/external-access/network", {
    token: ownerToken,
    body: { public_url: "https://ci.example.com", allowed_origins: ["https://ci.example.com"] },
  });
  if (network.status !== 200) throw new Error(`network: ${network.text}`);
  const install = await ready.call("POST", `/v1/artifacts/${artifactId}/install-link`, { token: ownerToken });
  if (install.status !== 200) throw new Error(`install-link: ${install.text}`);
  const installToken = pathOf(install.body.install_url).split("/")[3] ?? "";
  const iosInstall = await ready.call("POST", `/v1/artifacts/${ipa.body.artifact.id}/install-link`, { token: ownerToken });
  if (iosInstall.status !== 200) throw new Error(`ios install-link: ${iosInstall.text}`);
  const iosToken = pathOf(iosInstall.body.manifest_url).split("/")[3] ?? "";
  const webhook = await ready.call("POST", `/v1/projects/${project.id}/webhooks`, { token: ownerToken, body: { provider: "github" } });
  if (webhook.status !== 200) throw new Error(`webhook: ${webhook.text}`);
  // Its test sends go to the discard port on loopback: refused at once, never off the machine.
  const notification = await ready.call("POST", `/v1/projects/${project.id}/notifications`, {
    token: ownerToken,
    body: { kind: "slack", url: "http://127.0.0.1:9/hangar", on: ["failed"] },
  });
  if (notification.status !== 200) throw new Error(`notification: ${notification.text}`);
  // A channel with a tester for the channel routes, and a second channel the DELETE route removes.
  const channel = await ready.call("POST", `/v1/projects/${project.id}/channels`, {
    token: ownerToken,
    body: { name: "beta", pipeline_id: pipeline.id },
  });
  if (channel.status !== 200) throw new Error(`channel: ${channel.text}`);
  const doomedChannel = await ready.call("POST", `/v1/projects/${project.id}/channels`, {
    token: ownerToken,
    body: { name: "doomed", pipeline_id: pipeline.id },
  });
  if (doomedChannel.status !== 200) throw new Error(`channel: ${doomedChannel.text}`);
  const tester = await ready.call("POST", `/v1/projects/${project.id}/channels/${channel.body.id}/testers`, {
    token: ownerToken,
    body: { email: "tester@example.com" },
  });
  if (tester.status !== 200) throw new Error(`tester: ${tester.text}`);

  // The setup world: remote + trusted-proxy, so the local-owner route refuses after validation and no fuzzed
  // body can finish setup (which would turn every setup route into a plain 409).
  const setup = await makeTestApp();
  const setupToken = await startSetup(setup);
  const prefs = await setup.call("POST", "/v1/setup/preferences", {
    token: setupToken,
    body: { runtime_mode: "remote", remote_auth_mode: "trusted_proxy" },
  });
  if (prefs.status !== 200) throw new Error(`setup prefs: ${prefs.text}`);

  return {
    ready,
    setup,
    setupToken,
    ownerId,
    ownerToken,
    storageDir: mkdtempSync(join(tmpdir(), "hangar-fuzz-store-")),
    pipelineId: pipeline.id,
    runner,
    otherRunner,
    storeKeys: { asc: makeAscKey(), googlePlay: makeServiceAccount("https://127.0.0.1:1/token").json },
    params: {
      user_id: victim.id,
      project_id: project.id,
      runner_id: runner.id,
      job_id: build.id,
      build_id: build.id,
      artifact_id: artifactId,
      webhook_id: webhook.body.id,
      notification_id: notification.body.id,
      channel_id: channel.body.id,
      tester_id: tester.body.id,
    },
    routeParams: {
      "POST /v1/builds/:build_id/cancel": { build_id: toCancel.id },
      // Removal and rotation act on runners of their own, so the world's runner keeps its token.
      "DELETE /v1/runners/:runner_id": { runner_id: disposable[0]!.id },
      "POST /v1/runners/:runner_id/rotate-token": { runner_id: disposable[1]!.id },
      "PUT /v1/projects/:project_id/secrets/:name": { name: "FUZZ_SECRET" },
      "DELETE /v1/projects/:project_id/secrets/:name": { name: "FUZZ_SECRET" },
      "DELETE /v1/projects/:project_id/channels/:channel_id": { channel_id: doomedChannel.body.id },
      // The badge routes on the world's pipeline; the pipeline routes themselves keep "x" (DELETE would end it).
      "POST /v1/projects/:project_id/pipelines/:pipeline_id/badge": { pipeline_id: pipeline.id },
      "DELETE /v1/projects/:project_id/pipelines/:pipeline_id/badge": { pipeline_id: pipeline.id },
    },
    pathTokens: {
      "PUT /v1/artifacts/local-upload/:token": pathOf(pending.body.upload.url).split("/").pop() ?? "",
      "GET /v1/artifacts/download/:token": pathOf(download.body.url).split("/").pop() ?? "",
      "GET /install/ios/:token/manifest.plist": iosToken,
      "GET /install/artifact/:token": installToken,
      "GET /install/download/:token": installToken,
    },
  };
}

/** Concrete routes of the app (middleware `ALL` entries left out), in registration order. */
/**
 * The web UI's pages (src/web/, docs/api.md §10) answer HTML and take forms: they are not part of this JSON fuzz.
 * Their own tests (test/web/) cover their errors, Origin checks and escaping. The tester page `/apps/{token}`
 * (its icon and its install form too) is such a page, like `/install/{token}`: its errors are HTML pages.
 */
const WEB_UI_PATH =
  /^\/(?:$|assets\/|login|logout|builds|projects|runners(?:$|\/)|users|settings|audit|api$|setup(?:$|\/)|auth\/oidc\/callback|install\/:token$|apps\/|templates$|artifacts\/)/;

function appRoutes(t: TestApp): Route[] {
  const seen = new Map<string, Route>();
  for (const r of t.app.routes) {
    if (r.method === "ALL") continue;
    if (WEB_UI_PATH.test(r.path)) continue;
    const key = `${r.method} ${r.path}`;
    if (!seen.has(key)) seen.set(key, { method: r.method, path: r.path, key });
  }
  return [...seen.values()];
}

/** The credential a route is meant to be called with. */
function credentialOf(route: Route): Credential {
  const p = route.path;
  if (
    p === "/healthz" ||
    p === "/metrics" ||
    p === "/runner/hangar-runner.mjs" ||
    p === "/v1/openapi.json" ||
    p.startsWith("/v1/public/") ||
    p.startsWith("/install/") ||
    p.startsWith("/badge/")
  )
    return "none";
  if (p.startsWith("/v1/artifacts/local-upload/") || p.startsWith("/v1/artifacts/download/")) return "none";
  if (p === "/v1/setup/bootstrap-token/verify") return "none";
  if (p.startsWith("/v1/setup/")) return "setup";
  if (p.startsWith("/v1/auth/")) return p === "/v1/auth/logout" ? "user" : "none";
  // Removal and rotation are for owners and admins, not the runner itself.
  if (route.key === "DELETE /v1/runners/:runner_id" || route.key === "POST /v1/runners/:runner_id/rotate-token") return "user";
  if (p.startsWith("/v1/runners/:runner_id")) return "runner";
  return "user";
}

function appFor(w: World, route: Route): TestApp {
  return route.path.startsWith("/v1/setup/") ? w.setup : w.ready;
}

async function tokenFor(w: World, route: Route, credential: Credential): Promise<string | undefined> {
  switch (credential) {
    case "setup":
      return w.setupToken;
    case "runner":
      return w.runner.token;
    case "user":
      // Logout ends the session it is called with: give it a fresh one each time.
      return route.key === "POST /v1/auth/logout" ? sessionFor(w.ready, { id: w.ownerId }) : w.ownerToken;
    default:
      return undefined;
  }
}

function fillPath(w: World, route: Route, overrides: Record<string, string> = {}): string {
  return route.path.replace(/:([a-z_]+)/g, (_, name: string) => {
    if (name in overrides) return overrides[name]!;
    const own = w.routeParams[route.key]?.[name];
    if (own !== undefined) return own;
    if (name === "token") return w.pathTokens[route.key] ?? "x";
    return w.params[name] ?? "x";
  });
}

/** The query a route needs to get past its own query validation. */
function defaultQuery(route: Route): string {
  return route.key === "POST /v1/runners/:runner_id/jobs/:job_id/logs" ? "?offset=0" : "";
}

interface Attempt {
  label: string;
  rawBody?: string | Uint8Array;
  contentType?: string;
  token?: string;
  path?: string;
}

const JSON_TYPE = "application/json";

/** Bodies that are not the route's shape at all. */
function genericBodies(): Attempt[] {
  const manyKeys = JSON.stringify(Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, i])));
  return [
    { label: "malformed JSON", rawBody: "{", contentType: JSON_TYPE },
    { label: "malformed JSON value", rawBody: '{"a": }', contentType: JSON_TYPE },
    { label: "JSON with trailing garbage", rawBody: '{"a":1} tail', contentType: JSON_TYPE },
    { label: "truncated JSON", rawBody: '{"email":"a@exa', contentType: JSON_TYPE },
    { label: "JSON array", rawBody: "[]", contentType: JSON_TYPE },
    { label: "JSON array of objects", rawBody: '[{"a":1}]', contentType: JSON_TYPE },
    { label: "JSON string", rawBody: '"text"', contentType: JSON_TYPE },
    { label: "JSON null", rawBody: "null", contentType: JSON_TYPE },
    { label: "JSON number", rawBody: "42", contentType: JSON_TYPE },
    { label: "JSON true", rawBody: "true", contentType: JSON_TYPE },
    { label: "empty body declared JSON", rawBody: "", contentType: JSON_TYPE },
    { label: "empty object", rawBody: "{}", contentType: JSON_TYPE },
    { label: "byte-order mark", rawBody: "\ufeff{}", contentType: JSON_TYPE },
    { label: "raw NUL inside a JSON string", rawBody: '{"a":"\u0000"}', contentType: JSON_TYPE },
    { label: "prototype keys", rawBody: '{"__proto__":{"role":"owner"},"constructor":{"prototype":{"x":1}}}', contentType: JSON_TYPE },
    { label: "deep nesting", rawBody: `${"[".repeat(50_000)}${"]".repeat(50_000)}`, contentType: JSON_TYPE },
    { label: "20000 keys", rawBody: manyKeys, contentType: JSON_TYPE },
    { label: "invalid UTF-8", rawBody: Uint8Array.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]), contentType: JSON_TYPE },
    { label: "UTF-16 charset", rawBody: "{}", contentType: "application/json; charset=utf-16" },
    { label: "text/plain JSON", rawBody: '{"a":1}', contentType: "text/plain" },
    { label: "form body", rawBody: "a=1&b=%00", contentType: "application/x-www-form-urlencoded" },
    {
      label: "multipart body",
      rawBody: '--x\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--x--\r\n',
      contentType: "multipart/form-data; boundary=x",
    },
    { label: "no content type", rawBody: '{"a":1}' },
    { label: "octet-stream", rawBody: Uint8Array.from([0, 1, 2, 255]), contentType: "application/octet-stream" },
    { label: "over the 1 MiB cap", rawBody: JSON.stringify({ pad: "y".repeat(1100 * KB) }), contentType: JSON_TYPE },
  ];
}

/** Every path through a sample body: `a`, `a.b`, `a.0`, … */
function leafPaths(value: Json, prefix: string[] = []): string[][] {
  const out: string[][] = prefix.length ? [prefix] : [];
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...leafPaths(v, [...prefix, String(i)])));
  else if (value && typeof value === "object") for (const [k, v] of Object.entries(value)) out.push(...leafPaths(v, [...prefix, k]));
  return out;
}

const REMOVE = Symbol("remove");

function withValue(sample: Json, path: string[], value: Json | typeof REMOVE): Json {
  const copy = structuredClone(sample) as Record<string, Json>;
  let node: Record<string, Json> = copy;
  for (const part of path.slice(0, -1)) node = node[part] as Record<string, Json>;
  const last = path[path.length - 1]!;
  if (value === REMOVE) {
    if (Array.isArray(node)) node.splice(Number(last), 1);
    else delete node[last];
  } else node[last] = value;
  return copy;
}

/** One field at a time: each wrong type, each nasty string, and the field missing. */
function fieldMutations(sample: Record<string, Json>): Attempt[] {
  const out: Attempt[] = [];
  for (const path of leafPaths(sample)) {
    const name = path.join(".");
    for (const v of [...WRONG_TYPES, ...NASTY_STRINGS]) {
      const shown = typeof v === "string" && v.length > 40 ? `${v.length}-char string` : JSON.stringify(v);
      out.push({ label: `${name} = ${shown}`, rawBody: JSON.stringify(withValue(sample, path, v)), contentType: JSON_TYPE });
    }
    out.push({ label: `${name} missing`, rawBody: JSON.stringify(withValue(sample, path, REMOVE)), contentType: JSON_TYPE });
  }
  out.push({ label: "unknown extra field", rawBody: JSON.stringify({ ...sample, is_admin: true, role: "owner" }), contentType: JSON_TYPE });
  return out;
}

const PATH_ATTACKS = [
  "..%2F..%2Fetc%2Fpasswd",
  "..%252F..%252Fetc%252Fpasswd",
  "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
  "..%5C..%5Cwindows",
  "%00",
  "abc%00def",
  "%ff%fe",
  "%",
  "%E2%80%AE%F0%9F%9A%80",
  "%0d%0aSet-Cookie:%20x=1",
  "'%20OR%20'1'='1",
  "__proto__",
  "*",
  "x".repeat(8000),
];

const QUERY_ATTACKS = [
  "?offset=-1",
  "?offset=abc",
  "?offset=1e400",
  "?offset=99999999999999999999999",
  "?offset=1&offset=2",
  "?offset=0x10",
  "?wait=31",
  "?wait=-1",
  "?wait=abc",
  "?wait=1e9",
  "?limit=0",
  "?limit=1e9",
  "?limit=abc",
  "?cursor=%ff%fe",
  "?cursor=YjE5OTk5OTk5OTk5OTk5OTk5OTk5OTk5",
  "?cursor=Yi0x",
  `?cursor=${"A".repeat(5000)}`,
  "?status=nope",
  `?project_id=${"p".repeat(5000)}`,
  "?redirect_uri=javascript:alert(1)",
  "?redirect_uri=%0d%0aLocation:%20https://evil.example",
  "?redirect_uri=",
  "?%00=%00",
];

interface Failure {
  route: string;
  attempt: string;
  status: number;
  problem: string;
  body: string;
}

/** The rules every answer obeys. Returns what is wrong, or null. */
function problemWith(route: Route, res: CallResult): string | null {
  const contentType = res.headers.get("content-type") ?? "";
  if (res.status >= 400) {
    if (/\n\s+at |node:internal|\/work\/|\/tmp\//.test(res.text)) return "the error leaks a stack trace or path";
    if (res.status >= 500 && !(SPEC_500[route.key] ?? []).includes(res.body?.code) && res.status !== 502) return `server error ${res.status}`;
    if (!contentType.startsWith("application/json")) return `error without a JSON body (${contentType})`;
    const body = res.body as Record<string, unknown> | null;
    if (!body || typeof body !== "object" || Array.isArray(body)) return "error body is not an object";
    const extra = Object.keys(body).filter((k) => !["code", "message", "issues"].includes(k));
    if (extra.length) return `error body has extra keys ${extra.join(",")}`;
    if (typeof body.code !== "string" || !CODES.has(body.code)) return `unknown error code ${String(body.code)}`;
    if (body.code === "internal_error") return "internal_error";
    if (typeof body.message !== "string" || body.message.length === 0) return "error without a message";
    if (body.issues !== undefined) {
      if (!Array.isArray(body.issues)) return "issues is not an array";
      for (const i of body.issues as Array<Record<string, unknown>>) {
        if (typeof i?.path !== "string" || typeof i?.message !== "string") return "malformed issue";
      }
    }
    return null;
  }
  if (res.status === 204) return res.text === "" ? null : "204 with a body";
  if (res.status >= 300) {
    if (!NON_JSON_SUCCESS.has(route.key)) return `unexpected redirect ${res.status}`;
    return res.headers.get("location") ? null : "redirect without Location";
  }
  if (contentType.startsWith("application/json")) {
    try {
      JSON.parse(res.text);
      return null;
    } catch {
      return "success body is not valid JSON";
    }
  }
  return NON_JSON_SUCCESS.has(route.key) ? null : `non-JSON success (${contentType})`;
}

async function send(w: World, route: Route, a: Attempt): Promise<CallResult> {
  const t = appFor(w, route);
  const headers: Record<string, string> = {};
  // Fetch cannot put a body on a GET; the GET routes read none anyway (the real-socket tests send one).
  const hasBody = route.method !== "GET";
  if (a.contentType && hasBody) headers["content-type"] = a.contentType;
  const path = a.path ?? `${fillPath(w, route)}${defaultQuery(route)}`;
  return t.call(route.method, path, { token: a.token, rawBody: hasBody ? a.rawBody : undefined, headers });
}

async function fuzzRoute(w: World, route: Route, failures: Failure[]): Promise<number> {
  const credential = credentialOf(route);
  const sample = samples(w)[route.key];
  const bodies = [...genericBodies(), ...(sample ? fieldMutations(sample) : [])];
  let count = 0;
  const record = async (a: Attempt) => {
    const res = await send(w, route, a);
    count++;
    const problem = problemWith(route, res);
    if (problem) failures.push({ route: route.key, attempt: a.label, status: res.status, problem, body: res.text.slice(0, 200) });
    return res;
  };
  // The route's own credential: the whole body set.
  for (const a of bodies) await record({ ...a, token: await tokenFor(w, route, credential) });
  // No credential and wrong credentials: the generic set (a protected route refuses before it reads a body).
  const wrong = ["garbage-token", w.ownerToken, w.runner.token, w.setupToken, w.otherRunner.token, "a".repeat(10 * KB)];
  for (const given of [undefined, ...wrong]) {
    for (const a of genericBodies().slice(0, 6)) {
      // The owner's token is the right one for logout, which would end it: a fresh owner session there.
      const token = given === w.ownerToken ? await tokenFor(w, route, "user") : given;
      await record({ ...a, token, label: `${a.label} with token ${given?.slice(0, 8)}` });
    }
  }
  // Path parameters: each one replaced by an attack, the other ones real, the sample body.
  const params = [...route.path.matchAll(/:([a-z_]+)/g)].map((m) => m[1]!);
  for (const name of params) {
    for (const attack of PATH_ATTACKS) {
      const a: Attempt = {
        label: `path ${name}=${attack.slice(0, 40)}`,
        path: `${fillPath(w, route, { [name]: attack })}${defaultQuery(route)}`,
        rawBody: sample ? JSON.stringify(sample) : undefined,
        contentType: sample ? JSON_TYPE : undefined,
        token: await tokenFor(w, route, credential),
      };
      const res = await record(a);
      // An id that names nothing is a 4xx, never a success: 404 mostly; 400 when the body or path is refused;
      // runner paths answer 403 runner_mismatch for another runner id (docs/api.md §6).
      if (![400, 403, 404].includes(res.status) || (res.status === 403 && res.body?.code !== "runner_mismatch")) {
        failures.push({
          route: route.key,
          attempt: a.label,
          status: res.status,
          problem: "an attack id was not refused with 400/404",
          body: res.text.slice(0, 200),
        });
      }
    }
  }
  // Query strings: GET routes and the two POSTs that read one.
  if (route.method === "GET" || route.key.endsWith("/claim") || route.key.endsWith("/logs")) {
    for (const q of QUERY_ATTACKS) {
      // A valid long-poll would hold the test; every wait here is invalid or zero.
      await record({
        label: `query ${q.slice(0, 60)}`,
        path: `${fillPath(w, route)}${q}`,
        token: await tokenFor(w, route, credential),
        rawBody: route.key.endsWith("/logs") && route.method === "POST" ? "log line\n" : undefined,
        contentType: route.key.endsWith("/logs") && route.method === "POST" ? "text/plain" : undefined,
      });
    }
  }
  // Methods the path does not have, and a CORS preflight from a hostile origin.
  for (const method of ["OPTIONS", "PROPFIND", "PURGE"]) {
    const res = await appFor(w, route).call(method, fillPath(w, route), {
      headers: { origin: "null", "access-control-request-method": route.method, "access-control-request-headers": "authorization" },
    });
    count++;
    if (res.status >= 500)
      failures.push({ route: route.key, attempt: method, status: res.status, problem: "server error", body: res.text.slice(0, 200) });
  }
  return count;
}

describe("fuzzing every route", () => {
  let w: World;
  let routes: Route[];
  beforeAll(async () => {
    w = await makeWorld();
    routes = appRoutes(w.ready);
  }, 30_000);
  afterAll(() => rmSync(w.storageDir, { recursive: true, force: true }));

  it("enumerates the app's routes, and every body-taking route has a sample body or is declared bodyless", () => {
    expect(routes.length).toBeGreaterThan(60);
    const missing = routes
      .filter((r) => ["POST", "PUT", "PATCH"].includes(r.method))
      .filter((r) => !samples(w)[r.key] && !BODYLESS.has(r.key))
      .map((r) => r.key);
    expect(missing, "add a valid sample body (or declare the route bodyless) so its fields are fuzzed").toEqual([]);
    for (const key of Object.keys(samples(w)))
      expect(
        routes.map((r) => r.key),
        `sample for a route that no longer exists: ${key}`,
      ).toContain(key);
  });

  // A few groups so a failure names its area and each group stays within the test timeout.
  const groups: Array<[string, (r: Route) => boolean]> = [
    ["setup, auth and public", (r) => /^\/(healthz|metrics|runner\/|badge\/|v1\/(public|setup|auth|hooks|openapi))/.test(r.path)],
    ["users and settings", (r) => /^\/v1\/(users|audit-events|settings)/.test(r.path)],
    ["projects and builds", (r) => /^\/v1\/(projects|builds|search)/.test(r.path) && !r.path.includes("/artifacts") && !r.path.includes("signing")],
    // Signing uploads open real PKCS#12 files and keystores (a key derivation each): a group of their own.
    ["signing", (r) => /^\/v1\/(projects\/[^/]+\/)?signing/.test(r.path)],
    ["runners", (r) => r.path.startsWith("/v1/runners") && !r.path.includes("/artifacts")],
    ["artifacts and installs", (r) => r.path.includes("artifacts") || r.path.startsWith("/install/")],
  ];

  it("groups cover every route", () => {
    const uncovered = routes.filter((r) => !groups.some(([, match]) => match(r))).map((r) => r.key);
    expect(uncovered).toEqual([]);
  });

  for (const [name, match] of groups) {
    it(`${name}: no 500, every error is {code, message} with a known code`, async () => {
      const failures: Failure[] = [];
      let count = 0;
      for (const route of routes.filter(match)) count += await fuzzRoute(w, route, failures);
      expect(count).toBeGreaterThan(100);
      expect(failures, JSON.stringify(failures.slice(0, 15), null, 1)).toEqual([]);
      // Nothing reached onError as an unknown failure.
      const unhandled = [...w.ready.logs, ...w.setup.logs].filter((l) => l.level === "error");
      expect(unhandled).toEqual([]);
    }, 120_000);
  }

  it("a token of one kind opens no other kind's route: 404 not_found", async () => {
    const tokenRoutes = routes.filter((r) => r.path.includes(":token"));
    expect(tokenRoutes.length).toBeGreaterThanOrEqual(5);
    for (const route of tokenRoutes) {
      const own = w.pathTokens[route.key];
      // Tokens of the other kinds (an install token also serves the other two installer paths, by design).
      const foreign = Object.entries(w.pathTokens)
        .filter(([key, token]) => token !== own && !(key.startsWith("GET /install/") && route.key.startsWith("GET /install/")))
        .map(([, token]) => token);
      // Session and runner tokens have the same shape as URL tokens; they must not open anything either.
      foreign.push(w.ownerToken, w.runner.token, w.setupToken);
      for (const token of foreign) {
        const res = await w.ready.call(route.method, route.path.replace(":token", token), {
          rawBody: route.method === "PUT" ? "hello" : undefined,
          headers: route.method === "PUT" ? { "content-type": "application/octet-stream" } : {},
        });
        expect([res.status, res.body?.code], `${route.key} with a foreign token`).toEqual([404, "not_found"]);
      }
    }
  });

  it("the world survived: the owner still works and the build, artifact and runner are intact", async () => {
    const me = await w.ready.call("GET", "/v1/users/me", { token: w.ownerToken });
    expect(me.status).toBe(200);
    const runners = await w.ready.call("GET", "/v1/runners", { token: w.ownerToken });
    expect(runners.status).toBe(200);
    const artifacts = await w.ready.call("GET", `/v1/builds/${w.params.build_id}/artifacts`, { token: w.ownerToken });
    expect(artifacts.body.map((a: { id: string }) => a.id)).toContain(w.params.artifact_id);
  });
});
