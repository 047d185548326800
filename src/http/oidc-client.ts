import type { Context } from "hono";
import type { AppDeps, AppEnv } from "../deps.ts";
import { resolveOidcClient, type OidcClient } from "../domain/auth/oidc-client.ts";

/** The OIDC client of a request (API and web routes alike): the socket's peer and, behind a trusted proxy, X-Forwarded-For. */
export function oidcClientOf(deps: AppDeps, c: Context<AppEnv>): Promise<OidcClient> {
  return resolveOidcClient(deps, {
    peerAddress: deps.getPeerAddress(c),
    forwardedFor: c.req.header("x-forwarded-for"),
    // Read only where there is no socket (Workers): a Node daemon's client could send it.
    cfConnectingIp: c.req.header("cf-connecting-ip"),
    isLoopback: c.get("isLoopback"),
  });
}
