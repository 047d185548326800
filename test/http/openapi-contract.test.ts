import { createHash, createHmac } from "node:crypto";
import { validate } from "@readme/openapi-parser";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueBootstrapToken } from "../../src/domain/setup/setup.ts";
import { makeTestApp, type CallResult, type TestApp } from "../helpers/app.ts";
import { encodePng, makeApk, samplePixels } from "../helpers/app-fixtures.ts";
import { makeGitRepo } from "../helpers/builds.ts";
import { useLocalStorage, useS3Storage } from "../helpers/artifact-world.ts";
import { startTestS3 } from "../helpers/s3rver.ts";
import { createUser } from "../helpers/factories.ts";
import {
  startOidcProvider,
  TEST_CLIENT_ID,
  TEST_CLIENT_SECRET,
  TEST_REDIRECT_URI,
  wallClockSeconds,
  type TestOidcProvider,
} from "../helpers/oidc-provider.ts";
import { startReceiver, type Receiver } from "../helpers/receiver.ts";
import { androidSigningBody, iosSigningBody } from "../helpers/signing-material.ts";
import { makeAscKey, makeServiceAccount } from "../helpers/store-keys.ts";

/**
 * The contract test of docs/decisions.md: every operation of GET /v1/openapi.json is called on a real app (app.request, a
 * fresh database each, with the objects it needs made through the API itself) with the document's own example
 * request, and its answer must have a status the document lists for it and a body that validates against the
 * schema documented for that status. Response schemas are closed, so a field a route answers but the document
 * lacks fails here; an operation the app routes but this walk does not call fails too (the walk must grow with
 * the API), and so does one without a documented success schema.
 */

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the document is walked as arbitrary JSON
type Json = any;

let doc: Json;
const ajv = new Ajv2020({ strict: false, allErrors: true });
const validators = new Map<string, ValidateFunction>();
/** Every documented operation called, with the statuses it answered. */
const answered = new Map<string, number[]>();

function documentedOperations(): string[] {
  return Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, ops]) =>
    Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
  );
}

function operation(key: string): Json {
  const [method, path] = key.split(" ") as [string, string];
  const op = doc.paths[path]?.[method.toLowerCase()];
  if (!op) throw new Error(`${key} is not in the document`);
  return op;
}

function validatorFor(key: string, status: number, schema: Json): ValidateFunction {
  const id = `${key} ${status}`;
  let v = validators.get(id);
  if (!v) {
    // $refs point into the document's components.
    v = ajv.compile({ ...schema, $defs: undefined, components: doc.components });
    validators.set(id, v);
  }
  return v;
}

interface CallSpec {
  params?: Record<string, string>;
  token?: string;
  /** Merged over the documented example body (or replaces it when a function). */
  body?: Record<string, unknown> | ((example: Json) => unknown);
  query?: Record<string, string>;
  headers?: Record<string, string>;
  rawBody?: Uint8Array | string;
  peer?: string;
}

/** Calls a documented operation with its documented example (plus the ids this database gave) and checks the answer. */
async function callOp(t: TestApp, key: string, spec: CallSpec = {}): Promise<CallResult> {
  const op = operation(key);
  const [method, template] = key.split(" ") as [string, string];
  const path = template.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const value = spec.params?.[name];
    if (value === undefined) throw new Error(`${key}: no value for {${name}}`);
    return encodeURIComponent(value);
  });
  const parameters = (op.parameters ?? []) as Json[];
  const query = new URLSearchParams();
  for (const p of parameters.filter((p) => p.in === "query" && p.example !== undefined)) query.set(p.name, p.example);
  for (const [name, value] of Object.entries(spec.query ?? {})) query.set(name, value);
  const headers: Record<string, string> = {};
  for (const p of parameters.filter((p) => p.in === "header" && p.example !== undefined)) headers[p.name] = p.example;
  Object.assign(headers, spec.headers);

  const content = op.requestBody?.content as Record<string, Json> | undefined;
  let body: unknown;
  let rawBody: Uint8Array | string | undefined = spec.rawBody;
  if (content?.["application/json"]) {
    const example = content["application/json"].example;
    expect(example, `${key} documents an example body`).toBeDefined();
    body = typeof spec.body === "function" ? spec.body(example) : { ...example, ...spec.body };
  } else if (content) {
    const [type, media] = Object.entries(content)[0]!;
    expect(media.example, `${key} documents an example body`).toBeDefined();
    headers["content-type"] = type;
    rawBody ??= media.example as string;
  }
  if (typeof spec.body === "function" && !content) body = spec.body(undefined);
  if (rawBody !== undefined && body === undefined && headers["content-type"] === undefined) headers["content-type"] = "application/octet-stream";

  const url = query.size > 0 ? `${path}?${query}` : path;
  const res = await t.call(method, url, {
    token: spec.token,
    headers,
    peer: spec.peer,
    ...(body !== undefined ? { body } : { rawBody: rawBody as RequestInit["body"] }),
  });
  answered.set(key, [...(answered.get(key) ?? []), res.status]);
  checkAnswer(key, op, res);
  return res;
}

function checkAnswer(key: string, op: Json, res: CallResult): void {
  const documented = op.responses[String(res.status)];
  expect(documented, `${key} answered ${res.status}, which it does not document: ${res.text.slice(0, 300)}`).toBeDefined();
  const content = documented.content as Record<string, Json> | undefined;
  if (!content) {
    expect(res.text, `${key} ${res.status} documents no body`).toBe("");
    return;
  }
  const [type, media] = Object.entries(content)[0]!;
  expect(res.headers.get("content-type") ?? "", `${key} ${res.status} content type`).toContain(type === "application/octet-stream" ? "" : type);
  if (type !== "application/json" || key === "GET /v1/openapi.json") return;
  const check = validatorFor(key, res.status, media.schema);
  expect(check(res.body), `${key} ${res.status}: ${ajv.errorsText(check.errors)}\n${res.text.slice(0, 500)}`).toBe(true);
  if (res.status >= 400) expect(documented["x-error-codes"], `${key} ${res.status} code`).toContain(res.body.code);
}

/** The success status the walk reached for an operation, if any. */
function succeeded(key: string): boolean {
  return (answered.get(key) ?? []).some((s) => s >= 200 && s < 300);
}

let idp: TestOidcProvider;
let receiver: Receiver;
beforeAll(async () => {
  [idp, receiver] = await Promise.all([startOidcProvider(), startReceiver()]);
  const t = await makeTestApp();
  doc = (await t.call("GET", "/v1/openapi.json")).body;
});
afterAll(async () => {
  await idp?.close();
});

describe("the OpenAPI document's contract", () => {
  it("is a valid OpenAPI 3.1 document whose every operation documents a success answer, an example when it takes a body, and closed objects", async () => {
    const result = await validate(structuredClone(doc));
    expect(result.valid, JSON.stringify(result).slice(0, 2000)).toBe(true);
    for (const key of documentedOperations()) {
      const op = operation(key);
      const successes = Object.keys(op.responses).filter((s) => /^2\d\d$/.test(s));
      expect(successes.length, `${key} documents a success answer`).toBeGreaterThan(0);
      expect(op.summary, `${key} has a summary`).not.toMatch(/^(GET|POST|PUT|PATCH|DELETE) /);
      if (op.requestBody) {
        const media = Object.values(op.requestBody.content as Record<string, Json>)[0];
        expect(media.example, `${key} documents an example request body`).toBeDefined();
      }
      for (const status of successes) {
        const schema = op.responses[status].content?.["application/json"]?.schema;
        if (schema && key !== "GET /v1/openapi.json") assertClosed(schema, `${key} ${status}`);
      }
    }
    assertClosed(doc.components.schemas.Error, "Error");
  });

  it("validation with the documented schemas refuses a field the schema lacks (the check below is not vacuous)", async () => {
    const schema = operation("GET /v1/projects/{project_id}").responses["200"].content["application/json"].schema;
    const check = ajv.compile(schema);
    const project = {
      id: "p",
      name: "n",
      repo_url: "u",
      default_branch: "main",
      has_source_credentials: false,
      has_android_signing: false,
      has_ios_signing: false,
      config_path: null,
      created_at: 1,
      updated_at: 1,
    };
    expect(check(project)).toBe(true);
    expect(check({ ...project, sealed_token: "x" })).toBe(false);
    const build = operation("GET /v1/builds/{build_id}").responses["200"].content["application/json"].schema;
    expect(ajv.compile(build)({ id: "b" })).toBe(false);
  });

  it("every documented operation, called with its documented example on a real app, answers as documented", async () => {
    await localInstanceWalk();
    await trustedProxyWalk();
    await oidcWalk();

    // Every operation the app routes under /v1/ was called: nothing routed goes unchecked.
    const documented = documentedOperations();
    const missing = documented.filter((key) => !answered.has(key));
    expect(missing, "operations the walk did not call").toEqual([]);
    const failed = documented.filter((key) => !succeeded(key));
    expect(failed, "operations that never reached a documented success").toEqual([]);
    expect(documented.length).toBeGreaterThan(75);
  }, 120_000);
});

/** Every object schema says what it does with unknown keys: closed (false), or a documented free-form map. */
function assertClosed(schema: Json, where: string): void {
  if (!schema || typeof schema !== "object") return;
  if (Array.isArray(schema)) {
    schema.forEach((s, i) => assertClosed(s, `${where}[${i}]`));
    return;
  }
  if (schema.type === "object" || schema.properties) {
    expect(schema.additionalProperties, `${where} must be closed (additionalProperties)`).toBeDefined();
  }
  for (const [k, v] of Object.entries(schema)) if (typeof v === "object") assertClosed(v, `${where}.${k}`);
}

/** Setup in local mode, then every area of a ready instance, through the documented operations. */
async function localInstanceWalk(): Promise<void> {
  const t = await makeTestApp();
  const repo = makeGitRepo();
  try {
    await callOp(t, "GET /v1/openapi.json");
    await callOp(t, "GET /v1/public/setup-status");
    const { token: bootstrap } = await issueBootstrapToken(t.deps);
    const setup = (await callOp(t, "POST /v1/setup/bootstrap-token/verify", { body: { token: bootstrap } })).body.session_token as string;
    await callOp(t, "POST /v1/setup/preferences", { token: setup });
    await callOp(t, "POST /v1/setup/local-owner/create", { token: setup });
    await callOp(t, "POST /v1/setup/complete", { token: setup });
    const owner = (await callOp(t, "POST /v1/auth/local/login")).body.session_token as string;
    const as = { token: owner };

    // Users and audit.
    await callOp(t, "GET /v1/users/me", as);
    await callOp(t, "GET /v1/users", as);
    const invited = (await callOp(t, "POST /v1/users/invite", as)).body.id as string;
    await callOp(t, "PATCH /v1/users/{user_id}/role", { ...as, params: { user_id: invited } });
    await callOp(t, "DELETE /v1/users/{user_id}", { ...as, params: { user_id: invited } });
    await callOp(t, "POST /v1/users/{user_id}/enable", { ...as, params: { user_id: invited } });
    await callOp(t, "GET /v1/audit-events", as);

    // Settings.
    await callOp(t, "GET /v1/settings/preferences", as);
    await callOp(t, "PUT /v1/settings/preferences", as);
    await callOp(t, "GET /v1/settings/external-access/network", as);
    await callOp(t, "PUT /v1/settings/external-access/network", as);
    await callOp(t, "GET /v1/settings/external-access/preflight", as);
    await callOp(t, "GET /v1/settings/local-login", as);
    await callOp(t, "PUT /v1/settings/local-login", as);
    await callOp(t, "GET /v1/settings/trusted-proxy", as);
    // The documented key set is at a real team's name, which this machine cannot resolve.
    await callOp(t, "PUT /v1/settings/trusted-proxy", { ...as, body: (example) => ({ ...example, assertion: null }) });
    await callOp(t, "GET /v1/settings/artifact-storage", as);
    await callOp(t, "PUT /v1/settings/artifact-storage", as);

    // Projects, pipelines, credentials, secrets, protection.
    const project = (await callOp(t, "POST /v1/projects", { ...as, body: { repo_url: repo.url } })).body.id as string;
    const inProject = { ...as, params: { project_id: project } };
    await callOp(t, "GET /v1/projects", as);
    await callOp(t, "GET /v1/projects/{project_id}", inProject);
    await callOp(t, "PATCH /v1/projects/{project_id}", inProject);
    const pipeline = (await callOp(t, "POST /v1/projects/{project_id}/pipelines", inProject)).body.id as string;
    const inPipeline = { ...as, params: { project_id: project, pipeline_id: pipeline } };
    await callOp(t, "GET /v1/projects/{project_id}/pipelines", inProject);
    await callOp(t, "GET /v1/projects/{project_id}/pipelines/{pipeline_id}", inPipeline);
    await callOp(t, "PATCH /v1/projects/{project_id}/pipelines/{pipeline_id}", inPipeline);
    await callOp(t, "POST /v1/projects/{project_id}/pipeline-config/validate", inProject);
    await callOp(t, "GET /v1/projects/{project_id}/schedules", inProject);
    await callOp(t, "POST /v1/projects/{project_id}/pipelines/{pipeline_id}/badge", inPipeline);
    await callOp(t, "DELETE /v1/projects/{project_id}/pipelines/{pipeline_id}/badge", inPipeline);
    await callOp(t, "PUT /v1/projects/{project_id}/source-credentials", inProject);
    await callOp(t, "PUT /v1/projects/{project_id}/signing/android", { ...inProject, body: () => androidSigningBody() });
    await callOp(t, "PUT /v1/projects/{project_id}/signing/ios", { ...inProject, body: () => iosSigningBody() });
    await callOp(t, "GET /v1/projects/{project_id}/signing", inProject);
    await callOp(t, "GET /v1/signing/health", as);
    const ascKey = makeAscKey();
    await callOp(t, "PUT /v1/projects/{project_id}/stores/app-store-connect", { ...inProject, body: { private_key_p8: ascKey.privatePem } });
    await callOp(t, "PUT /v1/projects/{project_id}/stores/google-play", {
      ...inProject,
      body: { service_account_json: makeServiceAccount("https://oauth2.googleapis.com/token").json },
    });
    await callOp(t, "GET /v1/projects/{project_id}/stores", inProject);
    const secret = { ...as, params: { project_id: project, name: "API_KEY" } };
    await callOp(t, "PUT /v1/projects/{project_id}/secrets/{name}", secret);
    await callOp(t, "GET /v1/projects/{project_id}/secrets", inProject);
    await callOp(t, "GET /v1/projects/{project_id}/protection", inProject);
    await callOp(t, "PUT /v1/projects/{project_id}/protection", inProject);

    // Inbound webhooks: the documented ping, signed with the secret the create answer gave.
    const hook = (await callOp(t, "POST /v1/projects/{project_id}/webhooks", inProject)).body;
    const inHook = { ...as, params: { project_id: project, webhook_id: hook.id } };
    await callOp(t, "GET /v1/projects/{project_id}/webhooks", inProject);
    const ping = operation("POST /v1/hooks/{webhook_id}").requestBody.content["application/json"].example;
    const signature = `sha256=${createHmac("sha256", hook.secret).update(JSON.stringify(ping)).digest("hex")}`;
    await callOp(t, "POST /v1/hooks/{webhook_id}", { params: { webhook_id: hook.id }, headers: { "X-Hub-Signature-256": signature } });
    await callOp(t, "GET /v1/projects/{project_id}/webhooks/{webhook_id}/deliveries", inHook);

    // Notifications, to a real receiver on loopback.
    const notification = (await callOp(t, "POST /v1/projects/{project_id}/notifications", { ...inProject, body: { url: `${receiver.url}/hangar` } }))
      .body.id as string;
    const inNotification = { ...as, params: { project_id: project, notification_id: notification } };
    await callOp(t, "GET /v1/projects/{project_id}/notifications", inProject);
    await callOp(t, "POST /v1/projects/{project_id}/notifications/{notification_id}/test", inNotification);
    await callOp(t, "GET /v1/projects/{project_id}/notifications/{notification_id}/deliveries", inNotification);

    // Tester channels and their testers.
    const channel = (await callOp(t, "POST /v1/projects/{project_id}/channels", { ...inProject, body: { pipeline_id: pipeline } })).body.id as string;
    const inChannel = { ...as, params: { project_id: project, channel_id: channel } };
    await callOp(t, "GET /v1/projects/{project_id}/channels", inProject);
    await callOp(t, "GET /v1/projects/{project_id}/channels/{channel_id}", inChannel);
    await callOp(t, "PATCH /v1/projects/{project_id}/channels/{channel_id}", inChannel);
    await callOp(t, "GET /v1/projects/{project_id}/channels/{channel_id}/releases", inChannel);
    const tester = (await callOp(t, "POST /v1/projects/{project_id}/channels/{channel_id}/testers", inChannel)).body.id as string;
    await callOp(t, "GET /v1/projects/{project_id}/channels/{channel_id}/testers", inChannel);
    await callOp(t, "DELETE /v1/projects/{project_id}/channels/{channel_id}/testers/{tester_id}", {
      ...as,
      params: { project_id: project, channel_id: channel, tester_id: tester },
    });
    await callOp(t, "DELETE /v1/projects/{project_id}/channels/{channel_id}", inChannel);
    await callOp(t, "GET /v1/projects/{project_id}/devices", inProject);
    await callOp(t, "GET /v1/projects/{project_id}/devices/export", inProject);
    await callOp(t, "GET /v1/settings/smtp", as);
    await callOp(t, "PUT /v1/settings/smtp", as);

    // A runner takes a build through its whole life.
    const runner = (await callOp(t, "POST /v1/runners/register", as)).body;
    const asRunner = { token: runner.token as string, params: { runner_id: runner.id as string } };
    await callOp(t, "GET /v1/runners", as);
    await callOp(t, "POST /v1/runners/{runner_id}/heartbeat", asRunner);
    const build = (await callOp(t, "POST /v1/projects/{project_id}/builds", { ...inProject, body: { pipeline_id: pipeline } })).body.id as string;
    const inBuild = { ...as, params: { build_id: build } };
    await callOp(t, "GET /v1/builds", as);
    await callOp(t, "GET /v1/builds/{build_id}", inBuild);
    const job = (await callOp(t, "POST /v1/runners/{runner_id}/claim", asRunner)).body;
    expect(job.build_id).toBe(build);
    const inJob = { token: asRunner.token, params: { runner_id: runner.id, job_id: build } };
    await callOp(t, "GET /v1/runners/{runner_id}/jobs/{job_id}", inJob);
    await callOp(t, "POST /v1/runners/{runner_id}/jobs/{job_id}/status", inJob);
    await callOp(t, "POST /v1/runners/{runner_id}/jobs/{job_id}/logs", inJob);
    await callOp(t, "GET /v1/builds/{build_id}/logs", inBuild);
    await callOp(t, "GET /v1/search", as);
    await callOp(t, "GET /v1/builds/{build_id}/tests", inBuild);
    await callOp(t, "GET /v1/projects/{project_id}/tests", inProject);
    await callOp(t, "GET /v1/projects/{project_id}/tests/flaky", inProject);
    await callOp(t, "GET /v1/runners/{runner_id}/jobs/{job_id}/checkout-auth", inJob);
    await callOp(t, "GET /v1/runners/{runner_id}/jobs/{job_id}/android-signing", inJob);
    await callOp(t, "GET /v1/runners/{runner_id}/jobs/{job_id}/ios-signing", inJob);
    await callOp(t, "GET /v1/runners/{runner_id}/jobs/{job_id}/secrets", inJob);

    // Shared caches: refused while artifacts are on local disk, then through S3 (s3rver) and back to local disk.
    const cacheBytes = new TextEncoder().encode("a cache archive");
    const cacheBody = { key: "gradle-linux-3f2a", size_bytes: cacheBytes.length, sha256: createHash("sha256").update(cacheBytes).digest("hex") };
    expect((await callOp(t, "POST /v1/runners/{runner_id}/jobs/{job_id}/caches", { ...inJob, body: cacheBody })).status).toBe(409);
    expect((await callOp(t, "GET /v1/runners/{runner_id}/jobs/{job_id}/caches", inJob)).status).toBe(409);
    const s3 = await startTestS3();
    const walkNow = t.clock.now();
    // s3rver checks presigned expiry against the real clock.
    t.clock.set(Math.floor(Date.now() / 1000));
    try {
      await useS3Storage(t, s3.endpoint, s3.bucket);
      const cacheUpload = (await callOp(t, "POST /v1/runners/{runner_id}/jobs/{job_id}/caches", { ...inJob, body: cacheBody })).body.upload;
      expect((await fetch(cacheUpload.url, { method: "PUT", headers: cacheUpload.headers, body: cacheBytes })).status).toBe(200);
      expect((await callOp(t, "GET /v1/runners/{runner_id}/jobs/{job_id}/caches", inJob)).body.key).toBe("gradle-linux-3f2a");
    } finally {
      await useLocalStorage(t);
      t.clock.set(walkNow);
      await s3.close();
    }

    // Artifacts: an APK with an icon through upload, completion, download and an install link; one aborted.
    const apk = makeApk({ label: "Demo Android", icons: [{ density: 480, png: encodePng(48, 48, samplePixels(48, 48)) }] });
    const created = (
      await callOp(t, "POST /v1/runners/{runner_id}/jobs/{job_id}/artifacts", { ...inJob, body: { filename: "demo.apk", size_bytes: apk.length } })
    ).body;
    const uploadToken = new URL(created.upload.url).pathname.split("/").pop()!;
    await callOp(t, "PUT /v1/artifacts/local-upload/{token}", { params: { token: uploadToken }, rawBody: apk });
    const artifact = created.artifact.id as string;
    const inArtifact = { ...inJob, params: { ...inJob.params, artifact_id: artifact } };
    await callOp(t, "POST /v1/runners/{runner_id}/jobs/{job_id}/artifacts/{artifact_id}/complete", inArtifact);
    const other = (await callOp(t, "POST /v1/runners/{runner_id}/jobs/{job_id}/artifacts", inJob)).body.artifact.id as string;
    await callOp(t, "POST /v1/runners/{runner_id}/jobs/{job_id}/artifacts/{artifact_id}/abort", {
      ...inJob,
      params: { ...inJob.params, artifact_id: other },
    });
    await callOp(t, "GET /v1/builds/{build_id}/artifacts", inBuild);
    const asReader = { ...as, params: { artifact_id: artifact } };
    await callOp(t, "GET /v1/artifacts/{artifact_id}", asReader);
    const icon = await callOp(t, "GET /v1/artifacts/{artifact_id}/icon", asReader);
    expect(icon.headers.get("content-type")).toBe("image/png");
    const link = (await callOp(t, "POST /v1/artifacts/{artifact_id}/download-link", asReader)).body.url as string;
    const downloaded = await callOp(t, "GET /v1/artifacts/download/{token}", { params: { token: new URL(link).pathname.split("/").pop()! } });
    expect(downloaded.status).toBe(200);
    await callOp(t, "POST /v1/artifacts/{artifact_id}/install-link", asReader);
    await callOp(t, "POST /v1/runners/{runner_id}/jobs/{job_id}/status", { ...inJob, body: { status: "succeeded", exit_code: 0 } });
    expect((await callOp(t, "POST /v1/runners/{runner_id}/claim", asRunner)).status).toBe(204);
    await callOp(t, "POST /v1/builds/{build_id}/publish", inBuild);
    await callOp(t, "GET /v1/builds/{build_id}/publishes", inBuild);

    const rerun = (await callOp(t, "POST /v1/builds/{build_id}/rerun", inBuild)).body.id as string;
    await callOp(t, "POST /v1/builds/{build_id}/cancel", { ...as, params: { build_id: rerun } });

    // Retention: pins, policies, a dry and a real pass, the disk figures.
    await callOp(t, "POST /v1/builds/{build_id}/pin", inBuild);
    await callOp(t, "DELETE /v1/builds/{build_id}/pin", inBuild);
    await callOp(t, "GET /v1/settings/retention", as);
    await callOp(t, "PUT /v1/settings/retention", as);
    await callOp(t, "GET /v1/projects/{project_id}/retention", inProject);
    await callOp(t, "PUT /v1/projects/{project_id}/retention", inProject);
    await callOp(t, "POST /v1/settings/retention/run", as);
    await callOp(t, "POST /v1/settings/retention/run", { ...as, body: { dry_run: false } });
    await callOp(t, "GET /v1/settings/disk", as);

    // Runner management (a user, and the runner itself), then removal.
    await callOp(t, "PATCH /v1/runners/{runner_id}", { ...as, params: { runner_id: runner.id } });
    await callOp(t, "PATCH /v1/runners/{runner_id}", { ...asRunner, body: { status: "online" } });
    await callOp(t, "POST /v1/runners/{runner_id}/rotate-token", { ...as, params: { runner_id: runner.id } });
    await callOp(t, "DELETE /v1/runners/{runner_id}", { ...as, params: { runner_id: runner.id } });

    // Removals.
    await callOp(t, "DELETE /v1/projects/{project_id}/secrets/{name}", secret);
    await callOp(t, "DELETE /v1/projects/{project_id}/webhooks/{webhook_id}", inHook);
    await callOp(t, "DELETE /v1/projects/{project_id}/notifications/{notification_id}", inNotification);
    await callOp(t, "DELETE /v1/projects/{project_id}/pipelines/{pipeline_id}", inPipeline);
    await callOp(t, "DELETE /v1/projects/{project_id}", inProject);

    // A second session signs out; then ownership moves to an active admin (last: the owner becomes an admin).
    const second = (await callOp(t, "POST /v1/auth/local/login")).body.session_token as string;
    await callOp(t, "POST /v1/auth/logout", { token: second });
    await createUser(t, { email: "admin@example.com", role: "admin" });
    await callOp(t, "POST /v1/users/transfer-owner", as);
  } finally {
    repo.remove();
    t.close();
  }
}

/** Setup in remote mode with a trusted proxy in front (the test's peer, 127.0.0.1), and a proxy sign-in. */
async function trustedProxyWalk(): Promise<void> {
  const t = await makeTestApp();
  try {
    const { token: bootstrap } = await issueBootstrapToken(t.deps);
    const setup = (await callOp(t, "POST /v1/setup/bootstrap-token/verify", { body: { token: bootstrap } })).body.session_token as string;
    await callOp(t, "POST /v1/setup/preferences", { token: setup, body: { runtime_mode: "remote", remote_auth_mode: "trusted_proxy" } });
    await callOp(t, "POST /v1/setup/trusted-proxy/configure", { token: setup });
    await callOp(t, "POST /v1/setup/owner/claim-trusted-proxy", { token: setup });
    await callOp(t, "POST /v1/setup/complete", { token: setup });
    await callOp(t, "POST /v1/auth/trusted-proxy/login");
  } finally {
    t.close();
  }
}

/** Setup with an OIDC identity provider (panva's oidc-provider on loopback), sign-in, and the post-setup change. */
async function oidcWalk(): Promise<void> {
  const t = await makeTestApp();
  t.clock.set(wallClockSeconds());
  const client = { issuer_url: idp.issuer, client_id: TEST_CLIENT_ID, client_secret: TEST_CLIENT_SECRET };
  try {
    const { token: bootstrap } = await issueBootstrapToken(t.deps);
    const setup = (await callOp(t, "POST /v1/setup/bootstrap-token/verify", { body: { token: bootstrap } })).body.session_token as string;
    await callOp(t, "POST /v1/setup/oidc/configure", { token: setup, body: client });
    const start = (await callOp(t, "POST /v1/setup/owner/start-oidc", { token: setup, body: { redirect_uri: TEST_REDIRECT_URI } })).body;
    const owner = await idp.authorize(start.authorization_url, "owner-sub");
    await callOp(t, "POST /v1/setup/owner/verify-oidc", { token: setup, body: { code: owner.code, state: owner.state } });
    await callOp(t, "POST /v1/setup/complete", { token: setup });
    const signIn = (await callOp(t, "GET /v1/auth/oidc/start", { query: { redirect_uri: TEST_REDIRECT_URI } })).body;
    const again = await idp.authorize(signIn.authorization_url, "owner-sub");
    const session = (await callOp(t, "POST /v1/auth/oidc/callback", { body: { code: again.code, state: again.state } })).body.session_token as string;
    await callOp(t, "PUT /v1/settings/external-access/oidc", { token: session, body: client });
  } finally {
    t.close();
  }
}
