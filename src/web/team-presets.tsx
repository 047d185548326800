import type { Child } from "hono/jsx";
import { assertionSchema } from "../domain/auth/trusted-proxy.ts";
import type { AssertionInput } from "../domain/auth/proxy-assertion.ts";
import { Field } from "./components.tsx";
import { checkForm, fieldErrors } from "./form.ts";

// Presets for team access (docs/api.md §21, docs/team-access.md): each fills the setup wizard's and the Settings
// page's fields, which stay editable. They are links that re-render the form filled (`?preset=…`), so they work
// without JavaScript. `<team>` and the like are placeholders the owner replaces.

/** A trusted-proxy preset: the identity header, or a signed assertion (its header, key set, issuer, audience). */
export interface ProxyPreset {
  id: string;
  label: string;
  /** What the owner still has to fill in, in words. */
  note: string;
  values: Record<string, string>;
}

export const PROXY_PRESETS: readonly ProxyPreset[] = [
  {
    id: "tailscale",
    label: "Tailscale Serve",
    note: "Tailscale Serve on this machine sends the tailnet user's login. Leave proxy addresses empty (Serve connects from 127.0.0.1).",
    values: { user_email_header: "Tailscale-User-Login" },
  },
  {
    id: "cloudflare",
    label: "Cloudflare Access",
    note: "Replace <team> with your Zero Trust team name and paste the application's Audience (AUD) tag.",
    values: {
      assertion_header: "Cf-Access-Jwt-Assertion",
      jwks_url: "https://<team>.cloudflareaccess.com/cdn-cgi/access/certs",
      assertion_issuer: "https://<team>.cloudflareaccess.com",
      audience: "",
    },
  },
  {
    id: "google-iap",
    label: "Google IAP",
    note: "Paste the audience IAP shows for the backend: /projects/<number>/global/backendServices/<id>.",
    values: {
      assertion_header: "x-goog-iap-jwt-assertion",
      jwks_url: "https://www.gstatic.com/iap/verify/public_key-jwk",
      assertion_issuer: "https://cloud.google.com/iap",
      audience: "/projects/<number>/global/backendServices/<id>",
    },
  },
  {
    id: "pomerium",
    label: "Pomerium",
    note: "Replace the host names with your route's and your authenticate service's.",
    values: {
      assertion_header: "X-Pomerium-Jwt-Assertion",
      jwks_url: "https://<route-host>/.well-known/pomerium/jwks.json",
      assertion_issuer: "<route-host>",
      audience: "<route-host>",
    },
  },
  {
    id: "oauth2-proxy",
    label: "oauth2-proxy",
    note: "oauth2-proxy (behind Caddy or nginx, with --set-xauthrequest) sends the signed-in email. Set a shared secret in the proxy too.",
    values: { user_email_header: "X-Auth-Request-Email" },
  },
];

/** An OIDC preset: the issuer URL pattern of a well-known provider. */
export const OIDC_PRESETS: readonly ProxyPreset[] = [
  {
    id: "google",
    label: "Google Workspace",
    note: "Create an OAuth client (Web application) in Google Cloud with the redirect URI below.",
    values: { issuer_url: "https://accounts.google.com" },
  },
  {
    id: "entra",
    label: "Microsoft Entra ID",
    note: "Replace <tenant-id> with your directory (tenant) ID from the app registration's overview.",
    values: { issuer_url: "https://login.microsoftonline.com/<tenant-id>/v2.0" },
  },
  {
    id: "gitlab",
    label: "GitLab",
    note: "gitlab.com, or your own GitLab's URL; create an application with the openid, profile and email scopes.",
    values: { issuer_url: "https://gitlab.com" },
  },
];

export function presetById(list: readonly ProxyPreset[], id: string | undefined): ProxyPreset | null {
  return list.find((p) => p.id === id) ?? null;
}

/** The preset links: each reloads the page with the form filled (`href(id)`). */
export function PresetLinks(props: { list: readonly ProxyPreset[]; href: (id: string) => string; chosen: ProxyPreset | null; id: string }) {
  return (
    <div class="presets" id={props.id}>
      <p class="hint">Fill in for:</p>
      <ul class="inline-list">
        {props.list.map((p) => (
          <li>
            <a href={props.href(p.id)} data-preset={p.id} aria-current={props.chosen?.id === p.id ? "true" : undefined}>
              {p.label}
            </a>
          </li>
        ))}
      </ul>
      {props.chosen ? (
        <p class="hint" id={`${props.id}-note`}>
          {props.chosen.label}: {props.chosen.note} See docs/team-access.md.
        </p>
      ) : null}
    </div>
  );
}

/** The signed-assertion fields (all empty: no assertion, the plain identity header is believed). */
export function AssertionFields(props: { values: Record<string, string>; errors?: Record<string, string> }): Child {
  const v = props.values;
  const e = props.errors ?? {};
  return (
    <fieldset class="assertion-fields">
      <legend>Signed assertion (Cloudflare Access, Google IAP, Pomerium)</legend>
      <p class="hint">When set, Hangar believes only a JWT in this header signed by the key set below, and ignores the plain identity header.</p>
      <Field label="Assertion header" name="assertion_header" value={v.assertion_header} error={e.assertion_header} spellcheck={false} />
      <Field label="Key set URL (JWKS)" name="jwks_url" type="url" value={v.jwks_url} error={e.jwks_url} spellcheck={false} />
      <Field label="Issuer (iss)" name="assertion_issuer" value={v.assertion_issuer} error={e.assertion_issuer} spellcheck={false} />
      <Field label="Audience (aud)" name="audience" value={v.audience} error={e.audience} spellcheck={false} />
      <Field
        label="Email claim"
        name="email_claim"
        value={v.email_claim}
        error={e.email_claim}
        placeholder="email"
        spellcheck={false}
        hint="The claim that holds the user's email; email when empty."
      />
    </fieldset>
  );
}

const ASSERTION_FORM_FIELDS: Record<string, string> = {
  header: "assertion_header",
  jwks_url: "jwks_url",
  issuer: "assertion_issuer",
  audience: "audience",
  email_claim: "email_claim",
};

/** The assertion of a submitted form: null when its fields are empty, else the checked input or field errors. */
export function assertionFromForm(
  form: Record<string, string>,
): { ok: true; assertion: AssertionInput | null } | { ok: false; errors: Record<string, string> } {
  const text = (name: string) => (form[name] ?? "").trim();
  if (["assertion_header", "jwks_url", "assertion_issuer", "audience"].every((name) => text(name) === "")) return { ok: true, assertion: null };
  const parsed = checkForm(assertionSchema, {
    header: text("assertion_header"),
    jwks_url: text("jwks_url"),
    issuer: text("assertion_issuer"),
    audience: text("audience"),
    ...(text("email_claim") !== "" ? { email_claim: text("email_claim") } : {}),
  });
  if (parsed.ok) return { ok: true, assertion: parsed.data };
  // An empty key set, issuer or audience is missing; an empty header name is a header name that is not valid.
  const errors = fieldErrors(parsed.issues, {
    fieldNames: ASSERTION_FORM_FIELDS,
    message: (issue, field) =>
      text(field) === "" && field !== "assertion_header" ? "Required for a signed assertion." : `Not valid: ${issue.message}.`,
  });
  return { ok: false, errors };
}
