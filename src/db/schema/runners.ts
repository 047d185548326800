import { integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { lifecycleDates } from "./_columns.ts";
import { RUNNER_STATUSES } from "./constants.ts";

export const runners = sqliteTable(
  "runners",
  {
    id: text("id").primaryKey(),
    name: text("name"),
    tokenHash: text("token_hash").notNull(),
    status: text("status", { enum: RUNNER_STATUSES }).notNull(),
    capabilities: text("capabilities", { mode: "json" }).notNull(),
    lastHeartbeatAt: integer("last_heartbeat_at"),
    registeredBy: text("registered_by").notNull(),
    ...lifecycleDates,
  },
  (t) => [uniqueIndex("runners_token_hash_unique").on(t.tokenHash)],
);
