import { desc, sql, type SQL } from "drizzle-orm";
import { auditEvents } from "../../db/schema/index.ts";
import type { AppDeps } from "../../deps.ts";

export interface AuditInput {
  action: string;
  actor?: { id: string; email: string } | null;
  targetType?: string;
  targetId?: string;
  details?: Record<string, unknown>;
}

/** The insert for one audit event; callers batch it with the write it records, so neither lands alone. */
export function auditStatement(deps: Pick<AppDeps, "db" | "clock">, input: AuditInput) {
  return deps.db.insert(auditEvents).values({
    id: crypto.randomUUID(),
    action: input.action,
    actorUserId: input.actor?.id ?? null,
    actorEmail: input.actor?.email ?? null,
    targetType: input.targetType ?? null,
    targetId: input.targetId ?? null,
    details: input.details ?? null,
    createdAt: deps.clock.now(),
  });
}

/**
 * The same insert, landing only when `condition` holds when the statement runs: in a batch after the write it
 * records, so a write that matched nothing (a lost race, a duplicate) leaves no event behind.
 */
export function auditStatementWhen(deps: Pick<AppDeps, "db" | "clock">, input: AuditInput, condition: SQL) {
  const details = input.details ? JSON.stringify(input.details) : null;
  // Columns in table order; seq is null so SQLite assigns the next autoincrement value.
  return deps.db.insert(auditEvents).select(
    sql`select null, ${crypto.randomUUID()}, ${input.action}, ${input.actor?.id ?? null}, ${input.actor?.email ?? null},
        ${input.targetType ?? null}, ${input.targetId ?? null}, ${details}, ${deps.clock.now()} where ${condition}`,
  );
}

export async function recordAudit(deps: Pick<AppDeps, "db" | "clock">, input: AuditInput): Promise<void> {
  await auditStatement(deps, input);
}

export async function listAuditEvents(deps: Pick<AppDeps, "db">, limit: number) {
  const rows = await deps.db.select().from(auditEvents).orderBy(desc(auditEvents.seq)).limit(limit);
  return rows.map((r) => ({
    id: r.id,
    action: r.action,
    actor_user_id: r.actorUserId,
    actor_email: r.actorEmail,
    target_type: r.targetType,
    target_id: r.targetId,
    // A JSON column: an object whenever written (auditStatement), read back untyped.
    details: (r.details ?? {}) as Record<string, unknown>,
    created_at: r.createdAt,
  }));
}
