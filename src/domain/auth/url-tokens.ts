// Tokens carried in URL paths: upload (runner → local disk), download (15 minutes) and install (one hour).
// Only SHA-256 hashes are stored (docs/api.md §3); the plaintext exists only in the URL handed out once.
import { and, eq, gt, isNull, lt } from "drizzle-orm";
import { urlTokens } from "../../db/schema/index.ts";
import type { UrlTokenKind } from "../../db/schema/constants.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { randomToken, sha256Hex } from "../common/crypto.ts";

export type UrlTokenRow = typeof urlTokens.$inferSelect;

/** How long an expired token is kept, so its URL answers 410 rather than 404 for a while. */
const EXPIRED_TOKEN_RETENTION_S = 7 * 24 * 3600;

/** The insert statement for a new token, so it can go into one batch with the row it belongs to. */
export async function newUrlToken(
  deps: Pick<AppDeps, "db" | "clock">,
  input: { kind: UrlTokenKind; artifactId: string; ttlS: number; details?: unknown },
) {
  const token = randomToken();
  const now = deps.clock.now();
  const expiresAt = now + input.ttlS;
  const statement = deps.db.insert(urlTokens).values({
    tokenHash: await sha256Hex(token),
    kind: input.kind,
    artifactId: input.artifactId,
    expiresAt,
    details: input.details ?? null,
    createdAt: now,
  });
  return { token, expiresAt, statement };
}

/**
 * The live token of a kind: an unknown one is 404 not_found, an expired one 410 with the caller's code.
 * The lookup is by hash, so no comparison ever touches the plaintext.
 */
export async function resolveUrlToken(
  deps: Pick<AppDeps, "db" | "clock">,
  kind: UrlTokenKind,
  token: string,
  expiredCode: "link_expired" | "token_expired",
): Promise<UrlTokenRow> {
  const row = await deps.db
    .select()
    .from(urlTokens)
    .where(and(eq(urlTokens.tokenHash, await sha256Hex(token)), eq(urlTokens.kind, kind)))
    .get();
  if (!row) throw new ApiError("not_found", "no such link");
  if (row.expiresAt <= deps.clock.now()) throw new ApiError(expiredCode, "this link has expired");
  return row;
}

/**
 * Marks an upload token used, atomically: of two concurrent PUTs only one gets the row back.
 * A used or expired token answers 410 token_expired (docs/api.md §7).
 */
export async function claimUploadToken(deps: Pick<AppDeps, "db" | "clock">, token: string): Promise<UrlTokenRow> {
  const hash = await sha256Hex(token);
  const now = deps.clock.now();
  const claimed = await deps.db
    .update(urlTokens)
    .set({ usedAt: now })
    .where(and(eq(urlTokens.tokenHash, hash), eq(urlTokens.kind, "upload"), isNull(urlTokens.usedAt), gt(urlTokens.expiresAt, now)))
    .returning()
    .get();
  if (claimed) return claimed;
  const known = await deps.db
    .select({ hash: urlTokens.tokenHash })
    .from(urlTokens)
    .where(and(eq(urlTokens.tokenHash, hash), eq(urlTokens.kind, "upload")))
    .get();
  if (!known) throw new ApiError("not_found", "no such upload link");
  throw new ApiError("token_expired", "this upload link was used already or has expired");
}

/** Gives an upload token back after a refused body, so the runner can retry with the same URL. */
export async function releaseUploadToken(deps: Pick<AppDeps, "db">, tokenHash: string): Promise<void> {
  await deps.db.update(urlTokens).set({ usedAt: null }).where(eq(urlTokens.tokenHash, tokenHash));
}

/** Maintenance: forgets tokens expired for a week (their URLs then answer 404). */
export async function deleteExpiredUrlTokens(deps: Pick<AppDeps, "db" | "clock">): Promise<number> {
  const deleted = await deps.db
    .delete(urlTokens)
    .where(lt(urlTokens.expiresAt, deps.clock.now() - EXPIRED_TOKEN_RETENTION_S))
    .returning({ hash: urlTokens.tokenHash });
  return deleted.length;
}
