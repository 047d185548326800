// HTTP client of the reference runner: every runner-to-daemon call, with retries that ride out a daemon restart.
// The token lives only in the Authorization header; no message this module builds ever contains it.
// The bodies it sends and reads are the wire protocol's (src/protocol/runner.ts), the daemon's own definitions.
import { Agent as HttpAgent, request as httpRequest } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { ClaimedJob, DiskReport, JobState } from "../../protocol/runner.ts";
import type { Logger } from "./log.ts";

export interface RunnerInfo {
  id?: string;
  capabilities?: Record<string, unknown>;
}

/** A definite answer from the daemon that the caller has to decide about (a 4xx, or a 5xx once retries ran out). */
export class DaemonError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "DaemonError";
  }
}

/** The daemon could not be reached (connection refused or reset, timeout) and retrying was not allowed to go on. */
export class UnreachableError extends Error {
  override name = "UnreachableError";
}

export interface RetryPolicy {
  /** Stop retrying (and abort the request in flight) when this fires. */
  signal?: AbortSignal;
  /** Epoch milliseconds after which no new attempt starts. */
  deadline?: number;
  /** At most this many attempts (default: unlimited). */
  attempts?: number;
}

export interface Answer {
  status: number;
  body: unknown;
}

interface CallOptions {
  json?: unknown;
  bytes?: Uint8Array;
  contentType?: string;
  retry?: RetryPolicy;
  timeoutMs?: number;
}

/**
 * One keep-alive pool per scheme for the process. `node:http` rather than `fetch`: a round trip to a local daemon
 * took 0.5 ms against fetch's 1.5 ms, and a job makes several in a row on its way to the final report
 * (docs/benchmarks.md, the runner's overhead). Idle pooled sockets do not keep the process alive, and Node closes
 * them before the daemon's `Keep-Alive: timeout` would.
 */
const AGENTS = { http: new HttpAgent({ keepAlive: true }), https: new HttpsAgent({ keepAlive: true }) };

/** One request; rejects on a network error or when `signal` fires (before or during the answer). */
function send(url: string, method: string, headers: Record<string, string>, body: string | Uint8Array | undefined, signal: AbortSignal) {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const target = new URL(url);
    const secure = target.protocol === "https:";
    if (body !== undefined) headers["content-length"] = String(typeof body === "string" ? Buffer.byteLength(body) : body.byteLength);
    const req = (secure ? httpsRequest : httpRequest)(target, { method, headers, agent: secure ? AGENTS.https : AGENTS.http, signal }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("error", reject);
      res.on("close", () => {
        if (res.complete) resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") });
        else reject(new Error("the connection closed before the whole answer arrived"));
      });
    });
    req.on("error", reject);
    req.end(body);
  });
}

const BACKOFF_BASE_MS = 250;
const BACKOFF_CAP_MS = 5_000;

/** Exponential backoff with full jitter (AWS architecture blog): spreads reconnecting runners out. */
export function backoffDelay(attempt: number, baseMs = BACKOFF_BASE_MS, capMs = BACKOFF_CAP_MS): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.min(attempt, 20));
  return baseMs / 2 + Math.random() * (ceiling - baseMs / 2);
}

/** Resolves after `ms`, or early (without throwing) when the signal fires. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** Status codes worth another try: the daemon is restarting, overloaded or briefly failing. */
function isTransient(status: number): boolean {
  return status >= 500 || status === 429 || status === 408;
}

export class RunnerClient {
  readonly baseUrl: string;

  constructor(
    baseUrl: string,
    private readonly token: string,
    readonly runnerId: string,
    private readonly log: Logger,
  ) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
  }

  /** One request to `path` (relative to the daemon), retried per `retry` on network failures and 5xx/429. */
  async call(method: string, path: string, options: CallOptions = {}): Promise<Answer> {
    const policy = options.retry ?? { attempts: 1 };
    for (let attempt = 0; ; attempt++) {
      let failure: string;
      try {
        const answer = await this.attempt(method, path, options, policy.signal);
        if (!isTransient(answer.status)) return answer;
        failure = `HTTP ${answer.status}`;
        if (this.outOfRetries(policy, attempt)) throw toDaemonError(answer);
      } catch (err) {
        if (err instanceof DaemonError) throw err;
        if (policy.signal?.aborted) throw new UnreachableError(`${method} ${path}: stopped`);
        failure = describeNetworkError(err);
        if (this.outOfRetries(policy, attempt)) throw new UnreachableError(`${method} ${path}: ${failure}`);
      }
      const delay = backoffDelay(attempt);
      if (attempt === 0 || attempt % 10 === 0) this.log.warn(`${method} ${path} failed (${failure}); retrying`);
      await sleep(delay, policy.signal);
      if (policy.signal?.aborted) throw new UnreachableError(`${method} ${path}: stopped`);
    }
  }

  private outOfRetries(policy: RetryPolicy, attempt: number): boolean {
    if (policy.signal?.aborted) return true;
    if (policy.attempts !== undefined && attempt + 1 >= policy.attempts) return true;
    return policy.deadline !== undefined && Date.now() >= policy.deadline;
  }

  private async attempt(method: string, path: string, options: CallOptions, signal?: AbortSignal): Promise<Answer> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}`, accept: "application/json" };
    let body: string | Uint8Array | undefined;
    if (options.json !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(options.json);
    } else if (options.bytes !== undefined) {
      headers["content-type"] = options.contentType ?? "application/octet-stream";
      body = options.bytes;
    }
    const timeout = AbortSignal.timeout(options.timeoutMs ?? 30_000);
    const res = await send(this.baseUrl + path, method, headers, body, signal ? AbortSignal.any([signal, timeout]) : timeout);
    const text = res.text;
    let parsed: unknown = null;
    if (text) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = text;
      }
    }
    return { status: res.status, body: parsed };
  }

  /** Like `call`, but any status outside 2xx becomes a DaemonError. */
  async ok(method: string, path: string, options: CallOptions = {}): Promise<Answer> {
    const answer = await this.call(method, path, options);
    if (answer.status < 200 || answer.status > 299) throw toDaemonError(answer);
    return answer;
  }

  /**
   * A client for one claimed job's calls: they carry the job's own token when the claim has one, so the runner
   * token is not sent for work a build's code could observe (docs/runner-isolation.md).
   */
  forJob(jobToken: string | undefined): RunnerClient {
    if (!jobToken) return this;
    return new RunnerClient(this.baseUrl, jobToken, this.runnerId, this.log);
  }

  private runnerPath(suffix = ""): string {
    return `/v1/runners/${encodeURIComponent(this.runnerId)}${suffix}`;
  }

  jobPath(jobId: string, suffix = ""): string {
    return this.runnerPath(`/jobs/${encodeURIComponent(jobId)}${suffix}`);
  }

  /** Sets the runner's status; answers the runner as the daemon returns it. */
  async setStatus(status: "online" | "draining", retry: RetryPolicy): Promise<RunnerInfo> {
    const { body } = await this.ok("PATCH", this.runnerPath(), { json: { status }, retry });
    return (body ?? {}) as RunnerInfo;
  }

  /** Replaces the runner's capabilities (a runner token may only narrow its platforms). */
  async setCapabilities(capabilities: Record<string, unknown>, retry: RetryPolicy): Promise<RunnerInfo> {
    const { body } = await this.ok("PATCH", this.runnerPath(), { json: { capabilities }, retry });
    return (body ?? {}) as RunnerInfo;
  }

  /** A daemon that does not know the disk fields ignores them. */
  async heartbeat(disk: DiskReport | null = null): Promise<{ cancelJobIds: string[]; nextInS: number | null }> {
    const { body } = await this.ok("POST", this.runnerPath("/heartbeat"), { json: disk ?? {}, timeoutMs: 15_000 });
    const b = (body ?? {}) as { cancel_job_ids?: unknown; next_heartbeat_in_s?: unknown };
    return {
      cancelJobIds: Array.isArray(b.cancel_job_ids) ? b.cancel_job_ids.filter((x): x is string => typeof x === "string") : [],
      nextInS: typeof b.next_heartbeat_in_s === "number" ? b.next_heartbeat_in_s : null,
    };
  }

  /** Long-polls for a job: the job, or null after `waitS` seconds without one (204). */
  async claim(waitS: number, retry: RetryPolicy): Promise<ClaimedJob | null> {
    const wait = Math.max(0, Math.min(30, Math.floor(waitS)));
    const answer = await this.ok("POST", this.runnerPath(`/claim?wait=${wait}`), { retry, timeoutMs: (wait + 20) * 1000 });
    if (answer.status === 204 || answer.body === null) return null;
    return answer.body as ClaimedJob;
  }

  async getJob(jobId: string): Promise<JobState> {
    return (await this.ok("GET", this.jobPath(jobId), { timeoutMs: 10_000 })).body as JobState;
  }
}

export function toDaemonError(answer: Answer): DaemonError {
  const b = answer.body as { code?: unknown; message?: unknown } | null;
  const code = typeof b?.code === "string" ? b.code : `http_${answer.status}`;
  const message = typeof b?.message === "string" ? b.message : `the daemon answered ${answer.status}`;
  return new DaemonError(answer.status, code, message);
}

function describeNetworkError(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as Error & { cause?: { code?: string; message?: string } }).cause;
    return cause?.code ?? cause?.message ?? (err as NodeJS.ErrnoException).code ?? err.message;
  }
  return String(err);
}
