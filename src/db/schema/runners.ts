import { integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { lifecycleDates } from "./_columns.ts";
import { RUNNER_STATUSES, RUNNER_TRUSTS } from "./constants.ts";

export const runners = sqliteTable(
  "runners",
  {
    id: text("id").primaryKey(),
    name: text("name"),
    tokenHash: text("token_hash").notNull(),
    status: text("status", { enum: RUNNER_STATUSES }).notNull(),
    capabilities: text("capabilities", { mode: "json" }).notNull(),
    /** `protected` (may receive credentials) or `open` (takes outside code, never credentials); set by owners and admins. */
    trust: text("trust", { enum: RUNNER_TRUSTS }).notNull().default("protected"),
    lastHeartbeatAt: integer("last_heartbeat_at"),
    /** From the runner's last heartbeat that carried them (docs/api.md §16); null before any. */
    freeDiskBytes: integer("free_disk_bytes"),
    lowDisk: integer("low_disk", { mode: "boolean" }),
    registeredBy: text("registered_by").notNull(),
    ...lifecycleDates,
  },
  (t) => [uniqueIndex("runners_token_hash_unique").on(t.tokenHash)],
);
