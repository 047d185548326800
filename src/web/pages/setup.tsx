import { Hono, type Context } from "hono";
import type { RemoteAuthMode, RuntimeMode } from "../../db/schema/constants.ts";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { randomToken } from "../../domain/common/crypto.ts";
import { loadInstance, type InstanceRow } from "../../domain/setup/instance.ts";
import { configureSetupOidc, readOidcSettings, standardCallbackUri, startSetupOwnerOidc } from "../../domain/auth/oidc.ts";
import { touchSetupSession } from "../../domain/auth/sessions.ts";
import { completeSetup, createLocalOwner, setSetupPreferences, verifyBootstrapToken } from "../../domain/setup/setup.ts";
import {
  cidrListSchema,
  claimTrustedProxyOwner,
  configureTrustedProxy,
  DEFAULT_USER_EMAIL_HEADER,
  GATEWAY_USER_HEADER,
  gatewayTicketSchema,
  readTrustedProxySettings,
  sharedSecretSchema,
  userEmailHeaderSchema,
} from "../../domain/auth/trusted-proxy.ts";
import { findUserById, signIn } from "../../domain/auth/users.ts";
import { emailSchema } from "../../http/routes/setup.schemas.ts";
import { Button, CopyField, Field, PostForm, RadioGroup, Select, TextArea } from "../components.tsx";
import { AssertionFields, assertionFromForm, OIDC_PRESETS, PresetLinks, PROXY_PRESETS, presetById, type ProxyPreset } from "../team-presets.tsx";
import { errorMessage } from "../error-messages.ts";
import { setFlash } from "../flash.ts";
import { checkForm, firstMessage } from "../form.ts";
import { Layout, type PageCtx } from "../layout.tsx";
import {
  clearUiCookie,
  getUiCookie,
  OIDC_STATE_COOKIE_NAME,
  OIDC_STATE_TTL_S,
  pageContext,
  renderPage,
  setSessionCookie,
  setUiCookie,
  SETUP_COOKIE_NAME,
} from "../session.tsx";
import { HOME } from "./login.tsx";

// The setup wizard (docs/api.md §10): token → mode → owner → complete, as plain forms that work with JavaScript
// off. The setup session lives in an HttpOnly cookie; every step calls the same domain functions as /v1/setup.

type Step = "token" | "mode" | "owner" | "oidc" | "proxy" | "complete";
type Status = 200 | 400 | 401 | 403 | 409 | 410 | 429 | 500 | 502;

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
interface FormState {
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

function TokenStep(props: { ctx: PageCtx; form?: FormState }) {
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

function ModeStep(props: { ctx: PageCtx; inst: InstanceRow; form?: FormState }) {
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

function OwnerStep(props: { ctx: PageCtx; form?: FormState }) {
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

function OidcStep(props: {
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

function ProxyStep(props: {
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

function CompleteStep(props: { ctx: PageCtx; ownerEmail: string | null; form?: FormState }) {
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

function statusOf(err: ApiError): Status {
  return ([400, 401, 403, 409, 410, 429, 500, 502] as const).find((s) => s === err.status) ?? 400;
}

function formString(form: Record<string, unknown>, key: string): string {
  const v = form[key];
  return typeof v === "string" ? v : "";
}

/** The setup session behind the wizard's cookie (renewed), or the reason there is none. */
async function setupSession(deps: AppDeps, c: Context<AppEnv>): Promise<{ ok: true } | { ok: false; err: ApiError | null }> {
  const token = getUiCookie(c, SETUP_COOKIE_NAME);
  if (token === undefined) return { ok: false, err: null };
  try {
    const session = await touchSetupSession(deps, token);
    // The cookie slides with the session.
    setUiCookie(c, SETUP_COOKIE_NAME, token, session.expiresAt - deps.clock.now());
    return { ok: true };
  } catch (err) {
    if (err instanceof ApiError) {
      clearUiCookie(c, SETUP_COOKIE_NAME);
      return { ok: false, err };
    }
    throw err;
  }
}

/** The step the wizard is on: the state decides, the query may go back to an earlier step. */
function currentStep(inst: InstanceRow, requested: string | undefined): Step {
  if (inst.state === "owner_created") return "complete";
  if (inst.state === "idp_configured") return requested === "mode" ? "mode" : inst.remoteAuthMode === "trusted_proxy" ? "proxy" : "oidc";
  const remoteStep: Step = inst.remoteAuthMode === "trusted_proxy" ? "proxy" : "oidc";
  const modeStep: Step = inst.runtimeMode === "local" ? "owner" : remoteStep;
  if (requested === "owner" || requested === "oidc" || requested === "proxy") return modeStep;
  return "mode";
}

async function renderStep(deps: AppDeps, c: Context<AppEnv>, step: Step, form?: FormState, status: Status = 200) {
  const ctx = pageContext(c, deps);
  const inst = await loadInstance(deps);
  switch (step) {
    case "token":
      return renderPage(c, <TokenStep ctx={ctx} form={form} />, status as 200);
    case "mode":
      return renderPage(c, <ModeStep ctx={ctx} inst={inst} form={form} />, status as 200);
    case "owner":
      return renderPage(c, <OwnerStep ctx={ctx} form={form} />, status as 200);
    case "oidc": {
      const stored = inst.state === "idp_configured" ? await readOidcSettings(deps) : null;
      const callback = await standardCallbackUri(deps, new URL(c.req.url).origin);
      const configured = stored ? { issuer: stored.issuer_url, clientId: stored.client_id } : null;
      // The owner's sign-in form posts here and is redirected to the provider: CSP form-action must allow it.
      if (stored) c.set("cspFormActions", [...new Set([new URL(stored.issuer_url).origin, new URL(stored.discovered_issuer).origin])]);
      const preset = presetById(OIDC_PRESETS, c.req.query("preset"));
      return renderPage(c, <OidcStep ctx={ctx} inst={inst} callback={callback} configured={configured} form={form} preset={preset} />, status as 200);
    }
    case "proxy": {
      const stored = inst.state === "idp_configured" ? await readTrustedProxySettings(deps) : null;
      const a = stored?.assertion;
      const configured = stored
        ? {
            header: stored.userEmailHeader,
            cidrs: stored.cidrs,
            ownerEmail: stored.setupOwnerEmail,
            hasSecret: stored.hasSharedSecret,
            assertion: (a
              ? {
                  assertion_header: a.header,
                  jwks_url: a.jwks_url,
                  assertion_issuer: a.issuer,
                  audience: a.audience,
                  email_claim: a.email_claim === "email" ? "" : a.email_claim,
                }
              : {}) as Record<string, string>,
          }
        : null;
      const preset = presetById(PROXY_PRESETS, c.req.query("preset"));
      return renderPage(c, <ProxyStep ctx={ctx} configured={configured} form={form} preset={preset} />, status as 200);
    }
    case "complete": {
      const owner = inst.ownerUserId ? await findUserById(deps, inst.ownerUserId) : undefined;
      return renderPage(c, <CompleteStep ctx={ctx} ownerEmail={owner?.email ?? null} form={form} />, status as 200);
    }
  }
}

export function setupPages(deps: AppDeps) {
  /**
   * Wraps a wizard POST: setup must be open and the cookie's session valid (else back to the token step with
   * the reason); an ApiError re-renders `step` with the spec's error in words.
   */
  const step = (onError: Step, handler: (c: Context<AppEnv>, form: Record<string, unknown>) => Promise<Response>) => async (c: Context<AppEnv>) => {
    const inst = await loadInstance(deps);
    if (inst.state === "ready") return c.redirect("/", 303);
    const session = await setupSession(deps, c);
    if (!session.ok)
      return renderStep(deps, c, "token", { message: session.err ? errorMessage(session.err, "setup") : null }, session.err ? 401 : 200);
    const form = (await c.req.parseBody()) as Record<string, unknown>;
    try {
      return await handler(c, form);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      const values: Record<string, string> = {};
      for (const [k, v] of Object.entries(form)) if (typeof v === "string" && !/secret|ticket|token/.test(k)) values[k] = v;
      return renderStep(deps, c, onError, { values, message: errorMessage(err, "setup") }, statusOf(err));
    }
  };

  return new Hono<AppEnv>()
    .get("/setup", async (c) => {
      const inst = await loadInstance(deps);
      if (inst.state === "ready") return c.redirect("/", 303);
      const session = await setupSession(deps, c);
      if (!session.ok) return renderStep(deps, c, "token", { message: session.err ? errorMessage(session.err, "setup") : null });
      return renderStep(deps, c, currentStep(inst, c.req.query("step")));
    })
    .post("/setup/token", async (c) => {
      const inst = await loadInstance(deps);
      if (inst.state === "ready") return c.redirect("/", 303);
      const token = formString(await c.req.parseBody(), "token").trim();
      if (!/^[0-9a-fA-F]{64}$/.test(token)) {
        return renderStep(
          deps,
          c,
          "token",
          {
            values: { token },
            errors: { token: "A setup token is 64 characters of 0–9 and a–f. Copy the whole line npx hangar setup-token printed." },
          },
          400,
        );
      }
      try {
        const verified = await verifyBootstrapToken(deps, token);
        setUiCookie(c, SETUP_COOKIE_NAME, verified.session_token, verified.expires_at - deps.clock.now());
        return c.redirect("/setup?step=mode", 303);
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        return renderStep(deps, c, "token", { values: { token }, message: errorMessage(err, "setup") }, statusOf(err));
      }
    })
    .post(
      "/setup/mode",
      step("mode", async (c, form) => {
        const mode = formString(form, "mode");
        if (mode !== "local" && mode !== "oidc" && mode !== "trusted_proxy") {
          return renderStep(deps, c, "mode", { errors: { mode: "Choose one of the three modes." } }, 400);
        }
        const runtime_mode: RuntimeMode = mode === "local" ? "local" : "remote";
        const remote_auth_mode: RemoteAuthMode = mode === "trusted_proxy" ? "trusted_proxy" : "oidc";
        await setSetupPreferences(deps, { runtime_mode, remote_auth_mode });
        return c.redirect(`/setup?step=${mode === "local" ? "owner" : mode === "oidc" ? "oidc" : "proxy"}`, 303);
      }),
    )
    .post(
      "/setup/owner",
      step("owner", async (c, form) => {
        const email = formString(form, "email").trim();
        if (!checkForm(emailSchema, email).ok) {
          return renderStep(deps, c, "owner", { values: { email }, errors: { email: "Enter a valid email address, like you@example.com." } }, 400);
        }
        await createLocalOwner(deps, email);
        return c.redirect("/setup?step=complete", 303);
      }),
    )
    .post(
      "/setup/oidc",
      step("oidc", async (c, form) => {
        const input = {
          issuer_url: formString(form, "issuer_url").trim(),
          client_id: formString(form, "client_id").trim(),
          client_secret: formString(form, "client_secret"),
        };
        const errors: Record<string, string> = {};
        if (input.issuer_url === "") errors.issuer_url = "Enter the provider's issuer URL.";
        if (input.client_id === "") errors.client_id = "Enter the client ID the provider gave you.";
        if (Object.keys(errors).length > 0)
          return renderStep(deps, c, "oidc", { values: { issuer_url: input.issuer_url, client_id: input.client_id }, errors }, 400);
        await configureSetupOidc(deps, {
          issuer_url: input.issuer_url,
          client_id: input.client_id,
          ...(input.client_secret ? { client_secret: input.client_secret } : {}),
        });
        setFlash(c, "ok", "The provider answered. Now sign in there as the owner.");
        return c.redirect("/setup?step=oidc", 303);
      }),
    )
    .post(
      "/setup/oidc/start",
      step("oidc", async (c) => {
        const started = await startSetupOwnerOidc(deps, { redirect_uri: await standardCallbackUri(deps, new URL(c.req.url).origin) });
        setUiCookie(c, OIDC_STATE_COOKIE_NAME, started.state, OIDC_STATE_TTL_S);
        return c.redirect(started.authorization_url, 303);
      }),
    )
    .post(
      "/setup/proxy",
      step("proxy", async (c, form) => {
        const preset = formString(form, "header_preset");
        const headerText = preset === "custom" ? formString(form, "custom_header") : preset;
        const cidrs = formString(form, "trusted_proxy_cidrs")
          .split(/[\s,]+/)
          .filter((s) => s !== "");
        const secret = formString(form, "shared_secret");
        const ticket = formString(form, "gateway_access_ticket");
        const ownerEmail = formString(form, "setup_owner_email").trim();
        const errors: Record<string, string> = {};
        const header = checkForm(userEmailHeaderSchema, headerText);
        if (!header.ok) errors[preset === "custom" ? "custom_header" : "header_preset"] = `The header name ${firstMessage(header.issues)}.`;
        const cidrCheck = checkForm(cidrListSchema, cidrs);
        if (!cidrCheck.ok) errors.trusted_proxy_cidrs = `Not a valid address range: ${firstMessage(cidrCheck.issues)}`;
        if (secret !== "" && !checkForm(sharedSecretSchema, secret).ok)
          errors.shared_secret = "The shared secret must be 16 to 512 visible characters without spaces.";
        if (ticket !== "" && !checkForm(gatewayTicketSchema, ticket).ok)
          errors.gateway_access_ticket = "The ticket must be visible characters without spaces.";
        if (ownerEmail !== "" && !checkForm(emailSchema, ownerEmail).ok) errors.setup_owner_email = "Enter a valid email address, or leave it empty.";
        const assertionFields = ["assertion_header", "jwks_url", "assertion_issuer", "audience", "email_claim"];
        const assertion = assertionFromForm(Object.fromEntries(assertionFields.map((name) => [name, formString(form, name)])));
        if (!assertion.ok) Object.assign(errors, assertion.errors);
        if (Object.keys(errors).length > 0 || !header.ok || !assertion.ok) {
          return renderStep(
            deps,
            c,
            "proxy",
            {
              values: {
                header_preset: preset,
                custom_header: formString(form, "custom_header"),
                trusted_proxy_cidrs: formString(form, "trusted_proxy_cidrs"),
                setup_owner_email: ownerEmail,
                shared_secret: secret,
                ...Object.fromEntries(assertionFields.map((name) => [name, formString(form, name)])),
              },
              errors,
            },
            400,
          );
        }
        await configureTrustedProxy(deps, {
          user_email_header: header.data,
          trusted_proxy_cidrs: cidrs,
          setup_owner_email: ownerEmail === "" ? null : ownerEmail,
          ...(secret !== "" ? { shared_secret: secret } : {}),
          ...(ticket !== "" ? { gateway_access_ticket: ticket } : {}),
          assertion: assertion.assertion,
        });
        setFlash(c, "ok", "Saved. Now claim ownership through your proxy.");
        return c.redirect("/setup?step=proxy", 303);
      }),
    )
    .post(
      "/setup/proxy/claim",
      step("proxy", async (c) => {
        await claimTrustedProxyOwner(deps, { peer: deps.getPeerAddress(c), headers: c.req.raw.headers });
        return c.redirect("/setup?step=complete", 303);
      }),
    )
    .post(
      "/setup/complete",
      step("complete", async (c) => {
        const inst = await loadInstance(deps);
        await completeSetup(deps);
        clearUiCookie(c, SETUP_COOKIE_NAME);
        // The browser that completed setup proved the machine (token) and the owner's identity: sign it in.
        const owner = inst.ownerUserId ? await findUserById(deps, inst.ownerUserId) : undefined;
        if (owner) {
          const method = inst.runtimeMode === "local" ? "local" : inst.remoteAuthMode === "trusted_proxy" ? "trusted_proxy" : "oidc";
          const result = await signIn(deps, { email: owner.email, method });
          setSessionCookie(c, { token: result.session_token, expiresAt: result.expires_at }, deps.clock.now());
        }
        setFlash(c, "ok", "Setup is complete. Welcome to Hangar.");
        return c.redirect(owner ? HOME : "/login", 303);
      }),
    );
}
