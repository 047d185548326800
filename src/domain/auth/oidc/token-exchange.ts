// OIDC sign-in (docs/spec.md Auth, docs/api.md §3). The code exchange: the code and the PKCE verifier POSTed to the provider's token endpoint.

import type { AppDeps } from "../../../deps.ts";
import { ApiError } from "../../../errors.ts";
import { type Deps, MAX_DISCOVERY_BYTES, TOKEN_EXCHANGE_TIMEOUT_MS, type StoredOidcSettings, type DiscoveryDocument } from "./types.ts";
import { readCapped } from "./provider-fetch.ts";

export async function openSecret(deps: Deps, sealed: string, what: string): Promise<string> {
  try {
    return await deps.secrets.open(sealed);
  } catch {
    throw new ApiError("decryption_error", `the stored ${what} cannot be decrypted (was master.key replaced?)`);
  }
}

/**
 * The code and the PKCE verifier, POSTed through deps.fetch (RFC 6749 §4.1.3, client_secret_basic when a secret
 * is stored). A redirect is not followed (it would re-post both elsewhere), the timeout aborts the request
 * itself, and the answer is read with the discovery cap. Every failure is the provider's (502).
 */
export async function exchangeCode(
  deps: Pick<AppDeps, "fetch">,
  settings: StoredOidcSettings,
  secret: string | null,
  doc: DiscoveryDocument,
  redirectUri: string,
  code: string,
  verifier: string,
): Promise<Record<string, unknown>> {
  const form = new URLSearchParams({
    grant_type: "authorization_code",
    code,
    redirect_uri: redirectUri,
    client_id: settings.client_id,
    code_verifier: verifier,
  });
  const headers: Record<string, string> = { "content-type": "application/x-www-form-urlencoded", accept: "application/json" };
  // RFC 6749 §2.3.1: both parts form-encoded before base64 (the result is ASCII, so btoa is safe).
  if (secret !== null) headers.authorization = `Basic ${btoa(`${encodeURIComponent(settings.client_id)}:${encodeURIComponent(secret)}`)}`;
  const refuse = (detail: string) => new ApiError("token_exchange_error", `the provider refused the authorization code${detail}`);
  let status: number;
  let data: unknown;
  try {
    const res = await deps.fetch(doc.token_endpoint, {
      method: "POST",
      headers,
      body: form.toString(),
      // "manual", not "error" (which Workers refuses): a 3xx is then just another status that is not 200.
      redirect: "manual",
      signal: AbortSignal.timeout(TOKEN_EXCHANGE_TIMEOUT_MS),
    });
    status = res.status;
    // 400 and 401 carry the OAuth error code (RFC 6749 §5.2); anything else but 200 is not read.
    if (status !== 200 && status !== 400 && status !== 401) {
      await res.body?.cancel();
      throw refuse(` (HTTP ${status})`);
    }
    data = JSON.parse(await readCapped(res, MAX_DISCOVERY_BYTES));
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw refuse(err instanceof Error && err.name === "TimeoutError" ? ` (no answer within ${TOKEN_EXCHANGE_TIMEOUT_MS / 1000} s)` : "");
  }
  if (typeof data !== "object" || data === null || Array.isArray(data)) throw refuse("");
  const answer = data as Record<string, unknown>;
  if (status !== 200) {
    // Only a well-formed error code is echoed (RFC 6749 §5.2 codes are short ASCII words).
    const oauthError = typeof answer.error === "string" && /^[\w.-]{1,64}$/.test(answer.error) ? `: ${answer.error}` : "";
    throw refuse(oauthError);
  }
  return answer;
}
