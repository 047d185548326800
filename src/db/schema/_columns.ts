import { integer } from "drizzle-orm/sqlite-core";

/** created_at / updated_at in epoch seconds, always written from deps.clock (no SQL defaults: STYLE habit 6). */
export const lifecycleDates = {
  createdAt: integer("created_at").notNull(),
  updatedAt: integer("updated_at").notNull(),
};
