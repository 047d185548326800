import { customType, integer } from "drizzle-orm/sqlite-core";

/** created_at / updated_at in epoch seconds, always written from deps.clock (no SQL defaults: STYLE habit 6). */
export const lifecycleDates = {
  createdAt: integer("created_at").notNull(),
  updatedAt: integer("updated_at").notNull(),
};

/**
 * A BLOB read and written as a plain `Uint8Array` on every runtime. drizzle's `blob({ mode: "buffer" })` maps
 * rows through Node's `Buffer`, which does not exist in workerd: the Worker failed on the first log chunk it
 * read back (docs/decisions.md). On Node drizzle hands the column a `Buffer` (a Uint8Array); on Workers the client of
 * src/runtime/worker-db.ts hands it a Uint8Array; both drivers take a Uint8Array as a blob argument.
 */
export const bytes = customType<{ data: Uint8Array; driverData: ArrayBuffer | Uint8Array }>({
  dataType: () => "blob",
  toDriver: (value) => value,
  fromDriver: (value: unknown) => {
    if (value instanceof Uint8Array) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
    if (value instanceof ArrayBuffer) return new Uint8Array(value);
    // drizzle's libSQL session decodes an ArrayBuffer to text where there is no Buffer (workerd), losing bytes; the
    // Worker's client (src/runtime/worker-db.ts) hands blobs over as Uint8Array so this never happens quietly.
    throw new TypeError(`a blob column came back as ${typeof value}, not bytes`);
  },
});
