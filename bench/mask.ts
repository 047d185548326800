// npm run bench:mask: log masking throughput (src/domain/logs/log-mask.ts) for 1 MiB chunks against 1, 10 and 100
// secrets of 8 KiB, beside a plain Buffer.indexOf scan of the same bytes per secret (the limit: native search,
// Node-only, which the web-standard core cannot use), with the ratio. Two kinds of chunk: ordinary log text, and the near-miss worst case that froze the daemon
// for 67 s before docs/decisions.md (a chunk of 'A' against secrets of 'A…AB'). The quadratic scan it replaced is timed
// once on a smaller chunk for comparison.
import { randomBytes } from "node:crypto";
import { cpus, loadavg } from "node:os";
import { maskChunk, SecretMatcher } from "../src/domain/logs/log-mask.ts";

const MiB = 1024 * 1024;
const SECRET_BYTES = 8 * 1024;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 8);

function textChunk(): Buffer {
  const words = [
    "compiling",
    "Swift",
    "module",
    "warning:",
    "linking",
    "Pods",
    "xcodebuild",
    "[1/42]",
    "gradle",
    "task",
    ":app:assembleRelease",
    "UP-TO-DATE",
    "\n",
  ];
  const parts: string[] = [];
  let n = 0;
  while (n < MiB) {
    const w = words[(n * 7919) % words.length]!;
    parts.push(w, " ");
    n += w.length + 1;
  }
  return Buffer.from(parts.join("").slice(0, MiB));
}

function secretsFor(kind: "text" | "near-miss", count: number): Buffer[] {
  return Array.from({ length: count }, (_, i) =>
    kind === "near-miss"
      ? Buffer.concat([Buffer.alloc(SECRET_BYTES - 2, "A"), Buffer.from([0x42, 0x30 + (i % 10)])])
      : Buffer.from(randomBytes(SECRET_BYTES / 2).toString("hex")),
  );
}

function mibPerS(bytes: number, ms: number): number {
  return bytes / MiB / (ms / 1000);
}

function time(fn: () => void): number {
  fn(); // warm-up
  const started = performance.now();
  for (let i = 0; i < ROUNDS; i++) fn();
  return (performance.now() - started) / ROUNDS;
}

console.log(
  `bench:mask — 1 MiB chunks, secrets of ${SECRET_BYTES} bytes, ${ROUNDS} rounds; ${cpus().length} cores, load ${loadavg()[0]!.toFixed(2)}`,
);
console.log("chunk      secrets  build ms  mask ms  mask MiB/s  indexOf MiB/s (limit)  ratio");
for (const kind of ["text", "near-miss"] as const) {
  const chunk = kind === "text" ? textChunk() : Buffer.alloc(MiB, "A");
  const bytes = new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  for (const count of [1, 10, 100]) {
    const secrets = secretsFor(kind, count);
    const b0 = performance.now();
    const matcher = new SecretMatcher(secrets.map((s) => new Uint8Array(s.buffer, s.byteOffset, s.byteLength)));
    const buildMs = performance.now() - b0;
    const maskMs = time(() => maskChunk(matcher, bytes));
    const limitMs = time(() => {
      for (const secret of secrets) chunk.indexOf(secret);
    });
    const mask = mibPerS(MiB, maskMs);
    const limit = mibPerS(MiB, limitMs);
    console.log(
      `${kind.padEnd(10)} ${String(count).padStart(7)}  ${buildMs.toFixed(1).padStart(8)}  ${maskMs.toFixed(1).padStart(7)}  ${mask.toFixed(1).padStart(10)}  ${limit.toFixed(1).padStart(21)}  ${(mask / limit).toFixed(3).padStart(5)}`,
    );
  }
}

// The scan this replaced: every secret compared at every position (kept here only to show the difference).
function oldMask(data: Uint8Array, secrets: Uint8Array[]): number {
  let hits = 0;
  for (let i = 0; i < data.length; i++) {
    for (const s of secrets) {
      if (data[i] !== s[0] || i + s.length > data.length) continue;
      let j = 0;
      while (j < s.length && data[i + j] === s[j]) j++;
      if (j === s.length) hits++;
    }
  }
  return hits;
}
const small = new Uint8Array(64 * 1024).fill(0x41);
const oldSecret = [new Uint8Array(Buffer.concat([Buffer.alloc(SECRET_BYTES - 1, "A"), Buffer.from("B")]))];
const o0 = performance.now();
oldMask(small, oldSecret);
const oldMs = performance.now() - o0;
console.log(`old per-position scan, near-miss, 1 secret: 64 KiB in ${oldMs.toFixed(0)} ms = ${mibPerS(64 * 1024, oldMs).toFixed(2)} MiB/s`);
