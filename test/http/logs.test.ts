import { describe, expect, it } from "vitest";
import { maskChunk, SecretMatcher } from "../../src/domain/logs/log-mask.ts";
import { makeTestApp } from "../helpers/app.ts";
import { appendLog, buildWorld, claim, queueBuild, registerRunner, reportStatus } from "../helpers/builds.ts";
import { userWithRole } from "../helpers/factories.ts";
import { androidSigningBody, iosSigningBody } from "../helpers/signing-material.ts";

async function runningJob(secrets = false) {
  const t = await makeTestApp();
  const w = await buildWorld(t);
  if (secrets) {
    await t.call("PUT", `/v1/projects/${w.project.id}/source-credentials`, { token: w.ownerToken, body: { token: "ghp_SOURCETOKEN" } });
    await t.call("PUT", `/v1/projects/${w.project.id}/signing/android`, {
      token: w.ownerToken,
      body: androidSigningBody({ storePassword: "store-Pa55", keyPassword: "key-Pa55" }),
    });
    await t.call("PUT", `/v1/projects/${w.project.id}/signing/ios`, {
      token: w.ownerToken,
      body: iosSigningBody("p12-Pa55"),
    });
  }
  const b = await queueBuild(t, w.ownerToken, w.project.id, w.pipeline.id);
  await claim(t, w.runner);
  await reportStatus(t, w.runner, b.id, { status: "running" });
  const read = (offset = 0, token = w.ownerToken) => t.call("GET", `/v1/builds/${b.id}/logs?offset=${offset}`, { token });
  return { t, w, b, read };
}

describe("log append and read (docs/api.md §6)", () => {
  it("appends at byte offsets and reads text/plain from any offset", async () => {
    const { t, w, b, read } = await runningJob();
    expect((await appendLog(t, w.runner, b.id, 0, "step 1\n")).body).toEqual({ log_bytes: 7 });
    expect((await appendLog(t, w.runner, b.id, 7, "héllo\n")).body).toEqual({ log_bytes: 14 });
    const all = await read();
    expect(all.status).toBe(200);
    expect(all.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(all.text).toBe("step 1\nhéllo\n");
    expect(all.headers.get("x-log-next-offset")).toBe("14");
    expect(all.headers.get("x-log-complete")).toBe("false");
    expect((await read(7)).text).toBe("héllo\n");
    expect((await read(10)).text).toBe("llo\n");
    const past = await read(99);
    expect([past.status, past.text, past.headers.get("x-log-next-offset")]).toEqual([200, "", "99"]);
  });

  it("ignores a repeated chunk, keeps only the new part of an overlapping one, and refuses a gap (409 log_offset_mismatch)", async () => {
    const { t, w, b, read } = await runningJob();
    await appendLog(t, w.runner, b.id, 0, "abc\n");
    expect((await appendLog(t, w.runner, b.id, 0, "abc\n")).body).toEqual({ log_bytes: 4 });
    expect((await appendLog(t, w.runner, b.id, 2, "c\ndef\n")).body).toEqual({ log_bytes: 8 });
    const gap = await appendLog(t, w.runner, b.id, 10, "x");
    expect([gap.status, gap.body.code]).toEqual([409, "log_offset_mismatch"]);
    expect((await read()).text).toBe("abc\ndef\n");
  });

  it("masks the source token and signing passwords as ***", async () => {
    const { t, w, b, read } = await runningJob(true);
    const line = "token=ghp_SOURCETOKEN store=store-Pa55 key=key-Pa55 p12=p12-Pa55 done\n";
    await appendLog(t, w.runner, b.id, 0, line);
    expect((await read()).text).toBe("token=*** store=*** key=*** p12=*** done\n");
  });

  it("masks a secret split across two chunks, holding back only the possible secret prefix", async () => {
    const { t, w, b, read } = await runningJob(true);
    const first = "cloning with ghp_SOURC";
    await appendLog(t, w.runner, b.id, 0, first);
    // Nothing of the secret's start is visible yet.
    expect((await read()).text).toBe("cloning with ");
    await appendLog(t, w.runner, b.id, first.length, "ETOKEN ok\nghp_");
    expect((await read()).text).toBe("cloning with *** ok\n");
    // A held-back tail that never becomes a secret appears once the build is final, masked.
    await reportStatus(t, w.runner, b.id, { status: "succeeded" });
    const done = await read();
    expect(done.text).toBe("cloning with *** ok\n***");
    expect(done.headers.get("x-log-complete")).toBe("true");
    expect(done.text).not.toContain("ghp_");
  });

  it("pages long logs: a read returns about 4 MiB and X-Log-Next-Offset leads to the rest", async () => {
    const { t, w, b, read } = await runningJob();
    const chunk = (i: number) => `${String(i).padStart(6, "0")}`.repeat(1_000_000 / 6).padEnd(1_000_000, "\n");
    let offset = 0;
    for (let i = 0; i < 9; i++) {
      expect((await appendLog(t, w.runner, b.id, offset, chunk(i))).status).toBe(200);
      offset += 1_000_000;
    }
    await reportStatus(t, w.runner, b.id, { status: "succeeded" });
    const sizes: number[] = [];
    let text = "";
    let next = 0;
    for (;;) {
      const page = await read(next);
      sizes.push(page.text.length);
      text += page.text;
      next = Number(page.headers.get("x-log-next-offset"));
      if (page.headers.get("x-log-complete") === "true") break;
    }
    expect(sizes).toEqual([5_000_000, 4_000_000]);
    expect(text).toBe(Array.from({ length: 9 }, (_, i) => chunk(i)).join(""));
  });

  it("refuses a chunk over 1 MiB (413 payload_too_large) and a non-text body (400 invalid_input)", async () => {
    const { t, w, b } = await runningJob();
    const big = await appendLog(t, w.runner, b.id, 0, "x".repeat(1024 * 1024 + 1));
    expect([big.status, big.body.code]).toEqual([413, "payload_too_large"]);
    const json = await t.call("POST", `/v1/runners/${w.runner.id}/jobs/${b.id}/logs?offset=0`, { token: w.runner.token, body: { line: "x" } });
    expect([json.status, json.body.code]).toEqual([400, "invalid_input"]);
  });

  it("is readable by every role, 404 not_found for an unknown build; runner errors as elsewhere", async () => {
    const { t, w, b, read } = await runningJob();
    await appendLog(t, w.runner, b.id, 0, "x\n");
    const viewer = await userWithRole(t, "qa_viewer");
    expect((await read(0, viewer.token)).text).toBe("x\n");
    const missing = await t.call("GET", "/v1/builds/nope/logs", { token: w.ownerToken });
    expect([missing.status, missing.body.code]).toEqual([404, "not_found"]);
    const anon = await t.call("GET", `/v1/builds/${b.id}/logs`);
    expect([anon.status, anon.body.code]).toEqual([401, "missing_auth"]);
    const other = await registerRunner(t, w.ownerToken);
    const notMine = await appendLog(t, other, b.id, 2, "y");
    expect([notMine.status, notMine.body.code]).toEqual([404, "not_found"]);
    const mismatch = await t.call("POST", `/v1/runners/${w.runner.id}/jobs/${b.id}/logs?offset=2`, {
      token: other.token,
      rawBody: "y",
      headers: { "content-type": "text/plain" },
    });
    expect([mismatch.status, mismatch.body.code]).toEqual([403, "runner_mismatch"]);
    const noOffset = await t.call("POST", `/v1/runners/${w.runner.id}/jobs/${b.id}/logs`, {
      token: w.runner.token,
      rawBody: "y",
      headers: { "content-type": "text/plain" },
    });
    expect([noOffset.status, noOffset.body.code]).toEqual([400, "invalid_input"]);
    const badOffset = await read(-1);
    expect([badOffset.status, badOffset.body.code]).toEqual([400, "invalid_input"]);
  });
});

describe("masking primitives", () => {
  const enc = (s: string) => new TextEncoder().encode(s);
  const dec = (b: Uint8Array) => new TextDecoder().decode(b);
  const matcher = (...secrets: string[]) => new SecretMatcher(secrets.map(enc));
  it("masks every occurrence (overlapping ones as one run) and ignores secrets under 4 bytes", () => {
    expect(dec(maskChunk(matcher("abcd", "abcdef", "xy"), enc("abcdefg abcd xy"), true).stored)).toBe("***g *** xy");
    expect(dec(maskChunk(matcher("abcd", "cdef"), enc("xabcdefx abcdabcd"), true).stored)).toBe("x***x ******");
    expect(dec(maskChunk(matcher("aaaa"), enc("aaaaaaa b"), true).stored)).toBe("*** b");
  });
  it("holds back exactly the tail that could start a secret, and an occurrence crossing it whole", () => {
    const m = matcher("secret-token");
    const split = (s: string) => {
      const { stored, pending } = maskChunk(m, enc(s));
      return [dec(stored), dec(pending)];
    };
    expect(split("hello secr")).toEqual(["hello ", "secr"]);
    expect(split("hello")).toEqual(["hello", ""]);
    expect(split("hello s")).toEqual(["hello ", "s"]);
    expect(split("a secret-token b")).toEqual(["a *** b", ""]);
    // "abcd" ends inside the tail that could still become "cdxy": it goes to pending whole, unmasked and unshown.
    expect(
      (() => {
        const { stored, pending } = maskChunk(matcher("abcd", "cdxy"), enc("zzabcdx"));
        return [dec(stored), dec(pending)];
      })(),
    ).toEqual(["zz", "abcdx"]);
  });
  it("is linear on a near-miss chunk: 1 MiB against an 8 KiB secret in well under a second", () => {
    const secret = "A".repeat(8191) + "B";
    const m = matcher(secret);
    const chunk = new Uint8Array(1024 * 1024).fill(0x41);
    const started = performance.now();
    const { stored, pending } = maskChunk(m, chunk);
    expect(stored.length + pending.length).toBe(chunk.length);
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});
