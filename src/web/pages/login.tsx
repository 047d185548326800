import { Hono, type Context } from "hono";
import type { AppDeps, AppEnv } from "../../deps.ts";
import { ApiError } from "../../errors.ts";
import { constantTimeEqual } from "../../domain/common/crypto.ts";
import { loadInstance } from "../../domain/setup/instance.ts";
import { redeemLocalLoginCode } from "../../domain/auth/local-login-codes.ts";
import { localLogin, readLocalLoginSetting } from "../../domain/auth/local-login.ts";
import { completeOidcSignIn, readOidcSettings, startOidcSignIn, verifySetupOwnerOidc } from "../../domain/auth/oidc.ts";
import { revokeSessionStatement, touchSetupSession } from "../../domain/auth/sessions.ts";
import { trustedProxyLogin } from "../../domain/auth/trusted-proxy.ts";
import { oidcClientOf } from "../../http/oidc-client.ts";
import { isLocalUserRequest } from "../../http/middleware/loopback.ts";
import { Button, Field, PostForm } from "../components.tsx";
import { errorMessage } from "../error-messages.ts";
import { setFlash } from "../flash.ts";
import { ErrorPage, Layout, type PageCtx } from "../layout.tsx";
import {
  browserSession,
  clearSessionCookie,
  clearUiCookie,
  getUiCookie,
  OIDC_STATE_COOKIE_NAME,
  OIDC_STATE_TTL_S,
  pageContext,
  renderPage,
  safeNext,
  setSessionCookie,
  setUiCookie,
  SETUP_COOKIE_NAME,
} from "../session.tsx";

/** Where a signed-in browser starts. */
export const HOME = "/builds";

interface LoginChoices {
  local: boolean;
  /** Why local sign-in is not offered, when that helps the reader. */
  localHint: string | null;
  /** "Sign in with <provider>": the issuer's host name, when OIDC is configured and usable from here. */
  oidcProvider: string | null;
  trustedProxy: boolean;
}

/** Which sign-in ways this request may use: the same rules the API applies (docs/api.md §3). */
async function loginChoices(deps: AppDeps, isLoopback: boolean, isLocalUser: boolean): Promise<LoginChoices> {
  const inst = await loadInstance(deps);
  const localMode = inst.runtimeMode === "local";
  const cliOnly = (await readLocalLoginSetting(deps)).mode === "cli_only";
  // Loopback from another OS user (a build step, another account) does not get the button (docs/decisions.md).
  const local = localMode && isLocalUser && !cliOnly;
  const localHint = local
    ? null
    : localMode && cliOnly
      ? "Signing in on this machine is switched off: run npx hangar login on the machine for a one-time sign-in link."
      : localMode
        ? "Hangar runs in local mode: open it on the machine it runs on, from the account that runs it, or run npx hangar login there for a one-time sign-in link."
        : null;
  const oidc = await readOidcSettings(deps);
  // In local mode OIDC, too, answers loopback clients only.
  const oidcUsable = oidc !== null && (!localMode || isLoopback) && !(inst.runtimeMode === "remote" && inst.remoteAuthMode === "trusted_proxy");
  return {
    local,
    localHint,
    oidcProvider: oidcUsable ? providerName(oidc.discovered_issuer || oidc.issuer_url) : null,
    trustedProxy: inst.runtimeMode === "remote" && inst.remoteAuthMode === "trusted_proxy",
  };
}

/** A provider's display name: its issuer's host ("accounts.google.com"), never content fetched from it. */
function providerName(issuer: string): string {
  try {
    return new URL(issuer).host;
  } catch {
    return "your identity provider";
  }
}

function LoginPage(props: { ctx: PageCtx; choices: LoginChoices; next: string | null; email?: string; error?: string | null }) {
  const nextQuery = props.next ? `?next=${encodeURIComponent(props.next)}` : "";
  const { choices } = props;
  const none = !choices.local && !choices.oidcProvider && !choices.trustedProxy;
  return (
    <Layout ctx={props.ctx} title="Sign in" narrow>
      <section class="card">
        <h1>Sign in to Hangar</h1>
        {props.error ? (
          <div class="flash flash-error" role="alert">
            {props.error}
          </div>
        ) : null}
        <div class="login-choices">
          {choices.oidcProvider ? (
            <Button href={`/login/oidc${nextQuery}`} id="oidc-login">
              Sign in with {choices.oidcProvider}
            </Button>
          ) : null}
          {choices.trustedProxy ? (
            <PostForm action={`/login/proxy${nextQuery}`} id="proxy-login">
              <Button>Continue with your company sign-in</Button>
              <p class="hint">Your proxy tells Hangar who you are.</p>
            </PostForm>
          ) : null}
          {choices.local ? (
            <PostForm action={`/login/local${nextQuery}`} id="local-login">
              <Field
                label="Email"
                name="email"
                type="email"
                value={props.email}
                autocomplete="email"
                hint="Leave empty when you are the only user."
              />
              <Button variant={choices.oidcProvider ? "secondary" : "primary"}>Sign in on this machine</Button>
            </PostForm>
          ) : null}
          {choices.localHint ? <p class="muted">{choices.localHint}</p> : null}
          {none && !choices.localHint ? <p class="muted">No sign-in method is available to this browser. Ask the owner.</p> : null}
        </div>
        <p class="hint">
          From the machine Hangar runs on, <code>npx hangar login</code> prints a one-time sign-in link.
        </p>
      </section>
    </Layout>
  );
}

async function renderLogin(
  deps: AppDeps,
  c: Context<AppEnv>,
  error: string | null,
  status: 200 | 400 | 403 | 409 | 410 | 500 | 502 = 200,
  email?: string,
) {
  const choices = await loginChoices(deps, c.get("isLoopback"), await isLocalUserRequest(deps, c));
  return renderPage(
    c,
    <LoginPage ctx={pageContext(c, deps)} choices={choices} next={safeNext(c.req.query("next"))} email={email} error={error} />,
    status,
  );
}

function errorStatus(err: ApiError): 400 | 403 | 409 | 410 | 500 | 502 {
  return ([400, 403, 409, 410, 500, 502] as const).find((s) => s === err.status) ?? 400;
}

/** Signs the browser in with a LocalLoginResponse-shaped result and goes on. */
function signedIn(deps: AppDeps, c: Context<AppEnv>, result: { session_token: string; expires_at: number }, next: string | null) {
  setSessionCookie(c, { token: result.session_token, expiresAt: result.expires_at }, deps.clock.now());
  return c.redirect(next ?? HOME, 303);
}

/** `/` (where to go), `/login` with its choices, each way of signing in, the OIDC callback, and sign-out. */
export function loginPages(deps: AppDeps) {
  return (
    new Hono<AppEnv>()
      .get("/", async (c) => {
        const inst = await loadInstance(deps);
        if (inst.state !== "ready") return c.redirect("/setup", 303);
        return c.redirect((await browserSession(deps, c)) ? HOME : "/login", 303);
      })
      .get("/login", async (c) => {
        const inst = await loadInstance(deps);
        if (inst.state !== "ready") return c.redirect("/setup", 303);
        if (await browserSession(deps, c)) return c.redirect(safeNext(c.req.query("next")) ?? HOME, 303);
        return renderLogin(deps, c, null);
      })
      .post("/login/local", async (c) => {
        const form = await c.req.parseBody();
        const email = typeof form.email === "string" && form.email.trim() !== "" ? form.email.trim() : undefined;
        try {
          return signedIn(deps, c, await localLogin(deps, { email, isLoopback: await isLocalUserRequest(deps, c) }), safeNext(c.req.query("next")));
        } catch (err) {
          if (!(err instanceof ApiError)) throw err;
          return renderLogin(deps, c, errorMessage(err, "login"), errorStatus(err), email);
        }
      })
      // The one GET that signs in (docs/api.md §10): the `hangar login` link, single-use, 5 minutes.
      .get("/login/local/:code", async (c) => {
        // The code is in the URL: never send it on as a Referer.
        c.header("Referrer-Policy", "no-referrer");
        try {
          // Checked before the code is spent: a refused connection leaves the link usable from the right account.
          if (!(await isLocalUserRequest(deps, c))) {
            throw new ApiError("local_login_loopback_required", "sign-in links work only from this machine's own account");
          }
          return signedIn(deps, c, await redeemLocalLoginCode(deps, c.req.param("code")), null);
        } catch (err) {
          if (!(err instanceof ApiError)) throw err;
          const message =
            err.status === 410
              ? "This sign-in link was already used or has expired (links work once, for 5 minutes). Run npx hangar login again."
              : err.status === 404
                ? "This sign-in link is not valid. Run npx hangar login again and open the link it prints."
                : errorMessage(err, "login");
          return renderPage(
            c,
            <ErrorPage
              ctx={pageContext(c, deps)}
              title="Sign-in link not accepted"
              message={message}
              back={{ href: "/login", label: "Go to sign-in" }}
            />,
            errorStatus(err),
          );
        }
      })
      .post("/login/proxy", async (c) => {
        try {
          const result = await trustedProxyLogin(deps, { peer: deps.getPeerAddress(c), headers: c.req.raw.headers });
          return signedIn(deps, c, result, safeNext(c.req.query("next")));
        } catch (err) {
          if (!(err instanceof ApiError)) throw err;
          return renderLogin(deps, c, errorMessage(err, "login"), errorStatus(err));
        }
      })
      // Starts the OIDC browser flow; the state goes into a short-lived cookie, so only this browser can finish it.
      .get("/login/oidc", async (c) => {
        const inst = await loadInstance(deps);
        if (inst.state !== "ready") return c.redirect("/setup", 303);
        try {
          if (inst.runtimeMode === "local" && !c.get("isLoopback")) {
            throw new ApiError("local_login_loopback_required", "in local mode, sign-in works only from this machine");
          }
          const started = await startOidcSignIn(deps, { requestOrigin: new URL(c.req.url).origin, client: await oidcClientOf(deps, c) });
          setUiCookie(c, OIDC_STATE_COOKIE_NAME, started.state, OIDC_STATE_TTL_S);
          return c.redirect(started.authorization_url, 303);
        } catch (err) {
          if (!(err instanceof ApiError)) throw err;
          return renderLogin(deps, c, errorMessage(err, "login"), errorStatus(err));
        }
      })
      // The default redirect URI: a sign-in, or (before setup is complete) the owner's sign-in of the wizard.
      .get("/auth/oidc/callback", async (c) => {
        const expected = getUiCookie(c, OIDC_STATE_COOKIE_NAME);
        clearUiCookie(c, OIDC_STATE_COOKIE_NAME);
        const state = c.req.query("state") ?? "";
        const code = c.req.query("code") ?? "";
        const inst = await loadInstance(deps);
        const inSetup = inst.state !== "ready";
        const back = inSetup ? { href: "/setup", label: "Back to setup" } : { href: "/login", label: "Back to sign-in" };
        const fail = (title: string, message: string, status: 400 | 403 | 409 | 410 | 500 | 502) =>
          renderPage(c, <ErrorPage ctx={pageContext(c, deps)} title={title} message={message} back={back} />, status);

        const providerError = c.req.query("error");
        if (providerError !== undefined) {
          // Only the standard error code, and only when it looks like one: nothing else the provider sent is shown.
          const shown = /^[a-z_]{1,64}$/.test(providerError) ? ` (${providerError})` : "";
          return fail("Sign-in was not completed", `The identity provider did not sign you in${shown}. Try again.`, 400);
        }
        if (expected === undefined || state === "" || !constantTimeEqual(expected, state)) {
          return fail(
            "Sign-in was not started here",
            "This sign-in did not start in this browser, or it took longer than 10 minutes. Start it again.",
            400,
          );
        }
        if (code === "") return fail("Sign-in was not completed", "The identity provider sent no authorization code. Try again.", 400);
        try {
          if (inst.runtimeMode === "local" && !c.get("isLoopback")) {
            throw new ApiError("local_login_loopback_required", "in local mode, sign-in works only from this machine");
          }
          if (inSetup) {
            const setupToken = getUiCookie(c, SETUP_COOKIE_NAME);
            if (setupToken === undefined) throw new ApiError("missing_auth", "the setup session is missing");
            await touchSetupSession(deps, setupToken);
            await verifySetupOwnerOidc(deps, { code, state });
            return c.redirect("/setup?step=complete", 303);
          }
          return signedIn(deps, c, await completeOidcSignIn(deps, { code, state, client: await oidcClientOf(deps, c) }), null);
        } catch (err) {
          if (!(err instanceof ApiError)) throw err;
          return fail("Sign-in failed", errorMessage(err, "login"), errorStatus(err));
        }
      })
      .post("/logout", async (c) => {
        const session = await browserSession(deps, c);
        if (session) await revokeSessionStatement(deps, session.sessionId);
        clearSessionCookie(c);
        setFlash(c, "info", "You are signed out.");
        return c.redirect("/login", 303);
      })
  );
}
