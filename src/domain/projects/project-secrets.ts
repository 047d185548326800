// Secret variables and credential protection of a project (docs/api.md §5).
import { and, asc, eq } from "drizzle-orm";
import { z } from "zod";
import { projects, projectSecrets } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { sql } from "drizzle-orm";
import { auditStatement, auditStatementWhen } from "../common/audit.ts";
import { compileGlob } from "../common/glob.ts";
import { getProject, type ProjectRow } from "./projects.ts";
import { openSecrets } from "./secret-values.ts";

export { openSecrets };
import type { UserRow } from "../auth/users.ts";

type DbDeps = Pick<AppDeps, "db" | "clock">;

export const SECRET_NAME = /^[A-Z_][A-Z0-9_]{0,63}$/;
const MAX_SECRET_BYTES = 64 * 1024;
/** Per project (docs/decisions.md "Secret variables: caps and masking set-up"): every log chunk is masked against them all. */
export const MAX_SECRETS_PER_PROJECT = 100;
export const MAX_SECRET_TOTAL_BYTES = 1024 * 1024;

/**
 * A sealed value's plaintext size in SQL, without opening it: "v1." then base64url (no padding) of a 12-byte IV,
 * the ciphertext (as long as the plaintext) and a 16-byte tag (src/domain/common/crypto.ts).
 */
const plaintextBytes = sql`((length(${projectSecrets.valueSealed}) - 3) * 3 / 4 - 28)`;
/** What protection means when a project never set it: every branch gets its credentials. */
export const DEFAULT_PROTECTED_BRANCHES = ["**"];

export const secretNameSchema = z.string().regex(SECRET_NAME, "a name matches [A-Z_][A-Z0-9_]{0,63}");

export const putSecretSchema = z.strictObject({
  value: z
    .string()
    .refine((v) => new TextEncoder().encode(v).length <= MAX_SECRET_BYTES, "a value is at most 64 KiB")
    // A NUL cannot travel in an environment variable; refuse it here rather than lose it at the runner.
    .refine((v) => !v.includes("\u0000"), "a value cannot contain NUL characters"),
});

/** A branch glob: what git allows in a ref name, plus the glob characters; compiled once to refuse bad ones. */
const branchGlob = z
  .string()
  .min(1)
  .max(256)
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
  .refine((g) => !/[\x00-\x20\x7f~^:\\]/.test(g), "not a branch glob")
  .refine((g) => {
    try {
      compileGlob(g);
      return true;
    } catch {
      return false;
    }
  }, "the glob expands to too many alternatives");

/** Either list may be left out: it keeps its value (a body of only `branches` leaves the tag rules as they were). */
export const protectionSchema = z
  .strictObject({ branches: z.array(branchGlob).max(100).optional(), tags: z.array(branchGlob).max(100).optional() })
  .refine((p) => p.branches !== undefined || p.tags !== undefined, "give branches, tags or both");

export function protectedBranches(project: ProjectRow): string[] {
  return project.protectedBranches ?? DEFAULT_PROTECTED_BRANCHES;
}

export function protectedTags(project: ProjectRow): string[] {
  return project.protectedTags ?? DEFAULT_PROTECTED_BRANCHES;
}

export function toProtectionJson(project: ProjectRow) {
  return { branches: protectedBranches(project), tags: protectedTags(project) };
}

/** The ref a build is of: a tag (a `tag` event, or a `refs/tags/` trigger ref) or a branch, and its short name. */
export function buildRef(build: { branch: string; triggerEvent: string | null; triggerRef: string | null }): {
  kind: "tag" | "branch";
  name: string;
} {
  if (build.triggerRef?.startsWith("refs/tags/")) return { kind: "tag", name: build.triggerRef.slice("refs/tags/".length) };
  if (build.triggerEvent === "tag") return { kind: "tag", name: build.branch };
  return { kind: "branch", name: build.branch };
}

/**
 * True when builds of this ref may receive the project's signing material and secret variables. A tag matches
 * only the tag rules and a branch only the branch rules: a tag named `main` is not branch `main`.
 */
export function refIsProtected(project: ProjectRow, ref: { kind: "tag" | "branch"; name: string }): boolean {
  const globs = ref.kind === "tag" ? protectedTags(project) : protectedBranches(project);
  return globs.some((g) => compileGlob(g).test(ref.name));
}

export async function setProtection(deps: DbDeps, actor: UserRow, projectId: string, input: z.infer<typeof protectionSchema>): Promise<ProjectRow> {
  await getProject(deps, projectId);
  const now = deps.clock.now();
  const fields: Partial<ProjectRow> = { updatedAt: now };
  if (input.branches !== undefined) fields.protectedBranches = [...new Set(input.branches)];
  if (input.tags !== undefined) fields.protectedTags = [...new Set(input.tags)];
  await deps.db.batch([
    deps.db.update(projects).set(fields).where(eq(projects.id, projectId)),
    auditStatement(deps, {
      action: "project.protection.set",
      actor,
      targetType: "project",
      targetId: projectId,
      details: { branches: fields.protectedBranches, tags: fields.protectedTags },
    }),
  ]);
  return getProject(deps, projectId);
}

export async function putSecret(
  deps: DbDeps & Pick<AppDeps, "secrets">,
  actor: UserRow,
  projectId: string,
  name: string,
  value: string,
): Promise<{ name: string; updated_at: number }> {
  await getProject(deps, projectId);
  const sealed = await deps.secrets.seal(value);
  const now = deps.clock.now();
  const bytes = new TextEncoder().encode(value).length;
  // The caps are checked by the insert itself, so concurrent PUTs cannot together pass them. The value being
  // replaced (same name) does not count.
  const others = and(eq(projectSecrets.projectId, projectId), sql`${projectSecrets.name} <> ${name}`);
  const [written] = await deps.db.batch([
    deps.db
      .insert(projectSecrets)
      .select(
        sql`select ${projectId}, ${name}, ${sealed}, ${now}, ${now}
            where (select count(*) from ${projectSecrets} where ${others}) < ${MAX_SECRETS_PER_PROJECT}
              and (select coalesce(sum(${plaintextBytes}), 0) from ${projectSecrets} where ${others}) + ${bytes} <= ${MAX_SECRET_TOTAL_BYTES}`,
      )
      .onConflictDoUpdate({ target: [projectSecrets.projectId, projectSecrets.name], set: { valueSealed: sealed, updatedAt: now } })
      .returning({ name: projectSecrets.name }),
    // The name is not secret; the value never goes anywhere but the sealed column.
    auditStatementWhen(
      deps,
      { action: "project.secret.set", actor, targetType: "project", targetId: projectId, details: { name } },
      sql`changes() = 1`,
    ),
  ]);
  if (written.length === 0) {
    throw new ApiError(
      "invalid_input",
      `a project holds at most ${MAX_SECRETS_PER_PROJECT} secret variables and ${MAX_SECRET_TOTAL_BYTES / 1024 / 1024} MiB of values in all`,
      [{ path: "value", message: `at most ${MAX_SECRETS_PER_PROJECT} secret variables and 1 MiB of values per project` }],
    );
  }
  return { name, updated_at: now };
}

export async function listSecrets(deps: Pick<AppDeps, "db">, projectId: string): Promise<Array<{ name: string; updated_at: number }>> {
  await getProject(deps, projectId);
  const rows = await deps.db
    .select({ name: projectSecrets.name, updatedAt: projectSecrets.updatedAt })
    .from(projectSecrets)
    .where(eq(projectSecrets.projectId, projectId))
    .orderBy(asc(projectSecrets.name));
  return rows.map((r) => ({ name: r.name, updated_at: r.updatedAt }));
}

export async function deleteSecret(deps: DbDeps, actor: UserRow, projectId: string, name: string): Promise<void> {
  await getProject(deps, projectId);
  const [deleted] = await deps.db.batch([
    deps.db
      .delete(projectSecrets)
      .where(and(eq(projectSecrets.projectId, projectId), eq(projectSecrets.name, name)))
      .returning({ name: projectSecrets.name }),
    // Only a delete that removed a row is recorded (the batch runs the two in order).
    auditStatementWhen(
      deps,
      { action: "project.secret.delete", actor, targetType: "project", targetId: projectId, details: { name } },
      sql`changes() = 1`,
    ),
  ]);
  if (deleted.length === 0) throw new ApiError("not_found", "no such secret variable");
}
