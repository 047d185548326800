import { customType, integer } from "drizzle-orm/sqlite-core";

/** created_at / updated_at in epoch seconds, always written from deps.clock (no SQL defaults: STYLE habit 6). */
export const lifecycleDates = {
  createdAt: integer("created_at").notNull(),
  updatedAt: integer("updated_at").notNull(),
};

/**
 * A BLOB read and written as a plain `Uint8Array` on every runtime. drizzle's `blob({ mode: "buffer" })` maps
 * rows through Node's `Buffer`, which does not exist in workerd: the Worker failed on the first log chunk it
 * read back (issue 18). Both libSQL drivers (the embedded file and the server client) hand blobs over as an
 * `ArrayBuffer` and take a `Uint8Array` as a blob argument, so no conversion library is needed.
 */
export const bytes = customType<{ data: Uint8Array; driverData: ArrayBuffer | Uint8Array }>({
  dataType: () => "blob",
  toDriver: (value) => value,
  fromDriver: (value) => (value instanceof Uint8Array ? new Uint8Array(value.buffer, value.byteOffset, value.byteLength) : new Uint8Array(value)),
});
