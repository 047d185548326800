import { Hono, type Context } from "hono";
import type { RemoteAuthMode, RuntimeMode } from "../../db/schema/constants.ts";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { loadInstance, type InstanceRow } from "../../domain/setup/instance.ts";
import { configureSetupOidc, readOidcSettings, standardCallbackUri, startSetupOwnerOidc } from "../../domain/auth/oidc.ts";
import { touchSetupSession } from "../../domain/auth/sessions.ts";
import { completeSetup, createLocalOwner, setSetupPreferences, verifyBootstrapToken } from "../../domain/setup/setup.ts";
import {
  cidrListSchema,
  claimTrustedProxyOwner,
  configureTrustedProxy,
  gatewayTicketSchema,
  readTrustedProxySettings,
  sharedSecretSchema,
  userEmailHeaderSchema,
} from "../../domain/auth/trusted-proxy.ts";
import { findUserById, signIn } from "../../domain/auth/users.ts";
import { emailSchema } from "../../http/routes/setup.schemas.ts";
import { assertionFromForm, OIDC_PRESETS, PROXY_PRESETS, presetById } from "../team-presets.tsx";
import { errorMessage } from "../error-messages.ts";
import { setFlash } from "../flash.ts";
import { checkForm, firstMessage } from "../form.ts";
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
import { type Step, type Status, type FormState, TokenStep, ModeStep, OwnerStep, OidcStep, ProxyStep, CompleteStep } from "../views/setup.tsx";

// The setup wizard (docs/api.md §10): token → mode → owner → complete, as plain forms that work with JavaScript
// off. The setup session lives in an HttpOnly cookie; every step calls the same domain functions as /v1/setup.

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
