// The setup wizard's steps as HTML: view components only; the routes that run each step are src/web/pages/setup.tsx.
import { randomToken } from "../../domain/common/crypto.ts";
import type { InstanceRow } from "../../domain/setup/instance.ts";
import { DEFAULT_USER_EMAIL_HEADER, GATEWAY_USER_HEADER } from "../../domain/auth/trusted-proxy.ts";
import { Button, CopyField, Field, PostForm, RadioGroup, Select, TextArea } from "../components.tsx";
import { AssertionFields, OIDC_PRESETS, PresetLinks, PROXY_PRESETS, type ProxyPreset } from "../team-presets.tsx";
import { Layout, type PageCtx } from "../layout.tsx";

export type Step = "token" | "mode" | "owner" | "oidc" | "proxy" | "complete";
export type Status = 200 | 400 | 401 | 403 | 409 | 410 | 429 | 500 | 502;

const STEP_LABELS = ["Setup token", "Mode", "Owner", "Complete"] as const;

function stepIndex(step: Step): number {
  return step === "token" ? 0 : step === "mode" ? 1 : step === "complete" ? 3 : 2;
}

function Steps(props: { step: Step }) {
  const at = stepIndex(props.step);
  return (
    <ol class="steps" aria-label="Setup steps">
      {STEP_LABELS.map((label, i) => (
        <li class={i < at ? "done" : undefined} aria-current={i === at ? "step" : undefined}>
          {`${i + 1}. ${label}`}
        </li>
      ))}
    </ol>
  );
}

/** Form values and errors to show again after a refused submission. */
export interface FormState {
  values?: Record<string, string>;
  errors?: Record<string, string>;
  message?: string | null;
}

function Wizard(props: { ctx: PageCtx; step: Step; title: string; form?: FormState; children: unknown }) {
  return (
    <Layout ctx={props.ctx} title={`Setup: ${props.title}`} narrow>
      <h1>Set up Hangar</h1>
      <Steps step={props.step} />
      {props.form?.message ? (
        <div class="flash flash-error" role="alert" id="setup-error">
          {props.form.message}
        </div>
      ) : null}
      <section class="card">
        <h2>{props.title}</h2>
        {props.children}
      </section>
    </Layout>
  );
}

export function TokenStep(props: { ctx: PageCtx; form?: FormState }) {
  return (
    <Wizard ctx={props.ctx} step="token" title="Prove you are on the machine" form={props.form}>
      <p>
        On the machine Hangar runs on, run <code>npx hangar setup-token</code> in the project folder and paste the token it prints. It works once and
        expires after an hour.
      </p>
      <PostForm action="/setup/token">
        <Field
          label="Setup token"
          name="token"
          value={props.form?.values?.token}
          error={props.form?.errors?.token}
          autocomplete="off"
          spellcheck={false}
          required
          hint="64 characters, 0–9 and a–f."
        />
        <Button>Continue</Button>
      </PostForm>
    </Wizard>
  );
}

function modeValue(inst: InstanceRow): string {
  return inst.runtimeMode === "local" ? "local" : inst.remoteAuthMode;
}

export function ModeStep(props: { ctx: PageCtx; inst: InstanceRow; form?: FormState }) {
  return (
    <Wizard ctx={props.ctx} step="mode" title="How will people sign in?" form={props.form}>
      <PostForm action="/setup/mode">
        <RadioGroup
          legend="Mode"
          name="mode"
          value={props.form?.values?.mode ?? modeValue(props.inst)}
          error={props.form?.errors?.mode}
          options={[
            {
              value: "local",
              label: "Local: only this machine",
              description: "Hangar listens on 127.0.0.1. Sign in on this machine, no password. You can switch External Access on later.",
            },
            {
              value: "oidc",
              label: "Remote with OIDC",
              description: "Your team signs in with your identity provider (Google, Okta, Keycloak, Authentik…). Needs HTTPS in front of Hangar.",
            },
            {
              value: "trusted_proxy",
              label: "Remote behind a trusted proxy",
              description: "A proxy that already signs people in (an access gateway, oauth2-proxy…) tells Hangar who they are in a header.",
            },
          ]}
        />
        <Button>Continue</Button>
      </PostForm>
    </Wizard>
  );
}

export function OwnerStep(props: { ctx: PageCtx; form?: FormState }) {
  return (
    <Wizard ctx={props.ctx} step="owner" title="Who owns this Hangar?" form={props.form}>
      <p>The owner manages users, runners and settings. Ownership can be transferred later.</p>
      <PostForm action="/setup/owner">
        <Field
          label="Owner's email"
          name="email"
          type="email"
          autocomplete="email"
          required
          value={props.form?.values?.email}
          error={props.form?.errors?.email}
        />
        <div class="actions">
          <Button>Create the owner</Button>
          <Button href="/setup?step=mode" variant="secondary">
            Back
          </Button>
        </div>
      </PostForm>
    </Wizard>
  );
}

export function OidcStep(props: {
  ctx: PageCtx;
  inst: InstanceRow;
  callback: string;
  configured: { issuer: string; clientId: string } | null;
  form?: FormState;
  preset?: ProxyPreset | null;
}) {
  const v = { ...props.preset?.values, ...props.form?.values };
  return (
    <Wizard ctx={props.ctx} step="oidc" title="Your identity provider" form={props.form}>
      <PresetLinks list={OIDC_PRESETS} href={(id) => `/setup?step=oidc&preset=${id}`} chosen={props.preset ?? null} id="oidc-presets" />
      <p>Register Hangar as an OIDC client (authorization code flow) at your provider with this redirect URI:</p>
      <CopyField id="redirect-uri" label="Redirect URI" value={props.callback} />
      <PostForm action="/setup/oidc">
        <Field
          label="Issuer URL"
          name="issuer_url"
          type="url"
          required
          value={v.issuer_url ?? props.configured?.issuer}
          error={props.form?.errors?.issuer_url}
          placeholder="https://accounts.example.com"
          hint="Hangar reads /.well-known/openid-configuration from it."
        />
        <Field
          label="Client ID"
          name="client_id"
          required
          value={v.client_id ?? props.configured?.clientId}
          error={props.form?.errors?.client_id}
          autocomplete="off"
        />
        <Field
          label="Client secret"
          name="client_secret"
          type="password"
          autocomplete="off"
          error={props.form?.errors?.client_secret}
          hint="Optional for public clients. Stored encrypted; never shown again."
        />
        <div class="actions">
          <Button variant={props.configured ? "secondary" : "primary"}>{props.configured ? "Save again" : "Save and check the provider"}</Button>
          <Button href="/setup?step=mode" variant="secondary">
            Back
          </Button>
        </div>
      </PostForm>
      {props.configured ? (
        <PostForm action="/setup/oidc/start" class="owner-signin">
          <h3>Become the owner</h3>
          <p>
            Sign in at <strong>{hostOf(props.configured.issuer)}</strong> with the account that should own Hangar.
          </p>
          <Button>Sign in with {hostOf(props.configured.issuer)}</Button>
        </PostForm>
      ) : null}
    </Wizard>
  );
}

const HEADER_PRESETS = [
  { value: DEFAULT_USER_EMAIL_HEADER, label: `Generic proxy (${DEFAULT_USER_EMAIL_HEADER})` },
  { value: GATEWAY_USER_HEADER, label: `Access gateway (${GATEWAY_USER_HEADER})` },
  { value: "custom", label: "Custom header name" },
] as const;

export function ProxyStep(props: {
  ctx: PageCtx;
  configured: { header: string; cidrs: string[]; ownerEmail: string | null; hasSecret: boolean; assertion: Record<string, string> } | null;
  form?: FormState;
  preset?: ProxyPreset | null;
}) {
  const presetValues = props.preset?.values ?? {};
  // A preset's identity header goes into the custom header field; its assertion fields replace the stored ones.
  const fromPreset: Record<string, string> = props.preset
    ? {
        header_preset: presetValues.user_email_header ? "custom" : DEFAULT_USER_EMAIL_HEADER,
        custom_header: presetValues.user_email_header ?? "",
        assertion_header: "",
        jwks_url: "",
        assertion_issuer: "",
        audience: "",
        ...presetValues,
      }
    : {};
  const v = { ...fromPreset, ...props.form?.values };
  const e = props.form?.errors ?? {};
  const storedHeader = props.configured?.header;
  const presetOf = (h: string | undefined) =>
    h === undefined ? DEFAULT_USER_EMAIL_HEADER : HEADER_PRESETS.some((p) => p.value === h) ? h : "custom";
  const preset = v.header_preset ?? presetOf(storedHeader);
  const custom = v.custom_header ?? (preset === "custom" ? storedHeader : "");
  return (
    <Wizard ctx={props.ctx} step="proxy" title="Your trusted proxy" form={props.form}>
      <p>Your proxy signs people in and sends Hangar their email in a header. Hangar believes that header only from the proxy's addresses.</p>
      <PresetLinks list={PROXY_PRESETS} href={(id) => `/setup?step=proxy&preset=${id}`} chosen={props.preset ?? null} id="proxy-presets" />
      <PostForm action="/setup/proxy">
        <Select
          label="Identity header"
          name="header_preset"
          id="f-header-preset"
          options={HEADER_PRESETS}
          value={preset}
          error={e.header_preset}
          customToggle="custom-header-field"
        />
        <div id="custom-header-field">
          <Field
            label="Custom header name"
            name="custom_header"
            value={custom}
            error={e.custom_header}
            hint="Used when “Custom header name” is chosen above."
            spellcheck={false}
          />
        </div>
        <TextArea
          label="Proxy addresses (CIDR)"
          name="trusted_proxy_cidrs"
          value={v.trusted_proxy_cidrs ?? props.configured?.cidrs.join("\n")}
          error={e.trusted_proxy_cidrs}
          hint="One per line, e.g. 10.0.0.5/32. Empty: only a proxy on this machine (127.0.0.1, ::1) is trusted."
        />
        {props.configured?.hasSecret ? (
          <Field
            label="Shared secret"
            name="shared_secret"
            type="password"
            autocomplete="off"
            error={e.shared_secret}
            hint={
              <>
                At least 16 characters. The proxy sends it as <code>X-Hangar-Trusted-Proxy-Secret</code>. A secret is stored; leave empty to keep it.
              </>
            }
          />
        ) : (
          // Made by default (docs/decisions.md "Trusted proxy without a secret"): with neither a secret nor proxy
          // addresses, any process on this machine could pose as the proxy.
          <Field
            label="Shared secret"
            name="shared_secret"
            value={v.shared_secret ?? randomToken()}
            autocomplete="off"
            spellcheck={false}
            error={e.shared_secret}
            hint={
              <>
                Made for you: configure your proxy to send it as <code>X-Hangar-Trusted-Proxy-Secret</code> before you save. Clearing it leaves the
                proxy unproven (not recommended: with no proxy addresses either, any program on this machine can sign in as anyone).
              </>
            }
          />
        )}
        <Field
          label="Expected owner email"
          name="setup_owner_email"
          type="email"
          value={v.setup_owner_email ?? props.configured?.ownerEmail}
          error={e.setup_owner_email}
          hint="Optional: only this person can claim ownership."
        />
        <Field
          label="Gateway access ticket"
          name="gateway_access_ticket"
          type="password"
          autocomplete="off"
          error={e.gateway_access_ticket}
          hint="Optional, access gateway only: lets iPhones fetch installs through the gateway."
        />
        <AssertionFields values={props.form?.values || props.preset ? v : (props.configured?.assertion ?? {})} errors={e} />
        <div class="actions">
          <Button variant={props.configured ? "secondary" : "primary"}>{props.configured ? "Save again" : "Save"}</Button>
          <Button href="/setup?step=mode" variant="secondary">
            Back
          </Button>
        </div>
      </PostForm>
      {props.configured ? (
        <PostForm action="/setup/proxy/claim" class="owner-signin">
          <h3>Become the owner</h3>
          <p>
            Open this page through your proxy, signed in as the owner, then claim ownership. Hangar reads your email from{" "}
            <code>{props.configured.header}</code>.
          </p>
          <Button>Claim ownership</Button>
        </PostForm>
      ) : null}
    </Wizard>
  );
}

export function CompleteStep(props: { ctx: PageCtx; ownerEmail: string | null; form?: FormState }) {
  return (
    <Wizard ctx={props.ctx} step="complete" title="Finish setup" form={props.form}>
      <p>
        The owner is <strong>{props.ownerEmail ?? "created"}</strong>. Completing setup closes the setup endpoints for good and signs you in.
      </p>
      <PostForm action="/setup/complete">
        <Button>Complete setup</Button>
      </PostForm>
    </Wizard>
  );
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return "your provider";
  }
}
