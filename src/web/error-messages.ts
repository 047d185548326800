import type { ApiError, ErrorCode } from "../errors.ts";
import { sentence } from "./errors.tsx";

/** Where a page shows an error: the same code can mean another step to the reader (setup versus sign-in). */
export type MessageArea = "setup" | "login" | "settings" | "users";

/** One code's words: the same everywhere, or one sentence per area that shows it. */
type Words = string | { readonly [A in MessageArea]?: string };

/**
 * The words the pages show for an error code (docs/spec.md's error rows, in words), in src/errors.ts's order.
 * A code without words here, or without words for the area, shows the domain's own message as a sentence.
 * Never content fetched from a provider: these are fixed strings.
 */
const MESSAGES: { readonly [C in ErrorCode]?: Words } = {
  invalid_input: {
    login: "That email address is not valid.",
    users: "That email or role is not valid.",
  },
  not_found: {
    users: "That user does not exist (any more).",
  },
  insufficient_role: "Your role cannot change settings.",
  missing_auth: {
    setup: "Start with a setup token: your setup session is missing or not valid.",
    login: "The setup session is missing or has expired. Verify a new setup token.",
  },
  invalid_session: {
    setup: "Start with a setup token: your setup session is missing or not valid.",
    login: "The setup session is missing or has expired. Verify a new setup token.",
  },
  session_expired: {
    setup: "Your setup session expired after 30 minutes without activity. Verify a new setup token.",
    login: "The setup session is missing or has expired. Verify a new setup token.",
  },
  invalid_token: "That setup token is not right. Copy it again from npx hangar setup-token (the whole 64 characters).",
  already_configured: "Setup is already complete.",
  token_consumed: "That setup token was already used. Run npx hangar setup-token for a new one.",
  token_expired: "That setup token has expired. Run npx hangar setup-token for a new one.",
  too_many_attempts: "Too many wrong tokens were tried. Run npx hangar setup-token for a new one; it resets the count.",
  no_bootstrap_token: "No setup token exists yet. Run npx hangar setup-token on the machine Hangar runs on.",
  invalid_state: {
    setup: "That step does not fit where setup is now (another browser may have moved it on). The page shows the current step.",
    login: "This sign-in request is unknown or was already used. Start again.",
    settings: "Setup is not complete yet.",
  },
  mode_restricted: {
    setup: "That step belongs to another mode. Go back and choose the mode again.",
    login: "This sign-in method is not available in Hangar's current mode.",
  },
  oidc_discovery_failed:
    "Hangar could not read the provider's discovery document at <issuer>/.well-known/openid-configuration. Check the issuer URL.",
  encryption_error: "Hangar could not encrypt the client secret.",
  invalid_redirect_uri: "The redirect URI is not a valid http(s) URL.",
  too_many_pending: "Too many sign-ins are in progress. Wait a few minutes and try again.",
  oidc_discovery_error: {
    setup: "Hangar could not reach the identity provider. Try again, or check the issuer URL.",
    login: "Hangar could not reach the identity provider's configuration. Try again later, or tell the owner.",
  },
  auth_expired: {
    setup: "The sign-in took longer than 10 minutes. Start it again.",
    login: "This sign-in took longer than 10 minutes. Start again.",
  },
  decryption_error: {
    setup: "Hangar cannot read the stored client secret (was master.key replaced?). Save the provider again.",
    login: "Hangar cannot read its stored client secret (was master.key replaced?). Tell the owner.",
  },
  store_error: {
    setup: "Hangar could not save that. Try again.",
    login: "Hangar could not create your session. Try again.",
  },
  token_exchange_error: {
    setup: "The identity provider's answer could not be verified. Check the client ID and secret, then try again.",
    login: "The identity provider did not accept the sign-in code. Start again.",
  },
  missing_id_token: {
    setup: "The identity provider's answer could not be verified. Check the client ID and secret, then try again.",
    login: "The identity provider's answer could not be verified, so you were not signed in. Tell the owner.",
  },
  id_token_verification_error: {
    setup: "The identity provider's answer could not be verified. Check the client ID and secret, then try again.",
    login: "The identity provider's answer could not be verified, so you were not signed in. Tell the owner.",
  },
  missing_email: {
    setup: "The identity provider did not give a verified email address for this account.",
    login: "The identity provider did not give a verified email address for you.",
  },
  trusted_proxy_shared_secret_missing: {
    setup: "The proxy did not send the shared secret (X-Hangar-Trusted-Proxy-Secret). Open this page through the proxy.",
    login: "The proxy's shared secret is missing or wrong, so Hangar does not trust this request.",
  },
  trusted_proxy_shared_secret_invalid: {
    setup: "The proxy sent a wrong shared secret.",
    login: "The proxy's shared secret is missing or wrong, so Hangar does not trust this request.",
  },
  trusted_proxy_identity_missing: {
    setup: "The identity header is missing: open this page through your proxy, signed in.",
    login: "The proxy did not send your identity header.",
  },
  trusted_proxy_identity_invalid: {
    setup: "The identity header does not hold a valid email address.",
    login: "The proxy's identity header does not hold a valid email address.",
  },
  trusted_proxy_peer_not_allowed: {
    setup: "This request did not come from a trusted proxy address. Open the page through the proxy, or add its address.",
    login: "This request did not come through a trusted proxy.",
  },
  trusted_proxy_owner_email_mismatch: "You are signed in at the proxy as someone other than the expected owner email.",
  trusted_proxy_not_configured: "Save the proxy settings first.",
  setup_incomplete: "Setup is not complete yet.",
  oidc_not_configured: "Sign-in with an identity provider is not configured.",
  user_not_found: {
    login: "No active user has this email. Ask the owner or an admin to invite you.",
    users: "Nobody has this email.",
  },
  session_error: "Hangar could not create your session. Try again.",
  email_required: "Several people use this Hangar: enter your email.",
  local_login_loopback_required:
    "Signing in without a password works only on the machine Hangar runs on, from the account that runs it (or one named in HANGAR_LOCAL_LOGIN_USERS).",
  local_login_disabled: "Signing in on this machine is switched off. Run npx hangar login on the machine for a one-time link.",
  invalid_local_base_dir: "The local directory must be an absolute path the daemon can write to.",
  invalid_s3_bucket: "The bucket name does not follow the S3 naming rules (3–63 lower-case letters, digits, dots and hyphens).",
  invalid_s3_endpoint: "The endpoint must be an absolute https URL.",
  missing_s3_credentials: "Enter both the access key ID and the secret access key.",
  external_access_https_required: "The public URL must start with https://.",
  external_access_origin_not_allowed: "Allowed origins must include the public URL's origin (scheme, host and port).",
  artifact_delivery_https_required: "The artifact delivery URL must start with https://.",
  artifact_delivery_public_url_required: "The artifact delivery URL must be reachable from devices, not a loopback address.",
  artifact_delivery_url_invalid: "The artifact delivery URL is not a valid URL (no query or fragment).",
  external_access_owner_required: "Only the owner can change this.",
  external_access_loopback_required: "In local mode the network settings can only be changed on the machine Hangar runs on.",
  unsupported_key_storage_mode: "Only file key storage is supported.",
  external_access_preflight_failed: "The preflight has failing checks: fix them first.",
  external_access_public_url_missing: "Set a public URL first (an https address that is not this machine's loopback).",
  external_access_auth_missing: "Configure sign-in with OIDC (below) before switching External Access on.",
  already_exists: {
    users: "Someone with this email is already a user.",
  },
  invalid_email: "That email is not valid, or it is already the owner's.",
  user_not_active: "The new owner must be active: they have not signed in yet, or they are disabled.",
};

/** The sentence a page in `area` shows for `err`. */
export function errorMessage(err: ApiError, area: MessageArea): string {
  const words = MESSAGES[err.code];
  const found = typeof words === "string" ? words : words?.[area];
  return found ?? sentence(err.message);
}
