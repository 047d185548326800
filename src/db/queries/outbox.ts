import { clientOf, oneRow } from "../fixed-sql.ts";
import type { Db } from "../types.ts";

// The outbox pass's idle check, asked every second (src/domain/events/outbox.ts says why it is fixed SQL).

export const OUTBOX_HAS_WORK_SQL = `SELECT EXISTS (SELECT 1 FROM build_events WHERE expanded = 0)
  OR EXISTS (SELECT 1 FROM outbox WHERE status = 'pending' AND next_attempt_at_ms <= ?)`;

/** Whether an event waits to be expanded or a delivery is due at `nowMs`; true when the row cannot be read. */
export async function outboxHasWorkAt(db: Db, nowMs: number): Promise<boolean> {
  const row = (await clientOf(db).execute(oneRow(OUTBOX_HAS_WORK_SQL, [nowMs]))).rows[0];
  return Number(row?.[0] ?? 1) !== 0;
}
