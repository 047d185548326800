import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { OIDC_PURPOSES } from "./constants.ts";

/**
 * Pending authorization requests (docs/api.md §3): in the database, not in memory, so a restart or a
 * second daemon can finish them. Keyed by the SHA-256 of the state value handed to the browser.
 */
export const oidcPendingRequests = sqliteTable(
  "oidc_pending_requests",
  {
    stateHash: text("state_hash").primaryKey(),
    purpose: text("purpose", { enum: OIDC_PURPOSES }).notNull(),
    /** The PKCE verifier, sealed with the key file's box; the nonce is not a secret (it ends up in the ID token). */
    codeVerifierSealed: text("code_verifier_sealed").notNull(),
    nonce: text("nonce").notNull(),
    redirectUri: text("redirect_uri").notNull(),
    createdAt: integer("created_at").notNull(),
    expiresAt: integer("expires_at").notNull(),
    /** Who started it (peer or forwarded address): at most 20 pending per client (docs/api.md §3). */
    client: text("client"),
  },
  (t) => [index("oidc_pending_expires_at").on(t.expiresAt), index("oidc_pending_client").on(t.client, t.expiresAt)],
);
