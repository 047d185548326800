// Build output on its way to the daemon. Everything is first appended to a spool file in the job directory
// (so a long daemon outage costs disk, not memory, and nothing is dropped), then sent in chunks with their byte
// offset: `POST .../jobs/{id}/logs?offset=N`. A chunk is retried byte-for-byte until acknowledged, so a chunk
// the daemon stored before a crash is just ignored as a repeat — no loss, no duplicate.
import { closeSync, openSync, readSync, writeSync } from "node:fs";
import { type RunnerClient, backoffDelay, sleep } from "./client.ts";
import type { Logger } from "./log.ts";

const MAX_CHUNK = 256 * 1024;
const FLUSH_MS = 250;
/** Secrets shorter than this are not masked: masking "a" or "1" would garble every log. */
const MIN_SECRET_LEN = 4;

/** Replaces every occurrence of each secret in `buf` by `***`. */
export function maskSecrets(buf: Buffer, secrets: Buffer[]): Buffer {
  let out = buf;
  for (const secret of secrets) {
    let at = out.indexOf(secret);
    if (at < 0) continue;
    const parts: Buffer[] = [];
    let from = 0;
    while (at >= 0) {
      parts.push(out.subarray(from, at), MASK);
      from = at + secret.length;
      at = out.indexOf(secret, from);
    }
    parts.push(out.subarray(from));
    out = Buffer.concat(parts);
  }
  return out;
}
const MASK = Buffer.from("***");

/** Where the tail of `buf` that is a proper prefix of some secret starts (`buf.length` when none is). */
export function secretPrefixStart(buf: Buffer, secrets: Buffer[]): number {
  const longest = secrets[0]?.length ?? 0;
  for (let p = Math.max(0, buf.length - longest + 1); p < buf.length; p++) {
    const rest = buf.subarray(p);
    if (secrets.some((s) => s.length > rest.length && s.subarray(0, rest.length).equals(rest))) return p;
  }
  return buf.length;
}

/** Length of `buf` cut back so it does not end inside a UTF-8 sequence (the daemon may decode chunks as text). */
export function utf8SafeLength(buf: Buffer): number {
  for (let back = 1; back <= Math.min(3, buf.length); back++) {
    const byte = buf[buf.length - back]!;
    if ((byte & 0xc0) === 0x80) continue; // continuation byte: keep looking for the lead byte
    const need = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return need > back ? buf.length - back : buf.length;
  }
  return buf.length;
}

export class LogStream {
  private readonly fd: number;
  private written = 0;
  private sent = 0;
  private held: Buffer = Buffer.alloc(0);
  private secrets: Buffer[] = [];
  private maxChunk = MAX_CHUNK;
  private timer: NodeJS.Timeout | null = null;
  private pumping: Promise<void> | null = null;
  private closing = false;
  private stopped = false;
  private readonly abort = new AbortController();

  constructor(
    private readonly client: RunnerClient,
    private readonly jobId: string,
    spoolPath: string,
    private readonly log: Logger,
  ) {
    this.fd = openSync(spoolPath, "w+", 0o600);
  }

  /** Masks `secret` in everything written from now on (and in the held-back tail). */
  addSecret(secret: string | null | undefined): void {
    if (!secret || secret.length < MIN_SECRET_LEN) return;
    const buf = Buffer.from(secret);
    if (!this.secrets.some((s) => s.equals(buf))) this.secrets.push(buf);
    this.secrets.sort((a, b) => b.length - a.length);
  }

  write(data: string | Buffer): void {
    if (this.closing) return;
    this.held = Buffer.concat([this.held, typeof data === "string" ? Buffer.from(data) : data]);
    this.commit(false);
    this.schedule();
  }

  /**
   * Masks the pending bytes and appends them to the spool. Unless `all`, the tail that could be the start of a
   * secret whose end has not been written yet (a proper prefix of one) stays held; nothing else waits, so a step
   * that prints a line and then works for minutes shows that line at once.
   */
  private commit(all: boolean): void {
    this.held = maskSecrets(this.held, this.secrets);
    const keep = all ? 0 : this.held.length - secretPrefixStart(this.held, this.secrets);
    const cut = Math.max(0, this.held.length - keep);
    if (cut === 0) return;
    const out = this.held.subarray(0, cut);
    this.held = Buffer.from(this.held.subarray(cut));
    writeSync(this.fd, out, 0, out.length, this.written);
    this.written += out.length;
  }

  private schedule(delay = FLUSH_MS): void {
    if (this.timer || this.pumping || this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.pumping = this.pump().finally(() => {
        this.pumping = null;
        if (this.sent < this.written && !this.stopped) this.schedule();
      });
    }, delay);
  }

  private async pump(): Promise<void> {
    while (!this.stopped && this.sent < this.written) {
      const len = Math.min(this.maxChunk, this.written - this.sent);
      const chunk = Buffer.alloc(len);
      readSync(this.fd, chunk, 0, len, this.sent);
      const safe = this.closing && this.sent + len === this.written ? len : utf8SafeLength(chunk);
      if (safe === 0) return; // only a partial character so far: wait for the rest
      await this.send(chunk.subarray(0, safe));
    }
  }

  /** Sends one chunk until the daemon acknowledges it or tells us to stop. */
  private async send(chunk: Buffer): Promise<void> {
    const path = this.client.jobPath(this.jobId, `/logs?offset=${this.sent}`);
    for (let attempt = 0; !this.stopped; attempt++) {
      try {
        const answer = await this.client.call("POST", path, {
          bytes: chunk,
          contentType: "text/plain; charset=utf-8",
          retry: { signal: this.abort.signal },
        });
        if (answer.status >= 200 && answer.status < 300) {
          this.sent += chunk.length;
          return;
        }
        const err = answer.body as { code?: string } | null;
        if (answer.status === 413 && this.maxChunk > 4096) {
          this.maxChunk = Math.floor(this.maxChunk / 4);
          return;
        }
        this.stop(`the daemon refused log bytes at offset ${this.sent} (${answer.status} ${err?.code ?? ""})`);
        return;
      } catch (err) {
        // Retries already ran inside `call`; only an abort or an unexpected failure lands here.
        if (this.abort.signal.aborted) return;
        this.log.warn(`sending build log failed: ${(err as Error).message}`);
        await sleep(backoffDelay(attempt), this.abort.signal);
      }
    }
  }

  private stop(reason: string): void {
    if (this.stopped) return;
    this.stopped = true;
    this.log.warn(`log streaming stopped: ${reason}`);
  }

  get deliveredBytes(): number {
    return this.sent;
  }

  /**
   * Flushes everything (held bytes included) and waits until the daemon has all of it, the daemon refuses more,
   * or `timeoutMs` passes. Answers whether everything was delivered.
   */
  async close(timeoutMs = Number.POSITIVE_INFINITY): Promise<boolean> {
    this.closing = true;
    this.commit(true);
    const deadline = Date.now() + timeoutMs;
    while (!this.stopped && this.sent < this.written && Date.now() < deadline) {
      if (this.timer) {
        clearTimeout(this.timer);
        this.timer = null;
      }
      if (!this.pumping) {
        this.pumping = this.pump().finally(() => {
          this.pumping = null;
        });
      }
      const left = deadline - Date.now();
      await Promise.race([this.pumping, sleep(Number.isFinite(left) ? left : 60_000)]);
    }
    const delivered = this.sent === this.written;
    this.abort.abort();
    if (this.timer) clearTimeout(this.timer);
    await this.pumping?.catch(() => undefined);
    closeSync(this.fd);
    return delivered;
  }
}
