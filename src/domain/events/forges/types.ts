import type { ForgeProvider, TriggerEvent } from "../../../db/schema/constants.ts";
import { bytesToHex, constantTimeEqual } from "../../common/crypto.ts";

/** One ref change in a delivery that may start builds. */
export interface ForgeRequest {
  event: TriggerEvent;
  /** The full ref: `refs/heads/…`, `refs/tags/…`, `refs/pull/N/head`, `refs/merge-requests/N/head`. */
  ref: string;
  /** The branch built: the pushed branch, the PR's head branch, or the tag's name for a tag. */
  branch: string;
  /** A pull request's base branch: what a `pull_request` trigger's `branches` match. */
  baseBranch?: string;
  /** The commit to build (for an annotated tag the commit, never the tag object); null when the ref was deleted. */
  commitSha: string | null;
  /** The head commit's message when the payload carries it (the skip rules read it). */
  message: string | null;
  /** A pull request whose head repository differs from its base repository. */
  fork: boolean;
}

/** Where the forge's API is and what the repository is called there (commit statuses, docs/api.md §11). */
export interface RepoInfo {
  apiBase: string;
  /** `owner/name` (GitHub, Gitea, Forgejo, Bitbucket) or the numeric project id (GitLab). */
  repo: string;
}

export type ParsedDelivery =
  | { kind: "ping" }
  | { kind: "ignored"; reason: string; repo?: RepoInfo | null }
  | { kind: "requests"; actor: string | null; requests: ForgeRequest[]; repo: RepoInfo | null };

/** A forge's webhook dialect: headers, signature scheme and a pure parse of the JSON payload. */
export interface ForgeAdapter {
  provider: ForgeProvider;
  event(headers: Headers): string | null;
  deliveryId(headers: Headers): string | null;
  verify(secret: string, body: Uint8Array, headers: Headers): Promise<boolean>;
  parse(event: string, payload: unknown): ParsedDelivery;
}

export const ZERO_SHA = /^0+$/;

// Small readers for untrusted JSON: a payload is data of unknown shape, never trusted to match a type.
export type Json = unknown;
export function obj(value: Json): Record<string, Json> {
  return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, Json>) : {};
}
export function str(value: Json): string | null {
  return typeof value === "string" ? value : null;
}
export function num(value: Json): number | null {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}
export function arr(value: Json): Json[] {
  return Array.isArray(value) ? value : [];
}
export function at(value: Json, ...path: string[]): Json {
  let cur = value;
  for (const key of path) cur = obj(cur)[key];
  return cur;
}
/** A commit id as git writes it, or null: nothing else reaches a build row. */
export function sha(value: Json): string | null {
  const s = str(value);
  return s && /^[0-9a-f]{7,64}$/i.test(s) ? s.toLowerCase() : null;
}

export async function hmacSha256Hex(secret: string, body: Uint8Array): Promise<string> {
  const key = await crypto.subtle.importKey("raw", new TextEncoder().encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return bytesToHex(new Uint8Array(await crypto.subtle.sign("HMAC", key, body)));
}

/** Checks `<prefix><hex HMAC-SHA256>` in constant time; a missing header is a failure, not a pass. */
export async function verifyHexHmac(secret: string, body: Uint8Array, header: string | null, prefix = ""): Promise<boolean> {
  if (!header) return false;
  const expected = prefix + (await hmacSha256Hex(secret, body));
  return constantTimeEqual(header.trim().toLowerCase(), expected);
}

export function branchOf(ref: string): string | null {
  return ref.startsWith("refs/heads/") ? ref.slice("refs/heads/".length) : null;
}
export function tagOf(ref: string): string | null {
  return ref.startsWith("refs/tags/") ? ref.slice("refs/tags/".length) : null;
}

/** Origin of an http(s) URL, or null. */
export function originOf(url: string | null): string | null {
  if (!url || !URL.canParse(url)) return null;
  const u = new URL(url);
  return u.protocol === "https:" || u.protocol === "http:" ? u.origin : null;
}

/** A push of a branch or tag as a ForgeRequest, or null for any other ref. */
export function pushRequest(ref: string, commitSha: string | null, message: string | null): ForgeRequest | null {
  const branch = branchOf(ref);
  if (branch !== null) return { event: "push", ref, branch, commitSha, message, fork: false };
  const tag = tagOf(ref);
  if (tag !== null) return { event: "tag", ref, branch: tag, commitSha, message, fork: false };
  return null;
}
