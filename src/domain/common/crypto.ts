// Web Crypto and pure JS only, so the core runs unchanged on Node and on Workers.
import { sha256 } from "@noble/hashes/sha2.js";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function bytesToBase64Url(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export function base64UrlToBytes(text: string): Uint8Array {
  const padded = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
  const binary = atob(padded);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

export function bytesToHex(bytes: Uint8Array): string {
  let hex = "";
  for (const b of bytes) hex += b.toString(16).padStart(2, "0");
  return hex;
}

export function randomBytes(length: number): Uint8Array {
  const out = new Uint8Array(length);
  crypto.getRandomValues(out);
  return out;
}

/** 32 random bytes, base64url: session, runner, download, upload and install tokens (docs/api.md §3). */
export function randomToken(): string {
  return bytesToBase64Url(randomBytes(32));
}

/**
 * Bearer-token prefixes (docs/api.md §3): a leaked token says what it is, and no token starts with `-` (which
 * command-line parsers take for an option). URL-path tokens (download, upload, install, login links) have none.
 */
export const TOKEN_PREFIXES = { userSession: "hgu_", setupSession: "hgs_", runner: "hgr_", webhookSecret: "hgw_", job: "hgj_" } as const;
export type TokenPrefix = (typeof TOKEN_PREFIXES)[keyof typeof TOKEN_PREFIXES];

/** A bearer token: its prefix, then 32 random bytes base64url. It is hashed whole, prefix included. */
export function prefixedToken(prefix: TokenPrefix): string {
  return `${prefix}${randomToken()}`;
}

/** The bootstrap token: 64 hex characters (docs/spec.md limits). */
export function randomHexToken(): string {
  return bytesToHex(randomBytes(32));
}

/**
 * SHA-256 as hex. Synchronous pure-JS hashing (@noble/hashes) inside: every authenticated request hashes its
 * token, and Web Crypto's async digest costs ~30x more for inputs this small. Same result on Node and Workers.
 */
export async function sha256Hex(text: string | Uint8Array): Promise<string> {
  return nativeCreateHash ? nativeCreateHash("sha256").update(text).digest("hex") : sha256HexJs(text);
}

/**
 * Node's own synchronous SHA-256 where the runtime hands it out without an import (Node ≥ 20.16:
 * `process.getBuiltinModule`), about 3 µs less than the JS hash per request; the core imports no Node module, so
 * Workers (and any runtime without it) keep the JS hash. Both give the same digest (tested).
 */
type CreateHash = (algorithm: "sha256") => { update(data: string | Uint8Array): { digest(encoding: "hex"): string } };
const nativeCreateHash: CreateHash | undefined = (() => {
  const host = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process;
  const builtin =
    typeof host?.getBuiltinModule === "function" ? (host.getBuiltinModule("node:crypto") as { createHash?: CreateHash } | undefined) : undefined;
  return typeof builtin?.createHash === "function" ? builtin.createHash : undefined;
})();

/** The JS hash alone (tests compare it with the native one). */
export function sha256HexJs(text: string | Uint8Array): string {
  return bytesToHex(sha256(typeof text === "string" ? encoder.encode(text) : text));
}

/** Compares two strings without an early exit, so timing does not reveal the matching prefix. */
export function constantTimeEqual(a: string, b: string): boolean {
  const left = encoder.encode(a);
  const right = encoder.encode(b);
  let diff = left.length ^ right.length;
  const length = Math.max(left.length, right.length);
  for (let i = 0; i < length; i++) diff |= (left[i] ?? 0) ^ (right[i] ?? 0);
  return diff === 0;
}

export class DecryptionError extends Error {}

/**
 * AES-256-GCM box for secrets at rest (client secrets, source tokens, signing material).
 * Output: "v1." + base64url(12-byte IV || ciphertext+tag).
 */
export interface SecretBox {
  seal(plaintext: string): Promise<string>;
  open(sealed: string): Promise<string>;
}

export async function createSecretBox(keyBytes: Uint8Array): Promise<SecretBox> {
  if (keyBytes.length !== 32) throw new Error("the master key must be 32 bytes");
  const key = await crypto.subtle.importKey("raw", keyBytes, { name: "AES-GCM" }, false, ["encrypt", "decrypt"]);
  return {
    async seal(plaintext) {
      const iv = randomBytes(12);
      const sealed = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv }, key, encoder.encode(plaintext)));
      const out = new Uint8Array(iv.length + sealed.length);
      out.set(iv);
      out.set(sealed, iv.length);
      return `v1.${bytesToBase64Url(out)}`;
    },
    async open(sealed) {
      if (!sealed.startsWith("v1.")) throw new DecryptionError("unknown secret format");
      try {
        const raw = base64UrlToBytes(sealed.slice(3));
        const plain = await crypto.subtle.decrypt({ name: "AES-GCM", iv: raw.slice(0, 12) }, key, raw.slice(12));
        return decoder.decode(plain);
      } catch {
        throw new DecryptionError("secret cannot be decrypted with this key");
      }
    },
  };
}
