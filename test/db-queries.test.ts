import { describe, expect, it } from "vitest";
import { outboxHasWorkAt } from "../src/db/queries/outbox.ts";
import { queueVersion } from "../src/db/queries/queue-version.ts";
import { lookupSessionByTokenHash } from "../src/db/queries/sessions.ts";
import { sha256Hex } from "../src/domain/common/crypto.ts";
import { makeTestApp } from "./helpers/app.ts";
import { completeLocalSetup } from "./helpers/factories.ts";

// Every fixed SQL statement of src/db/queries/ run against a database migrated from drizzle/: a schema change
// that breaks one (a renamed column, a dropped table) fails here, not on the first request that needs it.

describe("src/db/queries against a migrated database", () => {
  it("looks a session up by its token hash, with every user column decoded as drizzle would", async () => {
    const t = await makeTestApp();
    const { ownerToken, owner } = await completeLocalSetup(t);
    const found = await lookupSessionByTokenHash(t.deps.db, await sha256Hex(ownerToken));
    expect(found?.user).toEqual(owner);
    expect(found?.expiresAt).toBeGreaterThan(t.clock.now());
    expect(await lookupSessionByTokenHash(t.deps.db, await sha256Hex("not-a-token"))).toBeUndefined();
  });

  it("reads the queue version and the outbox's idle check", async () => {
    const t = await makeTestApp();
    expect(await queueVersion(t.deps.db)).toBeGreaterThanOrEqual(0);
    expect(await outboxHasWorkAt(t.deps.db, Date.now())).toBe(false);
  });
});
